//! Matrix multiplication through the `gemm` crate, batched over broadcast leading dims.
//!
//! gemm is built with its `x86-v4` feature: it picks its AVX-512 kernels at run time where the
//! CPU has them (and its AVX2 ones elsewhere). On this Zen 4 host they raised square products
//! from 123–152 to 178–192 GFLOP/s (`eddy bench --json`, medians of 3 alternated runs).
//! Strided operands (transposed views) are read in place, with two exceptions for `f32`:
//! - a product whose right operand is transposed (`Linear`'s `x @ w.t()`) and has few rows
//!   against it is computed column-major and transposed into the output (see
//!   `col_major_out_pays`);
//! - an operand whose stride aliases in the cache is copied into the order gemm packs it in
//!   (see `with_reordered`).

use crate::kernel::{FnKernel, input, output, walk};
use crate::{DType, Elem, Layout};
use eddy_vm::Counted;
use eddy_vm::{Blob, instruction::Kernel};

/// `out[b] = a[b] @ b[b]` for every batch index: input 0 of layout `la` (`[batch.., m, k]`),
/// input 1 of layout `lb` (`[batch.., k, n]`), batch dims already broadcast to the same shape;
/// output 0 contiguous `[batch.., m, n]`. `dtype` is `f32` or `f64` (through `gemm`), or `i64`,
/// `i32` or `u8`, whose products and sums wrap in the dtype as PyTorch's do (see `run_int`).
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::matmul::matmul;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (a, b, c) = (vm.new_blob(4 * 8), vm.new_blob(4 * 8), vm.new_blob(4 * 8));
/// vm.run_op(StreamId::CPU, from_host(vec![1.0f64, 2.0, 3.0, 4.0]), &[], &[&a], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![5.0f64, 6.0, 7.0, 8.0]), &[], &[&b], false)?;
/// let l = Layout::contiguous([2, 2]);
/// vm.run_op(StreamId::CPU, matmul(DType::F64, l.clone(), l.clone()), &[&a, &b], &[&c], false)?;
/// let v = vm.read_blob(&c, move |m| gather_host::<f64>(m, &l))?;
/// assert_eq!(v, [19.0, 22.0, 43.0, 50.0]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn matmul(dtype: DType, la: Layout, lb: Layout) -> impl Kernel {
    FnKernel::new(
        "matmul",
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| match dtype {
            DType::F32 => run::<f32>(&la, &lb, None, ins, outs, single_row_f32),
            DType::F64 => run::<f64>(&la, &lb, None, ins, outs, |_, _, _, _, _| false),
            DType::I64 => run_int::<i64>(&la, &lb, ins, outs),
            DType::I32 => run_int::<i32>(&la, &lb, ins, outs),
            DType::U8 => run_int::<u8>(&la, &lb, ins, outs),
            d => Err(format!("matmul kernel does not take {d}")),
        },
    )
}

/// `out[b] = a[b] @ b[b] + c[b]`, PyTorch's `addmm` (and `linear`): [`matmul`] with input 2
/// of layout `lc`, already broadcast to the output's shape `[batch.., m, n]` (a bias is a row
/// broadcast down the rows), added to each block of the product right after it is computed,
/// while the block is in cache. Every output element is `product + c`, rounded once more,
/// exactly as a separate `add` after [`matmul`] computes it. `dtype` is `f32` or `f64`.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::matmul::matmul_bias;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout, Shape};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (a, b, c, o) = (vm.new_blob(4 * 8), vm.new_blob(4 * 8), vm.new_blob(2 * 8), vm.new_blob(4 * 8));
/// vm.run_op(StreamId::CPU, from_host(vec![1.0f64, 2.0, 3.0, 4.0]), &[], &[&a], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![5.0f64, 6.0, 7.0, 8.0]), &[], &[&b], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![0.5f64, -1.0]), &[], &[&c], false)?;
/// let l = Layout::contiguous([2, 2]);
/// let lc = Layout::contiguous([2]).broadcast_to(&Shape::from(&[2, 2][..]));
/// let k = matmul_bias(DType::F64, l.clone(), l.clone(), lc);
/// vm.run_op(StreamId::CPU, k, &[&a, &b, &c], &[&o], false)?;
/// let v = vm.read_blob(&o, move |m| gather_host::<f64>(m, &l))?;
/// assert_eq!(v, [19.5, 21.0, 43.5, 49.0]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn matmul_bias(dtype: DType, la: Layout, lb: Layout, lc: Layout) -> impl Kernel {
    addmm("addmm", dtype, la, lb, lc, false)
}

