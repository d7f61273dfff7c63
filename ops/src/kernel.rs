//! What every CPU kernel shares: the [`FnKernel`] adapter to the engine's `Kernel` trait, typed
//! views of blob memory, the strided walker, and the rule for when to use both cores.

use crate::{Elem, Layout};
use eddy_vm::Blob;
use eddy_vm::Counted;
use eddy_vm::instruction::{ComputeCtx, Kernel};

/// A kernel made of a name and a closure over the instruction's input and output blobs.
///
/// Op definitions build these with the layouts and dtypes they inferred captured inside, so the
/// closure is all a kernel sees: blobs and plain data, never a tensor or the scheduler.
///
/// # Examples
///
/// ```
/// use eddy_ops::FnKernel;
/// use eddy_vm::{instruction::OpCall, StreamId, Vm};
/// let vm = Vm::builder().build().unwrap();
/// let out = vm.new_blob(4);
/// let k = FnKernel::new("fill_ones", |_ins, outs| {
///     // SAFETY: the engine runs this kernel with exclusive access to its output.
///     let o = unsafe { eddy_ops::kernel::output::<u8>(&outs[0]) };
///     o.fill(1);
///     Ok(())
/// });
/// vm.run(StreamId::CPU, OpCall::new(k, Default::default(), [out.clone()].into_iter().collect())).unwrap();
/// assert_eq!(vm.read_blob(&out, |b| b.to_vec()).unwrap(), vec![1, 1, 1, 1]);
/// ```
pub struct FnKernel<F> {
    name: &'static str,
    f: F,
}

impl<F> FnKernel<F>
where
    F: FnMut(&[Counted<Blob>], &[Counted<Blob>]) -> Result<(), String> + Send + 'static,
{
    /// A kernel named `name` running `f(inputs, outputs)`; an `Err(message)` poisons the outputs.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::FnKernel;
    /// use eddy_vm::{StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// let out = vm.new_blob(4);
    /// let k = FnKernel::new("refuse", |_ins, _outs| Err("not today".to_string()));
    /// vm.run_op(StreamId::CPU, k, &[], &[&out], false)?;
    /// let err = vm.read_blob(&out, |b| b.to_vec()).unwrap_err(); // the output is poisoned
    /// assert!(err.to_string().contains("not today"), "{err}");
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn new(name: &'static str, f: F) -> Self {
        FnKernel { name, f }
    }
}

impl<F> Kernel for FnKernel<F>
where
    F: FnMut(&[Counted<Blob>], &[Counted<Blob>]) -> Result<(), String> + Send + 'static,
{
    fn name(&self) -> &str {
        self.name
    }
    fn compute(
        &mut self,
        inputs: &[Counted<Blob>],
        outputs: &[Counted<Blob>],
        _ctx: &mut ComputeCtx<'_>,
    ) -> eddy_vm::Result<()> {
        (self.f)(inputs, outputs).map_err(|m| eddy_vm::Error::kernel(self.name, m))
    }
}

/// The blob's memory as a slice of `T`.
///
/// # Safety
///
/// Call only inside a kernel whose instruction reads `b`, while it runs; the blob's memory is
/// at least 16-byte aligned (64 from the allocator, 16 inside a small blob) and its size a
/// multiple of `size_of::<T>()` for the dtype it was made for. `T` must be a storage type
/// (`T::ANY_BITS`: [`Bool8`](crate::Bool8) for `bool` tensors, never `bool`).
/// No output of the same instruction may be the same blob.
///
/// # Examples
///
/// ```
/// use eddy_ops::kernel::{from_host, input, output};
/// use eddy_ops::FnKernel;
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (a, sum) = (vm.new_blob(12), vm.new_blob(4));
/// vm.run_op(StreamId::CPU, from_host(vec![1.0f32, 2.0, 3.0]), &[], &[&a], false)?;
/// let k = FnKernel::new("sum", |ins, outs| {
///     // SAFETY: input 0 is read and output 0 written by this instruction; they differ.
///     let (x, o) = unsafe { (input::<f32>(&ins[0]), output::<f32>(&outs[0])) };
///     o[0] = x.iter().sum();
///     Ok(())
/// });
/// vm.run_op(StreamId::CPU, k, &[&a], &[&sum], false)?;
/// assert_eq!(vm.read_blob(&sum, |b| b.to_vec())?, 6.0f32.to_ne_bytes());
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub unsafe fn input<T: Elem>(b: &Blob) -> &[T] {
    debug_assert!(T::ANY_BITS, "bool is read through Bool8");
    // SAFETY: forwarded to the caller: the engine orders this read against every writer.
    let bytes = unsafe { b.bytes_ref() };
    if bytes.is_empty() {
        return &[];
    }
    debug_assert_eq!(bytes.as_ptr() as usize % std::mem::align_of::<T>(), 0);
    // SAFETY: the pointer is aligned (blob memory is at least 16-byte aligned) and the bytes were
    // written as `T`s by earlier kernels (every dtype's bit patterns are valid, `Bool8` included).
    unsafe {
        std::slice::from_raw_parts(
            bytes.as_ptr() as *const T,
            bytes.len() / std::mem::size_of::<T>(),
        )
    }
}

