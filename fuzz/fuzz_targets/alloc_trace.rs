//! Allocator traces on a capped `DeviceAllocator` (RELIABILITY F10); see `programs.rs`.
#![no_main]

#[path = "../programs.rs"]
mod programs;

libfuzzer_sys::fuzz_target!(|data: &[u8]| programs::alloc_trace(data));
