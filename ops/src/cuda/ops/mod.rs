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
pub use sort::{cumprod, cumprod_backward, cumsum, sort};

use super::launch::{CudaError, CudaKernel, DevLay, Launch, dptr};
use crate::{DType, Lay, Layout};
use eddy_vm::instruction::Kernel;
use eddy_vm::{Blob, Counted};
use std::ffi::c_void;

/// The kernel `<prefix>_<suffix>` for `dtype`, among the listed dtypes and their suffixes;
/// `None` for another dtype.
macro_rules! by_dtype {
    ($prefix:literal, $dtype:expr, $($d:ident => $s:literal),+ $(,)?) => {
        match $dtype {
            $(crate::DType::$d => Some(concat!($prefix, "_", $s)),)+
            #[allow(unreachable_patterns)]
            _ => None,
        }
    };
}
pub(super) use by_dtype;

/// A family with a kernel for each float dtype (`f32`, `f64`, `f16`, `bf16`).
macro_rules! floats {
    ($prefix:literal, $dtype:expr) => {
        super::by_dtype!($prefix, $dtype, F32 => "f32", F64 => "f64", F16 => "f16", BF16 => "bf16")
    };
}
pub(super) use floats;

/// A family with a kernel for every dtype (bool as `u8`).
macro_rules! every {
    ($prefix:literal, $dtype:expr) => {
        super::by_dtype!($prefix, $dtype, F32 => "f32", F64 => "f64", F16 => "f16", BF16 => "bf16",
            I64 => "i64", I32 => "i32", U8 => "u8", Bool => "u8")
    };
}
pub(super) use every;

/// A family that moves bits: one kernel per element size (`b1`, `b2`, `b4`, `b8`).
pub(super) fn by_size(dtype: DType, names: [&'static str; 4]) -> &'static str {
    match dtype.size_in_bytes() {
        1 => names[0],
        2 => names[1],
        4 => names[2],
        _ => names[3],
    }
}

/// Every dtype, for the checks that each family's kernels exist.
#[cfg(test)]
pub(super) const DTYPES: [DType; 8] = [
    DType::F32,
    DType::F64,
    DType::F16,
    DType::BF16,
    DType::I64,
    DType::I32,
    DType::U8,
    DType::Bool,
];

/// The bits of `value` in `dtype` (rounded, saturated or wrapped as the CPU's fill converts
/// it), widened to 64 bits: what a fill writes, or an index out of range reads.
pub(super) fn bits_of(dtype: DType, value: f64) -> u64 {
    use half::{bf16, f16};
    match dtype {
        DType::F32 => u64::from((value as f32).to_bits()),
        DType::F64 => value.to_bits(),
        DType::F16 => u64::from(f16::from_f64(value).to_bits()),
        DType::BF16 => u64::from(bf16::from_f64(value).to_bits()),
        DType::I64 => value as i64 as u64,
        DType::I32 => u64::from(value as i32 as u32),
        DType::U8 => u64::from(value as u8),
        DType::Bool => u64::from(value != 0.0),
    }
}

/// Fills the first `n` elements of `out` (of `elem` bytes each) with the bits `v`, on the
/// stream.
pub(super) fn fill_bits(
    l: &Launch<'_>,
    out: &Blob,
    elem: usize,
    n: usize,
    v: u64,
) -> Result<(), CudaError> {
    let mut dl = DevLay::flat(0, n, 1);
    launch_fill(l, out, &mut dl, elem, n, v)
}

/// Launches the fill of `elem`-byte elements through `dl`.
pub(super) fn launch_fill(
    l: &Launch<'_>,
    out: &Blob,
    dl: &mut DevLay,
    elem: usize,
    n: usize,
    v: u64,
) -> Result<(), CudaError> {
    let mut y = dptr::<u8>(out, 0);
    let mut n64 = n as i64;
    // Each kernel takes the value in its own width.
    let (mut v1, mut v2, mut v4, mut v8) = (v as u8, v as u16, v as u32, v);
    let (name, v) = match elem {
        1 => ("fill_b1", arg(&mut v1)),
        2 => ("fill_b2", arg(&mut v2)),
        4 => ("fill_b4", arg(&mut v4)),
        _ => ("fill_b8", arg(&mut v8)),
    };
    // SAFETY: y, dl, v, n64 are, in order, the parameters of the kernel `name` names in
    // `kernels/elementwise.cu`, each of the declared type and alive for the call; the device
    // addresses are this instruction's operands (or its scratch), allocated until the kernel has
    // run.
    unsafe { l.elementwise(name, n, &mut [arg(&mut y), arg(dl), v, arg(&mut n64)]) }
}

/// A pointer to one kernel argument.
pub(super) fn arg<T>(x: &mut T) -> *mut c_void {
    (x as *mut T).cast()
}

/// `la` over an output of `n` elements.
pub(super) fn dev_lay(la: &Lay, n: usize) -> Result<DevLay, CudaError> {
    match la {
        Lay::Dense(off) => Ok(DevLay::flat(*off, n, 1)),
        Lay::Splat(off) => Ok(DevLay::flat(*off, n, 0)),
        Lay::Strided(l) => DevLay::of(l)
            .ok_or_else(|| CudaError::Unsupported("a layout of more than 8 dims".into())),
    }
}

pub(super) fn dev_layout(l: &Layout) -> Result<DevLay, CudaError> {
    DevLay::of(l).ok_or_else(|| CudaError::Unsupported("a layout of more than 8 dims".into()))
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
            // SAFETY: y is the one parameter of `fault_on_purpose` in
            // `kernels/linalg.cu`, each of the declared type and alive for the call; the device
            // addresses are this instruction's operands (or its scratch), allocated until the
            // kernel has run.
            unsafe { l.grid("fault_on_purpose", 1, 32, 0, &mut [arg(&mut y)]) }
        },
    )
}

#[cfg(test)]
mod tests {
    /// Every kernel an op family may launch, for every dtype, is defined in the kernels'
    /// source: a kernel renamed or deleted there fails here, on any machine, where without this
    /// check it would fail only on a GPU, at the op's first launch.
    #[test]
    fn every_kernel_the_ops_launch_is_in_the_source() {
        let defined: std::collections::HashSet<&str> =
            crate::cuda::launch::kernel_names().collect();
        let mut launched = Vec::new();
        launched.extend(super::copy::names());
        launched.extend(super::elementwise::names());
        launched.extend(super::index::names());
        launched.extend(super::linalg::names());
        launched.extend(super::reduce::names());
        launched.extend(super::sort::names());
        launched.extend(["unit_f32", "unit_f64", "fault_on_purpose"]);
        let missing: Vec<&str> = launched
            .iter()
            .copied()
            .filter(|n| !defined.contains(n))
            .collect();
        assert!(missing.is_empty(), "kernels not in the source: {missing:?}");
        // Every dtype reaches the device's elementwise, index and sorting kernels.
        assert!(launched.len() > 120, "{} names", launched.len());
    }
}
