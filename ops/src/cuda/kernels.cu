// Eddy's CUDA kernels, compiled at run time by NVRTC (once per device) from this file, which
// the crate embeds. f32, with f64, f16 and bf16 for the elementwise ops, reductions and
// products; integers as indices, masks and the integer-preserving ops (i64, u8/bool).
//
// A `Lay` is an operand's layout as the CPU kernels see it: up to 8 dims, strides in
// elements, an offset; `at(l, i)` is the storage index of the output's i-th element.

typedef long long i64;
typedef unsigned char u8;
typedef unsigned long long u64;
typedef unsigned short u16;

#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)

struct Lay {
    int rank;
    int pad;
    i64 off;
    i64 dims[8];
    i64 strides[8];
};

__device__ __forceinline__ i64 at(const Lay& l, i64 i) {
    // A flat layout (a dense or repeated operand, `i` within its one dim) needs no division:
    // 64-bit division costs dozens of instructions, more than the element's arithmetic.
    if (l.rank == 1) return l.off + i * l.strides[0];
    i64 o = l.off;
    for (int d = l.rank - 1; d >= 0; --d) {
        i64 n = l.dims[d];
        i64 k = i % n;
        i /= n;
        o += k * l.strides[d];
    }
    return o;
}

#define GRID_STRIDE(i, n) \
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)blockDim.x * gridDim.x)

// The float ops, for T = float or double: CUDA's C++ math overloads (`exp(float)` is `expf`).
template <typename T>
__device__ T unary_op(int op, T x, T c, T d) {
    const T one = (T)1, zero = (T)0, half = (T)0.5;
    switch (op) {
    case 0: return -x;
    case 1: return fabs(x);
    case 2: return exp(x);
    case 3: return log(x);
    case 4: return sqrt(x);
    case 5: return one / sqrt(x);
    case 6: return sin(x);
    case 7: return cos(x);
    case 8: return tanh(x);
    case 9: return one / (one + exp(-x));
    case 10: return (x > zero || x != x) ? x : zero;
    case 11: return half * x * (one + erf(x * (T)0.70710678118654752));
    case 12: return x / (one + exp(-x));
    case 13: return one / x;
    case 14: return x * x;
    case 15: return x > zero ? one : (x < zero ? -one : x);
    case 16: {
        T cdf = half * (one + erf(x * (T)0.70710678118654752));
        T pdf = exp(-half * x * x) * (T)0.39894228040143268;
        return cdf + x * pdf;
    }
    case 17: { T s = one / (one + exp(-x)); return s * (one + x * (one - s)); }
    case 18: return x + c;
    case 19: return x * c;
    case 20: return x / c;
    case 21: return c - x;
    case 22: return c / x;
    case 23: return pow(x, c);
    case 24: return pow(c, x);
    case 25: return x != x ? x : fmin(fmax(x, c), d);
    case 26: return floor(x);
    case 27: return ceil(x);
    case 28: return rint(x);
    case 29: return trunc(x);
    case 30: return log1p(x);
    case 31: return expm1(x);
    case 32: return log2(x);
    case 33: return log10(x);
    case 34: return tan(x);
    case 35: return atan(x);
    case 36: return erf(x);
    case 37: return x > zero ? x : x * c;
    case 38: return x > zero ? x : c * expm1(x);
    case 39: { T bx = x * c; return bx > d ? x : log1p(exp(bx)) / c; }
    }
    return x;
}

template <typename T> __device__ __forceinline__ T nan_max(T x, T y) { return (x != x || x >= y) ? x : y; }
template <typename T> __device__ __forceinline__ T nan_min(T x, T y) { return (x != x || x <= y) ? x : y; }

template <typename T>
__device__ __forceinline__ T binary_op(int op, T a, T b) {
    switch (op) {
    case 0: return a + b;
    case 1: return a - b;
    case 2: return a * b;
    case 3: return a / b;
    case 4: return pow(a, b);
    case 5: return nan_max(a, b);
    case 6: return nan_min(a, b);
    case 7: return a > (T)0 ? b : (T)0;
    }
    return a;
}

