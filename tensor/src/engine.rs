//! Where new tensors go: the engine (a process-wide default started on first use, configured by
//! the `EDDY_VM_*` variables, or an explicit one for a scope: [`with_engine`]) and the device on
//! it (`cpu:0`, or another for a scope: [`with_device`]).

use crate::{Device, Error, Result};
use eddy_vm::{Blob, Counted, StreamId, Vm};
use std::cell::{Cell, RefCell};
use std::mem::ManuallyDrop;
use std::sync::OnceLock;

static DEFAULT: OnceLock<Vm> = OnceLock::new();

thread_local! {
    static SCOPED: RefCell<Vec<Vm>> = const { RefCell::new(Vec::new()) };
    static DEVICE: Cell<Device> = const { Cell::new(Device::CPU) };
}

/// The process-wide engine, started on first use.
///
/// # Errors
///
/// If an `EDDY_VM_*` variable is invalid.
///
/// # Examples
///
/// ```
/// let vm = eddy_tensor::default_engine().unwrap();
/// assert!(vm.same_engine(&eddy_tensor::default_engine().unwrap()));
/// ```
#[track_caller]
pub fn default_engine() -> Result<Vm> {
    if let Some(vm) = DEFAULT.get() {
        return Ok(vm.clone());
    }
    let vm = Vm::builder().build()?;
    give_passes(&vm);
    Ok(DEFAULT.get_or_init(|| vm).clone())
}

/// Gives an engine the op layer's passes: with automatic promotion on, a promoted loop's
/// elementwise ops are merged as a compiled graph's are; on a CUDA device, a fused unit of
/// eager elementwise ops runs as one launch ([`eddy_ops::cuda::unit_merge`]).
fn give_passes(vm: &Vm) {
    if vm.config().promotion && !vm.has_plan_pass() {
        vm.set_plan_pass(eddy_ops::fuse::plan_pass());
    }
    #[cfg(feature = "cuda")]
    for d in vm.devices() {
        if matches!(d, Device::Cuda(_)) {
            vm.set_unit_merge(d, eddy_ops::cuda::unit_merge());
        }
    }
}

/// Runs `f` with `vm` as the engine of the tensors it creates on this thread (for embedding Eddy
/// and for tests that need their own engine, e.g. a synchronous one). Ops on existing tensors
/// always run on their own engine.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{with_engine, Tensor, DType};
/// let vm = eddy_vm::Vm::builder().sync_mode(true).build().unwrap();
/// let t = with_engine(&vm, || Tensor::zeros([2], DType::F32)).unwrap();
/// assert!(t.engine().same_engine(&vm));
/// ```
pub fn with_engine<R>(vm: &Vm, f: impl FnOnce() -> R) -> R {
    struct Pop;
    impl Drop for Pop {
        fn drop(&mut self) {
            SCOPED.with(|s| s.borrow_mut().pop());
        }
    }
    give_passes(vm);
    SCOPED.with(|s| s.borrow_mut().push(vm.clone()));
    let _pop = Pop;
    f()
}

/// Runs `f` with `device` as the device of the tensors it creates on this thread (`zeros`,
/// `from_vec`, `randn`, …), as PyTorch's `torch.device` context. Ops on existing tensors run on
/// their operands' device; a creation on a device the engine lacks fails with
/// `DeviceUnavailable`.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{with_device, with_engine, Device, Tensor, DType};
/// let vm = eddy_vm::Vm::builder().cpu_devices(2).build()?;
/// let t = with_engine(&vm, || with_device(Device::Cpu(1), || Tensor::ones([2], DType::F32)))?;
/// assert_eq!(t.device(), Device::Cpu(1));
/// assert_eq!(t.add(&t)?.device(), Device::Cpu(1)); // ops follow their operands
/// let far = with_device(Device::Cpu(7), || Tensor::ones([2], DType::F32));
/// assert!(matches!(far, Err(eddy_tensor::Error::DeviceUnavailable { .. })));
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
pub fn with_device<R>(device: Device, f: impl FnOnce() -> R) -> R {
    struct Restore(Device);
    impl Drop for Restore {
        fn drop(&mut self) {
            DEVICE.with(|d| d.set(self.0));
        }
    }
    let _restore = Restore(DEVICE.with(|d| d.replace(device)));
    f()
}

/// A device of an engine and that device's compute stream, where ops on its tensors run,
/// packed in one word: every tensor handle carries one, and each op copies it into its output
/// (two stores and wider moves cost the per-op path measurably more).
///
/// Bits 0–31: the stream; 32–55: the device's ordinal; 56–62: its kind; 63: set in a global
/// tensor's handle (whose device and stream are its first component's), so that no local
/// tensor is ever at the same place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Loc(u64);

impl Loc {
    pub(crate) fn new(device: Device, stream: StreamId) -> Loc {
        let (kind, n) = match device {
            Device::Cpu(n) => (0u64, n),
            Device::Cuda(n) => (1, n),
            Device::Test(n) => (2, n),
        };
        debug_assert!(n < 1 << 24, "device ordinals fit 24 bits");
        Loc(kind << 56 | (u64::from(n) & 0xFF_FFFF) << 32 | u64::from(stream.0))
    }

    /// The same place, flagged as a global tensor's.
    pub(crate) fn global(self) -> Loc {
        Loc(self.0 | 1 << 63)
    }

    /// Whether this is a global tensor's place.
    #[inline(always)]
    pub(crate) fn is_global(self) -> bool {
        self.0 >> 63 != 0
    }

    /// The device.
    #[inline(always)]
    pub(crate) fn device(self) -> Device {
        let n = (self.0 >> 32) as u32 & 0xFF_FFFF;
        match self.0 >> 56 & 0x7F {
            0 => Device::Cpu(n),
            1 => Device::Cuda(n),
            _ => Device::Test(n),
        }
    }

