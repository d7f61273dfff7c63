//! The caching allocator's book-keeping (single-threaded; [`DeviceAllocator`] locks it).
//!
//! Memory is taken from the backend in *chunks* and handed out as *pieces*. Every piece belongs
//! to one chunk; the pieces of a chunk tile it exactly. Free pieces are indexed by `(size, addr)`
//! so that a request takes the smallest free piece that fits (best fit) and splits off the rest;
//! a freed piece merges with free neighbours of the same chunk. `shrink` returns chunks that are
//! one free piece to the backend.
//!
//! Small pieces (up to 64 KiB) that are freed go first to a *quick list* of their exact size
//! (at most 64 per size), still split off and not merged, so the next request of that size
//! takes one without touching the indexes: the common case of an eager program, which frees
//! and allocates tensors of the same few small sizes every step. `shrink` (and so the OOM path)
//! empties the quick lists through the merging path before returning chunks.
//!
//! Sizes are rounded up to multiples of 512 B (the smallest bin). Chunks grow by 2 MiB for
//! requests up to 1 MiB, 20 MiB for requests up to 10 MiB, and the request rounded up to 2 MiB
//! beyond. A piece from a large chunk is split only if the remainder is at least 1 MiB, which
//! bounds fragmentation like PyTorch's large-pool rule.
//!
//! [`DeviceAllocator`]: super::DeviceAllocator

use super::backend::Backend;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ptr::NonNull;

/// The smallest bin, and the rounding of every request.
pub const MIN_BLOCK: usize = 512;
const SMALL_REQUEST: usize = 1 << 20;
const SMALL_CHUNK: usize = 2 << 20;
const MID_REQUEST: usize = 10 << 20;
const MID_CHUNK: usize = 20 << 20;
const ROUND_LARGE: usize = 2 << 20;
/// The largest piece kept on a quick list.
const QUICK_MAX: usize = 64 << 10;
/// Quick lists, one per size from 512 B to `QUICK_MAX`.
const QUICK_CLASSES: usize = QUICK_MAX / MIN_BLOCK;
/// At most this many pieces per quick list.
const QUICK_DEPTH: usize = 64;

#[derive(Clone, Copy, Debug)]
struct Piece {
    size: usize,
    free: bool,
    chunk: usize,
}

/// A pointer the allocator owns, movable between threads with the allocator.
///
/// The tables index pieces by address (`usize`), but a pointer handed out is always derived
/// from the pointer the backend returned (its chunk's) or one handed back by `free`, never cast
/// from an integer, so it keeps its provenance (Miri checks this with strict provenance).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Owned(NonNull<u8>);

// SAFETY: an `Owned` is a plain address of memory this allocator holds; it is dereferenced only
// by whoever the piece is handed to, and the allocator is used under its owner's lock.
unsafe impl Send for Owned {}

impl Owned {
    fn addr(self) -> usize {
        self.0.as_ptr() as usize
    }
}

#[derive(Clone, Copy, Debug)]
struct Chunk {
    size: usize,
    base: Owned,
}

/// Best-fit, splitting and merging allocator over backend chunks. Not thread-safe.
///
/// # Examples
///
/// ```
/// use eddy_vm::alloc::{Backend, CachingAllocator, CpuBackend};
/// let backend = CpuBackend::new(None);
/// let mut a = CachingAllocator::new();
/// let (p, size) = a.allocate(1000, &backend).unwrap();
/// assert_eq!(size, 1024);
/// assert_eq!(a.reserved(), 2 << 20); // one 2 MiB chunk from the backend
/// a.free(p);
/// assert_eq!(a.shrink(&backend), 2 << 20);
/// assert_eq!(backend.used(), 0);
/// ```
#[derive(Debug, Default)]
pub struct CachingAllocator {
    pieces: BTreeMap<usize, Piece>,
    free: BTreeSet<(usize, usize)>,
    chunks: HashMap<usize, Chunk>,
    /// `quick[k]`: free pieces of exactly `(k + 1) * MIN_BLOCK` bytes, marked in use in
    /// `pieces` (neither indexed in `free` nor merged).
    quick: Vec<Vec<Owned>>,
    in_use: usize,
    reserved: usize,
}