/// [`matmul_bias`] followed by ReLU, PyTorch's `_addmm_activation` (what the tensor API's
/// `linear_relu` runs): each
/// block of the product gets its bias and then `max(·, 0)` while it is in cache, so the
/// activation costs no instruction, no pass over memory and no intermediate tensor. Every
/// output element is what the `relu` kernel gives for [`matmul_bias`]'s: `v` where `v > 0` or
/// `v` is NaN, else `+0`. `dtype` is `f32` or `f64`.
///
/// # Examples
///
/// ```
/// use eddy_ops::cpu::matmul::matmul_bias_relu;
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::{DType, Layout, Shape};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (a, b, c, o) = (vm.new_blob(2 * 8), vm.new_blob(4 * 8), vm.new_blob(2 * 8), vm.new_blob(2 * 8));
/// vm.run_op(StreamId::CPU, from_host(vec![1.0f64, 2.0]), &[], &[&a], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![1.0f64, -1.0, 1.0, -1.0]), &[], &[&b], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![0.5f64, 2.0]), &[], &[&c], false)?;
/// let (la, lb) = (Layout::contiguous([1, 2]), Layout::contiguous([2, 2]));
/// let lc = Layout::contiguous([2]).broadcast_to(&Shape::from(&[1, 2][..]));
/// let k = matmul_bias_relu(DType::F64, la.clone(), lb, lc);
/// vm.run_op(StreamId::CPU, k, &[&a, &b, &c], &[&o], false)?;
/// // [1, 2] @ [[1, -1], [1, -1]] = [3, -3]; plus the bias, [3.5, -1]; ReLU, [3.5, 0].
/// let v = vm.read_blob(&o, move |m| gather_host::<f64>(m, &la))?;
/// assert_eq!(v, [3.5, 0.0]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn matmul_bias_relu(dtype: DType, la: Layout, lb: Layout, lc: Layout) -> impl Kernel {
    addmm("addmm_relu", dtype, la, lb, lc, true)
}

/// The kernel of [`matmul_bias`] (`relu` false) and [`matmul_bias_relu`].
fn addmm(
    name: &'static str,
    dtype: DType,
    la: Layout,
    lb: Layout,
    lc: Layout,
    relu: bool,
) -> impl Kernel {
    FnKernel::new(
        name,
        move |ins: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let epi = Some((&lc, relu));
            match dtype {
                DType::F32 => run::<f32>(&la, &lb, epi, ins, outs, single_row_f32),
                DType::F64 => run::<f64>(&la, &lb, epi, ins, outs, |_, _, _, _, _| false),
                d => Err(format!("{name} kernel does not take {d}")),
            }
        },
    )
}

/// The sizes of a batched product `[batch.., m, k] @ [batch.., k, n]`, its broadcast batch
/// dims with their element count, and the storage of its operands and output.
struct Product<'a, T> {
    m: usize,
    k: usize,
    n: usize,
    batch: &'a [usize],
    nb: usize,
    a: &'a [T],
    b: &'a [T],
    o: &'a mut [T],
}

/// [`Product`] of the matmul instruction's layouts and blobs.
fn product<'a, T: Elem>(
    la: &'a Layout,
    lb: &Layout,
    ins: &'a [Counted<Blob>],
    outs: &'a [Counted<Blob>],
) -> Product<'a, T> {
    let r = la.shape.rank();
    // SAFETY: inputs 0 and 1 are read, output 0 written; the output is a fresh blob.
    let (a, b, o) = unsafe {
        (
            input::<T>(&ins[0]),
            input::<T>(&ins[1]),
            output::<T>(&outs[0]),
        )
    };
    let batch = &la.dims()[..r - 2];
    Product {
        m: la.dims()[r - 2],
        k: la.dims()[r - 1],
        n: lb.dims()[r - 1],
        batch,
        nb: crate::numel_of(batch),
        a,
        b,
        o,
    }
}

