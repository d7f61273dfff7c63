//! [`Tensor`]: a cheap handle to a layout over shared storage, plus its autograd record.

use crate::engine::{CHEAP_WORK, Loc, Place, VmRef};
use crate::{DType, Device, Error, Layout, Result, Shape};
use eddy_vm::instruction::Kernel;
use eddy_vm::{Blob, Counted, Vm};
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::mem::ManuallyDrop;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

mod global_handle;

/// Gradients of an op's inputs, `None` where an input gets none.
pub(crate) type Grads = Vec<Option<Tensor>>;

/// `backward(grad_of_output, inputs, output)`.
pub(crate) type BackwardFn =
    Box<dyn Fn(&Tensor, &[Tensor], &Tensor) -> Result<Grads> + Send + Sync>;

/// What an op's output remembers for backward: its op's name, and the parts a backward
/// through it needs until one frees them (see [`Tensor::backward`]).
pub(crate) struct Node {
    pub(crate) name: &'static str,
    /// `None` once a backward that did not retain the graph went through the node.
    pub(crate) parts: Mutex<Option<NodeParts>>,
}

/// What a backward through a node needs: its inputs (which hold their values), the backward
/// closure (with what it captured) and the versions of what it reads.
pub(crate) struct NodeParts {
    pub(crate) inputs: SmallVec<[Tensor; 3]>,
    pub(crate) backward: BackwardFn,
    /// The storages whose values the backward reads (inputs, or tensors it captured), with
    /// their versions at the forward: an in-place write since then would make the gradient
    /// wrong, so backward refuses it (PyTorch's saved-tensor version check).
    pub(crate) saved: SmallVec<[(eddy_vm::Counted<eddy_vm::Blob>, u64); 2]>,
    /// The output's version at the forward, when the backward reads the output's values.
    pub(crate) out_version: Option<u64>,
}

impl NodeParts {
    /// `Autograd` naming this node's op (`name`) if a tensor its backward reads was written
    /// in place since the forward; `out` is the node's output.
    #[track_caller]
    pub(crate) fn check_saved(&self, name: &'static str, out: &Tensor) -> Result<()> {
        let stale = self
            .saved
            .iter()
            .map(|(b, v)| (b.version(), *v))
            .chain(self.out_version.map(|v| (out.version_blob().version(), v)))
            .find(|(now, then)| now != then);
        match stale {
            None => Ok(()),
            Some((now, then)) => Err(Error::Autograd {
                at: crate::Caller::here(),
                op: name,
                message: format!(
                    "a tensor this op's gradient needs was modified by an in-place operation \
                     after the forward: it is at version {now}, expected version {then}"
                ),
            }),
        }
    }
}

/// The smallest and largest value of an integer tensor filled from host data, so index ops can
/// check their indices on the calling thread (`from_vec`). Shared by every view of the
/// storage (a write through any of them makes it stale), and absent for almost every tensor.
pub(crate) struct HostRange {
    range: (i64, i64),
    /// Whether `range` still describes the values: set once the fill is queued, cleared when
    /// any op writes the storage.
    valid: AtomicBool,
}

/// An n-dimensional array on an engine: every op call returns at once, after checking its
/// arguments, and the work runs asynchronously; host reads ([`to_vec`](Self::to_vec), [`item`](Self::item))
/// wait for it and report any error of the ops it depends on.
///
/// Cloning is cheap (a reference count); views share storage.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{Tensor, DType};
/// let a = Tensor::from_vec(vec![1f32, 2., 3., 4.], [2, 2])?;
/// let b = a.matmul(&a.t()?)?.add_scalar(1.0)?;
/// assert_eq!(b.to_vec2::<f32>()?, vec![vec![6., 12.], vec![12., 26.]]);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
#[derive(Clone)]
// The handle's own count is a `Counted`: dropping the only handle to a tensor (once per small
// op) then reads the count instead of decrementing it with a locked instruction.
pub struct Tensor(pub(crate) Counted<Inner>);