fn quick_class(size: usize) -> Option<usize> {
    (size <= QUICK_MAX).then(|| size / MIN_BLOCK - 1)
}

/// Rounds a request up to the allocator's granularity, `None` on overflow.
///
/// # Examples
///
/// ```
/// use eddy_vm::alloc::caching::round_size;
/// assert_eq!(round_size(0), Some(512));
/// assert_eq!(round_size(513), Some(1024));
/// assert_eq!(round_size(usize::MAX), None);
/// ```
pub fn round_size(size: usize) -> Option<usize> {
    size.max(1).checked_next_multiple_of(MIN_BLOCK)
}

fn chunk_size_for(rounded: usize) -> Option<usize> {
    if rounded <= SMALL_REQUEST {
        Some(SMALL_CHUNK)
    } else if rounded <= MID_REQUEST {
        Some(MID_CHUNK)
    } else {
        rounded.checked_next_multiple_of(ROUND_LARGE)
    }
}

impl CachingAllocator {
    /// An empty allocator.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::CachingAllocator;
    /// let a = CachingAllocator::new();
    /// assert_eq!((a.in_use(), a.reserved(), a.chunk_count()), (0, 0, 0));
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes handed out (rounded sizes).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{CachingAllocator, CpuBackend};
    /// let backend = CpuBackend::new(None);
    /// let mut a = CachingAllocator::new();
    /// let (p, _) = a.allocate(1000, &backend).unwrap();
    /// assert_eq!(a.in_use(), 1024);
    /// a.free(p);
    /// assert_eq!(a.in_use(), 0);
    /// # a.shrink(&backend);
    /// ```
    pub fn in_use(&self) -> usize {
        self.in_use
    }

    /// Bytes held from the backend.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{Backend, CachingAllocator, CpuBackend};
    /// let backend = CpuBackend::new(None);
    /// let mut a = CachingAllocator::new();
    /// let (p, _) = a.allocate(3 << 20, &backend).unwrap(); // a 20 MiB chunk
    /// assert_eq!(a.reserved(), 20 << 20);
    /// assert_eq!(a.reserved(), backend.used());
    /// a.free(p);
    /// # a.shrink(&backend);
    /// ```
    pub fn reserved(&self) -> usize {
        self.reserved
    }

    /// Bytes held but not handed out.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{CachingAllocator, CpuBackend};
    /// let backend = CpuBackend::new(None);
    /// let mut a = CachingAllocator::new();
    /// let (p, _) = a.allocate(512, &backend).unwrap();
    /// assert_eq!(a.cached(), (2 << 20) - 512);
    /// a.free(p);
    /// assert_eq!(a.cached(), 2 << 20);
    /// # a.shrink(&backend);
    /// ```
    pub fn cached(&self) -> usize {
        self.reserved - self.in_use
    }

