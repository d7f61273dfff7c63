//! Which engine new tensors go to: a process-wide default started on first use (configured by
//! the `EDDY_VM_*` variables), or an explicit one for a scope ([`with_engine`]).

use crate::Result;
use eddy_vm::Vm;
use std::cell::RefCell;
use std::mem::ManuallyDrop;
use std::sync::OnceLock;

static DEFAULT: OnceLock<Vm> = OnceLock::new();

thread_local! {
    static SCOPED: RefCell<Vec<Vm>> = const { RefCell::new(Vec::new()) };
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
pub fn default_engine() -> Result<Vm> {
    if let Some(vm) = DEFAULT.get() {
        return Ok(vm.clone());
    }
    let vm = Vm::builder().build()?;
    Ok(DEFAULT.get_or_init(|| vm).clone())
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
    SCOPED.with(|s| s.borrow_mut().push(vm.clone()));
    let _pop = Pop;
    f()
}

/// A tensor's engine handle. For the process-wide default engine it is an uncounted copy of
/// the static handle (the static is never dropped, so the engine outlives every tensor): two
/// locked instructions fewer per tensor, the count's increment and decrement. Any other engine
/// is held by a counted handle, which keeps it alive as long as its tensors.
pub(crate) struct VmRef {
    vm: ManuallyDrop<Vm>,
    counted: bool,
}

impl VmRef {
    /// The handle for `vm`: the uncounted one if `vm` is the default engine.
    pub(crate) fn of(vm: &Vm) -> VmRef {
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

/// The engine new tensors on this thread go to.
pub(crate) fn current() -> Result<VmRef> {
    if let Some(vm) = SCOPED.with(|s| s.borrow().last().map(VmRef::of)) {
        return Ok(vm);
    }
    if let Some(vm) = DEFAULT.get() {
        return Ok(VmRef::default_engine(vm));
    }
    default_engine().map(|vm| VmRef::of(&vm))
}
