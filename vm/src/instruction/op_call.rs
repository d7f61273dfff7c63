//! `OpCall`: run a kernel over input and output blobs.

use super::policy::{ComputeCtx, InstructionPolicy, PrepareCtx, PrepareError, allocate_outputs};
use crate::Counted;
use crate::blob::Blob;
use crate::error::{Caller, Result};
use smallvec::SmallVec;
use std::mem::MaybeUninit;

/// A kernel: the op-specific part of an [`OpCall`]. The ops crate implements it; kernels see
/// blobs and a context, never tensors or the scheduler.
///
/// # Examples
///
/// ```
/// use eddy_vm::{Blob, Result, instruction::{ComputeCtx, Kernel}};
/// struct Fill(u8);
/// impl Kernel for Fill {
///     fn name(&self) -> &str { "fill" }
///     fn compute(&mut self, _: &[eddy_vm::Counted<Blob>], outs: &[eddy_vm::Counted<Blob>], _: &mut ComputeCtx<'_>) -> Result<()> {
///         // SAFETY: the engine runs this kernel with exclusive access to its outputs.
///         unsafe { outs[0].bytes_mut().fill(self.0) };
///         Ok(())
///     }
/// }
/// ```
pub trait Kernel: Send + 'static {
    /// The op's name.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::instruction::{ComputeCtx, InstructionPolicy, Kernel, OpCall};
    /// # use eddy_vm::{Blob, Counted, Result};
    /// struct Relu;
    /// impl Kernel for Relu {
    ///     fn name(&self) -> &str { "relu" }
    ///     // ...
    /// #   fn compute(&mut self, _: &[Counted<Blob>], _: &[Counted<Blob>], _: &mut ComputeCtx<'_>)
    /// #       -> Result<()> { Ok(()) }
    /// }
    /// let call = OpCall::new(Relu, Default::default(), Default::default());
    /// assert_eq!(call.name(), "relu"); // the instruction's name, in errors and traces
    /// ```
    fn name(&self) -> &str;
    /// Runs the kernel.
    ///
    /// # Errors
    ///
    /// Any error poisons the outputs.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Blob, Counted, Result, StreamId, Vm};
    /// use eddy_vm::instruction::{op_call::Blobs, ComputeCtx, Kernel, OpCall};
    /// /// Writes the sum of its input's bytes into its output's first byte.
    /// struct Sum;
    /// impl Kernel for Sum {
    ///     fn name(&self) -> &str { "sum" }
    ///     fn compute(
    ///         &mut self,
    ///         ins: &[Counted<Blob>],
    ///         outs: &[Counted<Blob>],
    ///         _: &mut ComputeCtx<'_>,
    ///     ) -> Result<()> {
    ///         // SAFETY: the engine runs this with `ins` readable, `outs` exclusively writable.
    ///         let s = unsafe { ins[0].bytes_ref() }.iter().sum();
    ///         // SAFETY: as above: this instruction alone writes `outs[0]` while it runs.
    ///         unsafe { outs[0].bytes_mut()[0] = s };
    ///         Ok(())
    ///     }
    /// }
    /// let vm = Vm::builder().build()?;
    /// let (x, y) = (vm.new_blob(3), vm.new_blob(1));
    /// vm.write_blob(&x, |b| b.copy_from_slice(&[1, 2, 3]))?;
    /// let (ins, outs) = (Blobs::from_vec(vec![x]), Blobs::from_vec(vec![y.clone()]));
    /// vm.run(StreamId::CPU, OpCall::new(Sum, ins, outs))?;
    /// assert_eq!(vm.read_blob(&y, |b| b[0])?, 6);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    fn compute(
        &mut self,
        inputs: &[Counted<Blob>],
        outputs: &[Counted<Blob>],
        ctx: &mut ComputeCtx<'_>,
    ) -> Result<()>;
    /// Whether the kernel is small enough to fuse with neighbours (default: yes).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::instruction::{ComputeCtx, InstructionPolicy, Kernel, OpCall};
    /// # use eddy_vm::{Blob, Counted, Result};
    /// struct Big;
    /// impl Kernel for Big {
    ///     fn name(&self) -> &str { "big" }
    ///     fn fusable(&self) -> bool { false }
    ///     // ...
    /// #   fn compute(&mut self, _: &[Counted<Blob>], _: &[Counted<Blob>], _: &mut ComputeCtx<'_>)
    /// #       -> Result<()> { Ok(()) }
    /// }
    /// assert!(!Big.fusable());
    /// assert!(!OpCall::new(Big, Default::default(), Default::default()).fusable());
    /// ```
    fn fusable(&self) -> bool {
        true
    }
    /// Whether the kernel is about as cheap as queueing it (see
    /// [`InstructionPolicy::cheap`]); default: no. [`OpCall::cheap`] overrides it per call.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::instruction::{ComputeCtx, InstructionPolicy, Kernel, OpCall};
    /// # use eddy_vm::{Blob, Counted, Result};
    /// struct Tiny;
    /// impl Kernel for Tiny {
    ///     fn name(&self) -> &str { "tiny" }
    ///     fn cheap(&self) -> bool { true }
    ///     // ...
    /// #   fn compute(&mut self, _: &[Counted<Blob>], _: &[Counted<Blob>], _: &mut ComputeCtx<'_>)
    /// #       -> Result<()> { Ok(()) }
    /// }
    /// assert!(Tiny.cheap());
    /// assert!(OpCall::new(Tiny, Default::default(), Default::default()).cheap());
    /// ```
    fn cheap(&self) -> bool {
        false
    }
    /// Whether dropping the kernel has no effect anyone waits for (see
    /// [`InstructionPolicy::deferred_drop`]); default: no. An op call's own handles qualify,
    /// so [`OpCall::deferred_drop`] is this answer.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::instruction::{ComputeCtx, InstructionPolicy, Kernel, OpCall};
    /// # use eddy_vm::{Blob, Counted, Result};
    /// struct Scale(f32);
    /// impl Kernel for Scale {
    ///     fn name(&self) -> &str { "scale" }
    ///     fn deferred_drop(&self) -> bool { true } // a number: nothing to drop
    ///     // ...
    /// #   fn compute(&mut self, _: &[Counted<Blob>], _: &[Counted<Blob>], _: &mut ComputeCtx<'_>)
    /// #       -> Result<()> { Ok(()) }
    /// }
    /// assert!(OpCall::new(Scale(2.0), Default::default(), Default::default()).deferred_drop());
    /// ```
    fn deferred_drop(&self) -> bool {
        false
    }
    /// What the kernel computes, for a plan compiler that merges kernels (see
    /// [`plan`](crate::plan)): a value of a type the compiler and the op library agree on, or
    /// `None` (the default) for a kernel no compiler may look into. Made on request, so a
    /// kernel carries nothing for it. The engine asks only while it compiles a plan for
    /// automatic promotion, and keeps the answers to compare later windows' kernels with
    /// ([`is_described_by`](Self::is_described_by)).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::instruction::{ComputeCtx, Kernel};
    /// # use eddy_vm::{Blob, Counted, Result};
    /// struct AddScalar(f32);
    /// impl Kernel for AddScalar {
    ///     fn name(&self) -> &str { "add_scalar" }
    ///     fn describe(&self) -> Option<Box<dyn std::any::Any + Send>> { Some(Box::new(self.0)) }
    ///     // ...
    /// #   fn compute(&mut self, _: &[Counted<Blob>], _: &[Counted<Blob>], _: &mut ComputeCtx<'_>)
    /// #       -> Result<()> { Ok(()) }
    /// }
    /// let k: Box<dyn Kernel> = Box::new(AddScalar(1.0));
    /// assert_eq!(k.describe().and_then(|d| d.downcast_ref::<f32>().copied()), Some(1.0));
    /// ```
    fn describe(&self) -> Option<Box<dyn std::any::Any + Send>> {
        None
    }
    /// Whether [`describe`](Self::describe) would return a value equal to `description`
    /// (what it returned for this kernel or another), compared without making one. A kernel
    /// that describes itself implements both; the default, `false`, is right for one that
    /// does not, and for one that does costs only speed: automatic promotion then runs its
    /// plan pass on every window instead of reusing the merged steps of the first.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::instruction::{ComputeCtx, Kernel};
    /// # use eddy_vm::{Blob, Counted, Result};
    /// struct AddScalar(f32);
    /// impl Kernel for AddScalar {
    ///     fn name(&self) -> &str { "add_scalar" }
    ///     fn describe(&self) -> Option<Box<dyn std::any::Any + Send>> { Some(Box::new(self.0)) }
    ///     fn is_described_by(&self, d: &dyn std::any::Any) -> bool {
    ///         // Bit for bit: a merged kernel must compute exactly what this one does.
    ///         d.downcast_ref::<f32>().is_some_and(|x| x.to_bits() == self.0.to_bits())
    ///     }
    ///     // ...
    /// #   fn compute(&mut self, _: &[Counted<Blob>], _: &[Counted<Blob>], _: &mut ComputeCtx<'_>)
    /// #       -> Result<()> { Ok(()) }
    /// }
    /// let d = AddScalar(1.0).describe().unwrap();
    /// assert!(AddScalar(1.0).is_described_by(&*d) && !AddScalar(2.0).is_described_by(&*d));
    /// ```
    fn is_described_by(&self, description: &dyn std::any::Any) -> bool {
        let _ = description;
        false
    }
    /// Whether output `output` may be the same memory as input `input` (by position) and the
    /// kernel still compute the same values: it reads each element of that input only before
    /// it writes the element of the output at the same place. A plan then lays out a
    /// temporary that the step reads for the last time and one that it writes in one place
    /// ([`plan::MemoryLayout::pack_sharing`](crate::plan::MemoryLayout::pack_sharing)).
    /// The default is `false`. A kernel saying `true` must also be sound with the two blobs
    /// aliased: no slice of the one alive while it writes the other.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::instruction::Kernel;
    /// let k = eddy_vm::testing::AddByteOver(1);
    /// assert!(k.may_alias(0, 0) && !eddy_vm::testing::AddByte(1).may_alias(0, 0));
    /// ```
    fn may_alias(&self, output: usize, input: usize) -> bool {
        let _ = (output, input);
        false
    }
}

