// Reductions over trailing runs, arg-reductions, row-wise softmax, running sums and products.

// Output j reduces elements j*r .. (j+1)*r of `lx` (the reduced dims permuted last).
// One warp per output: lanes stride the run, then a shuffle tree. ops: 0 sum, 1 mean,
// 2 prod, 3 max, 4 min (NaN wins). Floats accumulate in their compute type.
template <typename T>
__device__ __forceinline__ T reduce_step(int op, T acc, T v) {
    if (op <= 1) return acc + v;
    if (op == 2) return acc * v;
    if (op == 3) return nan_max(acc, v);
    return nan_min(acc, v);
}
template <typename D>
__device__ void reduce_float(int op, const typename D::S* x, const Lay& lx, typename D::S* y, i64 nout, i64 r) {
    typedef typename D::C C;
    i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (warp >= nout) return;
    C acc = op == 2 ? (C)1 : (op == 3 ? (C)-INFINITY : (op == 4 ? (C)INFINITY : (C)0));
    for (i64 k = lane; k < r; k += 32) acc = reduce_step<C>(op, acc, D::load(x[at(lx, warp * r + k)]));
    for (int s = 16; s > 0; s /= 2) acc = reduce_step<C>(op, acc, __shfl_down_sync(0xffffffffu, acc, s));
    if (lane == 0) y[warp] = D::store(op == 1 ? (r > 0 ? acc / (C)r : (C)NAN) : acc);
}
extern "C" __global__ void reduce_f32(int op, const float* x, Lay lx, float* y, i64 nout, i64 r) { reduce_float<DF32>(op, x, lx, y, nout, r); }
extern "C" __global__ void reduce_f64(int op, const double* x, Lay lx, double* y, i64 nout, i64 r) { reduce_float<DF64>(op, x, lx, y, nout, r); }
extern "C" __global__ void reduce_f16(int op, const u16* x, Lay lx, u16* y, i64 nout, i64 r) { reduce_float<DF16>(op, x, lx, y, nout, r); }
extern "C" __global__ void reduce_bf16(int op, const u16* x, Lay lx, u16* y, i64 nout, i64 r) { reduce_float<DBF16>(op, x, lx, y, nout, r); }