/// `lc` with its ReLU flag: the bias added to the product, if any (see [`Bias`]).
fn run<T: Elem + num_traits::Zero>(
    la: &Layout,
    lb: &Layout,
    lc: Option<(&Layout, bool)>,
    ins: &[Counted<Blob>],
    outs: &[Counted<Blob>],
    single_row: SingleRow<T>,
) -> Result<(), String> {
    let r = la.shape.rank();
    let Product {
        m,
        k,
        n,
        batch,
        nb,
        a,
        b,
        o,
    } = product::<T>(la, lb, ins, outs);
    if nb == 0 || m == 0 || n == 0 {
        return Ok(());
    }
    let (with_bias, relu) = (lc.is_some(), lc.is_some_and(|(_, r)| r));
    // SAFETY: input 2, when there is a bias, is read.
    let c = lc.map(|_| unsafe { input::<T>(&ins[2]) }).unwrap_or(&[]);
    let lc = lc.map_or(la, |(l, _)| l); // without a bias, its strides and offset go unused
    let threads = eddy_vm::par::threads();
    // Enough batches go to the threads whole, each product on one thread (a fork per batch
    // of small products costs more than their work); otherwise each product is split.
    let by_batch = nb >= 2 && threads > 1 && m * n * k * nb >= PAR_MNK;
    let parts = if !by_batch && m * n * k >= PAR_MNK {
        threads
    } else {
        1
    };
    let (a_rs, a_cs) = (la.strides[r - 2] as isize, la.strides[r - 1] as isize);
    let (b_rs, b_cs) = (lb.strides[r - 2] as isize, lb.strides[r - 1] as isize);
    let (c_rs, c_cs) = (lc.strides[r - 2], lc.strides[r - 1]);
    let err = std::sync::Mutex::new(None);
    let out = Mat {
        p: o.as_mut_ptr(),
        rs: 0,
        cs: 0,
    };
    let one = |bi: usize, [oa, ob, oc]: [usize; 3]| {
        // SAFETY: product `bi` writes `bi·m·n..(bi + 1)·m·n` of the output, which no other
        // product touches (each batch index is handed out once), and the output outlives
        // every product.
        let dst = unsafe { std::slice::from_raw_parts_mut(out.ptr().add(bi * m * n), m * n) };
        let fail = |e: &str| *err.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
        let bias = match with_bias {
            true if oc + (m - 1) * c_rs + (n - 1) * c_cs >= c.len() => {
                return fail("addmm bias out of its storage");
            }
            // Every element `(i, j)` of the `m × n` bias, `oc + i*c_rs + j*c_cs`, is
            // within `c` (the last one was checked just above).
            true => Some(Bias {
                c: Mat {
                    p: c.as_ptr().wrapping_add(oc).cast_mut(),
                    rs: c_rs as isize,
                    cs: c_cs as isize,
                },
                relu,
            }),
            false => None,
        };
        let whole = Mat {
            p: dst.as_mut_ptr(),
            rs: n as isize,
            cs: 1,
        };
        if k == 0 {
            dst.fill(T::ZERO);
            // SAFETY: `whole` is `dst`, `m × n` row-major; `bias` was checked above.
            unsafe { add_bias(whole, bias, m, n) };
            return;
        }
        let last_a = oa + (m - 1) * a_rs as usize + (k - 1) * a_cs as usize;
        let last_b = ob + (k - 1) * b_rs as usize + (n - 1) * b_cs as usize;
        if last_a >= a.len() || last_b >= b.len() {
            return fail("matmul operand out of its storage");
        }
        if m == 1
            && a_cs == 1
            && single_row(&a[oa..oa + k], &b[ob..], b_rs as usize, b_cs as usize, dst)
        {
            // SAFETY: as for the `k == 0` case.
            unsafe { add_bias(whole, bias, m, n) };
            return;
        }
        // SAFETY: every element gemm reads, `base + i*rs + j*cs` for i, j within the
        // operand's dims, lies inside its slice (the last one was checked just above; strides
        // are non-negative); `dst` is a dense `m × n` row-major slice that only gemm writes;
        // `bias`, when given, was checked as above.
        unsafe {
            gemm_parts(
                parts,
                whole,
                Mat {
                    p: a.as_ptr().add(oa).cast_mut(),
                    rs: a_rs,
                    cs: a_cs,
                },
                Mat {
                    p: b.as_ptr().add(ob).cast_mut(),
                    rs: b_rs,
                    cs: b_cs,
                },
                bias,
                [m, n, k],
            )
        }
    };
    let strides = [
        &la.strides[..r - 2],
        &lb.strides[..r - 2],
        &lc.strides[..r - 2],
    ];
    let offsets = [la.offset, lb.offset, lc.offset];
    if by_batch {
        let mut at = Vec::with_capacity(nb);
        walk(batch, strides, offsets, 0, nb, |bi, offs| {
            at.push((bi, offs))
        });
        let per = nb.div_ceil(threads);
        eddy_vm::par::for_each(nb.div_ceil(per), |t| {
            for &(bi, offs) in &at[t * per..((t + 1) * per).min(nb)] {
                one(bi, offs);
            }
        });
    } else {
        walk(batch, strides, offsets, 0, nb, one);
    }
    let err = err.into_inner().unwrap_or_else(|p| p.into_inner());
    err.map_or(Ok(()), Err)
}