/// Implements [`Kernel`]'s methods in a wrapper by forwarding each to the kernel it wraps, so
/// that no wrapper drops what a kernel says of itself (`fusable`, `cheap`, `deferred_drop`,
/// `may_alias`, its description). `$with` is a macro of the wrapper's that runs an expression
/// on the wrapped kernel: `$with!(ref self, k => expr)` with `k` a shared reference to it,
/// `$with!(mut self, k => expr)` with `k` a mutable one. With `own description` after it, the
/// wrapper writes `describe` and `is_described_by` itself and the rest are forwarded.
///
/// # Examples
///
/// ```
/// use eddy_vm::instruction::Kernel;
/// use eddy_vm::testing::AddByte;
/// /// A kernel that counts its runs, and is otherwise the kernel it wraps.
/// struct Counting<K>(K, usize);
/// macro_rules! inner {
///     (ref $s:ident, $k:ident => $e:expr) => {{ let $k = &$s.0; $e }};
///     (mut $s:ident, $k:ident => $e:expr) => {{ $s.1 += 1; let $k = &mut $s.0; $e }};
/// }
/// impl<K: Kernel> Kernel for Counting<K> {
///     eddy_vm::forward_kernel!(inner);
/// }
/// let k = Counting(AddByte(1), 0);
/// assert_eq!((k.name(), k.fusable(), k.cheap()), (AddByte(1).name(), AddByte(1).fusable(), AddByte(1).cheap()));
/// ```
#[macro_export]
macro_rules! forward_kernel {
    ($with:ident) => {
        $crate::forward_kernel!($with, own description);
        fn describe(&self) -> Option<Box<dyn std::any::Any + Send>> {
            $with!(ref self, k => k.describe())
        }
        fn is_described_by(&self, description: &dyn std::any::Any) -> bool {
            $with!(ref self, k => k.is_described_by(description))
        }
    };
    ($with:ident, own description) => {
        #[inline]
        fn name(&self) -> &str {
            $with!(ref self, k => k.name())
        }
        #[inline]
        #[track_caller]
        fn compute(
            &mut self,
            inputs: &[$crate::Counted<$crate::Blob>],
            outputs: &[$crate::Counted<$crate::Blob>],
            ctx: &mut $crate::instruction::ComputeCtx<'_>,
        ) -> $crate::Result<()> {
            $with!(mut self, k => k.compute(inputs, outputs, ctx))
        }
        #[inline]
        fn fusable(&self) -> bool {
            $with!(ref self, k => k.fusable())
        }
        #[inline]
        fn cheap(&self) -> bool {
            $with!(ref self, k => k.cheap())
        }
        #[inline]
        fn deferred_drop(&self) -> bool {
            $with!(ref self, k => k.deferred_drop())
        }
        fn may_alias(&self, output: usize, input: usize) -> bool {
            $with!(ref self, k => k.may_alias(output, input))
        }
    };
}

