// Products of any dtype and layout (cuBLAS takes the usual float ones), the bias and ReLU after a product, fused units
// of elementwise ops, and a fault on purpose.

// out[b, i, j] = sum_k a[b, i, k] * b[b, k, j] for operands of any layout (cuBLAS takes the
// float products whose matrices have a unit stride): `la` and `lb` are the operands' layouts
// over their shapes (batch dims broadcast to the output's), `sa` and `sb` the steps along k.
// Floats sum in their compute type, in order; integers in i64, wrapping, narrowed to the dtype
// (the CPU's wrapping sums give the same bits). One thread an output element.
template <typename D>
__device__ void matmul_float(const typename D::S* a, const Lay& la, i64 sa, const typename D::S* b, const Lay& lb, i64 sb,
                             typename D::S* y, i64 batch, i64 m, i64 k, i64 n) {
    typedef typename D::C C;
    GRID_STRIDE(i, batch * m * n) {
        i64 col = i % n, row = (i / n) % m, bi = i / (m * n);
        C acc = (C)0;
        if (k > 0) {
            i64 pa = at(la, (bi * m + row) * k), pb = at(lb, bi * k * n + col);
            for (i64 j = 0; j < k; ++j) acc += D::load(a[pa + j * sa]) * D::load(b[pb + j * sb]);
        }
        y[i] = D::store(acc);
    }
}
template <typename D>
__device__ void matmul_integer(const typename D::S* a, const Lay& la, i64 sa, const typename D::S* b, const Lay& lb, i64 sb,
                               typename D::S* y, i64 batch, i64 m, i64 k, i64 n) {
    GRID_STRIDE(i, batch * m * n) {
        i64 col = i % n, row = (i / n) % m, bi = i / (m * n);
        u64 acc = 0ULL;
        if (k > 0) {
            i64 pa = at(la, (bi * m + row) * k), pb = at(lb, bi * k * n + col);
            for (i64 j = 0; j < k; ++j) acc += (u64)D::load(a[pa + j * sa]) * (u64)D::load(b[pb + j * sb]);
        }
        y[i] = D::store((i64)acc);
    }
}
#define MATMUL_ARGS(S) const S* a, Lay la, i64 sa, const S* b, Lay lb, i64 sb, S* y, i64 batch, i64 m, i64 k, i64 n
extern "C" __global__ void matmul_any_f32(MATMUL_ARGS(float)) { matmul_float<DF32>(a, la, sa, b, lb, sb, y, batch, m, k, n); }
extern "C" __global__ void matmul_any_f64(MATMUL_ARGS(double)) { matmul_float<DF64>(a, la, sa, b, lb, sb, y, batch, m, k, n); }
extern "C" __global__ void matmul_any_f16(MATMUL_ARGS(u16)) { matmul_float<DF16>(a, la, sa, b, lb, sb, y, batch, m, k, n); }
extern "C" __global__ void matmul_any_bf16(MATMUL_ARGS(u16)) { matmul_float<DBF16>(a, la, sa, b, lb, sb, y, batch, m, k, n); }
extern "C" __global__ void matmul_any_i64(MATMUL_ARGS(i64)) { matmul_integer<DI64>(a, la, sa, b, lb, sb, y, batch, m, k, n); }
extern "C" __global__ void matmul_any_i32(MATMUL_ARGS(i32)) { matmul_integer<DI32>(a, la, sa, b, lb, sb, y, batch, m, k, n); }
extern "C" __global__ void matmul_any_u8(MATMUL_ARGS(u8)) { matmul_integer<DU8>(a, la, sa, b, lb, sb, y, batch, m, k, n); }

// y = relu?(y + bias[col]) over a dense [rows, cols] y; bias laid out as `lb` over y's shape.
template <typename D>
__device__ void bias_act_body(typename D::S* y, const typename D::S* b, const Lay& lb, i64 n, int relu) {
    typedef typename D::C C;
    GRID_STRIDE(i, n) {
        C v = D::load(y[i]) + D::load(b[at(lb, i)]);
        y[i] = D::store(relu ? ((v > (C)0 || v != v) ? v : (C)0) : v);
    }
}
extern "C" __global__ void bias_act_f32(float* y, const float* b, Lay lb, i64 n, int relu) { bias_act_body<DF32>(y, b, lb, n, relu); }
extern "C" __global__ void bias_act_f64(double* y, const double* b, Lay lb, i64 n, int relu) { bias_act_body<DF64>(y, b, lb, n, relu); }

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