/// What the bias-adding products add to each block: the bias matrix `c`, then ReLU if `relu`.
#[derive(Clone, Copy)]
struct Bias<T> {
    c: Mat<T>,
    relu: bool,
}

/// `dst += bias.c` over a `rows × cols` block, `dst` row-major (`dst.cs == 1`), then
/// `dst = relu(dst)` if `bias.relu`; nothing without a bias.
///
/// # Safety
///
/// Every element `(i, j)` of both matrices is in bounds; `dst`'s are written by nothing else
/// during the call and do not overlap `bias`'s.
unsafe fn add_bias<T: Elem + num_traits::Zero>(
    dst: Mat<T>,
    bias: Option<Bias<T>>,
    rows: usize,
    cols: usize,
) {
    let Some(Bias { c, relu }) = bias else { return };
    if relu {
        // SAFETY: the caller's guarantee.
        unsafe {
            add_rows(
                dst,
                c,
                rows,
                cols,
                |v| if v <= T::ZERO { T::ZERO } else { v },
            )
        }
    } else {
        // SAFETY: as above.
        unsafe { add_rows(dst, c, rows, cols, |v| v) }
    }
}

/// `dst = act(dst + c)` over a `rows × cols` block: [`add_bias`]'s loop, one copy per
/// activation so that each vectorises on its own. ReLU is `v <= 0 ? +0 : v`, the `relu`
/// kernel's: NaN (for which `v <= 0` is false) passes through, and `-0` becomes `+0`.
///
/// # Safety
///
/// As [`add_bias`].
#[inline(always)]
unsafe fn add_rows<T: Elem + num_traits::Zero>(
    dst: Mat<T>,
    c: Mat<T>,
    rows: usize,
    cols: usize,
    act: impl Fn(T) -> T,
) {
    debug_assert_eq!(dst.cs, 1);
    for i in 0..rows as isize {
        // SAFETY: row `i` of `dst` is `cols` writable elements (the caller's guarantee).
        let d = unsafe { std::slice::from_raw_parts_mut(dst.p.offset(i * dst.rs), cols) };
        // SAFETY: row `i` of the bias is in bounds, as above.
        let cr = unsafe { c.p.offset(i * c.rs) };
        if c.cs == 1 {
            // SAFETY: a contiguous row of `cols` elements, as above (the slice lets the loop
            // vectorise).
            let cr = unsafe { std::slice::from_raw_parts(cr, cols) };
            for (x, &y) in d.iter_mut().zip(cr) {
                *x = act(*x + y);
            }
        } else if c.cs == 0 {
            // One value per row (a convolution's bias, broadcast over its positions).
            // SAFETY: element `(i, 0)` of the bias, as above.
            let y = unsafe { *cr };
            for x in d.iter_mut() {
                *x = act(*x + y);
            }
        } else {
            for (j, x) in d.iter_mut().enumerate() {
                // SAFETY: element `(i, j)` of the bias, as above.
                *x = act(*x + unsafe { *cr.offset(j as isize * c.cs) });
            }
        }
    }
}

/// `y = x @ B` for one row `x` (`B` at the slice's start with row and column strides
/// `rs`, `cs`), if the dtype has a kernel for it and `B` has contiguous rows or columns;
/// returns whether it ran.
type SingleRow<T> = fn(x: &[T], b: &[T], rs: usize, cs: usize, y: &mut [T]) -> bool;