// ---- The helpers above are also the prelude of the merged elementwise kernels (cuda/fused.rs).

extern "C" __global__ void unary_f32(int op, float c, float d, const float* x, Lay lx, float* y, i64 n) {
    GRID_STRIDE(i, n) { y[i] = unary_op<float>(op, x[at(lx, i)], c, d); }
}
extern "C" __global__ void unary_f64(int op, double c, double d, const double* x, Lay lx, double* y, i64 n) {
    GRID_STRIDE(i, n) { y[i] = unary_op<double>(op, x[at(lx, i)], c, d); }
}

// The integer-preserving unary ops on i64 (wrapping, as the CPU kernels): codes as above.
extern "C" __global__ void unary_i64(int op, i64 c, i64 d, const i64* x, Lay lx, i64* y, i64 n) {
    GRID_STRIDE(i, n) {
        i64 v = x[at(lx, i)];
        unsigned long long u = (unsigned long long)v;
        i64 r = v;
        switch (op) {
        case 0: r = (i64)(0ULL - u); break;
        case 1: r = v < 0 ? (i64)(0ULL - u) : v; break;
        case 14: r = (i64)(u * u); break;
        case 15: r = v > 0 ? 1 : (v < 0 ? -1 : 0); break;
        case 18: r = (i64)(u + (unsigned long long)c); break;
        case 19: r = (i64)(u * (unsigned long long)c); break;
        case 21: r = (i64)((unsigned long long)c - u); break;
        case 25: r = v < c ? c : (v > d ? d : v); break;
        }
        y[i] = r;
    }
}

extern "C" __global__ void binary_f32(int op, const float* a, Lay la, const float* b, Lay lb, float* y, i64 n) {
    GRID_STRIDE(i, n) { y[i] = binary_op<float>(op, a[at(la, i)], b[at(lb, i)]); }
}
extern "C" __global__ void binary_f64(int op, const double* a, Lay la, const double* b, Lay lb, double* y, i64 n) {
    GRID_STRIDE(i, n) { y[i] = binary_op<double>(op, a[at(la, i)], b[at(lb, i)]); }
}

// y = a op b over dense operands (each from its own start, all 16-byte aligned): four elements
// per thread through vector loads, the last n % 4 by the first threads.
extern "C" __global__ void binary_dense_f32(int op, const float* a, const float* b, float* y, i64 n) {
    i64 n4 = n / 4;
    const float4* a4 = (const float4*)a;
    const float4* b4 = (const float4*)b;
    float4* y4 = (float4*)y;
    GRID_STRIDE(i, n4) {
        float4 x = a4[i], z = b4[i], r;
        r.x = binary_op<float>(op, x.x, z.x);
        r.y = binary_op<float>(op, x.y, z.y);
        r.z = binary_op<float>(op, x.z, z.z);
        r.w = binary_op<float>(op, x.w, z.w);
        y4[i] = r;
    }
    i64 t = n4 * 4 + (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) y[t] = binary_op<float>(op, a[t], b[t]);
}

// out op= alpha * x, out laid out as `lo` (read and written), x broadcast to it.
template <typename T>
__device__ void binary_inplace_body(int op, T* o, const Lay& lo, const T* x, const Lay& lx, T alpha, i64 n) {
    GRID_STRIDE(i, n) {
        i64 k = at(lo, i);
        o[k] = binary_op<T>(op, o[k], alpha * x[at(lx, i)]);
    }
}
extern "C" __global__ void binary_inplace_f32(int op, float* o, Lay lo, const float* x, Lay lx, float alpha, i64 n) {
    binary_inplace_body<float>(op, o, lo, x, lx, alpha, n);
}
extern "C" __global__ void binary_inplace_f64(int op, double* o, Lay lo, const double* x, Lay lx, double alpha, i64 n) {
    binary_inplace_body<double>(op, o, lo, x, lx, alpha, n);
}

