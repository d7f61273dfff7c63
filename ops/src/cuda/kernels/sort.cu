// Sorting along the last dim: `sort`, `argsort`, `topk` (and `median`, built on them).

// A value's place in the sort order as an unsigned integer, as the CPU kernel's keys: NaN above
// every number, -0.0 equal to 0.0, so that equal keys tie and keep their order.
__device__ __forceinline__ u64 sort_key(float x) {
    if (x != x) return 0xffffffffULL;
    unsigned int b = __float_as_uint(x + 0.0f);
    return (b >> 31) ? (u64)(~b) : (u64)(b | 0x80000000u);
}
__device__ __forceinline__ u64 sort_key(double x) {
    if (x != x) return ~0ULL;
    u64 b = (u64)__double_as_longlong(x + 0.0);
    return (b >> 63) ? ~b : (b | 0x8000000000000000ULL);
}
__device__ __forceinline__ u64 sort_key(i64 x) { return (u64)x ^ 0x8000000000000000ULL; }
__device__ __forceinline__ u64 sort_key(u8 x) { return (u64)x; }

// Puts the smaller of pairs a < b (by key, then position) at a.
__device__ __forceinline__ void order_pair(u64* key, unsigned int* pos, i64 a, i64 b) {
    u64 ka = key[a], kb = key[b];
    unsigned int pa = pos[a], pb = pos[b];
    if (kb < ka || (kb == ka && pb < pa)) {
        key[a] = kb; key[b] = ka;
        pos[a] = pb; pos[b] = pa;
    }
}

// Sorts n (key, position) pairs ascending with the block's threads: a bitonic network in the
// form whose comparators all put the smaller pair first, so that the places past n (up to the
// next power of two) act as +infinity and are never touched. Every thread of the block calls it.
__device__ void block_sort(u64* key, unsigned int* pos, i64 n) {
    i64 p = 1;
    while (p < n) p <<= 1;
    for (i64 size = 2; size <= p; size <<= 1) {
        i64 half = size / 2;
        for (i64 t = threadIdx.x; t < p / 2; t += blockDim.x) {
            i64 base = (t / half) * size, off = t % half;
            i64 a = base + off, b = base + size - 1 - off;
            if (b < n) order_pair(key, pos, a, b);
        }
        __syncthreads();
        for (i64 stride = half / 2; stride > 0; stride >>= 1) {
            for (i64 t = threadIdx.x; t < p / 2; t += blockDim.x) {
                i64 a = (t / stride) * 2 * stride + t % stride, b = a + stride;
                if (b < n) order_pair(key, pos, a, b);
            }
            __syncthreads();
        }
    }
}

// Sorts each row of `x` (rows of n, the sorted dim last in `lx`) and writes the first k of each
// row's order: the values to `yv` and their positions in the row to `yi`, both through `ly`
// (last dim k). Ascending, or descending with the keys flipped (ties keep their order either
// way). One block a row; the row's keys and positions in shared memory when `key` is null
// (n * 12 bytes), else in `key` and `pos`, n of each per block.
__device__ __forceinline__ u64 sort_key(i32 x) { return sort_key((i64)x); }

// The key of a stored value: half precision by its f32 value.
template <typename D> struct Key {
    static __device__ __forceinline__ u64 of(typename D::S v) { return sort_key(v); }
};
template <> struct Key<DF16> {
    static __device__ __forceinline__ u64 of(u16 v) { return sort_key(f16_to_f32(v)); }
};
template <> struct Key<DBF16> {
    static __device__ __forceinline__ u64 of(u16 v) { return sort_key(bf16_to_f32(v)); }
};

// Sorts each row of `x` (rows of n, the sorted dim last in `lx`) and writes the first k of each
// row's order: the values to `yv` and their positions in the row to `yi`, both through `ly`
// (last dim k). Ascending, or descending with the keys flipped (ties keep their order either
// way). One block a row; the row's keys and positions in shared memory when `key` is null
// (n * 12 bytes), else in `key` and `pos`, n of each per block.
template <typename D>
__device__ void sort_body(const typename D::S* x, const Lay& lx, typename D::S* yv, i64* yi, const Lay& ly, i64 rows,
                          i64 n, i64 k, int descending, u64* gkey, unsigned int* gpos) {
    extern __shared__ u64 sh_key[];
    u64* key = gkey ? gkey + (i64)blockIdx.x * n : sh_key;
    unsigned int* pos = gkey ? gpos + (i64)blockIdx.x * n : (unsigned int*)(sh_key + n);
    u64 flip = descending ? ~0ULL : 0ULL;
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        for (i64 j = threadIdx.x; j < n; j += blockDim.x) {
            key[j] = Key<D>::of(x[at(lx, r * n + j)]) ^ flip;
            pos[j] = (unsigned int)j;
        }
        __syncthreads();
        block_sort(key, pos, n);
        for (i64 j = threadIdx.x; j < k; j += blockDim.x) {
            i64 o = at(ly, r * k + j);
            unsigned int p = pos[j];
            yv[o] = x[at(lx, r * n + p)];
            yi[o] = (i64)p;
        }
        __syncthreads();
    }
}
#define SORT_ARGS(S) const S* x, Lay lx, S* yv, i64* yi, Lay ly, i64 rows, i64 n, i64 k, int descending, u64* key, unsigned int* pos
extern "C" __global__ void __launch_bounds__(512) sort_f32(SORT_ARGS(float)) { sort_body<DF32>(x, lx, yv, yi, ly, rows, n, k, descending, key, pos); }
extern "C" __global__ void __launch_bounds__(512) sort_f64(SORT_ARGS(double)) { sort_body<DF64>(x, lx, yv, yi, ly, rows, n, k, descending, key, pos); }
extern "C" __global__ void __launch_bounds__(512) sort_f16(SORT_ARGS(u16)) { sort_body<DF16>(x, lx, yv, yi, ly, rows, n, k, descending, key, pos); }
extern "C" __global__ void __launch_bounds__(512) sort_bf16(SORT_ARGS(u16)) { sort_body<DBF16>(x, lx, yv, yi, ly, rows, n, k, descending, key, pos); }
extern "C" __global__ void __launch_bounds__(512) sort_i64(SORT_ARGS(i64)) { sort_body<DI64>(x, lx, yv, yi, ly, rows, n, k, descending, key, pos); }
extern "C" __global__ void __launch_bounds__(512) sort_i32(SORT_ARGS(i32)) { sort_body<DI32>(x, lx, yv, yi, ly, rows, n, k, descending, key, pos); }
extern "C" __global__ void __launch_bounds__(512) sort_u8(SORT_ARGS(u8)) { sort_body<DU8>(x, lx, yv, yi, ly, rows, n, k, descending, key, pos); }