/// The boxed kernel's own methods (not the box's: that would call itself).
macro_rules! unboxed {
    (ref $s:ident, $k:ident => $e:expr) => {{
        let $k: &K = $s;
        $e
    }};
    (mut $s:ident, $k:ident => $e:expr) => {{
        let $k: &mut K = $s;
        $e
    }};
}

/// A boxed kernel is a kernel (a `Box<dyn Kernel>` too), saying all its kernel says.
impl<K: Kernel + ?Sized> Kernel for Box<K> {
    forward_kernel!(unboxed);
}

/// Operand lists, inline for up to four blobs.
pub type Blobs = SmallVec<[Counted<Blob>; 4]>;

/// The instruction for one op call: a kernel, its inputs and its outputs.
///
/// # Examples
///
/// ```
/// use eddy_vm::{Blob, Counted, Result, StreamId, Vm};
/// use eddy_vm::instruction::{op_call::Blobs, ComputeCtx, Kernel, OpCall};
/// struct Fill(u8);
/// impl Kernel for Fill {
///     fn name(&self) -> &str { "fill" }
///     fn compute(&mut self, _: &[Counted<Blob>], outs: &[Counted<Blob>], _: &mut ComputeCtx<'_>)
///         -> Result<()> {
///         // SAFETY: the engine runs this kernel with exclusive access to its outputs.
///         unsafe { outs[0].bytes_mut().fill(self.0) };
///         Ok(())
///     }
/// }
/// let vm = Vm::builder().build()?;
/// let x = vm.new_blob(4);
/// vm.run(StreamId::CPU, OpCall::new(Fill(7), Blobs::new(), Blobs::from_vec(vec![x.clone()])))?;
/// assert_eq!(vm.read_blob(&x, |b| b.to_vec())?, vec![7; 4]);
/// # Ok::<(), eddy_vm::Error>(())
/// ```
pub struct OpCall<K: Kernel> {
    kernel: K,
    inputs: Blobs,
    outputs: Blobs,
    cheap: bool,
    at: Caller,
}