/// [`SingleRow`] for `f32`: the streaming loops of [`gemv`](super::gemv) where the CPU has them.
fn single_row_f32(x: &[f32], b: &[f32], rs: usize, cs: usize, y: &mut [f32]) -> bool {
    super::gemv::gemv(x, b, rs, cs, y)
}

/// From this many multiply-adds on, a product is split over the kernel pool's threads.
const PAR_MNK: usize = 64 * 64 * 64;

/// A strided matrix operand: element `(i, j)` at `p + i*rs + j*cs`.
#[derive(Clone, Copy)]
struct Mat<T> {
    p: *mut T,
    rs: isize,
    cs: isize,
}
// SAFETY: `gemm_parts` hands each thread a disjoint block of the output and read-only operands.
unsafe impl<T: Send + Sync> Send for Mat<T> {}

impl<T> Mat<T> {
    /// The base pointer (a method, so that a closure captures the whole `Sync` matrix).
    fn ptr(self) -> *mut T {
        self.p
    }
}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for Mat<T> {}

/// `dst = a @ b`, plus `bias` when given, for `[m, n, k]` (`m × k` by `k × n`) as `parts`
/// single-threaded gemm calls on the kernel pool, each computing a band of the output (and
/// adding its bias): columns when `n ≥ m`, else rows, in multiples of 16 so every band keeps
/// whole micro-kernel tiles. One band per thread, each packing its own
/// operands, measured faster than gemm's own rayon split from a non-rayon thread for every
/// shape of the MLP workload (the hand-off to rayon's sleeping threads cost 15–20 µs a call).
///
/// # Safety
///
/// As `gemm::gemm`: every element of the three matrices is in bounds, `dst` is written by
/// nothing else, and `a`, `b` are not written during the call; the same for `bias`, an
/// `m × n` matrix added to `dst` when given.
unsafe fn gemm_parts<T: Elem + num_traits::Zero + 'static>(
    parts: usize,
    dst: Mat<T>,
    a: Mat<T>,
    b: Mat<T>,
    bias: Option<Bias<T>>,
    [m, n, k]: [usize; 3],
) {
    // SAFETY: the caller's guarantee, for the block of `rows × cols` at `(i0, j0)`.
    let block = |i0: usize, j0: usize, rows: usize, cols: usize| unsafe {
        let (dst, a, b, bias) = (dst, a, b, bias); // whole operands (`Sync`), not their fields
        let bias = bias.map(|Bias { c, relu }| Bias {
            c: Mat {
                p: c.p.offset(i0 as isize * c.rs + j0 as isize * c.cs),
                ..c
            },
            relu,
        });
        let a = Mat {
            p: a.p.offset(i0 as isize * a.rs),
            ..a
        };
        let b = Mat {
            p: b.p.offset(j0 as isize * b.cs),
            ..b
        };
        let dst = Mat {
            p: dst.p.offset(i0 as isize * dst.rs + j0 as isize * dst.cs),
            ..dst
        };
        let product = |dst: Mat<T>, a: Mat<T>, b: Mat<T>| {
            gemm::gemm(
                rows,
                cols,
                k,
                dst.p,
                dst.cs,
                dst.rs,
                false,
                a.p,
                a.cs,
                a.rs,
                b.p,
                b.cs,
                b.rs,
                T::ZERO,
                T::from_f64(1.0),
                false,
                false,
                false,
                gemm::Parallelism::None,
            )
        };
        if col_major_out_pays(a, b, rows, cols, k) {
            // `a` column-major, as gemm's left operand is there. `col_major_out_pays` checked
            // that `T` is `f32` and the CPU has AVX2, as `with_col_major_out` requires; `dst`
            // is this block of the row-major output (`dst.cs == 1`), which gemm's fill of the
            // scratch does not read.
            with_col_major_out(dst, rows, cols, |t| {
                with_reordered(a.cs == 1, a, rows, k, 0, |a| product(t, a, b))
            })
        } else {
            // Transposed operands row-major where each element is used often enough.
            let (ua, ub) = (
                a.rs == 1 && cols >= PACK_MIN_USES,
                b.rs == 1 && rows >= PACK_MIN_USES,
            );
            with_reordered(ua, a, rows, k, 0, |a| {
                with_reordered(ub, b, k, cols, 1, |b| product(dst, a, b))
            })
        }
        // The block's bias while the block is in cache.
        add_bias(dst, bias, rows, cols);
    };
    let split_cols = n >= m;
    let len = if split_cols { n } else { m };
    let band = len.div_ceil(parts.max(1)).next_multiple_of(16);
    if parts < 2 || band >= len {
        block(0, 0, m, n);
        return;
    }
    eddy_vm::par::for_each(len.div_ceil(band), |p| {
        let (s, w) = (p * band, band.min(len - p * band));
        if split_cols {
            block(0, s, m, w)
        } else {
            block(s, 0, w, n)
        }
    });
}

