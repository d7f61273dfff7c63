//! Every tensor op against a naive reference written with plain loops over `f64`
//! (failure modes F1, F3, F4, F13, book: reliability).
//!
//! Inputs come from proptest: ranks 0..=3, dims 0..=4 with 0 drawn often in every position,
//! non-contiguous views (transposed, narrowed and broadcast views of larger tensors), operands
//! that broadcast against each other, and dtypes (`f32`, `f64`, and `f16`/`bf16`/`i64`/`i32`
//! where the op takes them). Input values are rounded to the tensor's dtype before the reference
//! sees them, so the comparison tolerance only covers the op's own rounding.
//!
//! The reference, the input builders and the strategies are shared with the other tensor suites
//! (`tests/common/reference.rs`); each module covers one family of ops.

#[path = "../common/mod.rs"]
mod common;

mod attention;
mod conv;
mod creation;
mod dtypes;
mod elementwise;
mod empty;
mod index;
mod large_sizes;
mod matmul;
mod nn_optim;
mod operators;
mod reduce;
mod shape_views;
mod sort_scan;