/// The blob's memory as a mutable slice of `T`.
///
/// # Safety
///
/// Call only inside a kernel whose instruction writes `b`, while it runs, once per blob; as for
/// [`input`] (`T` a storage type), and no input of the instruction may be the same blob.
///
/// # Examples
///
/// ```
/// use eddy_ops::kernel::{gather_host, output};
/// use eddy_ops::{FnKernel, Layout};
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let out = vm.new_blob(3 * 8);
/// let k = FnKernel::new("iota", |_ins, outs| {
///     // SAFETY: output 0 is written only by this instruction.
///     let o = unsafe { output::<i64>(&outs[0]) };
///     o.iter_mut().enumerate().for_each(|(i, v)| *v = i as i64);
///     Ok(())
/// });
/// vm.run_op(StreamId::CPU, k, &[], &[&out], false)?;
/// let l = Layout::contiguous([3]);
/// assert_eq!(vm.read_blob(&out, move |b| gather_host::<i64>(b, &l))?, [0, 1, 2]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
#[allow(clippy::mut_from_ref)]
pub unsafe fn output<T: Elem>(b: &Blob) -> &mut [T] {
    debug_assert!(T::ANY_BITS, "bool is written through Bool8");
    // SAFETY: forwarded to the caller: the engine gives this instruction exclusive access.
    let bytes = unsafe { b.bytes_mut() };
    if bytes.is_empty() {
        return &mut [];
    }
    debug_assert_eq!(bytes.as_ptr() as usize % std::mem::align_of::<T>(), 0);
    // SAFETY: as in `input`; the slice is unique because the caller takes it once.
    unsafe {
        std::slice::from_raw_parts_mut(
            bytes.as_mut_ptr() as *mut T,
            bytes.len() / std::mem::size_of::<T>(),
        )
    }
}

/// Below this many elements a kernel runs on one core: waking the pool costs more.
pub const PAR_MIN: usize = 1 << 15;

/// How many chunks a parallel loop is cut into per thread: more than one, so that a thread
/// that starts late (a helper waking up) takes fewer and nobody waits long for it.
pub const CHUNKS_PER_THREAD: usize = 4;

/// Runs `f(start, chunk)` over `out` split in chunks, on every core of the kernel pool
/// ([`eddy_vm::par`]) when `out` is large.
///
/// # Examples
///
/// ```
/// use eddy_ops::kernel::par_out;
/// let mut v = vec![0usize; 100_000];
/// par_out(&mut v, |start, chunk| {
///     for (k, x) in chunk.iter_mut().enumerate() {
///         *x = start + k;
///     }
/// });
/// assert!(v.iter().enumerate().all(|(i, &x)| x == i));
/// ```
pub fn par_out<T: Send>(out: &mut [T], f: impl Fn(usize, &mut [T]) + Sync + Send) {
    let n = out.len();
    // The size first: a small op does not look up the pool.
    if n < PAR_MIN || eddy_vm::par::threads() < 2 {
        f(0, out);
        return;
    }
    let chunk = n
        .div_ceil(eddy_vm::par::threads() * CHUNKS_PER_THREAD)
        .max(4096);
    eddy_vm::par::for_each_chunk_mut(out, chunk, f);
}