/// From this many uses of each element on (the other operand's rows or columns), a transposed
/// operand is copied row-major before the product (see [`with_reordered`]).
const PACK_MIN_USES: usize = 32;

/// Column strides (in floats) that are multiples of this map a column's neighbours onto a few
/// L1 sets (1 KiB apart: at most 4 of its 64 sets).
const ALIASING_STRIDE: usize = 256;

/// The largest scratch buffer a thread keeps after a product. A larger copy (a transposed
/// `[4096, 4096]` weight is 64 MiB) is freed at once, so one big product does not leave that
/// much memory held by every pool thread for the life of the process.
const SCRATCH_KEEP: usize = 8 << 20;

thread_local! {
    /// Per-thread scratch for the reordered copies (slot 0: the left operand, 1: the right)
    /// and for a column-major product (slot 2, see [`with_col_major_out`]), kept between calls
    /// (up to [`SCRATCH_KEEP`] bytes each) so a training step's products reuse it without page
    /// faults.
    static SCRATCH: [std::cell::RefCell<Vec<u64>>; 3] = const {
        [
            std::cell::RefCell::new(Vec::new()),
            std::cell::RefCell::new(Vec::new()),
            std::cell::RefCell::new(Vec::new()),
        ]
    };
}

/// Whether the block `dst = a @ b` (`rows × k` by `k × cols`, `dst` row-major) is cheaper as a
/// column-major product in scratch, transposed into `dst` afterwards (see
/// [`with_col_major_out`]): `f32` with AVX2, `b` a transposed view (contiguous columns), and
/// fewer floats transposed that way than by packing `b`.
///
/// Why: gemm's micro-kernel wants its left operand and the output contiguous along the same
/// dim. Asked for a row-major `dst`, gemm computes `dstᵀ = bᵀ aᵀ` and packs `bᵀ`; when `b` is
/// a transposed weight, as in `Linear`'s `x @ w.t()`, that pack is a transpose of `cols × k`
/// floats. Computed column-major, the transposes are `a`'s pack (`rows × k`, none when `a`
/// is itself column-major) and the result's (`rows × cols`): for `h @ w2.t()` with `h` of
/// `[128, 512]`, 96 Ki floats per thread instead of 128 Ki.
fn col_major_out_pays<T: 'static>(
    a: Mat<T>,
    b: Mat<T>,
    rows: usize,
    cols: usize,
    k: usize,
) -> bool {
    let a_pack = if a.rs == 1 { 0 } else { rows * k };
    b.rs == 1
        && b.cs != 1
        && rows >= 8
        && cols >= 8
        && a_pack + rows * cols < cols * k
        && std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>()
        && has_avx2()
}

/// Calls `f` with a column-major `rows × cols` matrix in this thread's scratch, for `f` to
/// fill, then writes its transpose to `dst` (row-major, row stride `dst.rs`). Only for `f32`
/// where the CPU has AVX2 ([`col_major_out_pays`] checks both).
///
/// # Safety
///
/// `T` is `f32`; AVX2 is available; every element `(i, j)` of `dst` for `i < rows`,
/// `j < cols` is writable and `dst.cs == 1`; `f` writes every element of the matrix it gets.
unsafe fn with_col_major_out<T: 'static>(
    dst: Mat<T>,
    rows: usize,
    cols: usize,
    f: impl FnOnce(Mat<T>),
) {
    with_scratch(2, rows * cols, |t| {
        f(Mat {
            p: t.cast::<T>(),
            rs: 1,
            cs: rows as isize,
        });
        // SAFETY: `f` filled the `rows × cols` column-major floats at `t` (`T` is `f32`, the
        // caller's guarantee, as are AVX2 and `dst`'s room).
        unsafe {
            transpose::copy_cols_to_rows(t, rows, rows, cols, dst.p.cast::<f32>(), dst.rs as usize)
        };
    })
}

