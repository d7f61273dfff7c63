//! Op calls with decoded shape arguments (RELIABILITY F2, F3); see `programs.rs`.
#![no_main]

#[path = "../programs.rs"]
mod programs;

libfuzzer_sys::fuzz_target!(|data: &[u8]| programs::shape_program(data));