/// A tensor handle. Its storage is its blob: every view holds the blob and counts itself among
/// the blob's holders ([`Blob::hold`]), and the handle that drops last releases it (the engine
/// frees the memory after every earlier access). The storage has no allocation of its own: a
/// fresh tensor costs this handle and the blob.
pub(crate) struct Inner {
    /// Dropped by `Inner`'s drop: a global handle's is an uncounted copy, never dropped.
    blob: ManuallyDrop<Counted<Blob>>,
    vm: VmRef,
    dtype: DType,
    /// The device the storage lives on, and its compute stream on `vm`, where ops run.
    loc: Loc,
    pub(crate) layout: Layout,
    /// `layout.numel()` and `layout.is_contiguous()`, worked out once: every op asks.
    numel: usize,
    contiguous: bool,
    host_range: Option<Counted<HostRange>>,
    /// A global tensor's placement, SBPs and components (its handle's storage holds nothing:
    /// the values are the components'); `None` for a local tensor. In the handle, not behind
    /// a pointer of its own: a global op then allocates one handle, not two.
    global: Option<crate::global::Global>,
    pub(crate) id: u64,
    pub(crate) requires_grad: AtomicBool,
    /// Boxed: only a recorded op's output has one, and inline it would be half the handle.
    pub(crate) node: OnceLock<Box<Node>>,
    pub(crate) grad: Mutex<Option<Tensor>>,
}

/// The storage's holders: the last handle of a tensor and its views releases the blob.
impl Drop for Inner {
    fn drop(&mut self) {
        drop_graph(self);
        // A global handle's blob is an uncounted copy of the engine's unusable one: nothing
        // to release, nothing to drop.
        if self.loc.is_global() {
            return;
        }
        if self.blob.unhold() {
            // An engine that is shut down has freed everything already; nothing to report.
            let _ = self.vm.release_unheld(&self.blob);
        }
        // SAFETY: a local handle's blob is counted for it; dropped once, here, and not read
        // after.
        unsafe { ManuallyDrop::drop(&mut self.blob) }
    }
}

/// What a new handle shares with the storage it views.
struct Parts {
    /// Counted for the new handle, or a global handle's uncounted copy; never dropped on the
    /// way (at worst a count leaks).
    blob: ManuallyDrop<Counted<Blob>>,
    vm: VmRef,
    dtype: DType,
    loc: Loc,
    host_range: Option<Counted<HostRange>>,
}

impl Tensor {
    /// Whether gradients flow to this tensor.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let w = Tensor::ones([2], DType::F32)?;
    /// assert!(!w.requires_grad()); // fresh tensors do not
    /// let w = w.requires_grad_(true)?;
    /// assert!(w.mul_scalar(2.0)?.requires_grad()); // an op on it does
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn requires_grad(&self) -> bool {
        self.0.requires_grad.load(Ordering::Relaxed)
    }

    /// A new handle (no autograd record) on the storage `self` views, with `layout`.
    pub(crate) fn with_layout(&self, layout: Layout) -> Tensor {
        self.view_with(layout, self.0.host_range.as_ref())
    }

    /// A new handle on `self`'s storage with `layout` and the host range `host_range`; a
    /// global tensor's components stay with it.
    fn view_with(&self, layout: Layout, host_range: Option<&Counted<HostRange>>) -> Tensor {
        let (numel, contiguous) = (layout.numel(), layout.is_contiguous());
        let blob = if self.0.loc.is_global() {
            self.0.vm.uncounted_unusable_blob()
        } else {
            self.0.blob.hold();
            ManuallyDrop::new(Counted::clone(&self.0.blob))
        };
        Tensor::from_parts(
            Parts {
                blob,
                vm: self.0.vm.share(),
                dtype: self.0.dtype,
                loc: self.0.loc,
                host_range: host_range.cloned(),
            },
            layout,
            numel,
            contiguous,
        )
        .with_global(self.0.global.clone())
    }