template <typename T>
__device__ void compare_body(int op, const T* a, const Lay& la, const T* b, const Lay& lb, u8* y, i64 n) {
    GRID_STRIDE(i, n) {
        T x = a[at(la, i)], z = b[at(lb, i)];
        bool r = false;
        switch (op) {
        case 0: r = x == z; break;
        case 1: r = x != z; break;
        case 2: r = x < z; break;
        case 3: r = x <= z; break;
        case 4: r = x > z; break;
        case 5: r = x >= z; break;
        case 6: r = (x != (T)0) && (z != (T)0); break;
        case 7: r = (x != (T)0) || (z != (T)0); break;
        case 8: r = (x != (T)0) != (z != (T)0); break;
        }
        y[i] = r ? 1 : 0;
    }
}
extern "C" __global__ void compare_f32(int op, const float* a, Lay la, const float* b, Lay lb, u8* y, i64 n) {
    compare_body<float>(op, a, la, b, lb, y, n);
}
extern "C" __global__ void compare_f64(int op, const double* a, Lay la, const double* b, Lay lb, u8* y, i64 n) {
    compare_body<double>(op, a, la, b, lb, y, n);
}
extern "C" __global__ void compare_i64(int op, const i64* a, Lay la, const i64* b, Lay lb, u8* y, i64 n) {
    compare_body<i64>(op, a, la, b, lb, y, n);
}
extern "C" __global__ void compare_u8(int op, const u8* a, Lay la, const u8* b, Lay lb, u8* y, i64 n) {
    compare_body<u8>(op, a, la, b, lb, y, n);
}

template <typename T>
__device__ void where_body(const u8* c, const Lay& lc, const T* a, const Lay& la, const T* b, const Lay& lb, T* y, i64 n) {
    GRID_STRIDE(i, n) { y[i] = c[at(lc, i)] ? a[at(la, i)] : b[at(lb, i)]; }
}
extern "C" __global__ void where_f32(const u8* c, Lay lc, const float* a, Lay la, const float* b, Lay lb, float* y, i64 n) {
    where_body<float>(c, lc, a, la, b, lb, y, n);
}
extern "C" __global__ void where_f64(const u8* c, Lay lc, const double* a, Lay la, const double* b, Lay lb, double* y, i64 n) {
    where_body<double>(c, lc, a, la, b, lb, y, n);
}
extern "C" __global__ void where_i64(const u8* c, Lay lc, const i64* a, Lay la, const i64* b, Lay lb, i64* y, i64 n) {
    where_body<i64>(c, lc, a, la, b, lb, y, n);
}
extern "C" __global__ void where_u8(const u8* c, Lay lc, const u8* a, Lay la, const u8* b, Lay lb, u8* y, i64 n) {
    where_body<u8>(c, lc, a, la, b, lb, y, n);
}

