// Elementwise kernels: unary and binary maps, in-place updates, comparisons, `where`, copies,
// casts and fills. Each dtype's kernel is a one-line instance of a template over its `D`.

// The integer-preserving unary ops, in i64 (wrapping, as the CPU kernels); codes as
// `unary_op`'s. Floor, ceil, round and trunc leave an integer as it is.
__device__ __forceinline__ i64 unary_int(int op, i64 v, i64 c, i64 d) {
    u64 u = (u64)v;
    switch (op) {
    case 0: return (i64)(0ULL - u);
    case 1: return v < 0 ? (i64)(0ULL - u) : v;
    case 10: return v > 0 ? v : 0;
    case 14: return (i64)(u * u);
    case 15: return v > 0 ? 1 : (v < 0 ? -1 : 0);
    case 18: return (i64)(u + (u64)c);
    case 19: return (i64)(u * (u64)c);
    case 21: return (i64)((u64)c - u);
    case 25: { i64 r = v < c ? c : v; return r > d ? d : r; }
    }
    return v;
}

// `x ** y` on integers, wrapping; a negative power of 0 gives 0 (the CPU kernel fails instead).
__device__ __forceinline__ i64 int_pow(i64 x, i64 y) {
    if (y < 0) return x == 1 ? 1 : (x == -1 ? ((y & 1) ? -1 : 1) : 0);
    u64 base = (u64)x, acc = 1ULL, e = (u64)y;
    while (e) {
        if (e & 1ULL) acc *= base;
        base *= base;
        e >>= 1;
    }
    return (i64)acc;
}

// The binary ops on integers, in i64 (wrapping, as the CPU kernels); codes as `binary_op`'s.
// Floor division and remainder round toward negative infinity, as Python's; a division by 0
// gives 0 (the CPU kernel fails instead).
__device__ __forceinline__ i64 binary_int(int op, i64 a, i64 b) {
    u64 ua = (u64)a, ub = (u64)b;
    switch (op) {
    case 0: return (i64)(ua + ub);
    case 1: return (i64)(ua - ub);
    case 2: return (i64)(ua * ub);
    case 4: return int_pow(a, b);
    case 5: return a > b ? a : b;
    case 6: return a < b ? a : b;
    case 7: return a > 0 ? b : 0;
    case 8:
    case 9: {
        if (b == 0) return 0;
        // i64::MIN / -1 wraps to i64::MIN, its remainder is 0 (Rust's wrapping_div/rem).
        bool wraps = a == (i64)0x8000000000000000ULL && b == -1;
        i64 q = wraps ? a : a / b, r = wraps ? 0 : a % b;
        bool adjust = r != 0 && ((r < 0) != (b < 0));
        if (op == 8) return adjust ? (i64)((u64)q - 1ULL) : q;
        return adjust ? (i64)((u64)r + ub) : r;
    }
    }
    return a;
}

template <typename D>
__device__ void unary_float(int op, typename D::C c, typename D::C d, const typename D::S* x, const Lay& lx,
                            typename D::S* y, i64 n) {
    GRID_STRIDE(i, n) { y[i] = D::store(unary_op<typename D::C>(op, D::load(x[at(lx, i)]), c, d)); }
}
template <typename D>
__device__ void unary_integer(int op, i64 c, i64 d, const typename D::S* x, const Lay& lx, typename D::S* y, i64 n) {
    GRID_STRIDE(i, n) { y[i] = D::store(unary_int(op, D::load(x[at(lx, i)]), c, d)); }
}
extern "C" __global__ void unary_f32(int op, float c, float d, const float* x, Lay lx, float* y, i64 n) { unary_float<DF32>(op, c, d, x, lx, y, n); }
extern "C" __global__ void unary_f64(int op, double c, double d, const double* x, Lay lx, double* y, i64 n) { unary_float<DF64>(op, c, d, x, lx, y, n); }
extern "C" __global__ void unary_f16(int op, float c, float d, const u16* x, Lay lx, u16* y, i64 n) { unary_float<DF16>(op, c, d, x, lx, y, n); }
extern "C" __global__ void unary_bf16(int op, float c, float d, const u16* x, Lay lx, u16* y, i64 n) { unary_float<DBF16>(op, c, d, x, lx, y, n); }
extern "C" __global__ void unary_i64(int op, i64 c, i64 d, const i64* x, Lay lx, i64* y, i64 n) { unary_integer<DI64>(op, c, d, x, lx, y, n); }
extern "C" __global__ void unary_i32(int op, i64 c, i64 d, const i32* x, Lay lx, i32* y, i64 n) { unary_integer<DI32>(op, c, d, x, lx, y, n); }
extern "C" __global__ void unary_u8(int op, i64 c, i64 d, const u8* x, Lay lx, u8* y, i64 n) { unary_integer<DU8>(op, c, d, x, lx, y, n); }