    /// Allocates `size > 0` bytes. Returns the address and the size of the piece handed out
    /// (at least the request rounded to 512 B), or `None` when
    /// neither the cache nor the backend can serve it.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{CachingAllocator, CpuBackend};
    /// let backend = CpuBackend::new(Some(1 << 20));
    /// let mut a = CachingAllocator::new();
    /// // A 2 MiB chunk does not fit the capacity: the allocator grows by the request alone.
    /// let (p, size) = a.allocate(600 << 10, &backend).unwrap();
    /// assert_eq!((size, a.reserved()), (600 << 10, 600 << 10));
    /// assert!(a.allocate(600 << 10, &backend).is_none());
    /// a.free(p);
    /// # a.shrink(&backend);
    /// ```
    pub fn allocate(&mut self, size: usize, backend: &dyn Backend) -> Option<(NonNull<u8>, usize)> {
        let rounded = round_size(size)?;
        if let Some(p) = quick_class(rounded).and_then(|k| self.quick.get_mut(k)?.pop()) {
            self.in_use += rounded;
            return Some((p.0, rounded));
        }
        let (addr, ptr) = match self.take_cached(rounded) {
            Some(a) => a,
            None => {
                // Grow by a whole chunk; near the capacity, by just the request.
                let mut chunk = chunk_size_for(rounded)?;
                let base = match backend.allocate(chunk) {
                    Some(p) => p,
                    None if chunk > rounded => {
                        chunk = rounded;
                        backend.allocate(chunk)?
                    }
                    None => return None,
                };
                let base = Owned(base);
                self.chunks.insert(base.addr(), Chunk { size: chunk, base });
                let base = base.addr();
                self.reserved += chunk;
                self.pieces.insert(
                    base,
                    Piece {
                        size: chunk,
                        free: true,
                        chunk: base,
                    },
                );
                self.free.insert((chunk, base));
                self.take_cached(rounded)
                    .expect("a fresh chunk fits the request")
            }
        };
        // The piece may be larger than asked when the remainder was too small to split.
        let size = self.pieces[&addr].size;
        self.in_use += rounded;
        Some((ptr, size))
    }

    /// Takes the best-fitting free piece for `rounded` bytes; returns its address and a pointer
    /// to it derived from its chunk's.
    fn take_cached(&mut self, rounded: usize) -> Option<(usize, NonNull<u8>)> {
        let &(fsize, addr) = self.free.range((rounded, 0)..).next()?;
        let piece = self.pieces[&addr];
        let rest = fsize - rounded;
        let chunk = self.chunks[&piece.chunk];
        // SAFETY: the piece lies inside its chunk (`pieces` tile the chunks), so the offset
        // stays within the backend's allocation.
        let ptr = unsafe { chunk.base.0.add(addr - piece.chunk) };
        let min_split = if chunk.size > SMALL_CHUNK {
            SMALL_REQUEST
        } else {
            MIN_BLOCK
        };
        self.free.remove(&(fsize, addr));
        if rest >= min_split {
            let tail = addr + rounded;
            self.pieces.insert(
                tail,
                Piece {
                    size: rest,
                    free: true,
                    chunk: piece.chunk,
                },
            );
            self.free.insert((rest, tail));
            self.pieces.insert(
                addr,
                Piece {
                    size: rounded,
                    free: false,
                    chunk: piece.chunk,
                },
            );
        } else {
            self.pieces.insert(
                addr,
                Piece {
                    size: fsize,
                    free: false,
                    chunk: piece.chunk,
                },
            );
            // The whole piece is used; account for the slack as in use.
            self.in_use += rest;
        }
        Some((addr, ptr))
    }

    /// Returns a piece; merges it with free neighbours of the same chunk.
    ///
    /// # Panics
    ///
    /// If `ptr` is not a piece handed out by this allocator (an engine bug).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{CachingAllocator, CpuBackend};
    /// let backend = CpuBackend::new(None);
    /// let mut a = CachingAllocator::new();
    /// let (p, _) = a.allocate(100 << 10, &backend).unwrap();
    /// let (q, _) = a.allocate(100 << 10, &backend).unwrap();
    /// a.free(p);
    /// a.free(q);
    /// assert_eq!(a.in_use(), 0);
    /// assert_eq!(a.check_invariants(), Ok(())); // merged back into one free piece
    /// # a.shrink(&backend);
    /// ```
    pub fn free(&mut self, ptr: NonNull<u8>) {
        let size = self
            .pieces
            .get(&(ptr.as_ptr() as usize))
            .expect("free of an unknown piece")
            .size;
        self.free_sized(ptr, size);
    }