/// Calls `f` with the operand `m` (`rows × cols`, column- or row-major) as is, or, if `want`,
/// with a copy of it in the other order in this thread's scratch `slot` when `m` is `f32`,
/// its stride is a multiple of [`ALIASING_STRIDE`], both dims are at least 8, and the CPU has
/// AVX2 for the copy.
///
/// Why: gemm reads a column-major operand down its columns as it packs it (and a row-major
/// one along its rows where it must pack it column-major), and with columns 1 or 2 KiB apart
/// those reads fall onto a few cache sets. Measured (`mm_shapes` experiment, AVX-512 kernels):
/// - a transposed view used at least [`PACK_MIN_USES`] times, copied row-major: the weight
///   gradient `g.t() @ x` (`g` of `[128, 512]`) went from 139 to 156 GFLOP/s. With a stride
///   of 784 the copy cost more than it saved: `x @ w1.t()` went from 177 to 165 (medians of 6
///   alternated runs);
/// - the row-major left operand of [`with_col_major_out`]'s products, copied column-major:
///   `h @ w2.t()` (`h` of `[128, 512]`) ran at 0.86 of `h @ w2`'s rate, against 0.80 with
///   gemm's own pack; `x @ w1.t()` (rows 784 floats apart, not copied) at 0.95, against 0.88
///   copied (five alternated runs, ratios to `h @ w2` in the same run).
///
/// # Safety
///
/// Every element `(i, j)` of `m` for `i < rows`, `j < cols` is readable and not written
/// during the call.
unsafe fn with_reordered<T: 'static, R>(
    want: bool,
    m: Mat<T>,
    rows: usize,
    cols: usize,
    slot: usize,
    f: impl FnOnce(Mat<T>) -> R,
) -> R {
    // `m`, or `mᵀ` when `m` is row-major, as `r × c` with contiguous columns `ld` apart.
    let col_major = m.rs == 1;
    let (ld, r, c) = if col_major {
        (m.cs, rows, cols)
    } else {
        (m.rs, cols, rows)
    };
    let worth = want
        && (m.rs == 1) != (m.cs == 1)
        && ld > 1
        && (ld as usize).is_multiple_of(ALIASING_STRIDE)
        && rows >= 8
        && cols >= 8
        && std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>()
        && has_avx2();
    if !worth {
        return f(m);
    }
    with_scratch(slot, rows * cols, |dst| {
        // SAFETY: `T` is `f32` and AVX2 was detected (both checked above); the caller lets us
        // read the `r × c` columns `ld` apart; `dst` has room for `rows × cols` floats.
        unsafe { transpose::copy_cols_to_rows(m.p.cast::<f32>(), ld as usize, r, c, dst, c) };
        let p = dst.cast::<T>();
        f(if col_major {
            Mat {
                p,
                rs: cols as isize,
                cs: 1,
            }
        } else {
            Mat {
                p,
                rs: 1,
                cs: rows as isize,
            }
        })
    })
}

/// Calls `f` with room for `len` floats (64-bit aligned, contents unspecified) from this
/// thread's scratch `slot`, kept for the next call when it is at most [`SCRATCH_KEEP`] bytes.
fn with_scratch<R>(slot: usize, len: usize, f: impl FnOnce(*mut f32) -> R) -> R {
    SCRATCH.with(|s| {
        // Taken, not borrowed: a nested call on the same slot gets a fresh buffer.
        let mut buf = s[slot].take();
        buf.clear();
        buf.reserve(len.div_ceil(2));
        let r = f(buf.as_mut_ptr().cast::<f32>());
        if buf.capacity() * std::mem::size_of::<u64>() <= SCRATCH_KEEP {
            s[slot].replace(buf);
        }
        r
    })
}

fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

mod int;
use int::run_int;

#[cfg(target_arch = "x86_64")]
pub(crate) mod transpose;

#[cfg(not(target_arch = "x86_64"))]
mod transpose {
    /// Never called: `has_avx2` is false off x86-64.
    ///
    /// # Safety
    ///
    /// None needed: it only panics.
    pub(super) unsafe fn copy_cols_to_rows(
        _: *const f32,
        _: usize,
        _: usize,
        _: usize,
        _: *mut f32,
        _: usize,
    ) {
        unreachable!("no AVX2 off x86-64")
    }
}
