//! `Blob`: the engine's view of a tensor's storage (OneFlow's EagerBlobObject without shape).
//!
//! A blob has a byte size, a device, one dependence (its live accesses, owned by the scheduler),
//! memory that `Prepare` allocates lazily, a poison slot for asynchronous errors, and the
//! producer and last-used streams the [`InstructionsBuilder`](crate::InstructionsBuilder) tracks for
//! soft sync. Views share one blob, so dependences are per storage.

use crate::Counted;
use crate::alloc::{Allocation, DeviceAllocator};
use crate::dependence::AccessList;
use crate::error::{Error, Result};
use parking_lot::Mutex;
use qcell::{QCell, QCellOwnerID};
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// No stream has used the blob yet.
pub(crate) const NO_STREAM: u32 = u32::MAX;

pub use crate::alloc::INLINE_BYTES;

/// Storage tracked by the engine: bytes, a dependence, memory, poison.
///
/// Blobs are created with [`Vm::new_blob`](crate::Vm::new_blob) and shared as `Counted<Blob>` by the
/// instructions that read or write them.
///
/// # Examples
///
/// ```
/// let vm = eddy_vm::Vm::builder().build().unwrap();
/// let b = vm.new_blob(16);
/// assert_eq!(b.bytes(), 16);
/// assert!(!b.is_allocated());
/// ```
// Layout: the fields are grouped by the thread that writes them, with a cache line of padding
// between groups, so the submitting thread and the scheduler do not invalidate each other's
// lines: submit-side (id, engine, stream tracking; next to the reference count), the scheduler's
// access list, and the compute side (memory, poison). Padding rather than 128-byte alignment
// (`CachePadded`): an over-aligned allocation leaves the allocator's fast path, which cost
// about 230 instructions per blob, more than the rest of `new_blob` together.
#[repr(C)]
pub struct Blob {
    id: u64,
    pub(crate) engine: QCellOwnerID,
    released: AtomicBool,
    pub(crate) last_used_stream: AtomicU32,
    /// User handles sharing the blob (a tensor and its views): see [`hold`](Blob::hold).
    holders: AtomicUsize,
    /// In-place writes the client counted: see [`version`](Blob::version).
    version: AtomicU64,
    /// Automatic promotion's mark: the window that last noted the blob, and where in it (see
    /// `engine::promotion::window`). Written and read only under promotion's lock.
    promotion_tag: AtomicU64,
    _pad0: LinePad,
    pub(crate) access: QCell<AccessList>,
    _pad1: LinePad,
    compute: ComputeSide,
}

/// A cache line of padding: two fields with one of these between them never share a line,
/// whatever the struct's alignment.
struct LinePad(#[allow(dead_code)] [MaybeUninit<u8>; 64]);

/// The part of a blob that prepare, compute and release touch. The size lives here, not with
/// the id: `prepare` reads it on the scheduler thread, and next to the reference count, which the
/// submitting thread keeps writing, that read was a cache miss per instruction (90 % of
/// `ensure_allocated`'s samples in the `vm_chain` profile).
struct ComputeSide {
    bytes: usize,
    memory: Mutex<Option<Allocation>>,
    /// The memory kernels see: the allocation's, the inline buffer, or null (none).
    ptr: std::sync::atomic::AtomicPtr<u8>,
    poisoned: AtomicBool,
    poison: Mutex<Option<Error>>,
    inline: InlineBytes,
}

/// A small blob's memory, inside the blob (16-byte aligned, as the global allocator's blocks).
#[repr(C, align(16))]
struct InlineBytes(UnsafeCell<[MaybeUninit<u8>; INLINE_BYTES]>);

// SAFETY: the bytes are only reached through `Blob::bytes_ref` / `bytes_mut` (unsafe, with the
// engine's ordering as their contract: one writer at a time, no reader beside it), exactly as
// memory from the allocator is; the cell itself is never borrowed.
unsafe impl Sync for InlineBytes {}

impl std::fmt::Debug for Blob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blob")
            .field("id", &self.id)
            .field("bytes", &self.compute.bytes)
            .finish()
    }
}

