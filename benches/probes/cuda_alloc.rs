//! Times device memory allocation three ways on `cuda:0`, to choose the CUDA allocator's
//! backend: `cuMemAlloc`/`cuMemFree` pairs, stream-ordered `cuMemAllocAsync`/`cuMemFreeAsync`
//! pairs (the device's default pool, its release threshold raised so it keeps its memory, as a
//! caching allocator does), and Eddy's caching allocator over `cuMemAlloc` (what the engine
//! uses). Prints nanoseconds per allocate-and-free pair for each size.
//!
//! `cargo bench --features cuda --bench cuda_alloc` (on a machine with a CUDA device).

use eddy::vm::alloc::{AllocMode, DeviceAllocator};
use eddy::vm::cudarc::driver::{result, sys};
use eddy::vm::stream::cuda::CudaDevice;
use eddy::vm::stream::cuda_memory::CudaBackend;
use std::time::Instant;

fn main() {
    let dev = match CudaDevice::open(0) {
        Ok(d) => d,
        Err(e) => {
            println!("SKIPPED: no CUDA device here: {e}");
            return;
        }
    };
    dev.bind().expect("context");
    let stream = result::stream::create(result::stream::StreamKind::NonBlocking).expect("stream");
    // SAFETY: the context is current; the pool handle is the device's own.
    unsafe {
        let pool = result::device::get_default_mem_pool(0).expect("default pool");
        let mut keep = u64::MAX;
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut keep as *mut u64).cast(),
        )
        .result()
        .expect("threshold");
    }
    let caching = DeviceAllocator::new(
        Box::new(CudaBackend::new(dev.clone(), None)),
        AllocMode::Caching,
    );
    for size in [4usize << 10, 1 << 20, 64 << 20] {
        let n = if size >= 64 << 20 { 200 } else { 2000 };
        let time = |f: &mut dyn FnMut()| {
            f(); // warm
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_nanos() as f64 / n as f64
        };
        let sync = time(&mut || {
            // SAFETY: the pointer is freed once, right after it was allocated, never used.
            unsafe {
                let p = result::malloc_sync(size).expect("cuMemAlloc");
                result::free_sync(p).expect("cuMemFree");
            }
        });
        let ordered = time(&mut || {
            // SAFETY: as above, on a live stream of the current context.
            unsafe {
                let p = result::malloc_async(stream, size).expect("cuMemAllocAsync");
                result::free_async(p, stream).expect("cuMemFreeAsync");
            }
        });
        // SAFETY: the stream is live.
        unsafe { result::stream::synchronize(stream) }.expect("sync");
        let cached = time(&mut || drop(caching.allocate(size).expect("caching")));
        println!(
            "{{\"bytes\": {size}, \"cuMemAlloc_ns\": {sync:.0}, \"cuMemAllocAsync_ns\": {ordered:.0}, \"eddy_caching_ns\": {cached:.0}}}"
        );
    }
}
