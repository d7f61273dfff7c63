//! The CUDA kernels of each op family, as the op layer asks for them: one module per family,
//! the argument helpers here.

mod copy;
mod elementwise;
mod index;
mod linalg;
mod reduce;
mod sort;

pub use copy::{copy, download, fill, from_host, generate, random, upload_tensor};
pub use elementwise::{binary, binary_inplace, compare, unary, where_};
pub(crate) use elementwise::{binary_code, unary_code};
pub use index::{gather, index_add, index_select, scatter_add};
pub use linalg::{matmul, matmul_bias};
pub use reduce::{reduce, softmax, sum_leading};
pub use sort::{cumsum, sort};

use super::launch::{CudaKernel, DevLay, Launch, dptr};
use crate::{Lay, Layout};
use eddy_vm::instruction::Kernel;
use eddy_vm::{Blob, Counted};
use std::ffi::c_void;

/// A pointer to one kernel argument.
pub(super) fn arg<T>(x: &mut T) -> *mut c_void {
    (x as *mut T).cast()
}

/// `la` over an output of `n` elements.
pub(super) fn dev_lay(la: &Lay, n: usize) -> Result<DevLay, String> {
    match la {
        Lay::Dense(off) => Ok(DevLay::flat(*off, n, 1)),
        Lay::Splat(off) => Ok(DevLay::flat(*off, n, 0)),
        Lay::Strided(l) => DevLay::of(l).ok_or_else(|| "more than 8 dims".to_string()),
    }
}

pub(super) fn dev_layout(l: &Layout) -> Result<DevLay, String> {
    DevLay::of(l).ok_or_else(|| "more than 8 dims".to_string())
}

/// How many elements of `elem` bytes `b` holds.
pub(super) fn numel(b: &Blob, elem: usize) -> usize {
    b.bytes() / elem
}

/// A kernel that faults the device on purpose (a trap), writing output 0 (any blob): for tests
/// of how a device fault is reported. The device's context is unusable afterwards, for the
/// rest of the process.
pub fn fault_on_purpose() -> impl Kernel {
    CudaKernel::new(
        "fault_on_purpose",
        |l: &Launch<'_>, _: &[Counted<Blob>], outs: &[Counted<Blob>]| {
            let mut y = dptr::<i32>(&outs[0], 0);
            l.grid("fault_on_purpose", 1, 32, 0, &mut [arg(&mut y)])
        },
    )
}