    /// The handle over `parts` (whose blob already counts it as a holder) with `layout`, of
    /// `numel` elements, contiguous or not.
    fn from_parts(parts: Parts, layout: Layout, numel: usize, contiguous: bool) -> Tensor {
        debug_assert_eq!(
            (numel, contiguous),
            (layout.numel(), layout.is_contiguous())
        );
        // Built in place: `Counted::new(Inner { .. })` would build the handle on the stack and
        // copy its two hundred bytes into the allocation, a `memcpy` call per op in profiles.
        // SAFETY: every field of the `Inner` behind `p` is written exactly once, as
        // `new_with` requires.
        let inner = unsafe {
            Counted::new_with(|p: *mut Inner| {
                use std::ptr::addr_of_mut;
                addr_of_mut!((*p).blob).write(parts.blob);
                addr_of_mut!((*p).vm).write(parts.vm);
                addr_of_mut!((*p).dtype).write(parts.dtype);
                addr_of_mut!((*p).loc).write(parts.loc);
                addr_of_mut!((*p).layout).write(layout);
                addr_of_mut!((*p).numel).write(numel);
                addr_of_mut!((*p).contiguous).write(contiguous);
                addr_of_mut!((*p).host_range).write(parts.host_range);
                // A local handle's: a global one's is set after (`with_global`), so that the
                // handles of local ops move nothing more.
                addr_of_mut!((*p).global).write(None);
                addr_of_mut!((*p).id).write(eddy_vm::unique_id());
                addr_of_mut!((*p).requires_grad).write(AtomicBool::new(false));
                addr_of_mut!((*p).node).write(OnceLock::new());
                addr_of_mut!((*p).grad).write(Mutex::new(None));
            })
        };
        Tensor(inner)
    }

    /// A fresh contiguous tensor at `place` whose memory `Prepare` allocates when its producer
    /// runs.
    #[track_caller]
    pub(crate) fn empty_on(place: Place, shape: Shape, dtype: DType) -> Result<Tensor> {
        Tensor::empty_with_range(place, shape, dtype, None)
    }

    /// As [`empty_on`](Self::empty_on), at a place given by its parts (passed in registers:
    /// the per-op path).
    #[inline(always)]
    #[track_caller]
    fn empty_at(vm: VmRef, loc: Loc, shape: Shape, dtype: DType) -> Result<Tensor> {
        Tensor::fresh(vm, loc, shape, dtype, None)
    }

    /// As [`empty_on`](Self::empty_on), for a tensor that will hold host values between `lo`
    /// and `hi` (`range`); [`range_is_filled`](Self::range_is_filled) says when they are queued.
    #[track_caller]
    pub(crate) fn empty_with_range(
        place: Place,
        shape: Shape,
        dtype: DType,
        range: Option<(i64, i64)>,
    ) -> Result<Tensor> {
        Tensor::fresh(place.vm, place.loc, shape, dtype, range)
    }

    /// A fresh contiguous tensor on `vm` at `loc`, for host values in `range` if given.
    #[inline]
    #[track_caller]
    fn fresh(
        vm: VmRef,
        loc: Loc,
        shape: Shape,
        dtype: DType,
        range: Option<(i64, i64)>,
    ) -> Result<Tensor> {
        let bytes = shape.checked_bytes(dtype)?;
        let numel = bytes / dtype.size_in_bytes(); // every dtype has a size
        // The layout first: built right before `from_parts` copies it, its fields were still
        // in the store buffer when the copy read them in wider pieces (a store-forwarding
        // stall, two fifths of `from_parts`' samples); the blob's set-up lets them drain.
        let layout = Layout::contiguous(shape);
        let host_range = range.map(|range| {
            Counted::new(HostRange {
                range,
                valid: AtomicBool::new(false),
            })
        });
        Ok(Tensor::from_parts(
            Parts {
                // The blob counts its creator as its first holder: this handle.
                blob: ManuallyDrop::new(vm.new_blob(bytes)),
                vm,
                dtype,
                loc,
                host_range,
            },
            layout,
            numel,
            true,
        ))
    }