template <typename D>
__device__ void binary_float(int op, const typename D::S* a, const Lay& la, const typename D::S* b, const Lay& lb,
                             typename D::S* y, i64 n) {
    GRID_STRIDE(i, n) { y[i] = D::store(binary_op<typename D::C>(op, D::load(a[at(la, i)]), D::load(b[at(lb, i)]))); }
}
template <typename D>
__device__ void binary_integer(int op, const typename D::S* a, const Lay& la, const typename D::S* b, const Lay& lb,
                               typename D::S* y, i64 n) {
    GRID_STRIDE(i, n) { y[i] = D::store(binary_int(op, D::load(a[at(la, i)]), D::load(b[at(lb, i)]))); }
}
extern "C" __global__ void binary_f32(int op, const float* a, Lay la, const float* b, Lay lb, float* y, i64 n) { binary_float<DF32>(op, a, la, b, lb, y, n); }
extern "C" __global__ void binary_f64(int op, const double* a, Lay la, const double* b, Lay lb, double* y, i64 n) { binary_float<DF64>(op, a, la, b, lb, y, n); }
extern "C" __global__ void binary_f16(int op, const u16* a, Lay la, const u16* b, Lay lb, u16* y, i64 n) { binary_float<DF16>(op, a, la, b, lb, y, n); }
extern "C" __global__ void binary_bf16(int op, const u16* a, Lay la, const u16* b, Lay lb, u16* y, i64 n) { binary_float<DBF16>(op, a, la, b, lb, y, n); }
extern "C" __global__ void binary_i64(int op, const i64* a, Lay la, const i64* b, Lay lb, i64* y, i64 n) { binary_integer<DI64>(op, a, la, b, lb, y, n); }
extern "C" __global__ void binary_i32(int op, const i32* a, Lay la, const i32* b, Lay lb, i32* y, i64 n) { binary_integer<DI32>(op, a, la, b, lb, y, n); }
extern "C" __global__ void binary_u8(int op, const u8* a, Lay la, const u8* b, Lay lb, u8* y, i64 n) { binary_integer<DU8>(op, a, la, b, lb, y, n); }

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
template <typename D>
__device__ void inplace_float(int op, typename D::S* o, const Lay& lo, const typename D::S* x, const Lay& lx,
                              typename D::C alpha, i64 n) {
    GRID_STRIDE(i, n) {
        i64 k = at(lo, i);
        o[k] = D::store(binary_op<typename D::C>(op, D::load(o[k]), alpha * D::load(x[at(lx, i)])));
    }
}
// The integer forms the CPU defines: add and subtract (with alpha), multiply, maximum, minimum.
template <typename D>
__device__ void inplace_integer(int op, typename D::S* o, const Lay& lo, const typename D::S* x, const Lay& lx,
                                i64 alpha, i64 n) {
    GRID_STRIDE(i, n) {
        i64 k = at(lo, i);
        i64 d = D::load(o[k]), v = D::load(x[at(lx, i)]);
        u64 av = (u64)alpha * (u64)v;
        i64 r = op == 0 ? (i64)((u64)d + av) : (op == 1 ? (i64)((u64)d - av) : binary_int(op, d, v));
        o[k] = D::store(r);
    }
}
extern "C" __global__ void binary_inplace_f32(int op, float* o, Lay lo, const float* x, Lay lx, float alpha, i64 n) { inplace_float<DF32>(op, o, lo, x, lx, alpha, n); }
extern "C" __global__ void binary_inplace_f64(int op, double* o, Lay lo, const double* x, Lay lx, double alpha, i64 n) { inplace_float<DF64>(op, o, lo, x, lx, alpha, n); }
extern "C" __global__ void binary_inplace_f16(int op, u16* o, Lay lo, const u16* x, Lay lx, float alpha, i64 n) { inplace_float<DF16>(op, o, lo, x, lx, alpha, n); }
extern "C" __global__ void binary_inplace_bf16(int op, u16* o, Lay lo, const u16* x, Lay lx, float alpha, i64 n) { inplace_float<DBF16>(op, o, lo, x, lx, alpha, n); }
extern "C" __global__ void binary_inplace_i64(int op, i64* o, Lay lo, const i64* x, Lay lx, i64 alpha, i64 n) { inplace_integer<DI64>(op, o, lo, x, lx, alpha, n); }
extern "C" __global__ void binary_inplace_i32(int op, i32* o, Lay lo, const i32* x, Lay lx, i64 alpha, i64 n) { inplace_integer<DI32>(op, o, lo, x, lx, alpha, n); }
extern "C" __global__ void binary_inplace_u8(int op, u8* o, Lay lo, const u8* x, Lay lx, i64 alpha, i64 n) { inplace_integer<DU8>(op, o, lo, x, lx, alpha, n); }

