//! Typed errors of the tensor API (failure modes F1–F4, F17, book: reliability): argument errors are returned at the
//! call with nothing enqueued and nothing allocated; asynchronous kernel errors surface at the
//! read that depends on them and poison only what depends on them; writes through views are
//! ordered against reads of the base; a 100k-long autograd chain builds, back-propagates and
//! drops in constant stack.
//!
//! Each module covers one kind of error; the helpers below check that a failing call left its
//! engines untouched.

#[path = "../common/mod.rs"]
mod common;

mod callers;
mod dtype;
mod engines;
mod index;
mod integers;
mod overflow;
mod shape;
mod views;

use common::reference::R;
use eddy::tensor::{Error, with_engine};
use eddy::vm::Vm;

/// A private synchronous engine: its counters are exact after every call.
fn private() -> Vm {
    Vm::builder().sync_mode(true).build().unwrap()
}

fn on<T>(vm: &Vm, f: impl FnOnce() -> R<T>) -> T {
    with_engine(vm, f).unwrap()
}

/// Runs `f`, which must fail, and checks that it enqueued nothing and allocated nothing on any
/// of `vms` (F1: errors at the call site, before anything is enqueued).
#[track_caller]
fn fails_at_call<T: std::fmt::Debug>(vms: &[&Vm], f: impl FnOnce() -> R<T>) -> Error {
    for vm in vms {
        vm.sync().unwrap();
    }
    let before: Vec<_> = vms
        .iter()
        .map(|vm| (vm.stats(), vm.alloc_stats()))
        .collect();
    let r = f();
    let after: Vec<_> = vms
        .iter()
        .map(|vm| (vm.stats(), vm.alloc_stats()))
        .collect();
    let e = r.expect_err("the call should fail");
    // The error names the test's own file (the failing call is in `f`, written there), not
    // a line inside Eddy: every function between the call and the check is `#[track_caller]`.
    assert_eq!(
        e.caller().map(|l| l.file()),
        Some(std::panic::Location::caller().file()),
        "`{e}` should name the calling line"
    );
    for ((s0, a0), (s1, a1)) in before.iter().zip(&after) {
        assert_eq!(
            s0.inserted, s1.inserted,
            "instructions were enqueued before `{e}`"
        );
        assert_eq!(
            s0.in_flight, s1.in_flight,
            "instructions in flight after `{e}`"
        );
        assert_eq!(
            a0.allocations, a1.allocations,
            "memory was allocated before `{e}`"
        );
        assert_eq!(a0.in_use, a1.in_use, "memory in use changed by `{e}`");
        assert_eq!(a0.system_allocations, a1.system_allocations);
    }
    e
}
