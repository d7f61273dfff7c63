//! Op calls with decoded shape arguments (failure modes F2, F3, book: reliability); see `programs.rs`.
#![no_main]

#[path = "../programs.rs"]
mod programs;

libfuzzer_sys::fuzz_target!(|data: &[u8]| programs::shape_program(data));