    /// A new handle on `self`'s storage and layout that knows nothing of its values on the
    /// host (no recorded range) and has no autograd record: a graph's trace input, whose
    /// values change from run to run.
    pub(crate) fn alias_unknown(&self) -> Tensor {
        self.view_with(self.0.layout.clone(), None)
    }

    /// A tensor viewing `blob` (of `vm`, on `loc`) with `layout`; `fresh`: the blob is new
    /// and counts this handle as its first holder already.
    pub(crate) fn on_blob(
        vm: VmRef,
        loc: Loc,
        blob: Counted<Blob>,
        fresh: bool,
        dtype: DType,
        layout: Layout,
    ) -> Tensor {
        if !fresh {
            blob.hold();
        }
        let (numel, contiguous) = (layout.numel(), layout.is_contiguous());
        Tensor::from_parts(
            Parts {
                blob: ManuallyDrop::new(blob),
                vm,
                dtype,
                loc,
                host_range: None,
            },
            layout,
            numel,
            contiguous,
        )
    }

    /// A global tensor's placement, SBPs and components; `None` for a local tensor.
    #[inline(always)]
    pub(crate) fn global(&self) -> Option<&crate::global::Global> {
        // The location's flag first: a local handle stops at a bit test of a word it has
        // loaded anyway.
        if !self.0.loc.is_global() {
            return None;
        }
        self.0.global.as_ref()
    }

    /// A fresh tensor on the same engine and device as `self`.
    #[inline(always)]
    #[track_caller]
    pub(crate) fn empty_like_shape(&self, shape: Shape, dtype: DType) -> Result<Tensor> {
        Tensor::empty_at(self.0.vm.share(), self.0.loc, shape, dtype)
    }

    /// Where `self` lives, for a new tensor beside it.
    #[inline]
    pub(crate) fn place(&self) -> Place {
        Place {
            vm: self.0.vm.share(),
            loc: self.0.loc,
        }
    }

    /// Marks the host values given to [`empty_with_range`](Self::empty_with_range) as the
    /// storage's: call once the op filling it is queued.
    pub(crate) fn range_is_filled(&self) {
        if let Some(h) = &self.0.host_range {
            h.valid.store(true, Ordering::Relaxed);
        }
    }

    /// The smallest and largest value of this tensor, if they are known on the host without
    /// waiting: the storage was filled from host data, no op has written it since, and this
    /// view reads every element of it (a narrow or select might skip the extremes).
    pub(crate) fn known_range(&self) -> Option<(i64, i64)> {
        let h = self.0.host_range.as_ref()?;
        if !h.valid.load(Ordering::Relaxed) {
            return None;
        }
        let l = self.layout();
        let distinct: usize = l
            .shape
            .dims()
            .iter()
            .zip(&l.strides)
            .filter(|&(_, &st)| st != 0)
            .fold(1usize, |a, (&d, _)| a.saturating_mul(d));
        let elems = self.0.blob.bytes() / self.0.dtype.size_in_bytes().max(1);
        (l.offset == 0 && distinct == elems).then_some(h.range)
    }

    /// This tensor as a kernel operand of its own shape, when it is dense or a splat.
    #[inline]
    pub(crate) fn flat_lay(&self) -> Option<eddy_ops::Lay> {
        eddy_ops::Lay::flat(self.layout(), self.0.contiguous)
    }

    /// This operand's layout for an elementwise kernel whose output has `shape` (which it
    /// broadcasts to): dense or a splat without building a layout ([`Lay::for_shape`]).
    ///
    /// [`Lay::for_shape`]: eddy_ops::Lay::for_shape
    pub(crate) fn lay_for(&self, shape: &Shape) -> eddy_ops::Lay {
        eddy_ops::Lay::for_shape(self.layout(), self.0.contiguous, shape)
    }