template <typename D>
__device__ void compare_body(int op, const typename D::S* a, const Lay& la, const typename D::S* b, const Lay& lb,
                             u8* y, i64 n) {
    typedef typename D::C C;
    GRID_STRIDE(i, n) {
        C x = D::load(a[at(la, i)]), z = D::load(b[at(lb, i)]);
        bool r = false;
        switch (op) {
        case 0: r = x == z; break;
        case 1: r = x != z; break;
        case 2: r = x < z; break;
        case 3: r = x <= z; break;
        case 4: r = x > z; break;
        case 5: r = x >= z; break;
        case 6: r = (x != (C)0) && (z != (C)0); break;
        case 7: r = (x != (C)0) || (z != (C)0); break;
        case 8: r = (x != (C)0) != (z != (C)0); break;
        }
        y[i] = r ? 1 : 0;
    }
}
extern "C" __global__ void compare_f32(int op, const float* a, Lay la, const float* b, Lay lb, u8* y, i64 n) { compare_body<DF32>(op, a, la, b, lb, y, n); }
extern "C" __global__ void compare_f64(int op, const double* a, Lay la, const double* b, Lay lb, u8* y, i64 n) { compare_body<DF64>(op, a, la, b, lb, y, n); }
extern "C" __global__ void compare_f16(int op, const u16* a, Lay la, const u16* b, Lay lb, u8* y, i64 n) { compare_body<DF16>(op, a, la, b, lb, y, n); }
extern "C" __global__ void compare_bf16(int op, const u16* a, Lay la, const u16* b, Lay lb, u8* y, i64 n) { compare_body<DBF16>(op, a, la, b, lb, y, n); }
extern "C" __global__ void compare_i64(int op, const i64* a, Lay la, const i64* b, Lay lb, u8* y, i64 n) { compare_body<DI64>(op, a, la, b, lb, y, n); }
extern "C" __global__ void compare_i32(int op, const i32* a, Lay la, const i32* b, Lay lb, u8* y, i64 n) { compare_body<DI32>(op, a, la, b, lb, y, n); }
extern "C" __global__ void compare_u8(int op, const u8* a, Lay la, const u8* b, Lay lb, u8* y, i64 n) { compare_body<DU8>(op, a, la, b, lb, y, n); }

// `where`, copies of one dtype and fills move bits: one kernel per element size.
template <typename T>
__device__ void where_body(const u8* c, const Lay& lc, const T* a, const Lay& la, const T* b, const Lay& lb, T* y, i64 n) {
    GRID_STRIDE(i, n) { y[i] = c[at(lc, i)] ? a[at(la, i)] : b[at(lb, i)]; }
}
extern "C" __global__ void where_b1(const u8* c, Lay lc, const u8* a, Lay la, const u8* b, Lay lb, u8* y, i64 n) { where_body<u8>(c, lc, a, la, b, lb, y, n); }
extern "C" __global__ void where_b2(const u8* c, Lay lc, const u16* a, Lay la, const u16* b, Lay lb, u16* y, i64 n) { where_body<u16>(c, lc, a, la, b, lb, y, n); }
extern "C" __global__ void where_b4(const u8* c, Lay lc, const u32* a, Lay la, const u32* b, Lay lb, u32* y, i64 n) { where_body<u32>(c, lc, a, la, b, lb, y, n); }
extern "C" __global__ void where_b8(const u8* c, Lay lc, const u64* a, Lay la, const u64* b, Lay lb, u64* y, i64 n) { where_body<u64>(c, lc, a, la, b, lb, y, n); }