// Element i of `src` (any layout) to element i of `dst` (any non-overlapping layout),
// converted: floats to integers truncate toward zero, saturating (NaN to 0), as PyTorch's CUDA
// casts; anything to bool is "not zero".
template <typename S, typename D>
__device__ void copy_body(const S* x, const Lay& lx, D* y, const Lay& ly, i64 n) {
    GRID_STRIDE(i, n) { y[at(ly, i)] = (D)x[at(lx, i)]; }
}
template <typename S>
__device__ void to_bool_body(const S* x, const Lay& lx, u8* y, const Lay& ly, i64 n) {
    GRID_STRIDE(i, n) { y[at(ly, i)] = x[at(lx, i)] != (S)0; }
}
template <typename F>
__device__ __forceinline__ i64 float_to_i64(F v) {
    if (v != v) return 0;
    if (v >= (F)9.2233720368547758e18) return 0x7fffffffffffffffLL;
    if (v <= (F)-9.2233720368547758e18) return (i64)0x8000000000000000ULL;
    return (i64)v;
}
template <typename F>
__device__ void float_to_i64_body(const F* x, const Lay& lx, i64* y, const Lay& ly, i64 n) {
    GRID_STRIDE(i, n) { y[at(ly, i)] = float_to_i64<F>(x[at(lx, i)]); }
}
extern "C" __global__ void copy_f32(const float* x, Lay lx, float* y, Lay ly, i64 n) { copy_body(x, lx, y, ly, n); }
extern "C" __global__ void copy_f64(const double* x, Lay lx, double* y, Lay ly, i64 n) { copy_body(x, lx, y, ly, n); }
extern "C" __global__ void copy_i64(const i64* x, Lay lx, i64* y, Lay ly, i64 n) { copy_body(x, lx, y, ly, n); }
extern "C" __global__ void copy_u8(const u8* x, Lay lx, u8* y, Lay ly, i64 n) { copy_body(x, lx, y, ly, n); }
extern "C" __global__ void cast_u8_f32(const u8* x, Lay lx, float* y, Lay ly, i64 n) { copy_body(x, lx, y, ly, n); }
extern "C" __global__ void cast_u8_f64(const u8* x, Lay lx, double* y, Lay ly, i64 n) { copy_body(x, lx, y, ly, n); }
extern "C" __global__ void cast_i64_f32(const i64* x, Lay lx, float* y, Lay ly, i64 n) { copy_body(x, lx, y, ly, n); }
extern "C" __global__ void cast_i64_f64(const i64* x, Lay lx, double* y, Lay ly, i64 n) { copy_body(x, lx, y, ly, n); }
extern "C" __global__ void cast_f32_f64(const float* x, Lay lx, double* y, Lay ly, i64 n) { copy_body(x, lx, y, ly, n); }
extern "C" __global__ void cast_f64_f32(const double* x, Lay lx, float* y, Lay ly, i64 n) { copy_body(x, lx, y, ly, n); }
extern "C" __global__ void cast_u8_i64(const u8* x, Lay lx, i64* y, Lay ly, i64 n) { copy_body(x, lx, y, ly, n); }
extern "C" __global__ void cast_f32_i64(const float* x, Lay lx, i64* y, Lay ly, i64 n) { float_to_i64_body(x, lx, y, ly, n); }
extern "C" __global__ void cast_f64_i64(const double* x, Lay lx, i64* y, Lay ly, i64 n) { float_to_i64_body(x, lx, y, ly, n); }
extern "C" __global__ void cast_f32_bool(const float* x, Lay lx, u8* y, Lay ly, i64 n) { to_bool_body(x, lx, y, ly, n); }
extern "C" __global__ void cast_f64_bool(const double* x, Lay lx, u8* y, Lay ly, i64 n) { to_bool_body(x, lx, y, ly, n); }
extern "C" __global__ void cast_i64_bool(const i64* x, Lay lx, u8* y, Lay ly, i64 n) { to_bool_body(x, lx, y, ly, n); }
extern "C" __global__ void cast_u8_bool(const u8* x, Lay lx, u8* y, Lay ly, i64 n) { to_bool_body(x, lx, y, ly, n); }

template <typename T>
__device__ void fill_body(T* y, const Lay& ly, T v, i64 n) {
    GRID_STRIDE(i, n) { y[at(ly, i)] = v; }
}
extern "C" __global__ void fill_f32(float* y, Lay ly, float v, i64 n) { fill_body(y, ly, v, n); }
extern "C" __global__ void fill_f64(double* y, Lay ly, double v, i64 n) { fill_body(y, ly, v, n); }
extern "C" __global__ void fill_i64(i64* y, Lay ly, i64 v, i64 n) { fill_body(y, ly, v, n); }
extern "C" __global__ void fill_u8(u8* y, Lay ly, u8 v, i64 n) { fill_body(y, ly, v, n); }

