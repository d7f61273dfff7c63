//! Allocator traces on a capped `DeviceAllocator` (failure mode F10, book: reliability); see `programs.rs`.
#![no_main]

#[path = "../programs.rs"]
mod programs;

libfuzzer_sys::fuzz_target!(|data: &[u8]| programs::alloc_trace(data));