impl<K: Kernel> OpCall<K> {
    /// An op call of `kernel` reading `inputs` and writing `outputs`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::instruction::{op_call::Blobs, ComputeCtx, InstructionPolicy, Kernel, OpCall};
    /// # use eddy_vm::{Blob, Counted, Result};
    /// # struct Add;
    /// # impl Kernel for Add {
    /// #     fn name(&self) -> &str { "add" }
    /// #     fn compute(&mut self, _: &[Counted<Blob>], _: &[Counted<Blob>], _: &mut ComputeCtx)
    /// #         -> Result<()> { Ok(()) }
    /// # }
    /// let vm = eddy_vm::Vm::builder().build().unwrap();
    /// let (a, b, c) = (vm.new_blob(4), vm.new_blob(4), vm.new_blob(4));
    /// let (blobs_in, blobs_out) = (Blobs::from_vec(vec![a, b]), Blobs::from_vec(vec![c]));
    /// let (call, line) = (OpCall::new(Add, blobs_in, blobs_out), line!());
    /// assert_eq!((call.inputs().len(), call.outputs().len()), (2, 1));
    /// assert!(call.fusable(), "kernels are fusable by default");
    /// // It remembers its caller (`#[track_caller]`), for the errors it reports.
    /// assert_eq!(call.caller().location().unwrap().line(), line);
    /// ```
    #[track_caller]
    pub fn new(kernel: K, inputs: Blobs, outputs: Blobs) -> Self {
        OpCall {
            cheap: kernel.cheap(),
            kernel,
            inputs,
            outputs,
            at: Caller::here(),
        }
    }