/// Storage offsets of the elements `start..end` (row-major order) of `N` layouts sharing one
/// shape: calls `f(i, [offset; N])` for each.
///
/// The innermost dim is a plain strided loop; the outer dims advance like an odometer.
///
/// # Examples
///
/// ```
/// use eddy_ops::{kernel::walk, Layout};
/// // A [2, 3] matrix stored transposed: row-major order visits storage 0, 2, 4, 1, 3, 5.
/// let t = Layout::contiguous([3, 2]).transpose(0, 1);
/// let mut seen = Vec::new();
/// walk(t.dims(), [&t.strides], [t.offset], 0, 6, |i, [o]| seen.push((i, o)));
/// assert_eq!(seen, [(0, 0), (1, 2), (2, 4), (3, 1), (4, 3), (5, 5)]);
/// // A sub-range, two layouts at once.
/// let c = Layout::contiguous([2, 3]);
/// let mut pairs = Vec::new();
/// walk(c.dims(), [&c.strides, &t.strides], [0, 0], 2, 4, |_, [a, b]| pairs.push((a, b)));
/// assert_eq!(pairs, [(2, 4), (3, 1)]);
/// ```
pub fn walk<const N: usize>(
    dims: &[usize],
    strides: [&[usize]; N],
    offsets: [usize; N],
    start: usize,
    end: usize,
    mut f: impl FnMut(usize, [usize; N]),
) {
    if start >= end {
        return;
    }
    let rank = dims.len();
    if rank == 0 {
        f(0, offsets);
        return;
    }
    // The multi-index of `start`.
    let mut idx = [0usize; 12];
    let mut big_idx;
    let idx: &mut [usize] = if rank <= 12 {
        &mut idx[..rank]
    } else {
        big_idx = vec![0; rank];
        &mut big_idx
    };
    let mut rem = start;
    for d in (0..rank).rev() {
        idx[d] = rem % dims[d];
        rem /= dims[d];
    }
    let mut off = offsets;
    for k in 0..N {
        for d in 0..rank {
            off[k] += idx[d] * strides[k][d];
        }
    }
    let last = rank - 1;
    let inner = dims[last];
    let mut inner_s = [0usize; N];
    for k in 0..N {
        inner_s[k] = strides[k][last];
    }
    let mut i = start;
    while i < end {
        let run = (inner - idx[last]).min(end - i);
        let mut o = off;
        for _ in 0..run {
            f(i, o);
            for k in 0..N {
                o[k] += inner_s[k];
            }
            i += 1;
        }
        if i >= end {
            break;
        }
        // Carry: back to the start of the row, then advance the outer dims.
        for k in 0..N {
            off[k] = o[k] - inner * inner_s[k];
        }
        idx[last] = 0;
        let mut d = last;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            for k in 0..N {
                off[k] += strides[k][d];
            }
            if idx[d] < dims[d] {
                break;
            }
            for k in 0..N {
                off[k] -= dims[d] * strides[k][d];
            }
            idx[d] = 0;
        }
    }
}

/// Collects the elements of `layout` from raw storage bytes, in row-major order (host reads).
///
/// # Panics
///
/// If the layout reaches past `bytes` (the tensor layer never builds such a layout).
///
/// # Examples
///
/// ```
/// use eddy_ops::{kernel::gather_host, Layout};
/// let storage = [1u8, 2, 3, 4, 5, 6];
/// let t = Layout::contiguous([3, 2]).transpose(0, 1); // [2, 3], column-major in storage
/// assert_eq!(gather_host::<u8>(&storage, &t), [1, 3, 5, 2, 4, 6]);
/// assert_eq!(gather_host::<bool>(&storage[..2], &Layout::contiguous([2])), [true, true]);
/// ```
pub fn gather_host<T: Elem>(bytes: &[u8], layout: &Layout) -> Vec<T> {
    let n = layout.numel();
    if n == 0 {
        return Vec::new();
    }
    if !T::ANY_BITS {
        // `bool`: read the stored bytes as `Bool8` and convert (any nonzero byte is true).
        return gather_host::<crate::Bool8>(bytes, layout)
            .into_iter()
            .map(|b| T::from_f64(b.to_f64()))
            .collect();
    }
    let len = bytes.len() / std::mem::size_of::<T>();
    assert!(layout.storage_extent() <= len, "layout past its storage");
    assert_eq!(bytes.as_ptr() as usize % std::mem::align_of::<T>(), 0);
    // SAFETY: the bytes are aligned for `T` (checked above; storage is at least 16-byte aligned) and
    // hold `len` initialised `T`s written by kernels; every bit pattern is a valid `T`
    // (`T::ANY_BITS`, checked above).
    let s: &[T] = unsafe { std::slice::from_raw_parts(bytes.as_ptr() as *const T, len) };
    if let Some(r) = layout.contiguous_range() {
        return s[r].to_vec();
    }
    let mut v = Vec::with_capacity(n);
    walk(
        layout.dims(),
        [&layout.strides],
        [layout.offset],
        0,
        n,
        |_, [o]| v.push(s[o]),
    );
    v
}

