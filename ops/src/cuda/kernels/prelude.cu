// Eddy's CUDA kernels, compiled at run time by NVRTC (once per device) from the files of this
// folder, which the crate embeds one after the other (this one first). Every dtype of the CPU
// kernels: f32 and f64 computed in their own type, f16 and bf16 stored as 16-bit patterns and
// computed in f32 (as the CPU kernels do), i64, i32 and u8 computed in i64 and narrowed by
// wrapping (as the CPU kernels do), bool as bytes holding 0 or 1.
//
// A `Lay` is an operand's layout as the CPU kernels see it: up to 8 dims, strides in
// elements, an offset; `at(l, i)` is the storage index of the output's i-th element.

typedef long long i64;
typedef int i32;
typedef unsigned char u8;
typedef unsigned long long u64;
typedef unsigned short u16;
typedef unsigned int u32;

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

// Half precision through PTX conversions, so that no toolkit header is needed: loads widen
// exactly, stores round to nearest even.
__device__ __forceinline__ float f16_to_f32(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ u16 f32_to_f16(float f) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ float bf16_to_f32(u16 b) { return __uint_as_float(((u32)b) << 16); }
__device__ __forceinline__ u16 f32_to_bf16(float f) {
    u16 h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// The dtypes: `S` the storage type, `C` the type each element is computed in, `load` and
// `store` between them (integers narrow by wrapping).
struct DF32 {
    typedef float S; typedef float C;
    static __device__ __forceinline__ C load(S v) { return v; }
    static __device__ __forceinline__ S store(C v) { return v; }
};
struct DF64 {
    typedef double S; typedef double C;
    static __device__ __forceinline__ C load(S v) { return v; }
    static __device__ __forceinline__ S store(C v) { return v; }
};
struct DF16 {
    typedef u16 S; typedef float C;
    static __device__ __forceinline__ C load(S v) { return f16_to_f32(v); }
    static __device__ __forceinline__ S store(C v) { return f32_to_f16(v); }
};
struct DBF16 {
    typedef u16 S; typedef float C;
    static __device__ __forceinline__ C load(S v) { return bf16_to_f32(v); }
    static __device__ __forceinline__ S store(C v) { return f32_to_bf16(v); }
};
struct DI64 {
    typedef i64 S; typedef i64 C;
    static __device__ __forceinline__ C load(S v) { return v; }
    static __device__ __forceinline__ S store(C v) { return v; }
};
struct DI32 {
    typedef i32 S; typedef i64 C;
    static __device__ __forceinline__ C load(S v) { return (i64)v; }
    static __device__ __forceinline__ S store(C v) { return (i32)(u32)(u64)v; }
};
struct DU8 {
    typedef u8 S; typedef i64 C;
    static __device__ __forceinline__ C load(S v) { return (i64)v; }
    static __device__ __forceinline__ S store(C v) { return (u8)(u64)v; }
};

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

// Python's `%` on floats (PyTorch's `remainder`): `fmod`, moved by `y` when the signs differ.
template <typename T>
__device__ __forceinline__ T rem_float(T x, T y) {
    T m = fmod(x, y);
    return (m != (T)0 && ((y < (T)0) != (m < (T)0))) ? m + y : m;
}
// Python's `//` on floats (PyTorch's `div_floor`), as the CPU kernel computes it.
template <typename T>
__device__ __forceinline__ T floor_div_float(T x, T y) {
    if (y == (T)0) return x / y;
    T m = fmod(x, y);
    T div = (x - m) / y;
    if (m != (T)0 && ((y < (T)0) != (m < (T)0))) div = div - (T)1;
    if (div == (T)0) return copysign((T)0, x / y);
    T f = floor(div);
    return (div - f > (T)0.5) ? f + (T)1 : f;
}

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
    case 8: return floor_div_float(a, b);
    case 9: return rem_float(a, b);
    case 10: return b * unary_op<T>(16, a, (T)0, (T)0);
    }
    return a;
}

// ---- The helpers above are also the prelude of the merged elementwise kernels (cuda/fused.rs).
