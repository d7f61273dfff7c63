//! The live accesses of one dependence and the edge rules of the book's lifecycle chapter.
//!
//! A dependence's live accesses always have the shape `[W?] R*`: at most one leading writer,
//! then readers. The list is owned by the scheduler: it lives in a `QCell` whose owner is the
//! scheduler's, so only code holding the scheduler (`&mut Scheduler`) can read or change it.
//!
//! | new access | edges from | list afterwards |
//! |---|---|---|
//! | read | the leading writer, if live and on another stream | appended |
//! | write | every live access on another stream | only the new write |
//!
//! Accesses on the same stream need no edge: each stream dispatches in submission order and runs
//! FIFO, which is what the stream's sequential dependence guarantees. A stream whose
//! instructions may complete out of order (a lazy-job launcher, whose runs end when their
//! actors do) tags each access with a stream of its own, so its accesses get edges as across
//! streams.

use smallvec::SmallVec;

/// One live access: the instruction's slot and its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Access {
    pub slot: u32,
    pub stream: u32,
}

/// The live accesses of a dependence, `[W?] R*`.
#[derive(Default, Debug)]
pub(crate) struct AccessList {
    pub writer: Option<Access>,
    pub readers: SmallVec<[Access; 4]>,
}

impl AccessList {
    /// Registers a read by `a`, calling `edge(from)` for the edge it needs.
    #[inline]
    pub fn read(&mut self, a: Access, mut edge: impl FnMut(u32)) {
        if self.readers.last() == Some(&a) {
            return; // read just before by the same unit: edged then
        }
        if let Some(w) = self.writer {
            if w.slot == a.slot {
                // The same unit (a fused group) wrote it: its write already orders every later
                // access, and leaves with it.
                return;
            }
            if w.stream != a.stream {
                edge(w.slot);
            }
        }
        self.readers.push(a);
    }

    /// Registers a write by `a`, calling `edge(from)` for each edge it needs.
    #[inline]
    pub fn write(&mut self, a: Access, mut edge: impl FnMut(u32)) {
        if let Some(w) = self.writer
            && w.stream != a.stream
            && w.slot != a.slot
        {
            edge(w.slot);
        }
        for r in self.readers.drain(..) {
            if r.stream != a.stream && r.slot != a.slot {
                edge(r.slot);
            }
        }
        self.writer = Some(a);
    }

    /// Removes every access of `slot` (called when it is released).
    #[inline]
    pub fn remove(&mut self, slot: u32) {
        if self.writer.is_some_and(|w| w.slot == slot) {
            self.writer = None;
        }
        if self.readers.iter().any(|r| r.slot == slot) {
            self.readers.retain(|r| r.slot != slot);
        }
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.writer.is_none() && self.readers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edges(f: impl FnOnce(&mut dyn FnMut(u32))) -> Vec<u32> {
        let mut v = vec![];
        f(&mut |s| v.push(s));
        v
    }

    #[test]
    fn readers_never_edge_each_other_and_writer_edges_all() {
        let mut l = AccessList::default();
        let w = Access { slot: 1, stream: 0 };
        assert!(edges(|e| l.write(w, e)).is_empty());
        // Readers on another stream depend on the writer only.
        assert_eq!(edges(|e| l.read(Access { slot: 2, stream: 1 }, e)), vec![1]);
        assert_eq!(edges(|e| l.read(Access { slot: 3, stream: 2 }, e)), vec![1]);
        // A same-stream reader needs no edge (FIFO).
        assert!(edges(|e| l.read(Access { slot: 4, stream: 0 }, e)).is_empty());
        // A writer on stream 1 waits for the writer and every reader not on stream 1.
        let mut got = edges(|e| l.write(Access { slot: 5, stream: 1 }, e));
        got.sort();
        assert_eq!(got, vec![1, 3, 4]);
        assert_eq!(l.writer, Some(Access { slot: 5, stream: 1 }));
        assert!(l.readers.is_empty());
    }

    #[test]
    fn a_unit_reading_what_it_wrote_or_read_adds_nothing() {
        let mut l = AccessList::default();
        let a = Access { slot: 1, stream: 0 };
        l.write(a, |_| {});
        l.read(a, |_| panic!("no edge to itself"));
        assert!(l.readers.is_empty(), "covered by its own write");
        let b = Access { slot: 2, stream: 1 };
        assert_eq!(edges(|e| l.read(b, e)), vec![1]);
        assert!(edges(|e| l.read(b, e)).is_empty(), "no second edge");
        assert_eq!(l.readers.len(), 1, "no duplicate reader");
        // A writer on a third stream still waits for both, once each.
        let mut got = edges(|e| l.write(Access { slot: 3, stream: 2 }, e));
        got.sort();
        assert_eq!(got, vec![1, 2]);
    }

    #[test]
    fn remove_leaves_shape() {
        let mut l = AccessList::default();
        l.write(Access { slot: 1, stream: 0 }, |_| {});
        l.read(Access { slot: 2, stream: 1 }, |_| {});
        l.remove(1);
        assert!(l.writer.is_none());
        l.remove(2);
        assert!(l.is_empty());
    }
}