/// A kernel that writes host data into output 0 (the tensor's fresh storage); the data moves
/// into the instruction, so creating a tensor from a `Vec` does not wait.
///
/// `bool` data is stored as [`Bool8`](crate::Bool8) bytes (converted here, on the caller's
/// thread), and `Bool8` data as 0 or 1 (any nonzero byte is true), as comparisons write them.
///
/// # Examples
///
/// ```
/// use eddy_ops::kernel::{from_host, gather_host};
/// use eddy_ops::Layout;
/// use eddy_vm::{StreamId, Vm};
/// let vm = Vm::builder().build()?;
/// let (x, mask) = (vm.new_blob(8), vm.new_blob(2));
/// vm.run_op(StreamId::CPU, from_host(vec![1.5f32, -2.0]), &[], &[&x], false)?;
/// vm.run_op(StreamId::CPU, from_host(vec![true, false]), &[], &[&mask], false)?;
/// let l = Layout::contiguous([2]);
/// assert_eq!(vm.read_blob(&x, move |b| gather_host::<f32>(b, &l))?, [1.5, -2.0]);
/// assert_eq!(vm.read_blob(&mask, |b| b.to_vec())?, [1, 0]); // stored as `Bool8` bytes
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub fn from_host<T: Elem>(mut data: Vec<T>) -> impl eddy_vm::instruction::Kernel {
    let bools: Vec<crate::Bool8> = if T::ANY_BITS {
        if T::DTYPE == crate::DType::Bool {
            // `Bool8`: any nonzero byte becomes 1.
            data.iter_mut().for_each(|v| *v = T::from_f64(v.to_f64()));
        }
        Vec::new()
    } else {
        let b = data
            .iter()
            .map(|v| crate::Bool8::from_f64(v.to_f64()))
            .collect();
        data = Vec::new();
        b
    };
    FnKernel::new(
        "from_vec",
        move |_: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            if T::ANY_BITS {
                // SAFETY: output 0 is written only by this instruction; any bytes are a valid `T`.
                let o = unsafe { output::<T>(&outs[0]) };
                o[..data.len()].copy_from_slice(&data);
            } else {
                // SAFETY: as above, viewed as the storage type of `bool`.
                let o = unsafe { output::<crate::Bool8>(&outs[0]) };
                o[..bools.len()].copy_from_slice(&bools);
            }
            Ok(())
        },
    )
}

/// Where each row along the last dim of `l` starts in its storage, rows in row-major order (a
/// rank-0 layout is one row), for kernels that work a row at a time (sort, cumsum).
pub(crate) fn row_starts(l: &Layout) -> Vec<usize> {
    let outer = &l.dims()[..l.dims().len().saturating_sub(1)];
    let rows = crate::numel_of(outer);
    let mut starts = Vec::with_capacity(rows);
    walk(
        outer,
        [&l.strides[..outer.len()]],
        [l.offset],
        0,
        rows,
        |_, [s]| starts.push(s),
    );
    starts
}

/// How many of `rows` rows of `r` elements one pool chunk takes: all of them when the work is
/// too small to share, else enough for [`CHUNKS_PER_THREAD`] chunks per thread.
pub(crate) fn rows_per_chunk(rows: usize, r: usize) -> usize {
    let threads = eddy_vm::par::threads();
    if rows.saturating_mul(r) < PAR_MIN || threads < 2 {
        rows
    } else {
        rows.div_ceil(threads * CHUNKS_PER_THREAD)
    }
}
