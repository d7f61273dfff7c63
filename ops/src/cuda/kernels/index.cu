// Index kernels: `index_select` and `gather` move bits (one kernel per element size, with the
// value an index out of range reads passed in: NaN for floats, 0 for integers), `index_add`
// and `scatter_add` add atomically in each dtype. Indices are i64, i32 or u8 (`ik` 0, 1, 2).

__device__ __forceinline__ i64 load_index(const void* idx, int ik, i64 j) {
    if (ik == 0) return ((const i64*)idx)[j];
    if (ik == 1) return (i64)((const i32*)idx)[j];
    return (i64)((const u8*)idx)[j];
}

// out[o, j, q] = src[o, idx[j], q]; an index out of range reads `miss` and sets *bad.
template <typename T>
__device__ void index_select_body(const T* s, i64 off, const void* idx, int ik, i64 ioff, T* y, i64 outer,
                                  i64 size, i64 inner, i64 nidx, int* bad, T miss) {
    GRID_STRIDE(i, outer * nidx * inner) {
        i64 q = i % inner, j = (i / inner) % nidx, o = i / (inner * nidx);
        i64 ix = load_index(idx, ik, ioff + j);
        if (ix < 0 || ix >= size) { if (bad) atomicExch(bad, 1); y[i] = miss; continue; }
        y[i] = s[off + (o * size + ix) * inner + q];
    }
}
extern "C" __global__ void index_select_b1(const u8* s, i64 off, const void* idx, int ik, i64 ioff, u8* y, i64 outer, i64 size, i64 inner, i64 nidx, int* bad, u8 miss) { index_select_body<u8>(s, off, idx, ik, ioff, y, outer, size, inner, nidx, bad, miss); }
extern "C" __global__ void index_select_b2(const u16* s, i64 off, const void* idx, int ik, i64 ioff, u16* y, i64 outer, i64 size, i64 inner, i64 nidx, int* bad, u16 miss) { index_select_body<u16>(s, off, idx, ik, ioff, y, outer, size, inner, nidx, bad, miss); }
extern "C" __global__ void index_select_b4(const u32* s, i64 off, const void* idx, int ik, i64 ioff, u32* y, i64 outer, i64 size, i64 inner, i64 nidx, int* bad, u32 miss) { index_select_body<u32>(s, off, idx, ik, ioff, y, outer, size, inner, nidx, bad, miss); }
extern "C" __global__ void index_select_b8(const u64* s, i64 off, const void* idx, int ik, i64 ioff, u64* y, i64 outer, i64 size, i64 inner, i64 nidx, int* bad, u64 miss) { index_select_body<u64>(s, off, idx, ik, ioff, y, outer, size, inner, nidx, bad, miss); }

// out[i] = src[at(ls with dim replaced by idx[i])]: `ls` is the source layout broadcast to the
// index's shape with the gathered dim's stride zeroed; `stride_dim` adds idx * stride.
template <typename T>
__device__ void gather_body(const T* s, const Lay& ls, i64 stride_dim, i64 size, const void* idx, int ik, i64 ioff,
                            T* y, i64 n, int* bad, T miss) {
    GRID_STRIDE(i, n) {
        i64 ix = load_index(idx, ik, ioff + i);
        if (ix < 0 || ix >= size) { if (bad) atomicExch(bad, 1); y[i] = miss; continue; }
        y[i] = s[at(ls, i) + ix * stride_dim];
    }
}
extern "C" __global__ void gather_b1(const u8* s, Lay ls, i64 stride_dim, i64 size, const void* idx, int ik, i64 ioff, u8* y, i64 n, int* bad, u8 miss) { gather_body<u8>(s, ls, stride_dim, size, idx, ik, ioff, y, n, bad, miss); }
extern "C" __global__ void gather_b2(const u16* s, Lay ls, i64 stride_dim, i64 size, const void* idx, int ik, i64 ioff, u16* y, i64 n, int* bad, u16 miss) { gather_body<u16>(s, ls, stride_dim, size, idx, ik, ioff, y, n, bad, miss); }
extern "C" __global__ void gather_b4(const u32* s, Lay ls, i64 stride_dim, i64 size, const void* idx, int ik, i64 ioff, u32* y, i64 n, int* bad, u32 miss) { gather_body<u32>(s, ls, stride_dim, size, idx, ik, ioff, y, n, bad, miss); }
extern "C" __global__ void gather_b8(const u64* s, Lay ls, i64 stride_dim, i64 size, const void* idx, int ik, i64 ioff, u64* y, i64 n, int* bad, u64 miss) { gather_body<u64>(s, ls, stride_dim, size, idx, ik, ioff, y, n, bad, miss); }

// *p += v atomically, in the dtype's arithmetic: the device's own atomics where it has them;
// a compare-and-swap loop on the aligned 32-bit word that holds a 16- or 8-bit element.
template <typename D>
__device__ __forceinline__ void atomic_add_narrow(typename D::S* p, typename D::S v) {
    typedef typename D::S S;
    u32* w = (u32*)((u64)p & ~(u64)3);
    u32 shift = (u32)((u64)p & 3) * 8;
    u32 mask = (sizeof(S) == 2 ? 0xffffu : 0xffu) << shift;
    u32 old = *w, assumed;
    do {
        assumed = old;
        S cur = (S)((assumed & mask) >> shift);
        S nv = D::store(D::load(cur) + D::load(v));
        u32 repl = (assumed & ~mask) | (((u32)nv << shift) & mask);
        old = atomicCAS(w, assumed, repl);
    } while (old != assumed);
}
template <typename D> struct Atomic {
    static __device__ __forceinline__ void add(typename D::S* p, typename D::S v) { atomic_add_narrow<D>(p, v); }
};
template <> struct Atomic<DF32> {
    static __device__ __forceinline__ void add(float* p, float v) { atomicAdd(p, v); }
};
template <> struct Atomic<DF64> {
    static __device__ __forceinline__ void add(double* p, double v) { atomicAdd(p, v); }
};
template <> struct Atomic<DI64> {
    static __device__ __forceinline__ void add(i64* p, i64 v) { atomicAdd((u64*)p, (u64)v); }
};
template <> struct Atomic<DI32> {
    static __device__ __forceinline__ void add(i32* p, i32 v) { atomicAdd(p, v); }
};
// Bool adds are "or".
struct DBOOL {
    typedef u8 S; typedef i64 C;
    static __device__ __forceinline__ C load(S v) { return (i64)v; }
    static __device__ __forceinline__ S store(C v) { return v != 0; }
};