// Output j reduces elements j*r .. (j+1)*r of `lx` (the reduced dims permuted last).
// One warp per output: lanes stride the run, then a shuffle tree. ops: 0 sum, 1 mean,
// 2 prod, 3 max, 4 min (NaN wins).
template <typename T>
__device__ __forceinline__ T reduce_step(int op, T acc, T v) {
    if (op <= 1) return acc + v;
    if (op == 2) return acc * v;
    if (op == 3) return nan_max(acc, v);
    return nan_min(acc, v);
}
template <typename T>
__device__ void reduce_body(int op, const T* x, const Lay& lx, T* y, i64 nout, i64 r) {
    i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (warp >= nout) return;
    T acc = op == 2 ? (T)1 : (op == 3 ? (T)-INFINITY : (op == 4 ? (T)INFINITY : (T)0));
    for (i64 k = lane; k < r; k += 32) acc = reduce_step<T>(op, acc, x[at(lx, warp * r + k)]);
    for (int s = 16; s > 0; s /= 2) acc = reduce_step<T>(op, acc, __shfl_down_sync(0xffffffffu, acc, s));
    if (lane == 0) y[warp] = op == 1 ? (r > 0 ? acc / (T)r : (T)NAN) : acc;
}
extern "C" __global__ void reduce_f32(int op, const float* x, Lay lx, float* y, i64 nout, i64 r) {
    reduce_body<float>(op, x, lx, y, nout, r);
}
extern "C" __global__ void reduce_f64(int op, const double* x, Lay lx, double* y, i64 nout, i64 r) {
    reduce_body<double>(op, x, lx, y, nout, r);
}

// ArgMax (op 0) / ArgMin (op 1) of each run, first index on ties, NaN wins; i64 output.
template <typename T>
__device__ void argreduce_body(int op, const T* x, const Lay& lx, i64* y, i64 nout, i64 r) {
    GRID_STRIDE(j, nout) {
        if (r == 0) { y[j] = 0; continue; } // refused by the op; never read past the input
        T best = x[at(lx, j * r)];
        i64 bi = 0;
        for (i64 k = 1; k < r; ++k) {
            T v = x[at(lx, j * r + k)];
            if (best != best) break;
            bool better = (v != v) || (op == 0 ? v > best : v < best);
            if (better) { best = v; bi = k; }
        }
        y[j] = bi;
    }
}
extern "C" __global__ void argreduce_f32(int op, const float* x, Lay lx, i64* y, i64 nout, i64 r) {
    argreduce_body<float>(op, x, lx, y, nout, r);
}
extern "C" __global__ void argreduce_f64(int op, const double* x, Lay lx, i64* y, i64 nout, i64 r) {
    argreduce_body<double>(op, x, lx, y, nout, r);
}
extern "C" __global__ void argreduce_i64(int op, const i64* x, Lay lx, i64* y, i64 nout, i64 r) {
    argreduce_body<i64>(op, x, lx, y, nout, r);
}
extern "C" __global__ void argreduce_u8(int op, const u8* x, Lay lx, i64* y, i64 nout, i64 r) {
    argreduce_body<u8>(op, x, lx, y, nout, r);
}

// Integer and bool reductions, as the CPU's: sum and product in i64, wrapping (ops 0 and 2),
// into an i64 output; max and min (ops 3 and 4) in the input's own type. One warp per output.
template <typename S>
__device__ void reduce_int_body(int op, const S* x, const Lay& lx, void* y, i64 nout, i64 r) {
    i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (warp >= nout) return;
    // Wrapping arithmetic through unsigned 64-bit values; max and min on signed ones.
    u64 acc = op == 2 ? 1ULL : 0ULL;
    i64 best = op == 3 ? (i64)0x8000000000000000ULL : 0x7fffffffffffffffLL;
    for (i64 k = lane; k < r; k += 32) {
        i64 v = (i64)x[at(lx, warp * r + k)];
        if (op == 0) acc += (u64)v;
        else if (op == 2) acc *= (u64)v;
        else if (op == 3) best = v > best ? v : best;
        else best = v < best ? v : best;
    }
    for (int s = 16; s > 0; s /= 2) {
        u64 o = __shfl_down_sync(0xffffffffu, acc, s);
        i64 b = __shfl_down_sync(0xffffffffu, best, s);
        if (op == 0) acc += o;
        else if (op == 2) acc *= o;
        else if (op == 3) best = b > best ? b : best;
        else best = b < best ? b : best;
    }
    if (lane != 0) return;
    if (op <= 2) ((i64*)y)[warp] = (i64)acc;
    else ((S*)y)[warp] = (S)best;
}
extern "C" __global__ void reduce_i64(int op, const i64* x, Lay lx, i64* y, i64 nout, i64 r) {
    reduce_int_body<i64>(op, x, lx, y, nout, r);
}
extern "C" __global__ void reduce_u8(int op, const u8* x, Lay lx, void* y, i64 nout, i64 r) {
    reduce_int_body<u8>(op, x, lx, y, nout, r);
}

