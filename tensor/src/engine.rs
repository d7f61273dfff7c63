//! Which engine new tensors go to: a process-wide default started on first use (configured by
//! the `EDDY_VM_*` variables), or an explicit one for a scope ([`with_engine`]).

use crate::Result;
use eddy_vm::Vm;
use std::cell::RefCell;
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

/// The engine new tensors on this thread go to.
pub(crate) fn current() -> Result<Vm> {
    if let Some(vm) = SCOPED.with(|s| s.borrow().last().cloned()) {
        return Ok(vm);
    }
    default_engine()
}