// out[at(lo, i) + idx[i] * stride_dim] += src[off + i] (out filled first); indices out of
// range are skipped (the op layer checks known ranges on the host).
template <typename D>
__device__ void scatter_add_body(const typename D::S* s, i64 off, const Lay& lo, i64 stride_dim, i64 size,
                                 const void* idx, int ik, i64 ioff, typename D::S* y, i64 n) {
    GRID_STRIDE(i, n) {
        i64 ix = load_index(idx, ik, ioff + i);
        if (ix < 0 || ix >= size) continue;
        Atomic<D>::add(&y[at(lo, i) + ix * stride_dim], s[off + i]);
    }
}
// out[o, idx[j], q] += src[o, j, q] (out filled first).
template <typename D>
__device__ void index_add_body(const typename D::S* s, i64 off, const void* idx, int ik, i64 ioff, typename D::S* y,
                               i64 outer, i64 size, i64 inner, i64 nidx) {
    GRID_STRIDE(i, outer * nidx * inner) {
        i64 q = i % inner, j = (i / inner) % nidx, o = i / (inner * nidx);
        i64 ix = load_index(idx, ik, ioff + j);
        if (ix < 0 || ix >= size) continue;
        Atomic<D>::add(&y[(o * size + ix) * inner + q], s[off + i]);
    }
}
#define SCATTER_ARGS(S) const S* s, i64 off, Lay lo, i64 stride_dim, i64 size, const void* idx, int ik, i64 ioff, S* y, i64 n
#define INDEX_ADD_ARGS(S) const S* s, i64 off, const void* idx, int ik, i64 ioff, S* y, i64 outer, i64 size, i64 inner, i64 nidx
extern "C" __global__ void scatter_add_f32(SCATTER_ARGS(float)) { scatter_add_body<DF32>(s, off, lo, stride_dim, size, idx, ik, ioff, y, n); }
extern "C" __global__ void scatter_add_f64(SCATTER_ARGS(double)) { scatter_add_body<DF64>(s, off, lo, stride_dim, size, idx, ik, ioff, y, n); }
extern "C" __global__ void scatter_add_f16(SCATTER_ARGS(u16)) { scatter_add_body<DF16>(s, off, lo, stride_dim, size, idx, ik, ioff, y, n); }
extern "C" __global__ void scatter_add_bf16(SCATTER_ARGS(u16)) { scatter_add_body<DBF16>(s, off, lo, stride_dim, size, idx, ik, ioff, y, n); }
extern "C" __global__ void scatter_add_i64(SCATTER_ARGS(i64)) { scatter_add_body<DI64>(s, off, lo, stride_dim, size, idx, ik, ioff, y, n); }
extern "C" __global__ void scatter_add_i32(SCATTER_ARGS(i32)) { scatter_add_body<DI32>(s, off, lo, stride_dim, size, idx, ik, ioff, y, n); }
extern "C" __global__ void scatter_add_u8(SCATTER_ARGS(u8)) { scatter_add_body<DU8>(s, off, lo, stride_dim, size, idx, ik, ioff, y, n); }
extern "C" __global__ void scatter_add_bool(SCATTER_ARGS(u8)) { scatter_add_body<DBOOL>(s, off, lo, stride_dim, size, idx, ik, ioff, y, n); }
extern "C" __global__ void index_add_f32(INDEX_ADD_ARGS(float)) { index_add_body<DF32>(s, off, idx, ik, ioff, y, outer, size, inner, nidx); }
extern "C" __global__ void index_add_f64(INDEX_ADD_ARGS(double)) { index_add_body<DF64>(s, off, idx, ik, ioff, y, outer, size, inner, nidx); }
extern "C" __global__ void index_add_f16(INDEX_ADD_ARGS(u16)) { index_add_body<DF16>(s, off, idx, ik, ioff, y, outer, size, inner, nidx); }
extern "C" __global__ void index_add_bf16(INDEX_ADD_ARGS(u16)) { index_add_body<DBF16>(s, off, idx, ik, ioff, y, outer, size, inner, nidx); }
extern "C" __global__ void index_add_i64(INDEX_ADD_ARGS(i64)) { index_add_body<DI64>(s, off, idx, ik, ioff, y, outer, size, inner, nidx); }
extern "C" __global__ void index_add_i32(INDEX_ADD_ARGS(i32)) { index_add_body<DI32>(s, off, idx, ik, ioff, y, outer, size, inner, nidx); }
extern "C" __global__ void index_add_u8(INDEX_ADD_ARGS(u8)) { index_add_body<DU8>(s, off, idx, ik, ioff, y, outer, size, inner, nidx); }
extern "C" __global__ void index_add_bool(INDEX_ADD_ARGS(u8)) { index_add_body<DBOOL>(s, off, idx, ik, ioff, y, outer, size, inner, nidx); }