// Softmax (or log-softmax) over the last dim of a dense [rows, cols] input: one block a row.
extern "C" __global__ void softmax_f32(const float* x, i64 off, float* y, i64 rows, i64 cols, int log_) {
    extern __shared__ float sh[];
    i64 row = blockIdx.x;
    if (row >= rows) return;
    const float* xr = x + off + row * cols;
    float* yr = y + row * cols;
    float m = -INFINITY;
    for (i64 k = threadIdx.x; k < cols; k += blockDim.x) m = fmaxf(m, xr[k]);
    sh[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + s]);
        __syncthreads();
    }
    m = sh[0];
    __syncthreads();
    float sum = 0.0f;
    for (i64 k = threadIdx.x; k < cols; k += blockDim.x) sum += expf(xr[k] - m);
    sh[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    sum = sh[0];
    float lse = logf(sum);
    for (i64 k = threadIdx.x; k < cols; k += blockDim.x) {
        float z = xr[k] - m;
        yr[k] = log_ ? z - lse : expf(z) / sum;
    }
}

// What an index out of range reads (the op layer checks known indices on the host; a value
// computed on the device that is out of range gives this, and sets *bad where there is one):
// NaN for floats (f16 and bf16 as their bits, copied as u16), 0 for integers and bool.
template <typename T> __device__ __forceinline__ T missing() { return (T)0; }
template <> __device__ __forceinline__ float missing<float>() { return NAN; }
template <> __device__ __forceinline__ double missing<double>() { return (double)NAN; }
#define F16_NAN ((u16)0x7e00)
#define BF16_NAN ((u16)0x7fc0)

// out[o, j, q] = src[o, idx[j], q]; an index out of range sets *bad.
template <typename T>
__device__ void index_select_body(const T* s, i64 off, const i64* idx, i64 ioff, T* y, i64 outer,
                                  i64 size, i64 inner, i64 nidx, int* bad, T miss = missing<T>()) {
    GRID_STRIDE(i, outer * nidx * inner) {
        i64 q = i % inner, j = (i / inner) % nidx, o = i / (inner * nidx);
        i64 ix = idx[ioff + j];
        if (ix < 0 || ix >= size) { if (bad) atomicExch(bad, 1); y[i] = miss; continue; }
        y[i] = s[off + (o * size + ix) * inner + q];
    }
}
extern "C" __global__ void index_select_f32(const float* s, i64 off, const i64* idx, i64 ioff, float* y, i64 outer, i64 size, i64 inner, i64 nidx, int* bad) {
    index_select_body<float>(s, off, idx, ioff, y, outer, size, inner, nidx, bad);
}
extern "C" __global__ void index_select_f64(const double* s, i64 off, const i64* idx, i64 ioff, double* y, i64 outer, i64 size, i64 inner, i64 nidx, int* bad) {
    index_select_body<double>(s, off, idx, ioff, y, outer, size, inner, nidx, bad);
}
extern "C" __global__ void index_select_i64(const i64* s, i64 off, const i64* idx, i64 ioff, i64* y, i64 outer, i64 size, i64 inner, i64 nidx, int* bad) {
    index_select_body<i64>(s, off, idx, ioff, y, outer, size, inner, nidx, bad);
}
extern "C" __global__ void index_select_f16(const u16* s, i64 off, const i64* idx, i64 ioff, u16* y, i64 outer, i64 size, i64 inner, i64 nidx, int* bad) {
    index_select_body<u16>(s, off, idx, ioff, y, outer, size, inner, nidx, bad, F16_NAN);
}
extern "C" __global__ void index_select_bf16(const u16* s, i64 off, const i64* idx, i64 ioff, u16* y, i64 outer, i64 size, i64 inner, i64 nidx, int* bad) {
    index_select_body<u16>(s, off, idx, ioff, y, outer, size, inner, nidx, bad, BF16_NAN);
}
extern "C" __global__ void index_select_u8(const u8* s, i64 off, const i64* idx, i64 ioff, u8* y, i64 outer, i64 size, i64 inner, i64 nidx, int* bad) {
    index_select_body<u8>(s, off, idx, ioff, y, outer, size, inner, nidx, bad);
}