    /// Marks the call cheap or not (for a kernel whose cost depends on its operands' sizes,
    /// which the caller knows): see [`InstructionPolicy::cheap`].
    ///
    /// ```
    /// use eddy_vm::instruction::{ComputeCtx, InstructionPolicy, Kernel, OpCall};
    /// struct Nothing;
    /// impl Kernel for Nothing {
    ///     fn name(&self) -> &str { "nothing" }
    ///     fn compute(&mut self, _: &[eddy_vm::Counted<eddy_vm::Blob>], _: &[eddy_vm::Counted<eddy_vm::Blob>], _: &mut ComputeCtx<'_>) -> eddy_vm::Result<()> { Ok(()) }
    /// }
    /// let call = OpCall::new(Nothing, Default::default(), Default::default());
    /// assert!(!call.cheap());
    /// assert!(call.with_cheap(true).cheap());
    /// ```
    pub fn with_cheap(mut self, cheap: bool) -> Self {
        self.cheap = cheap;
        self
    }
}

impl<K: Kernel> InstructionPolicy for OpCall<K> {
    fn name(&self) -> &str {
        self.kernel.name()
    }
    fn inputs(&self) -> &[Counted<Blob>] {
        &self.inputs
    }
    fn outputs(&self) -> &[Counted<Blob>] {
        &self.outputs
    }
    fn fusable(&self) -> bool {
        self.kernel.fusable()
    }
    fn cheap(&self) -> bool {
        self.cheap
    }
    fn caller(&self) -> Caller {
        self.at
    }
    fn deferred_drop(&self) -> bool {
        self.kernel.deferred_drop()
    }
    fn kernel(&self) -> Option<&dyn Kernel> {
        Some(&self.kernel)
    }
    fn compute(&mut self, ctx: &mut ComputeCtx<'_>) -> Result<()> {
        self.kernel.compute(&self.inputs, &self.outputs, ctx)
    }
}

/// Bitwise copies of up to [`SHALLOW_MAX`] of a caller's blob handles, as one slice: what
/// [`Vm::run_op`](crate::Vm::run_op) hands a kernel it runs at once, so that the run takes no
/// reference-count traffic (six locked operations for a binary op) and builds no owned lists.
///
/// The copies share their originals' reference counts and are never dropped, so the counts
/// are neither raised nor lowered; a kernel that clones one raises the shared count, as it
/// should. A value lives only inside `run_op`, while the caller's borrows of the originals
/// keep every blob alive.
pub(crate) struct Shallow {
    buf: [MaybeUninit<Counted<Blob>>; SHALLOW_MAX],
    len: usize,
}

/// The most operands of one kind [`Shallow`] holds; calls with more take owned handles.
pub(crate) const SHALLOW_MAX: usize = 4;