    /// Returns a piece whose size (as [`allocate`](Self::allocate) returned it) is known: a
    /// small piece goes to its quick list without an index lookup.
    ///
    /// # Panics
    ///
    /// If `ptr` is not a piece handed out by this allocator (an engine bug).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{CachingAllocator, CpuBackend};
    /// let backend = CpuBackend::new(None);
    /// let mut a = CachingAllocator::new();
    /// let (p, size) = a.allocate(3000, &backend).unwrap();
    /// a.free_sized(p, size);
    /// let (q, _) = a.allocate(3000, &backend).unwrap();
    /// assert_eq!(q, p, "the quick list serves the same size again");
    /// a.free_sized(q, size);
    /// # a.shrink(&backend);
    /// ```
    pub fn free_sized(&mut self, ptr: NonNull<u8>, size: usize) {
        let addr = ptr.as_ptr() as usize;
        if let Some(k) = quick_class(size) {
            if self.quick.is_empty() {
                self.quick = vec![Vec::new(); QUICK_CLASSES];
            }
            if self.quick[k].len() < QUICK_DEPTH {
                debug_assert!(
                    self.pieces
                        .get(&addr)
                        .is_some_and(|p| !p.free && p.size == size),
                    "quick free of {addr:#x}: not an in-use piece of {size} bytes"
                );
                self.quick[k].push(Owned(ptr));
                self.in_use -= size;
                return;
            }
        }
        self.free_merging(addr);
    }

    /// Empties the quick lists into the merging path.
    fn flush_quick(&mut self) {
        for k in 0..self.quick.len() {
            while let Some(p) = self.quick[k].pop() {
                self.in_use += (k + 1) * MIN_BLOCK; // `free_merging` takes it off again
                self.free_merging(p.addr());
            }
        }
    }

    fn free_merging(&mut self, addr: usize) {
        let mut addr = addr;
        let mut piece = self.pieces.remove(&addr).expect("free of an unknown piece");
        assert!(!piece.free, "double free of piece {addr:#x}");
        self.in_use -= piece.size;
        // Merge with the next piece.
        let next = addr + piece.size;
        if let Some(n) = self.pieces.get(&next).copied()
            && n.free
            && n.chunk == piece.chunk
        {
            self.pieces.remove(&next);
            self.free.remove(&(n.size, next));
            piece.size += n.size;
        }
        // Merge with the previous piece.
        if let Some((&paddr, &p)) = self.pieces.range(..addr).next_back()
            && p.free
            && p.chunk == piece.chunk
            && paddr + p.size == addr
        {
            self.pieces.remove(&paddr);
            self.free.remove(&(p.size, paddr));
            addr = paddr;
            piece.size += p.size;
        }
        piece.free = true;
        self.pieces.insert(addr, piece);
        self.free.insert((piece.size, addr));
    }

    /// Returns every chunk that is entirely free to the backend; returns the bytes released.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{Backend, CachingAllocator, CpuBackend};
    /// let backend = CpuBackend::new(None);
    /// let mut a = CachingAllocator::new();
    /// let (p, _) = a.allocate(1000, &backend).unwrap();
    /// assert_eq!(a.shrink(&backend), 0, "the chunk is in use");
    /// a.free(p);
    /// assert_eq!(a.shrink(&backend), 2 << 20);
    /// assert_eq!((a.reserved(), backend.used()), (0, 0));
    /// ```
    pub fn shrink(&mut self, backend: &dyn Backend) -> usize {
        self.flush_quick();
        let whole: Vec<Chunk> = self
            .chunks
            .iter()
            .filter(|&(base, c)| {
                self.pieces
                    .get(base)
                    .is_some_and(|p| p.free && p.size == c.size)
            })
            .map(|(_, &c)| c)
            .collect();
        let mut released = 0;
        for Chunk { size, base: ptr } in whole {
            let base = ptr.addr();
            self.pieces.remove(&base);
            self.free.remove(&(size, base));
            self.chunks.remove(&base);
            self.reserved -= size;
            released += size;
            // SAFETY: `base` was obtained from `backend.allocate(size)` when the chunk was
            // created and is freed only here, once, after removing the chunk from the tables.
            unsafe { backend.free(ptr.0, size) };
        }
        released
    }