// out[i] = src[at(ls with dim replaced by idx[i])]: `ls` is the source layout broadcast to the
// index's shape with the gathered dim's stride zeroed; `stride_dim` adds idx * stride.
template <typename T>
__device__ void gather_body(const T* s, const Lay& ls, i64 stride_dim, i64 size, const i64* idx, i64 ioff,
                            T* y, i64 n, int* bad, T miss = missing<T>()) {
    GRID_STRIDE(i, n) {
        i64 ix = idx[ioff + i];
        if (ix < 0 || ix >= size) { if (bad) atomicExch(bad, 1); y[i] = miss; continue; }
        y[i] = s[at(ls, i) + ix * stride_dim];
    }
}
extern "C" __global__ void gather_f32(const float* s, Lay ls, i64 stride_dim, i64 size, const i64* idx, i64 ioff, float* y, i64 n, int* bad) {
    gather_body<float>(s, ls, stride_dim, size, idx, ioff, y, n, bad);
}
extern "C" __global__ void gather_f64(const double* s, Lay ls, i64 stride_dim, i64 size, const i64* idx, i64 ioff, double* y, i64 n, int* bad) {
    gather_body<double>(s, ls, stride_dim, size, idx, ioff, y, n, bad);
}
extern "C" __global__ void gather_i64(const i64* s, Lay ls, i64 stride_dim, i64 size, const i64* idx, i64 ioff, i64* y, i64 n, int* bad) {
    gather_body<i64>(s, ls, stride_dim, size, idx, ioff, y, n, bad);
}
extern "C" __global__ void gather_f16(const u16* s, Lay ls, i64 stride_dim, i64 size, const i64* idx, i64 ioff, u16* y, i64 n, int* bad) {
    gather_body<u16>(s, ls, stride_dim, size, idx, ioff, y, n, bad, F16_NAN);
}
extern "C" __global__ void gather_bf16(const u16* s, Lay ls, i64 stride_dim, i64 size, const i64* idx, i64 ioff, u16* y, i64 n, int* bad) {
    gather_body<u16>(s, ls, stride_dim, size, idx, ioff, y, n, bad, BF16_NAN);
}
extern "C" __global__ void gather_u8(const u8* s, Lay ls, i64 stride_dim, i64 size, const i64* idx, i64 ioff, u8* y, i64 n, int* bad) {
    gather_body<u8>(s, ls, stride_dim, size, idx, ioff, y, n, bad);
}

// y = relu?(y + bias[col]) over a dense [rows, cols] y; bias laid out as `lb` over y's shape.
extern "C" __global__ void bias_act_f32(float* y, const float* b, Lay lb, i64 n, int relu) {
    GRID_STRIDE(i, n) {
        float v = y[i] + b[at(lb, i)];
        y[i] = relu ? ((v > 0.0f || v != v) ? v : 0.0f) : v;
    }
}