impl Shallow {
    /// An empty value, to be [`fill`](Self::fill)ed where it lies.
    pub(crate) const EMPTY: Shallow = Shallow {
        buf: [const { MaybeUninit::uninit() }; SHALLOW_MAX],
        len: 0,
    };

    /// Copies `blobs` into this value in place. Filling where the value lies, rather than
    /// returning a filled one, keeps the compiler from moving it: a move read the 8-byte
    /// stores back in 16-byte pieces, a store-forwarding stall on every call.
    ///
    /// # Safety
    ///
    /// The value (and every slice it lends) must be gone before any of the borrowed handles
    /// `blobs` is dropped, and it must not be sent to another thread or stored. `blobs` holds
    /// at most [`SHALLOW_MAX`] handles (more panics).
    #[inline]
    pub(crate) unsafe fn fill(&mut self, blobs: &[&Counted<Blob>]) {
        assert!(blobs.len() <= SHALLOW_MAX, "at most {SHALLOW_MAX} operands");
        for (slot, b) in self.buf.iter_mut().zip(blobs) {
            // SAFETY: `ptr::read` makes a bitwise copy of a live `Counted`, never dropped (the
            // slots are `MaybeUninit`), so the allocation's count stays balanced; the caller
            // keeps the original, hence the blob, alive for as long as the copy is used.
            slot.write(unsafe { std::ptr::read(*b) });
        }
        self.len = blobs.len();
    }

    /// As [`fill`](Self::fill), with the `n` handles `blob(0)`, … `blob(n - 1)`.
    ///
    /// # Safety
    ///
    /// As [`fill`](Self::fill), for the handles `blob` returns.
    #[inline]
    pub(crate) unsafe fn fill_with<'a>(
        &mut self,
        n: usize,
        blob: impl Fn(usize) -> &'a Counted<Blob>,
    ) {
        assert!(n <= SHALLOW_MAX, "at most {SHALLOW_MAX} operands");
        for (k, slot) in self.buf.iter_mut().take(n).enumerate() {
            // SAFETY: as in `fill`: a bitwise copy, never dropped, of a handle the caller keeps.
            slot.write(unsafe { std::ptr::read(blob(k)) });
        }
        self.len = n;
    }

    /// The copies.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[Counted<Blob>] {
        // SAFETY: the first `len` slots were written in `fill` (`MaybeUninit<T>` has `T`'s
        // layout); they stay valid while the originals live, which `fill`'s caller guarantees.
        unsafe { std::slice::from_raw_parts(self.buf.as_ptr().cast::<Counted<Blob>>(), self.len) }
    }
}

/// A kernel borrowed with its operands, run at once by [`Vm::run_op`](crate::Vm::run_op) as
/// an instruction would run (see `instruction::Run`): no policy object is built or moved.
pub(crate) struct KernelCall<'a, K: Kernel> {
    pub(crate) kernel: &'a mut K,
    pub(crate) inputs: &'a [Counted<Blob>],
    pub(crate) outputs: &'a [Counted<Blob>],
    pub(crate) at: Caller,
}

impl<K: Kernel> super::policy::Run for KernelCall<'_, K> {
    #[inline]
    fn name(&self) -> &str {
        self.kernel.name()
    }
    #[inline]
    fn inputs(&self) -> &[Counted<Blob>] {
        self.inputs
    }
    #[inline]
    fn outputs(&self) -> &[Counted<Blob>] {
        self.outputs
    }
    #[inline]
    fn handles_poison(&self) -> bool {
        false
    }
    #[inline]
    fn poisons_selectively(&self) -> bool {
        false
    }
    #[inline]
    fn caller(&self) -> Caller {
        self.at
    }
    #[inline]
    fn prepare(&mut self, ctx: &mut PrepareCtx<'_>) -> Result<(), PrepareError> {
        allocate_outputs(self.outputs, ctx)
    }
    #[inline]
    fn compute(&mut self, ctx: &mut ComputeCtx<'_>) -> Result<()> {
        self.kernel.compute(self.inputs, self.outputs, ctx)
    }
}