// Integer and bool reductions, as the CPU's: sum and product in i64, wrapping (ops 0 and 2),
// into an i64 output; max and min (ops 3 and 4) in the input's own type. One warp per output.
template <typename D>
__device__ void reduce_integer(int op, const typename D::S* x, const Lay& lx, void* y, i64 nout, i64 r) {
    i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (warp >= nout) return;
    // Wrapping arithmetic through unsigned 64-bit values; max and min on signed ones.
    u64 acc = op == 2 ? 1ULL : 0ULL;
    i64 best = op == 3 ? (i64)0x8000000000000000ULL : 0x7fffffffffffffffLL;
    for (i64 k = lane; k < r; k += 32) {
        i64 v = D::load(x[at(lx, warp * r + k)]);
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
    else ((typename D::S*)y)[warp] = D::store(best);
}
extern "C" __global__ void reduce_i64(int op, const i64* x, Lay lx, void* y, i64 nout, i64 r) { reduce_integer<DI64>(op, x, lx, y, nout, r); }
extern "C" __global__ void reduce_i32(int op, const i32* x, Lay lx, void* y, i64 nout, i64 r) { reduce_integer<DI32>(op, x, lx, y, nout, r); }
extern "C" __global__ void reduce_u8(int op, const u8* x, Lay lx, void* y, i64 nout, i64 r) { reduce_integer<DU8>(op, x, lx, y, nout, r); }

// ArgMax (op 0) / ArgMin (op 1) of each run, first index on ties, NaN wins; i64 output.
template <typename D>
__device__ void argreduce_body(int op, const typename D::S* x, const Lay& lx, i64* y, i64 nout, i64 r) {
    typedef typename D::C C;
    GRID_STRIDE(j, nout) {
        if (r == 0) { y[j] = 0; continue; } // refused by the op; never read past the input
        C best = D::load(x[at(lx, j * r)]);
        i64 bi = 0;
        for (i64 k = 1; k < r; ++k) {
            C v = D::load(x[at(lx, j * r + k)]);
            if (best != best) break;
            bool better = (v != v) || (op == 0 ? v > best : v < best);
            if (better) { best = v; bi = k; }
        }
        y[j] = bi;
    }
}
extern "C" __global__ void argreduce_f32(int op, const float* x, Lay lx, i64* y, i64 nout, i64 r) { argreduce_body<DF32>(op, x, lx, y, nout, r); }
extern "C" __global__ void argreduce_f64(int op, const double* x, Lay lx, i64* y, i64 nout, i64 r) { argreduce_body<DF64>(op, x, lx, y, nout, r); }
extern "C" __global__ void argreduce_f16(int op, const u16* x, Lay lx, i64* y, i64 nout, i64 r) { argreduce_body<DF16>(op, x, lx, y, nout, r); }
extern "C" __global__ void argreduce_bf16(int op, const u16* x, Lay lx, i64* y, i64 nout, i64 r) { argreduce_body<DBF16>(op, x, lx, y, nout, r); }
extern "C" __global__ void argreduce_i64(int op, const i64* x, Lay lx, i64* y, i64 nout, i64 r) { argreduce_body<DI64>(op, x, lx, y, nout, r); }
extern "C" __global__ void argreduce_i32(int op, const i32* x, Lay lx, i64* y, i64 nout, i64 r) { argreduce_body<DI32>(op, x, lx, y, nout, r); }
extern "C" __global__ void argreduce_u8(int op, const u8* x, Lay lx, i64* y, i64 nout, i64 r) { argreduce_body<DU8>(op, x, lx, y, nout, r); }

// Softmax (or log-softmax) over the last dim of a dense [rows, cols] input: one block a row,
// in the dtype's compute type; shared memory holds one value a thread.
template <typename D>
__device__ void softmax_body(const typename D::S* x, i64 off, typename D::S* y, i64 rows, i64 cols, int log_) {
    typedef typename D::C C;
    extern __shared__ __align__(8) unsigned char smem[];
    C* sh = (C*)smem;
    i64 row = blockIdx.x;
    if (row >= rows) return;
    const typename D::S* xr = x + off + row * cols;
    typename D::S* yr = y + row * cols;
    C m = (C)-INFINITY;
    for (i64 k = threadIdx.x; k < cols; k += blockDim.x) m = fmax(m, D::load(xr[k]));
    sh[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) sh[threadIdx.x] = fmax(sh[threadIdx.x], sh[threadIdx.x + s]);
        __syncthreads();
    }
    m = sh[0];
    __syncthreads();
    C sum = (C)0;
    for (i64 k = threadIdx.x; k < cols; k += blockDim.x) sum += exp(D::load(xr[k]) - m);
    sh[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    sum = sh[0];
    C lse = log(sum);
    for (i64 k = threadIdx.x; k < cols; k += blockDim.x) {
        C z = D::load(xr[k]) - m;
        yr[k] = D::store(log_ ? z - lse : exp(z) / sum);
    }
}
extern "C" __global__ void softmax_f32(const float* x, i64 off, float* y, i64 rows, i64 cols, int log_) { softmax_body<DF32>(x, off, y, rows, cols, log_); }
extern "C" __global__ void softmax_f64(const double* x, i64 off, double* y, i64 rows, i64 cols, int log_) { softmax_body<DF64>(x, off, y, rows, cols, log_); }
extern "C" __global__ void softmax_f16(const u16* x, i64 off, u16* y, i64 rows, i64 cols, int log_) { softmax_body<DF16>(x, off, y, rows, cols, log_); }
extern "C" __global__ void softmax_bf16(const u16* x, i64 off, u16* y, i64 rows, i64 cols, int log_) { softmax_body<DBF16>(x, off, y, rows, cols, log_); }

// Running sums (prod 0) or products (prod 1) along each row (rows of n, the scanned dim last
// in `lx`) into `ly`: one thread a row, in order, so that they round as the CPU kernel's do.
// Floats run in their compute type and keep the first element as it is (`cumsum([-0.0])` is
// -0.0); integers and bools run in i64, wrapping, into an i64 output.
template <typename D>
__device__ void scan_float(const typename D::S* x, const Lay& lx, typename D::S* y, const Lay& ly, i64 rows, i64 n, int prod) {
    typedef typename D::C C;
    GRID_STRIDE(r, rows) {
        if (n == 0) continue;
        C acc = D::load(x[at(lx, r * n)]);
        y[at(ly, r * n)] = D::store(acc);
        for (i64 j = 1; j < n; ++j) {
            C v = D::load(x[at(lx, r * n + j)]);
            acc = prod ? acc * v : acc + v;
            y[at(ly, r * n + j)] = D::store(acc);
        }
    }
}
template <typename D>
__device__ void scan_integer(const typename D::S* x, const Lay& lx, i64* y, const Lay& ly, i64 rows, i64 n, int prod) {
    GRID_STRIDE(r, rows) {
        u64 acc = prod ? 1ULL : 0ULL;
        for (i64 j = 0; j < n; ++j) {
            u64 v = (u64)D::load(x[at(lx, r * n + j)]);
            acc = prod ? acc * v : acc + v;
            y[at(ly, r * n + j)] = (i64)acc;
        }
    }
}
extern "C" __global__ void scan_f32(const float* x, Lay lx, float* y, Lay ly, i64 rows, i64 n, int prod) { scan_float<DF32>(x, lx, y, ly, rows, n, prod); }
extern "C" __global__ void scan_f64(const double* x, Lay lx, double* y, Lay ly, i64 rows, i64 n, int prod) { scan_float<DF64>(x, lx, y, ly, rows, n, prod); }
extern "C" __global__ void scan_f16(const u16* x, Lay lx, u16* y, Lay ly, i64 rows, i64 n, int prod) { scan_float<DF16>(x, lx, y, ly, rows, n, prod); }
extern "C" __global__ void scan_bf16(const u16* x, Lay lx, u16* y, Lay ly, i64 rows, i64 n, int prod) { scan_float<DBF16>(x, lx, y, ly, rows, n, prod); }
extern "C" __global__ void scan_i64(const i64* x, Lay lx, i64* y, Lay ly, i64 rows, i64 n, int prod) { scan_integer<DI64>(x, lx, y, ly, rows, n, prod); }
extern "C" __global__ void scan_i32(const i32* x, Lay lx, i64* y, Lay ly, i64 rows, i64 n, int prod) { scan_integer<DI32>(x, lx, y, ly, rows, n, prod); }
extern "C" __global__ void scan_u8(const u8* x, Lay lx, i64* y, Lay ly, i64 rows, i64 n, int prod) { scan_integer<DU8>(x, lx, y, ly, rows, n, prod); }

// The gradient of the running products along dense rows of n: x from `xo`, g from `go`, the
// output dense from 0: d/dx_k = (prod_{j<k} x_j) * S_k, S_k = g_k + x_{k+1} * S_{k+1}, as the
// CPU kernel computes it (exact where some x_j is 0). One thread a row.
template <typename D>
__device__ void cumprod_backward_body(const typename D::S* x, i64 xo, const typename D::S* g, i64 go,
                                      typename D::S* y, i64 rows, i64 n) {
    typedef typename D::C C;
    GRID_STRIDE(r, rows) {
        if (n == 0) continue;
        const typename D::S* xr = x + xo + r * n;
        const typename D::S* gr = g + go + r * n;
        typename D::S* yr = y + r * n;
        C s = D::load(gr[n - 1]);
        yr[n - 1] = D::store(s);
        for (i64 k = n - 2; k >= 0; --k) {
            s = D::load(gr[k]) + D::load(xr[k + 1]) * s;
            yr[k] = D::store(s);
        }
        C before = (C)1;
        for (i64 k = 0; k < n; ++k) {
            C sk = D::load(yr[k]);
            yr[k] = D::store(before * sk);
            before = before * D::load(xr[k]);
        }
    }
}
extern "C" __global__ void cumprod_backward_f32(const float* x, i64 xo, const float* g, i64 go, float* y, i64 rows, i64 n) { cumprod_backward_body<DF32>(x, xo, g, go, y, rows, n); }
extern "C" __global__ void cumprod_backward_f64(const double* x, i64 xo, const double* g, i64 go, double* y, i64 rows, i64 n) { cumprod_backward_body<DF64>(x, xo, g, go, y, rows, n); }
extern "C" __global__ void cumprod_backward_f16(const u16* x, i64 xo, const u16* g, i64 go, u16* y, i64 rows, i64 n) { cumprod_backward_body<DF16>(x, xo, g, go, y, rows, n); }
extern "C" __global__ void cumprod_backward_bf16(const u16* x, i64 xo, const u16* g, i64 go, u16* y, i64 rows, i64 n) { cumprod_backward_body<DBF16>(x, xo, g, go, y, rows, n); }