    /// The dims.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Shape, Tensor, DType};
    /// let t = Tensor::zeros([2, 3], DType::F32)?;
    /// assert_eq!(t.shape(), &Shape::from([2, 3]));
    /// assert_eq!(t.shape().rank(), 2);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn shape(&self) -> &Shape {
        &self.0.layout.shape
    }
    /// The dims as a slice.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::zeros([2, 3], DType::F32)?;
    /// assert_eq!(t.dims(), &[2, 3]);
    /// assert_eq!(Tensor::scalar(1f32)?.dims(), &[] as &[usize]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn dims(&self) -> &[usize] {
        self.0.layout.dims()
    }
    /// The number of dims.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::zeros([2, 3], DType::F32)?;
    /// assert_eq!(t.rank(), 2);
    /// assert_eq!(t.sum_all()?.rank(), 0);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn rank(&self) -> usize {
        self.0.layout.shape.rank()
    }
    /// The size of dim `d` (negative counts from the end).
    ///
    /// # Errors
    ///
    /// `InvalidDim`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::zeros([2, 3], DType::F32)?;
    /// assert_eq!((t.dim(0)?, t.dim(-1)?), (2, 3));
    /// assert!(t.dim(2).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn dim(&self, d: isize) -> Result<usize> {
        Ok(self.dims()[self.shape().dim("dim", d)?])
    }
    /// The element count.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::zeros([2, 3], DType::F32)?;
    /// assert_eq!(t.numel(), 6);
    /// assert_eq!(Tensor::zeros([4, 0], DType::F32)?.numel(), 0);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn numel(&self) -> usize {
        self.0.numel
    }
    /// The element type.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// assert_eq!(Tensor::from_vec(vec![1i32], [1])?.dtype(), DType::I32);
    /// assert_eq!(Tensor::from_vec(vec![1i32], [1])?.div_scalar(2.0)?.dtype(), DType::F32);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }
    /// The device the tensor's storage lives on, where its ops run.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{with_engine, Device, Tensor, DType};
    /// assert_eq!(Tensor::zeros([2], DType::F32)?.device(), Device::CPU);
    /// let vm = eddy_vm::Vm::builder().cpu_devices(2).build()?;
    /// let t = with_engine(&vm, || Tensor::zeros([2], DType::F32))?.to_device(Device::Cpu(1))?;
    /// assert_eq!(t.device(), Device::Cpu(1));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[inline]
    pub fn device(&self) -> Device {
        self.0.loc.device()
    }

    /// Whether `other` is on the same device of the same engine: the same compute stream.
    #[inline]
    pub(crate) fn same_place(&self, other: &Tensor) -> bool {
        self.0.loc == other.0.loc && self.engine().same_engine(other.engine())
    }
    /// Shape, strides and offset into the storage.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::zeros([2, 3], DType::F32)?;
    /// assert_eq!(t.layout().strides.as_slice(), &[3, 1]);
    /// let tt = t.t()?; // a view: the strides swap
    /// assert_eq!((tt.layout().strides.as_slice(), tt.layout().offset), (&[1, 3][..], 0));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn layout(&self) -> &Layout {
        &self.0.layout
    }
    /// Whether the elements are dense and row-major.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::zeros([2, 3], DType::F32)?;
    /// assert!(t.is_contiguous());
    /// assert!(!t.t()?.is_contiguous());
    /// assert!(t.t()?.contiguous()?.is_contiguous());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn is_contiguous(&self) -> bool {
        self.0.contiguous
    }
    /// The engine the tensor lives on.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let a = Tensor::zeros([2], DType::F32)?;
    /// let b = Tensor::ones([2], DType::F32)?;
    /// assert!(a.engine().same_engine(b.engine())); // both on the default engine
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn engine(&self) -> &Vm {
        &self.0.vm
    }
    /// The engine, as the handle new tensors on it take.
    pub(crate) fn engine_ref(&self) -> &VmRef {
        &self.0.vm
    }
    /// A process-unique id of this handle's tensor (views have their own).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let a = Tensor::zeros([2], DType::F32)?;
    /// assert_eq!(a.clone().id(), a.id()); // a clone is the same tensor
    /// assert_ne!(a.reshape([2, 1])?.id(), a.id()); // a view is another
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn id(&self) -> u64 {
        self.0.id
    }
    /// Whether `self` and `other` share storage.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let a = Tensor::zeros([2, 2], DType::F32)?;
    /// assert!(a.t()?.shares_storage(&a));
    /// assert!(!a.t()?.contiguous()?.shares_storage(&a)); // a copy
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn shares_storage(&self, other: &Tensor) -> bool {
        match (self.global(), other.global()) {
            // Global handles: their first rank's components (each rank's views the same way).
            (Some(a), Some(b)) => a.parts[0].shares_storage(&b.parts[0]),
            (None, None) => Counted::ptr_eq(&self.0.blob, &other.0.blob),
            _ => false,
        }
    }
    pub(crate) fn blob(&self) -> &Counted<Blob> {
        &self.0.blob
    }
    /// The blob whose version counts this tensor's in-place writes: its own, or a global
    /// handle's first component's (an in-place op on a global tensor writes every component).
    pub(crate) fn version_blob(&self) -> &Counted<Blob> {
        match self.global() {
            Some(g) => g.parts[0].version_blob(),
            None => &self.0.blob,
        }
    }

    /// Checks that `other` is on the same device and engine, for `op`.
    #[inline]
    #[track_caller]
    pub(crate) fn same_device(&self, op: &'static str, other: &Tensor) -> Result<()> {
        if !self.same_place(other) {
            return Err(self.device_mismatch(op, other));
        }
        Ok(())
    }

    /// Checks that `other` has this tensor's dtype, for `op`.
    #[track_caller]
    pub(crate) fn same_dtype(&self, op: &'static str, other: &Tensor) -> Result<()> {
        if self.dtype() != other.dtype() {
            return Err(Error::DTypeMismatch {
                at: crate::Caller::here(),
                op,
                lhs: self.dtype(),
                rhs: other.dtype(),
            });
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    #[track_caller]
    fn device_mismatch(&self, op: &'static str, other: &Tensor) -> Error {
        if self.is_global() || other.is_global() {
            return crate::global::mismatch(op, self, other);
        }
        let (lhs, rhs) = (self.device(), other.device());
        if lhs != rhs {
            return Error::DeviceMismatch {
                at: crate::Caller::here(),
                op,
                lhs: format!("{lhs} (tensor {})", self.id()),
                rhs: format!("{rhs} (tensor {})", other.id()),
            };
        }
        Error::DeviceMismatch {
            at: crate::Caller::here(),
            op,
            lhs: format!("{lhs} (engine of tensor {})", self.id()),
            rhs: format!("{rhs} (another engine, tensor {})", other.id()),
        }
    }

    /// Enqueues `kernel` reading `ins` and writing `outs` on the tensors' engine. Its work is
    /// taken as the elements it reads and writes (see [`launch_with_work`](Self::launch_with_work)).
    #[track_caller]
    pub(crate) fn launch(kernel: impl Kernel, ins: &[&Tensor], outs: &[&Tensor]) -> Result<()> {
        let work = ins
            .iter()
            .chain(outs)
            .fold(0usize, |a, t| a.saturating_add(t.numel()));
        Tensor::launch_with_work(kernel, ins, outs, Some(work))
    }

    /// Enqueues `kernel` reading `ins` and writing `outs` on the tensors' engine. `work` is
    /// roughly how many element touches (or multiply-adds) it costs, if known: at most
    /// [`CHEAP_WORK`] makes the call cheap, so an idle engine runs it at once on this thread
    /// (`InstructionPolicy::cheap`). `None` leaves the choice to the kernel.
    #[track_caller]
    pub(crate) fn launch_with_work(
        kernel: impl Kernel,
        ins: &[&Tensor],
        outs: &[&Tensor],
        work: Option<usize>,
    ) -> Result<()> {
        Tensor::launch_on(None, kernel, ins, outs, work)
    }

    /// As [`launch_with_work`](Self::launch_with_work), on `stream` if given (a copy stream),
    /// else on the compute stream of the first output's (or input's) device.
    #[track_caller]
    pub(crate) fn launch_on(
        stream: Option<eddy_vm::StreamId>,
        kernel: impl Kernel,
        ins: &[&Tensor],
        outs: &[&Tensor],
        work: Option<usize>,
    ) -> Result<()> {
        // A kernel whose outputs are all empty has nothing to do. Not launching it also keeps
        // kernels from looping over the huge outer dims a zero-sized tensor may have
        // (`[2^62, 0]`), and saturated extents from reaching them.
        if !outs.is_empty() && outs.iter().all(|t| t.numel() == 0) {
            return Ok(());
        }
        for t in outs {
            if let Some(h) = &t.0.host_range {
                // Written by an op: the values are no longer known on the host.
                h.valid.store(false, Ordering::Relaxed);
            }
        }
        let t = outs.first().or(ins.first()).expect("an operand");
        let cheap = match work {
            Some(w) => w <= CHEAP_WORK,
            None => kernel.cheap(),
        };
        // A global operand's storage is released from the start: the engine refuses a kernel
        // on it (an op without global rules), which the error names as such.
        (t.engine().run_op(
            stream.unwrap_or(t.0.loc.stream()),
            kernel,
            &blob_refs(ins),
            &blob_refs(outs),
            cheap,
        ))
        .map_err(|e| crate::global::refused_kernel(e, ins, outs))
    }
}

/// The blobs of `ts`, in order.
fn blob_refs<'a>(ts: &[&'a Tensor]) -> SmallVec<[&'a Counted<Blob>; 4]> {
    match ts {
        [] => SmallVec::new(),
        // The usual case, without `collect`'s capacity checks: a full buffer, `len` used.
        [.., last] if ts.len() <= 4 => SmallVec::from_buf_and_len(
            std::array::from_fn(|k| ts.get(k).unwrap_or(last).blob()),
            ts.len(),
        ),
        _ => ts.iter().map(|t| t.blob()).collect(),
    }
}

