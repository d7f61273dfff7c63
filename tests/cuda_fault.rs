//! A device fault (feature `cuda`): a kernel that traps on purpose breaks the device's context
//! for the rest of the process, so this test has a binary of its own. The error names the
//! first instruction not confirmed complete when the fault was seen, every later piece of work
//! on the device fails with the same error, and host work goes on. Prints why it skips where
//! the machine has no CUDA device (a skip is not a pass).
#![cfg(feature = "cuda")]

mod common;

use common::watchdog;
use eddy::tensor::{DType, Device, Error, Tensor, with_device, with_engine};
use eddy::vm::{Error as VmError, Vm};

type R<T> = eddy::tensor::Result<T>;

const GPU: Device = Device::Cuda(0);

/// The fault's report, or a panic naming what came instead.
fn first_unconfirmed(e: &Error) -> String {
    match e {
        Error::Vm(VmError::DeviceFault {
            first_unconfirmed,
            device,
            ..
        }) => {
            assert_eq!(device, "cuda:0", "{e}");
            first_unconfirmed.clone()
        }
        other => panic!("not a device fault: {other}"),
    }
}

#[test]
fn a_device_fault_names_its_first_suspect_and_fails_the_devices_later_work() {
    let vm = match Vm::builder().cuda_devices(1).build() {
        Ok(vm) => vm,
        Err(e) => {
            eprintln!("SKIPPED: no CUDA device here: {e}");
            return;
        }
    };
    watchdog(120, move || {
        with_engine(&vm, || -> R<()> {
            let x = with_device(GPU, || Tensor::ones([1024], DType::F32))?;
            let y = x.mul_scalar(3.0)?;
            // A host read waits for an event after everything launched so far: all confirmed.
            assert_eq!(y.sum_all()?.to_vec::<f32>()?, vec![3072.0]);
            let stream = vm.device_stream(GPU).expect("cuda:0 has a compute stream");
            let scratch = vm.new_blob(4);
            vm.run_op(
                stream,
                eddy::ops::cuda::ops::fault_on_purpose(),
                &[],
                &[&scratch],
                false,
            )?;
            let z = y.add(&y)?; // launched after the fault, or refused
            let e = z.to_vec::<f32>().unwrap_err();
            let suspect = first_unconfirmed(&e);
            assert!(suspect.contains("`fault_on_purpose`"), "{e}");
            println!("reported: {e}");
            // Later work on the device fails with the same report, at its first sync.
            let w = y.mul_scalar(2.0)?;
            let e2 = w.to_vec::<f32>().unwrap_err();
            assert_eq!(first_unconfirmed(&e2), suspect, "{e2}");
            // The engine and the host go on.
            let c = Tensor::ones([4], DType::F32)?.sum_all()?.item::<f32>()?;
            assert_eq!(c, 4.0);
            Ok(())
        })
        .unwrap();
    });
}
