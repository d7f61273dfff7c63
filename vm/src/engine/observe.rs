//! What the engine reports: counters, allocator figures and the timeline.
use super::Vm;
use crate::alloc::AllocStats;
use crate::stats::VmStats;
use crate::stream::Device;
use crate::trace::TraceEvent;
use std::sync::Arc;
use std::sync::atomic::Ordering;

impl Vm {
    /// Counters and allocator figures.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Noop, StreamId, Vm};
    /// let vm = Vm::builder().build()?;
    /// vm.run(StreamId::CPU, Noop::new(vec![], vec![vm.new_blob(4)]))?;
    /// vm.sync()?;
    /// let st = vm.stats();
    /// assert_eq!(st.in_flight, 0);
    /// assert_eq!(st.inserted, st.erased, "nothing is live");
    /// assert!(st.erased >= 1);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn stats(&self) -> VmStats {
        let sh = self.shared();
        let alloc = self
            .allocator(Device::CPU)
            .map(|a| a.stats())
            .unwrap_or_default();
        sh.stats
            .snapshot(sh.in_flight.load(Ordering::Acquire) as u64, alloc)
    }

    /// The CPU allocator's figures.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// let b = vm.new_blob(1024); // above `INLINE_BYTES`: from the allocator
    /// vm.write_blob(&b, |bytes| bytes.fill(0))?;
    /// assert!(vm.alloc_stats().in_use >= 1024);
    /// vm.release(&b)?;
    /// vm.sync()?;
    /// assert_eq!(vm.alloc_stats().in_use, 0);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn alloc_stats(&self) -> AllocStats {
        self.allocator(Device::CPU)
            .map(|a| a.stats())
            .unwrap_or_default()
    }

    /// Returns the cached, unused memory of every allocator of `device` to the system (for a
    /// CUDA device: its streams' device memory and its pinned host memory), as PyTorch's
    /// `torch.cuda.empty_cache`, with the arenas of the plans automatic promotion compiled
    /// (compiled again when their loops come back). Memory in use stays; returns how many
    /// bytes went back.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Device, Vm};
    /// let vm = Vm::builder().build()?;
    /// let b = vm.new_blob(1 << 20);
    /// vm.write_blob(&b, |bytes| bytes.fill(0))?;
    /// vm.release(&b)?;
    /// vm.sync()?;
    /// assert!(vm.allocator(Device::CPU).unwrap().stats().reserved >= 1 << 20, "cached");
    /// assert!(vm.empty_cache(Device::CPU) >= 1 << 20);
    /// assert_eq!(vm.allocator(Device::CPU).unwrap().stats().reserved, 0);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn empty_cache(&self, device: Device) -> usize {
        // What the engine keeps for work that may come back goes first: its memory is then
        // free to go back too.
        self.shared().shed_caches(device);
        let streams = &self.shared().streams;
        let mut freed = 0;
        for (k, st) in streams.iter().enumerate() {
            let first = streams[..k]
                .iter()
                .all(|o| !Arc::ptr_eq(&o.allocator, &st.allocator));
            if st.policy.device() == device && first {
                freed += st.allocator.shrink();
            }
        }
        freed
    }

    /// The memory statistics of `device`: those of each of its allocators (a CUDA device has
    /// one per stream: compute, host-to-device, device-to-host), added up. `peak_in_use` is
    /// the sum of each allocator's own peak, an upper bound of the device's. Zero for a device
    /// the engine does not have.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Device, Vm, testing::Noop};
    /// let vm = Vm::builder().cpu_devices(2).build()?;
    /// let on1 = vm.device_stream(Device::Cpu(1)).unwrap();
    /// let b = vm.new_blob(1 << 16);
    /// vm.run(on1, Noop::new(vec![], vec![b.clone()]))?; // allocated on cpu:1 by its first write
    /// vm.sync()?;
    /// assert!(vm.memory_stats(Device::Cpu(1)).in_use >= 1 << 16);
    /// assert_eq!(vm.memory_stats(Device::Cpu(0)).in_use, 0);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn memory_stats(&self, device: Device) -> AllocStats {
        let streams = &self.shared().streams;
        let mut total = AllocStats::default();
        for (k, st) in streams.iter().enumerate() {
            let first = streams[..k]
                .iter()
                .all(|o| !Arc::ptr_eq(&o.allocator, &st.allocator));
            if st.policy.device() == device && first {
                let s = st.allocator.stats();
                total.in_use += s.in_use;
                total.cached += s.cached;
                total.reserved += s.reserved;
                total.peak_in_use += s.peak_in_use;
                total.allocations += s.allocations;
                total.system_allocations += s.system_allocations;
                total.oom_retries += s.oom_retries;
                total.ooms += s.ooms;
            }
        }
        total
    }

    /// The recorded timeline (empty unless tracing was on).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Noop, StreamId, Vm};
    /// let vm = Vm::builder().trace(true).build()?;
    /// vm.run(StreamId::CPU, Noop::new(vec![], vec![vm.new_blob(4)]))?;
    /// vm.sync()?;
    /// assert!(vm.trace_events().iter().any(|e| e.name == "noop" && e.stream == 0));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn trace_events(&self) -> Vec<TraceEvent> {
        self.collect_device_events(false);
        self.shared().trace.lock().clone()
    }

    /// Moves the device lanes' completed launches into the timeline (see
    /// `stream/cuda_timing.rs`); with `clear`, drops them all instead.
    fn collect_device_events(&self, clear: bool) {
        #[cfg(feature = "cuda")]
        {
            use crate::stream::cuda::CudaStream;
            let sh = self.shared();
            for (k, entry) in sh.streams.iter().enumerate() {
                if let Some(s) = entry.policy.as_any().downcast_ref::<CudaStream>() {
                    let lane = format!("{} device", s.stream_name());
                    let events = s.device_events(k as u32, sh.trace_origin, &lane, clear);
                    sh.trace.lock().extend(events);
                }
            }
        }
        #[cfg(not(feature = "cuda"))]
        let _ = clear;
    }

    /// Clears the recorded timeline.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Noop, StreamId, Vm};
    /// let vm = Vm::builder().trace(true).build()?;
    /// vm.run(StreamId::CPU, Noop::new(vec![], vec![vm.new_blob(4)]))?;
    /// vm.sync()?;
    /// assert!(!vm.trace_events().is_empty());
    /// vm.clear_trace();
    /// assert!(vm.trace_events().is_empty());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn clear_trace(&self) {
        self.collect_device_events(true);
        self.shared().trace.lock().clear();
    }

    /// Turns recording of the timeline on or off from now on (the builder's `trace` switch,
    /// `EDDY_VM_TRACE`, sets it at start). Instructions already running are not affected.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// assert!(!vm.is_tracing());
    /// vm.set_trace(true);
    /// assert!(vm.is_tracing());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn set_trace(&self, on: bool) {
        self.shared().tracing.store(on, Ordering::Relaxed);
        for st in &self.shared().streams {
            st.policy.tracing_changed(on);
        }
    }

    /// Whether the timeline is being recorded.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().trace(true).build()?;
    /// assert!(vm.is_tracing());
    /// vm.set_trace(false);
    /// assert!(!vm.is_tracing());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn is_tracing(&self) -> bool {
        self.shared().tracing.load(Ordering::Relaxed)
    }

    /// Writes the timeline as chrome-trace / Perfetto JSON.
    ///
    /// # Errors
    ///
    /// I/O errors from `w`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{testing::Noop, StreamId, Vm};
    /// let vm = Vm::builder().trace(true).build()?;
    /// vm.run(StreamId::CPU, Noop::new(vec![], vec![vm.new_blob(4)]))?;
    /// vm.sync()?;
    /// let mut json = Vec::new();
    /// vm.write_chrome_trace(&mut json).unwrap();
    /// let json = String::from_utf8(json).unwrap();
    /// assert!(json.starts_with("{\"traceEvents\":["));
    /// assert!(json.contains("\"name\":\"noop\""));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn write_chrome_trace(&self, w: impl std::io::Write) -> std::io::Result<()> {
        let names: Vec<String> = self
            .shared()
            .streams
            .iter()
            .map(|s| s.policy.name().to_string())
            .collect();
        crate::trace::write_chrome_trace(&self.trace_events(), &names, w)
    }
}