/// Shape, dtype, device, whether it requires grad, and the values (printed as `Display` does,
/// which waits for the tensor): what a REPL such as evcxr shows for a tensor.
///
/// ```
/// let t = eddy_tensor::Tensor::from_vec(vec![1i64, 2], [2]).unwrap();
/// assert_eq!(format!("{t:?}"), "Tensor[dims [2], i64, cpu:0] tensor([1, 2], dtype=i64)");
/// ```
impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tensor[dims {:?}, {}, {}{}] {}",
            self.dims(),
            self.dtype(),
            crate::global::describe(self),
            if self.requires_grad() {
                ", requires_grad"
            } else {
                ""
            },
            self
        )
    }
}

/// Drops a handle's autograd record iteratively (F17), from `Inner`'s drop: a tensor's node
/// holds its inputs, whose nodes hold theirs; a recursive drop of 100k links would overflow the
/// stack.
pub(crate) fn drop_graph(inner: &mut Inner) {
    let Some(Some(parts)) = inner.node.take().map(|n| n.parts.into_inner()) else {
        return;
    };
    let mut stack = parts.inputs;
    while let Some(t) = stack.pop() {
        if let Ok(mut inner) = eddy_vm::Counted::try_unwrap(t.0)
            && let Some(Some(p)) = inner.node.take().map(|n| n.parts.into_inner())
        {
            stack.extend(p.inputs);
        }
    }
}