impl Blob {
    /// A blob in a fresh [`Counted`], built in place: `Counted::new(Blob { .. })` would build
    /// the blob on the stack and copy it (a `memcpy` per blob in profiles of small ops), and
    /// even a `write` of a whole `Blob` copies the padding and the inline buffer. Only the
    /// fields that hold values are written; the padding and the inline bytes stay
    /// uninitialised.
    pub(crate) fn new_arc(engine: QCellOwnerID, bytes: usize) -> Counted<Blob> {
        // SAFETY: `p` points to the fresh allocation's writable, aligned `Blob`; every field
        // except `_pad0`, `_pad1` and `compute.inline` (all `MaybeUninit` bytes, valid
        // uninitialised) is written exactly once, as `new_with` requires.
        unsafe {
            Counted::new_with(|p: *mut Blob| {
                use std::ptr::addr_of_mut;
                addr_of_mut!((*p).id).write(crate::unique_id());
                addr_of_mut!((*p).engine).write(engine);
                addr_of_mut!((*p).released).write(AtomicBool::new(false));
                addr_of_mut!((*p).last_used_stream).write(AtomicU32::new(NO_STREAM));
                addr_of_mut!((*p).holders).write(AtomicUsize::new(1));
                addr_of_mut!((*p).version).write(AtomicU64::new(0));
                addr_of_mut!((*p).promotion_tag).write(AtomicU64::new(0));
                addr_of_mut!((*p).access).write(QCell::new(engine, AccessList::default()));
                let c = addr_of_mut!((*p).compute);
                addr_of_mut!((*c).bytes).write(bytes);
                addr_of_mut!((*c).memory).write(Mutex::new(None));
                addr_of_mut!((*c).ptr)
                    .write(std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()));
                addr_of_mut!((*c).poisoned).write(AtomicBool::new(false));
                addr_of_mut!((*c).poison).write(Mutex::new(None));
            })
        }
    }

    /// Automatic promotion's mark (0 until a window notes the blob).
    pub(crate) fn promotion_tag(&self) -> u64 {
        self.promotion_tag.load(Ordering::Relaxed)
    }

    /// Sets automatic promotion's mark.
    pub(crate) fn set_promotion_tag(&self, tag: u64) {
        self.promotion_tag.store(tag, Ordering::Relaxed);
    }

    /// A process-unique id.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build().unwrap();
    /// let (a, b) = (vm.new_blob(4), vm.new_blob(4));
    /// assert_ne!(a.id(), b.id());
    /// assert_ne!(a.id(), 0);
    /// ```
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The size in bytes the blob needs once allocated.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build().unwrap();
    /// assert_eq!(vm.new_blob(12).bytes(), 12);
    /// assert_eq!(vm.new_blob(0).bytes(), 0);
    /// ```
    pub fn bytes(&self) -> usize {
        self.compute.bytes
    }

    /// Whether `Prepare` has given the blob memory and no release has taken it away
    /// (zero-byte blobs never need any).
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// let b = vm.new_blob(16);
    /// assert!(!b.is_allocated());
    /// vm.write_blob(&b, |bytes| bytes.fill(1))?; // the first writer allocates
    /// assert!(b.is_allocated());
    /// vm.release(&b)?;
    /// vm.sync()?;
    /// assert!(!b.is_allocated());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn is_allocated(&self) -> bool {
        !(self.as_ptr().is_null() || self.is_released() && self.has_inline_memory())
    }

    /// Whether the blob's memory is its inline buffer. Once it is, it stays so: only the
    /// release could change it, and releasing inline memory frees nothing (see `Vm::release`).
    pub(crate) fn has_inline_memory(&self) -> bool {
        self.as_ptr() == self.inline_ptr()
    }

    /// Whether the blob's memory came from `alloc` (not inline, not another allocator's).
    pub(crate) fn memory_from(&self, alloc: &Arc<DeviceAllocator>) -> bool {
        self.compute
            .memory
            .lock()
            .as_ref()
            .is_some_and(|a| a.is_from(alloc))
    }

    /// The inline buffer's address (whether or not the blob uses it).
    fn inline_ptr(&self) -> *mut u8 {
        self.compute.inline.0.get().cast()
    }

    /// Allocates the blob's memory if it has none yet: inside the blob when it is small and
    /// `alloc` allows it ([`DeviceAllocator::inline_max`]), else from `alloc`. Zero-byte blobs
    /// get none.
    ///
    /// The engine calls this and [`free_memory`](Self::free_memory) in the blob's access
    /// order (prepare before the first writer runs, the release after the last access), so
    /// the lock below is uncontended; it keeps even a misordered pair memory-safe.
    pub(crate) fn ensure_allocated(
        &self,
        alloc: &Arc<DeviceAllocator>,
    ) -> Result<(), crate::alloc::AllocError> {
        let bytes = self.compute.bytes;
        if bytes == 0 || !self.as_ptr().is_null() {
            return Ok(());
        }
        if bytes <= alloc.inline_max() {
            self.compute.ptr.store(self.inline_ptr(), Ordering::Release);
            return Ok(());
        }
        let mut m = self.compute.memory.lock();
        if m.is_none() {
            let a = alloc.allocate(bytes)?;
            self.compute.ptr.store(a.ptr(), Ordering::Release);
            *m = Some(a);
        }
        Ok(())
    }

    /// Gives the blob memory it does not own (a plan's arena): kernels see `ptr`; a release
    /// frees nothing.
    ///
    /// # Safety
    ///
    /// `ptr` is valid for [`bytes`](Self::bytes) bytes, aligned for any element type, for as
    /// long as the blob is used, and no other blob in use at the same time is given any of
    /// those bytes. The blob has no memory yet.
    pub(crate) unsafe fn bind_memory(&self, ptr: *mut u8) {
        debug_assert!(self.as_ptr().is_null(), "a blob given memory twice");
        self.compute.ptr.store(ptr, Ordering::Release);
    }

    /// Marks the blob failed with `e`, as a failed kernel marks its outputs: every later read
    /// returns `e`, and every op that reads it is skipped and passes `e` on. For a blob whose
    /// values can never exist (a placeholder written only inside a capture).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Error, Vm};
    /// let vm = Vm::builder().build()?;
    /// let b = vm.new_blob(4);
    /// b.poison_with(&Error::kernel("made", "never computed"));
    /// assert!(matches!(vm.read_blob(&b, |_| ()), Err(Error::KernelFailed { .. })));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn poison_with(&self, e: &Error) {
        self.set_poison(e);
    }

    /// Frees the blob's memory (the `ReleaseTensor` instruction calls this once every earlier
    /// access has completed). Idempotent. Inline memory needs no free: kernels stop seeing
    /// it, and it goes with the blob.
    pub(crate) fn free_memory(&self) {
        let p = self.as_ptr();
        if p.is_null() {
            return;
        }
        if p == self.inline_ptr() {
            self.compute
                .ptr
                .store(std::ptr::null_mut(), Ordering::Release);
            return;
        }
        let a = self.compute.memory.lock().take();
        self.compute
            .ptr
            .store(std::ptr::null_mut(), Ordering::Release);
        drop(a);
    }

    /// The start of the blob's memory, or null if it has none (unallocated or zero bytes).
    ///
    /// The pointer is valid for [`bytes`](Self::bytes) bytes while an instruction that lists the
    /// blob among its inputs or outputs is computing; the engine orders accesses so that a
    /// kernel writing it has exclusive use.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// let b = vm.new_blob(16);
    /// assert!(b.as_ptr().is_null());
    /// vm.write_blob(&b, |bytes| bytes.fill(0))?;
    /// assert!(!b.as_ptr().is_null());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn as_ptr(&self) -> *mut u8 {
        self.compute.ptr.load(Ordering::Acquire)
    }

    /// The blob's bytes, for reading inside a kernel or callback that lists it as an input.
    ///
    /// Returns an empty slice for a zero-byte or unallocated blob.
    ///
    /// # Safety
    ///
    /// Call only from an instruction that has the blob among its dependences while that
    /// instruction runs (then no writer runs concurrently), and do not keep the slice after.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Blob, Counted, Result, StreamId, Vm, instruction::{ComputeCtx, Kernel}};
    /// /// Copies its input into its output.
    /// struct Dup;
    /// impl Kernel for Dup {
    ///     fn name(&self) -> &str { "dup" }
    ///     fn compute(
    ///         &mut self, ins: &[Counted<Blob>], outs: &[Counted<Blob>], _: &mut ComputeCtx<'_>,
    ///     ) -> Result<()> {
    ///         // SAFETY: the engine runs this kernel while it reads `ins` and writes `outs`.
    ///         unsafe { outs[0].bytes_mut().copy_from_slice(ins[0].bytes_ref()) };
    ///         Ok(())
    ///     }
    /// }
    /// let vm = Vm::builder().build()?;
    /// let (a, b) = (vm.new_blob(4), vm.new_blob(4));
    /// vm.write_blob(&a, |bytes| bytes.copy_from_slice(&[1, 2, 3, 4]))?;
    /// vm.run_op(StreamId::CPU, Dup, &[&a], &[&b], false)?;
    /// assert_eq!(vm.read_blob(&b, |bytes| bytes.to_vec())?, vec![1, 2, 3, 4]);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub unsafe fn bytes_ref(&self) -> &[u8] {
        let p = self.as_ptr();
        if p.is_null() {
            return &[];
        }
        // SAFETY: `p` points to `bytes()` bytes owned by this blob's allocation, which lives
        // until `free_memory`; the caller guarantees the engine orders this read after every
        // earlier write and before any later one or the release.
        unsafe { std::slice::from_raw_parts(p, self.compute.bytes) }
    }

    /// The blob's bytes, for writing inside a kernel that lists it as an output.
    ///
    /// # Safety
    ///
    /// Call only from an instruction that has the blob among its outputs while that instruction
    /// runs (then nothing else touches it), and do not keep the slice after.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{Blob, Counted, Result, StreamId, Vm, instruction::{ComputeCtx, Kernel}};
    /// /// Writes 0, 1, 2, ... into its output.
    /// struct Iota;
    /// impl Kernel for Iota {
    ///     fn name(&self) -> &str { "iota" }
    ///     fn compute(
    ///         &mut self, _: &[Counted<Blob>], outs: &[Counted<Blob>], _: &mut ComputeCtx<'_>,
    ///     ) -> Result<()> {
    ///         // SAFETY: the engine runs this kernel with exclusive access to its outputs.
    ///         let out = unsafe { outs[0].bytes_mut() };
    ///         out.iter_mut().enumerate().for_each(|(i, x)| *x = i as u8);
    ///         Ok(())
    ///     }
    /// }
    /// let vm = Vm::builder().build()?;
    /// let b = vm.new_blob(3);
    /// vm.run_op(StreamId::CPU, Iota, &[], &[&b], false)?;
    /// assert_eq!(vm.read_blob(&b, |bytes| bytes.to_vec())?, vec![0, 1, 2]);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn bytes_mut(&self) -> &mut [u8] {
        let p = self.as_ptr();
        if p.is_null() {
            return &mut [];
        }
        // SAFETY: as in `bytes_ref`; in addition the engine runs at most one writer of the blob
        // at a time and no reader concurrently with it, so the slice is unique.
        unsafe { std::slice::from_raw_parts_mut(p, self.compute.bytes) }
    }

    /// The error that poisoned this blob, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{StreamId, Vm, testing::Fail};
    /// let vm = Vm::builder().build().unwrap();
    /// let b = vm.new_blob(4);
    /// assert_eq!(b.poison(), None);
    /// vm.run(StreamId::CPU, Fail::new(vec![], vec![b.clone()])).unwrap();
    /// let root = vm.sync().unwrap_err();
    /// assert_eq!(b.poison(), Some(root));
    /// ```
    #[inline]
    pub fn poison(&self) -> Option<Error> {
        if !self.compute.poisoned.load(Ordering::Acquire) {
            return None;
        }
        self.poison_slow()
    }

    /// The poison itself, out of line: every instruction asks about each input, and the
    /// answer is almost always no.
    #[cold]
    #[inline(never)]
    fn poison_slow(&self) -> Option<Error> {
        self.compute.poison.lock().clone()
    }

    /// Whether the blob is poisoned (cheap check).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::{StreamId, Vm, testing::{Fail, Noop}};
    /// let vm = Vm::builder().build()?;
    /// let b = vm.new_blob(4);
    /// vm.run(StreamId::CPU, Fail::new(vec![], vec![b.clone()]))?;
    /// vm.barrier()?;
    /// assert!(b.is_poisoned());
    /// vm.run(StreamId::CPU, Noop::new(vec![], vec![b.clone()]))?; // a successful writer
    /// vm.barrier()?;
    /// assert!(!b.is_poisoned());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    #[inline]
    pub fn is_poisoned(&self) -> bool {
        self.compute.poisoned.load(Ordering::Acquire)
    }

    /// Poisons the blob with `e` (the latest failed writer's root error).
    pub(crate) fn set_poison(&self, e: &Error) {
        *self.compute.poison.lock() = Some(e.clone());
        self.compute.poisoned.store(true, Ordering::Release);
    }

    /// Clears the poison (the blob is being overwritten by a successful writer).
    #[inline]
    pub(crate) fn clear_poison(&self) {
        if self.compute.poisoned.load(Ordering::Acquire) {
            self.clear_poison_slow();
        }
    }

    #[cold]
    #[inline(never)]
    fn clear_poison_slow(&self) {
        *self.compute.poison.lock() = None;
        self.compute.poisoned.store(false, Ordering::Release);
    }

    /// Counts one more user handle to the blob. A blob starts with one, its creator's. A layer
    /// that shares one blob between several handles of its own (a tensor and its views) counts
    /// them here instead of in an allocation of its own, and releases the blob
    /// ([`Vm::release`](crate::Vm::release)) when [`unhold`](Self::unhold) says the last one
    /// went. The engine itself never reads the count. Only a holder may call `hold` (a new
    /// handle is made from an existing one), so a count of one is the caller's own.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build().unwrap();
    /// let b = vm.new_blob(16);
    /// b.hold(); // a second handle
    /// assert!(!b.unhold(), "one handle is left");
    /// if b.unhold() {
    ///     vm.release(&b).unwrap(); // the last one: release the memory
    /// }
    /// assert!(b.is_released());
    /// ```
    #[inline]
    pub fn hold(&self) {
        // Relaxed, as `Arc::clone`: a new handle is made from an existing one, which the
        // caller's thread already sees.
        self.holders.fetch_add(1, Ordering::Relaxed);
    }

    /// Drops one user handle counted by [`hold`](Self::hold) (or the creator's); returns whether
    /// it was the last.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build().unwrap();
    /// let b = vm.new_blob(16);
    /// b.hold();
    /// assert!(!b.unhold(), "the creator's handle is left");
    /// assert!(b.unhold(), "the last handle went");
    /// ```
    #[inline]
    pub fn unhold(&self) -> bool {
        // The only holder (the usual case: a tensor without views): no other handle exists to
        // `hold` again, so a plain store ends the count, without a locked instruction. Acquire
        // pairs with the Release of the other holders' `unhold`s, as the fence below does.
        if self.holders.load(Ordering::Acquire) == 1 {
            self.holders.store(0, Ordering::Relaxed);
            return true;
        }
        // Release, then Acquire on the last, as `Arc`'s drop: every use through the other
        // handles happens before the last holder releases the blob.
        if self.holders.fetch_sub(1, Ordering::Release) != 1 {
            return false;
        }
        std::sync::atomic::fence(Ordering::Acquire);
        true
    }

    /// How many user handles share the blob now (see [`hold`](Self::hold)): 1 when the only
    /// handle is its creator's. A snapshot; other threads may change it.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build().unwrap();
    /// let b = vm.new_blob(16);
    /// assert_eq!(b.holders(), 1);
    /// b.hold();
    /// assert_eq!(b.holders(), 2);
    /// ```
    #[inline]
    pub fn holders(&self) -> usize {
        self.holders.load(Ordering::Acquire)
    }

    /// How many in-place writes the client has counted with [`bump_version`](Self::bump_version)
    /// (the engine itself never changes it). The tensor crate counts every in-place op, so that
    /// autograd can refuse a backward that would read a tensor changed since its forward.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build().unwrap();
    /// let b = vm.new_blob(16);
    /// assert_eq!(b.version(), 0);
    /// b.bump_version();
    /// assert_eq!(b.version(), 1);
    /// ```
    #[inline]
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Counts one in-place write (see [`version`](Self::version)).
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build().unwrap();
    /// let b = vm.new_blob(16);
    /// b.bump_version();
    /// b.bump_version();
    /// assert_eq!(b.version(), 2);
    /// ```
    #[inline]
    pub fn bump_version(&self) {
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether `release` was already called on the blob.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().build()?;
    /// let b = vm.new_blob(16);
    /// assert!(!b.is_released());
    /// vm.release(&b)?;
    /// assert!(b.is_released());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn is_released(&self) -> bool {
        self.released.load(Ordering::Acquire)
    }

    pub(crate) fn mark_released(&self) -> bool {
        !self.released.swap(true, Ordering::AcqRel)
    }

    /// [`mark_released`](Self::mark_released) for the blob's last holder, whom no other
    /// holder can race: a load and a store instead of a locked swap. Release, as the swap:
    /// the holder's earlier writes are seen by whoever sees the blob released.
    pub(crate) fn mark_released_unheld(&self) -> bool {
        if self.released.load(Ordering::Acquire) {
            return false;
        }
        self.released.store(true, Ordering::Release);
        true
    }
}