    /// The device's compute stream.
    #[inline(always)]
    pub(crate) fn stream(self) -> StreamId {
        StreamId(self.0 as u32)
    }
}

/// Where a new tensor goes: an engine, and a device on it.
pub(crate) struct Place {
    pub(crate) vm: VmRef,
    pub(crate) loc: Loc,
}

impl Place {
    /// `device` on `vm`.
    ///
    /// # Errors
    ///
    /// `DeviceUnavailable` (for `op`) if the engine has no stream on that device.
    #[track_caller]
    pub(crate) fn on(op: &'static str, vm: VmRef, device: Device) -> Result<Place> {
        let stream = if device == Device::CPU {
            StreamId::CPU
        } else {
            match vm.device_stream(device) {
                Some(stream) => stream,
                None => return Err(unavailable(op, device)),
            }
        };
        Ok(Place {
            vm,
            loc: Loc::new(device, stream),
        })
    }
}

/// Why `device` cannot be used here.
#[cold]
#[track_caller]
pub(crate) fn unavailable(op: &'static str, device: Device) -> Error {
    Error::DeviceUnavailable {
        at: crate::Caller::here(),
        op,
        device: device.to_string(),
        reason: match device {
            Device::Cpu(_) => {
                "the engine has fewer CPU devices (VmBuilder::cpu_devices, EDDY_VM_CPU_DEVICES)"
            }
            Device::Cuda(_) => "this build has no CUDA support (feature `cuda`)",
            Device::Test(_) => "the engine has no stream on that test device",
        },
    }
}

/// A tensor's engine handle. For the process-wide default engine, and any engine made to live
/// until the process ends ([`Vm::leak`]), it is an uncounted copy of a handle that is never
/// dropped, so the engine outlives every tensor: two locked instructions fewer per tensor,
/// the count's increment and decrement. Any other engine is held by a counted handle, which
/// keeps it alive as long as its tensors.
pub(crate) struct VmRef {
    vm: ManuallyDrop<Vm>,
    counted: bool,
}

impl VmRef {
    /// The handle for `vm`: the uncounted one if `vm` is the default engine.
    pub(crate) fn of(vm: &Vm) -> VmRef {
        if vm.lives_forever() {
            return VmRef {
                // SAFETY: a bitwise copy of a handle to an engine that `Vm::leak` keeps
                // alive until the process ends (its leaked handle holds a count); never
                // dropped (`counted` is false).
                vm: ManuallyDrop::new(unsafe { std::ptr::read(vm) }),
                counted: false,
            };
        }
        match DEFAULT.get() {
            Some(d) if d.same_engine(vm) => VmRef::default_engine(d),
            _ => VmRef {
                vm: ManuallyDrop::new(vm.clone()),
                counted: true,
            },
        }
    }

    fn default_engine(d: &'static Vm) -> VmRef {
        VmRef {
            // SAFETY: a bitwise copy of the static's handle, never dropped (`counted` is
            // false): the static holds its count for the life of the process.
            vm: ManuallyDrop::new(unsafe { std::ptr::read(d) }),
            counted: false,
        }
    }

    /// The storage of a global handle: a bitwise copy of the engine's unusable blob
    /// ([`Vm::unusable_blob`]), which the handle never drops, so making and dropping a global
    /// tensor's handle changes no count.
    #[inline]
    pub(crate) fn uncounted_unusable_blob(&self) -> ManuallyDrop<Counted<Blob>> {
        // SAFETY: the engine keeps its own handle of the blob for its life; the tensor handle
        // given this copy keeps the engine alive (its `VmRef`: counted, or an engine that
        // lives until the process ends) and never drops the copy (`Inner`'s drop returns
        // first for a global handle). A clone of the copy counts and drops as any clone does.
        ManuallyDrop::new(unsafe { std::ptr::read(self.vm.unusable_blob_ref()) })
    }

    /// Another handle to the same engine.
    #[inline]
    pub(crate) fn share(&self) -> VmRef {
        VmRef {
            vm: if self.counted {
                ManuallyDrop::new((*self.vm).clone())
            } else {
                // SAFETY: as in `default_engine`: an uncounted copy of the static's handle.
                ManuallyDrop::new(unsafe { std::ptr::read(&*self.vm) })
            },
            counted: self.counted,
        }
    }
}

impl Drop for VmRef {
    #[inline]
    fn drop(&mut self) {
        if self.counted {
            // SAFETY: a counted handle, dropped once, here.
            unsafe { ManuallyDrop::drop(&mut self.vm) }
        }
    }
}

impl std::ops::Deref for VmRef {
    type Target = Vm;
    #[inline]
    fn deref(&self) -> &Vm {
        &self.vm
    }
}

/// Where new tensors made by `op` on this thread go: the scoped or default engine, and the
/// scoped device.
#[track_caller]
pub(crate) fn current(op: &'static str) -> Result<Place> {
    let device = DEVICE.with(|d| d.get());
    Place::on(op, current_engine()?, device)
}

/// The engine new tensors on this thread go to.
#[track_caller]
fn current_engine() -> Result<VmRef> {
    if let Some(vm) = SCOPED.with(|s| s.borrow().last().map(VmRef::of)) {
        return Ok(vm);
    }
    if let Some(vm) = DEFAULT.get() {
        return Ok(VmRef::default_engine(vm));
    }
    default_engine().map(|vm| VmRef::of(&vm))
}

/// The most work (element touches, or multiply-adds for a product) for which an op counts as
/// cheap: at about a nanosecond per element it costs less than handing it to the scheduler
/// thread (a few hundred nanoseconds), so an idle engine runs it on the calling thread.
pub(crate) const CHEAP_WORK: usize = 8192;