// out[at(lo, i) + idx[i] * stride_dim] += src[off + i] (out zeroed first); indices out of
// range are skipped (the op layer checks known ranges on the host). f32 and f64 (whose
// atomicAdd the device has from sm_60).
template <typename T>
__device__ void scatter_add_body(const T* s, i64 off, const Lay& lo, i64 stride_dim, i64 size,
                                 const i64* idx, i64 ioff, T* y, i64 n) {
    GRID_STRIDE(i, n) {
        i64 ix = idx[ioff + i];
        if (ix < 0 || ix >= size) continue;
        atomicAdd(&y[at(lo, i) + ix * stride_dim], s[off + i]);
    }
}
extern "C" __global__ void scatter_add_f32(const float* s, i64 off, Lay lo, i64 stride_dim, i64 size,
                                           const i64* idx, i64 ioff, float* y, i64 n) {
    scatter_add_body<float>(s, off, lo, stride_dim, size, idx, ioff, y, n);
}
extern "C" __global__ void scatter_add_f64(const double* s, i64 off, Lay lo, i64 stride_dim, i64 size,
                                           const i64* idx, i64 ioff, double* y, i64 n) {
    scatter_add_body<double>(s, off, lo, stride_dim, size, idx, ioff, y, n);
}

// out[o, idx[j], q] += src[o, j, q] (out zeroed first).
template <typename T>
__device__ void index_add_body(const T* s, i64 off, const i64* idx, i64 ioff, T* y, i64 outer,
                               i64 size, i64 inner, i64 nidx) {
    GRID_STRIDE(i, outer * nidx * inner) {
        i64 q = i % inner, j = (i / inner) % nidx, o = i / (inner * nidx);
        i64 ix = idx[ioff + j];
        if (ix < 0 || ix >= size) continue;
        atomicAdd(&y[(o * size + ix) * inner + q], s[off + i]);
    }
}
extern "C" __global__ void index_add_f32(const float* s, i64 off, const i64* idx, i64 ioff, float* y,
                                         i64 outer, i64 size, i64 inner, i64 nidx) {
    index_add_body<float>(s, off, idx, ioff, y, outer, size, inner, nidx);
}
extern "C" __global__ void index_add_f64(const double* s, i64 off, const i64* idx, i64 ioff, double* y,
                                         i64 outer, i64 size, i64 inner, i64 nidx) {
    index_add_body<double>(s, off, idx, ioff, y, outer, size, inner, nidx);
}

// A fused unit of up to 32 elementwise ops of the engine (each op's operands dense from their
// pointers, or one element), run in order on each element: one launch for the unit. The host
// takes only units where no element's ops read another element's results.
struct Unit {
    i64 n;
    int nops;
    int pad;
    int code[32];
    int binary[32];
    int a[32];
    int b[32];
    int y[32];
    double c[32];
    double d[32];
    u64 ptr[96];
    int splat[96];
};
template <typename T>
__device__ __forceinline__ void unit_body(const Unit& u) {
    GRID_STRIDE(i, u.n) {
        for (int s = 0; s < u.nops; ++s) {
            const T* pa = (const T*)u.ptr[u.a[s]];
            T va = pa[u.splat[u.a[s]] ? 0 : i];
            T r;
            if (u.binary[s]) {
                const T* pb = (const T*)u.ptr[u.b[s]];
                r = binary_op<T>(u.code[s], va, pb[u.splat[u.b[s]] ? 0 : i]);
            } else {
                r = unary_op<T>(u.code[s], va, (T)u.c[s], (T)u.d[s]);
            }
            ((T*)u.ptr[u.y[s]])[i] = r;
        }
    }
}
// `__grid_constant__`: the threads read the argument where the launch put it, instead of
// each copying its 2,320 bytes.
extern "C" __global__ void unit_f32(const __grid_constant__ Unit u) { unit_body<float>(u); }
extern "C" __global__ void unit_f64(const __grid_constant__ Unit u) { unit_body<double>(u); }

// Faults the device on purpose (a trap): for tests of how a device fault is reported.
extern "C" __global__ void fault_on_purpose(int* y) {
    if (threadIdx.x == 0) __trap();
    y[0] = 1;
}