    /// Number of chunks held from the backend.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{CachingAllocator, CpuBackend};
    /// let backend = CpuBackend::new(None);
    /// let mut a = CachingAllocator::new();
    /// let (p, _) = a.allocate(1000, &backend).unwrap();
    /// let (q, _) = a.allocate(1000, &backend).unwrap();
    /// assert_eq!(a.chunk_count(), 1, "both pieces are split off one chunk");
    /// a.free(p);
    /// a.free(q);
    /// a.shrink(&backend);
    /// assert_eq!(a.chunk_count(), 0);
    /// ```
    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// Checks the allocator's invariants (for tests): pieces tile their chunks with no overlap,
    /// every free piece is indexed, neighbouring free pieces are merged, and the counters match
    /// a recount.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::alloc::{CachingAllocator, CpuBackend};
    /// let backend = CpuBackend::new(None);
    /// let mut a = CachingAllocator::new();
    /// let ps: Vec<_> = (1..6).map(|k| a.allocate(k * 700, &backend).unwrap().0).collect();
    /// for p in ps.into_iter().step_by(2) {
    ///     a.free(p);
    /// }
    /// assert_eq!(a.check_invariants(), Ok(()));
    /// # a.shrink(&backend);
    /// ```
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut quick_total = 0;
        let mut in_use = 0;
        let mut reserved = 0;
        for (k, list) in self.quick.iter().enumerate() {
            for addr in list.iter().map(|p| p.addr()) {
                match self.pieces.get(&addr) {
                    Some(p) if !p.free && p.size == (k + 1) * MIN_BLOCK => {}
                    _ => return Err(format!("quick-listed {addr:#x} is not a piece of its size")),
                }
                quick_total += (k + 1) * MIN_BLOCK;
            }
        }
        for (&base, c) in &self.chunks {
            let size = c.size;
            reserved += size;
            let mut at = base;
            let mut prev_free = false;
            while at < base + size {
                let p = self
                    .pieces
                    .get(&at)
                    .ok_or_else(|| format!("gap at {at:#x} in chunk {base:#x}"))?;
                if p.chunk != base {
                    return Err(format!(
                        "piece {at:#x} names chunk {:#x}, lies in {base:#x}",
                        p.chunk
                    ));
                }
                if p.free {
                    if prev_free {
                        return Err(format!("unmerged free neighbours at {at:#x}"));
                    }
                    if !self.free.contains(&(p.size, at)) {
                        return Err(format!("free piece {at:#x} not indexed"));
                    }
                } else {
                    in_use += p.size;
                }
                prev_free = p.free;
                at += p.size;
            }
            if at != base + size {
                return Err(format!("pieces overrun chunk {base:#x}"));
            }
        }
        let piece_total: usize = self.pieces.values().map(|p| p.size).sum();
        if piece_total != reserved {
            return Err(format!(
                "pieces cover {piece_total} bytes, chunks {reserved}"
            ));
        }
        if self.free.len() != self.pieces.values().filter(|p| p.free).count() {
            return Err("free index out of date".into());
        }
        // Quick-listed pieces are marked in use in `pieces` but are cached.
        let in_use = in_use - quick_total;
        if in_use != self.in_use || reserved != self.reserved {
            return Err(format!(
                "counters {}/{} != recount {in_use}/{reserved}",
                self.in_use, self.reserved
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::backend::CpuBackend;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Step {
        Alloc(usize),
        Free(usize),
        Shrink,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            // log-uniform sizes from 1 B to 32 MiB
            4 => (0u32..25).prop_flat_map(|e| (1usize << e)..=(1usize << (e + 1))).prop_map(Step::Alloc),
            3 => any::<usize>().prop_map(Step::Free),
            1 => Just(Step::Shrink),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Random alloc/free/shrink traces: no overlap, 64-byte alignment, counters equal a
        /// recount, `in_use` equals the model's, and freeing everything then shrinking returns
        /// every byte to the backend.
        #[test]
        fn random_traces_keep_the_invariants(steps in proptest::collection::vec(step(), 1..120)) {
            let backend = CpuBackend::new(Some(256 << 20));
            let mut a = CachingAllocator::new();
            let mut live: Vec<(NonNull<u8>, usize)> = Vec::new(); // (piece, rounded) — the model
            for s in steps {
                match s {
                    Step::Alloc(n) => {
                        if let Some((p, rounded)) = a.allocate(n, &backend) {
                            let addr = p.as_ptr() as usize;
                            prop_assert_eq!(addr % 64, 0);
                            prop_assert!(rounded >= n);
                            for &(b, sz) in &live {
                                let b = b.as_ptr() as usize;
                                prop_assert!(addr + rounded <= b || b + sz <= addr, "overlap");
                            }
                            live.push((p, rounded));
                        }
                    }
                    Step::Free(i) if !live.is_empty() => {
                        let (p, _) = live.swap_remove(i % live.len());
                        a.free(p);
                    }
                    Step::Free(_) => {}
                    Step::Shrink => {
                        a.shrink(&backend);
                    }
                }
                a.check_invariants().map_err(TestCaseError::fail)?;
                prop_assert_eq!(a.in_use(), live.iter().map(|l| l.1).sum::<usize>());
                prop_assert_eq!(backend.used(), a.reserved());
            }
            for (p, _) in live.drain(..) {
                a.free(p);
            }
            a.shrink(&backend);
            prop_assert_eq!(a.reserved(), 0);
            prop_assert_eq!(backend.used(), 0);
        }
    }

    #[test]
    fn best_fit_split_and_merge() {
        let backend = CpuBackend::new(None);
        let mut a = CachingAllocator::new();
        let (p1, s1) = a.allocate(1000, &backend).unwrap();
        let (p2, _) = a.allocate(1000, &backend).unwrap();
        assert_eq!(s1, 1024);
        assert_eq!(
            p2.as_ptr() as usize,
            p1.as_ptr() as usize + 1024,
            "split from the same chunk"
        );
        assert_eq!(a.chunk_count(), 1);
        a.free(p1);
        a.free(p2);
        a.check_invariants().unwrap();
        // Merged back into one free piece covering the chunk: shrink returns it.
        assert_eq!(a.shrink(&backend), 2 << 20);
        assert_eq!(backend.used(), 0);
    }

    #[test]
    fn a_small_free_goes_to_its_quick_list_and_serves_the_next_request_of_that_size() {
        let backend = CpuBackend::new(None);
        let mut a = CachingAllocator::new();
        let (p1, s1) = a.allocate(3000, &backend).unwrap();
        let (p2, _) = a.allocate(3000, &backend).unwrap();
        a.free(p1);
        a.check_invariants().unwrap();
        assert_eq!(a.in_use(), s1, "the quick-listed piece counts as cached");
        let (p3, s3) = a.allocate(2600, &backend).unwrap();
        assert_eq!(
            (p3, s3),
            (p1, s1),
            "same rounded size: the quick piece comes back"
        );
        a.free(p3);
        a.free(p2);
        // Both pieces sit on a quick list, unmerged; shrink merges them and returns the chunk.
        assert_eq!(a.shrink(&backend), 2 << 20);
        assert_eq!((a.reserved(), backend.used()), (0, 0));
        a.check_invariants().unwrap();
    }

    #[test]
    fn near_capacity_grows_by_the_request_only() {
        let backend = CpuBackend::new(Some(1 << 20));
        let mut a = CachingAllocator::new();
        let (p, _) = a
            .allocate(600 << 10, &backend)
            .expect("a 2 MiB chunk does not fit; the request does");
        assert!(a.allocate(600 << 10, &backend).is_none());
        assert!(
            a.allocate(usize::MAX, &backend).is_none(),
            "overflow is a failure, not a panic"
        );
        a.free(p);
        assert_eq!(a.shrink(&backend), 600 << 10);
        assert_eq!(backend.used(), 0);
    }
}
