//! Elementwise kernels: unary maps, binary maps with broadcasting, comparisons and `where`.
//!
//! Outputs are fresh and contiguous; inputs come with any layout already broadcast to the
//! output's shape. Floats compute in their accumulation type (`f32` for the 16-bit floats).

mod binary;
mod elem;
mod map;
mod unary;

pub(crate) use binary::{apply_binary_float, nan_max, nan_min};
pub use binary::{binary, binary_inplace, compare, where_};
pub use elem::{FloatElem, IntElem};
pub(crate) use elem::{dispatch_float, dispatch_int};
pub use map::{map1, map1_lay, map2, map2_lay};
pub use unary::unary;
pub(crate) use unary::{apply_float, params};