// Element i of `src` (any layout) to element i of `dst` (any non-overlapping layout).
template <typename T>
__device__ void copy_body(const T* x, const Lay& lx, T* y, const Lay& ly, i64 n) {
    GRID_STRIDE(i, n) { y[at(ly, i)] = x[at(lx, i)]; }
}
extern "C" __global__ void copy_b1(const u8* x, Lay lx, u8* y, Lay ly, i64 n) { copy_body(x, lx, y, ly, n); }
extern "C" __global__ void copy_b2(const u16* x, Lay lx, u16* y, Lay ly, i64 n) { copy_body(x, lx, y, ly, n); }
extern "C" __global__ void copy_b4(const u32* x, Lay lx, u32* y, Lay ly, i64 n) { copy_body(x, lx, y, ly, n); }
extern "C" __global__ void copy_b8(const u64* x, Lay lx, u64* y, Lay ly, i64 n) { copy_body(x, lx, y, ly, n); }

template <typename T>
__device__ void fill_body(T* y, const Lay& ly, T v, i64 n) {
    GRID_STRIDE(i, n) { y[at(ly, i)] = v; }
}
extern "C" __global__ void fill_b1(u8* y, Lay ly, u8 v, i64 n) { fill_body(y, ly, v, n); }
extern "C" __global__ void fill_b2(u16* y, Lay ly, u16 v, i64 n) { fill_body(y, ly, v, n); }
extern "C" __global__ void fill_b4(u32* y, Lay ly, u32 v, i64 n) { fill_body(y, ly, v, n); }
extern "C" __global__ void fill_b8(u64* y, Lay ly, u64 v, i64 n) { fill_body(y, ly, v, n); }

// Casts between any two dtypes, as the CPU's `cast` (and PyTorch's): between integers modulo
// 2^bits; floats to i32 and i64 truncated toward zero, the smallest value for NaN and out of
// range; floats to u8 through i64; to floats rounded once to the nearest; to bool "not zero".
// dtype codes (the host's `cast_code`): 0 f32, 1 f64, 2 f16, 3 bf16, 4 i64, 5 i32, 6 u8, 7 bool.
struct Val {
    double f; // a float's value, exactly (every narrower float is a double)
    i64 i;    // an integer's value
    bool is_float;
};
__device__ __forceinline__ Val load_val(int k, const void* p, i64 j) {
    Val v = {0.0, 0, true};
    switch (k) {
    case 0: v.f = ((const float*)p)[j]; break;
    case 1: v.f = ((const double*)p)[j]; break;
    case 2: v.f = f16_to_f32(((const u16*)p)[j]); break;
    case 3: v.f = bf16_to_f32(((const u16*)p)[j]); break;
    case 4: v.i = ((const i64*)p)[j]; v.is_float = false; break;
    case 5: v.i = ((const i32*)p)[j]; v.is_float = false; break;
    default: v.i = ((const u8*)p)[j]; v.is_float = false; break;
    }
    return v;
}
// `d` in f32, rounded to odd: rounding that to f16 or bf16 rounds `d` once (f32 keeps more
// than two bits beyond either).
__device__ __forceinline__ float to_odd_f32(double d) {
    float f = __double2float_rz(d);
    if ((double)f != d && f == f) f = __uint_as_float(__float_as_uint(f) | 1u);
    return f;
}
__device__ __forceinline__ i64 trunc_i64(double f) {
    return (f >= -9223372036854775808.0 && f < 9223372036854775808.0) ? (i64)f : (i64)0x8000000000000000ULL;
}
__device__ __forceinline__ i32 trunc_i32(double f) {
    return (f > -2147483649.0 && f < 2147483648.0) ? (i32)f : (i32)0x80000000u;
}
__device__ __forceinline__ void store_val(int k, void* p, i64 j, Val v) {
    double f = v.is_float ? v.f : (double)v.i;
    switch (k) {
    case 0: ((float*)p)[j] = (float)f; break;
    case 1: ((double*)p)[j] = f; break;
    case 2: ((u16*)p)[j] = f32_to_f16(to_odd_f32(f)); break;
    case 3: ((u16*)p)[j] = f32_to_bf16(to_odd_f32(f)); break;
    case 4: ((i64*)p)[j] = v.is_float ? trunc_i64(v.f) : v.i; break;
    case 5: ((i32*)p)[j] = v.is_float ? trunc_i32(v.f) : (i32)(u32)(u64)v.i; break;
    case 6: ((u8*)p)[j] = (u8)(u64)(v.is_float ? trunc_i64(v.f) : v.i); break;
    default: ((u8*)p)[j] = v.is_float ? (v.f != 0.0) : (v.i != 0); break;
    }
}
extern "C" __global__ void cast(int sk, int dk, const void* x, Lay lx, void* y, Lay ly, i64 n) {
    GRID_STRIDE(i, n) { store_val(dk, y, at(ly, i), load_val(sk, x, at(lx, i))); }
}
