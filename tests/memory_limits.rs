//! Host memory that runs out gives a typed error, never a killed process: requests beyond the
//! host's limit or beyond its free memory are refused before the global allocator sees them
//! (this binary uses the system allocator), and the dependents of an op that ran out of memory
//! are skipped with its error instead of running the out-of-memory path again.

mod common;

use common::watchdog;
use eddy::tensor::{DType, Error, Tensor, with_engine};
use eddy::vm::{Error as VmError, Vm, alloc};

/// Elements of f32 for twice the host's limit (physical memory or the cgroup's limit).
fn twice_the_host() -> usize {
    let limit = alloc::host_limit().expect("Linux reports its memory");
    limit / 4 * 2
}

fn oom_op(e: &Error) -> Option<String> {
    match e {
        Error::Vm(VmError::OutOfMemory { op, .. }) => Some(op.clone()),
        _ => None,
    }
}

#[cfg(target_os = "linux")]
#[test]
fn twice_the_host_is_a_typed_oom_and_the_engine_goes_on() {
    watchdog(120, || {
        let vm = Vm::builder().build().unwrap();
        with_engine(&vm, || {
            let huge = Tensor::zeros([twice_the_host()], DType::F32).unwrap();
            let e = huge.sync().unwrap_err();
            assert!(oom_op(&e).is_some(), "{e}");
            if let Error::Vm(VmError::OutOfMemory {
                requested,
                capacity,
                ..
            }) = &e
            {
                assert!(*requested >= twice_the_host() * 4, "{e}");
                assert_eq!(*capacity, alloc::host_limit(), "the default cap: {e}");
            }
            vm.clear_errors();
            let x = Tensor::from_vec(vec![1f32, 2.0], [2]).unwrap();
            assert_eq!(x.add(&x).unwrap().to_vec::<f32>().unwrap(), [2.0, 4.0]);
        });
        assert_eq!(vm.alloc_stats().in_use, 0, "nothing was handed out");
    });
}

/// With the cap lifted far above the machine, the check of each large request against the
/// memory free now still refuses it.
#[cfg(target_os = "linux")]
#[test]
fn a_request_beyond_the_free_memory_is_refused_without_a_cap() {
    watchdog(120, || {
        let vm = Vm::builder()
            .capacity(Some(usize::MAX / 2))
            .build()
            .unwrap();
        with_engine(&vm, || {
            let huge = Tensor::zeros([twice_the_host()], DType::F32).unwrap();
            let e = huge.to_vec::<f32>().unwrap_err();
            assert!(oom_op(&e).is_some(), "{e}");
            vm.clear_errors();
            assert_eq!(
                Tensor::ones([3], DType::F32)
                    .unwrap()
                    .sum_all()
                    .unwrap()
                    .item::<f32>()
                    .unwrap(),
                3.0
            );
        });
    });
}

/// An op that runs out of memory is the one root error: its dependents, which would each ask
/// for as much, are skipped without allocating, and the OOM is counted once.
#[test]
fn dependents_of_an_oom_are_skipped_with_its_error() {
    watchdog(120, || {
        let vm = Vm::builder().capacity(Some(1 << 20)).build().unwrap();
        with_engine(&vm, || {
            let a = Tensor::full([1 << 20], 1.0, DType::F32).unwrap(); // 4 MiB: too much
            let b = a.exp().unwrap();
            let c = b.add(&a).unwrap().mul_scalar(2.0).unwrap();
            let root = oom_op(&a.sync().unwrap_err()).expect("an OOM");
            for t in [&b, &c] {
                let e = t.sync().unwrap_err();
                assert_eq!(oom_op(&e).as_deref(), Some(root.as_str()), "{e}");
            }
            assert_eq!(vm.errors().len(), 1, "{:?}", vm.errors());
            assert_eq!(vm.stats().ooms, 1);
            vm.clear_errors();
            let small = Tensor::full([4], 2.0, DType::F32).unwrap();
            assert_eq!(small.exp().unwrap().to_vec::<f32>().unwrap().len(), 4);
        });
    });
}
