//! A window's notes (where each call's operands come from, and the buffers they are kept in)
//! and its held calls.

use crate::Counted;
use crate::blob::{Blob, NO_STREAM};
use crate::captured::Captured;
use crate::error::Result;

use crate::stream::StreamId;
use smallvec::SmallVec;
use std::sync::atomic::Ordering::Relaxed;
use std::thread::ThreadId;

/// Where an operand comes from, within a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ref {
    /// Blob `k` from before the window, by first use.
    Outer(u32),
    /// Made by call `i`, its output `k`.
    Made(u32, u32),
}

/// One call's notes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Note {
    pub(super) name: u64,
    pub(super) stream: StreamId,
    pub(super) inputs: SmallVec<[Ref; 3]>,
    /// Each output: an operand already known, or a new blob of so many bytes.
    pub(super) outputs: SmallVec<[Result<Ref, u64>; 1]>,
}

/// A window's notes: its calls, the sizes of the blobs from before it, and which blobs made
/// in it are still held at its end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Notes {
    pub(super) calls: Vec<Note>,
    pub(super) outer_bytes: Vec<usize>,
    pub(super) kept: Vec<bool>,
}

/// What a held window keeps, in order, to run as a plan or as usual.
pub(super) enum Held {
    Op(Captured),
    Release(Counted<Blob>, bool),
}

/// The calls of one thread since its last host access.
#[derive(Default)]
pub(super) struct Window {
    pub(super) owner: Option<ThreadId>,
    /// Set when the window notes its first call (0: none yet); see [`Window::find`].
    pub(super) epoch: u32,
    pub(super) notes: Notes,
    /// The blobs from before the window, by first use.
    pub(super) outer: Vec<Counted<Blob>>,
    /// The blobs made in the window, in order, and whether each was released in it.
    pub(super) made: Vec<(Counted<Blob>, bool)>,
    /// The call and output that made each of `made` (in call order, so sorted).
    pub(super) made_at: Vec<(usize, usize)>,
    /// Holding this window's calls: they match the notes of the windows seen at `live` so far.
    pub(super) holding: bool,
    pub(super) live: Vec<usize>,
    pub(super) held: Vec<Held>,
    /// Running eagerly unnoted: the window began like the kind of this id, whose plan runs
    /// lose for now (see `Vm::promotion_op`).
    pub(super) quiet: Option<u64>,
}

/// The buffers of the last window, emptied, for the next: a long window's notes are
/// written to memory already touched, not to fresh pages each time.
#[derive(Default)]
pub(super) struct Spare {
    pub(super) calls: Vec<Note>,
    pub(super) outer: Vec<Counted<Blob>>,
    pub(super) made: Vec<(Counted<Blob>, bool)>,
    pub(super) made_at: Vec<(usize, usize)>,
}

impl Spare {
    /// Keeps the buffers of the ended window `w`, emptied.
    pub(super) fn keep(&mut self, mut w: Window) {
        w.outer.clear();
        w.made.clear();
        w.made_at.clear();
        self.outer = w.outer;
        self.made = w.made;
        self.made_at = w.made_at;
    }

    /// Gives the window `w`, which has noted nothing yet (its buffers are empty), the buffers
    /// kept.
    pub(super) fn lend(&mut self, w: &mut Window) {
        std::mem::swap(&mut w.notes.calls, &mut self.calls);
        std::mem::swap(&mut w.outer, &mut self.outer);
        std::mem::swap(&mut w.made, &mut self.made);
        std::mem::swap(&mut w.made_at, &mut self.made_at);
    }
}

/// A kernel's name as a number (FNV-1a).
fn hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Where a window knows a blob from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Found {
    /// The `k`th blob from before the window.
    Outer(usize),
    /// The `m`th blob made in it.
    Made(usize),
}

/// A mark's bit for a blob made in the window; below it, the index.
const MADE: u64 = 1 << 31;

impl Window {
    /// Where this window knows `b` from: the blob's mark, if this window set it. (A mark holds
    /// the window's epoch above bit 32, so marks of earlier windows read as none; no map from
    /// blob ids is kept.)
    pub(super) fn find(&self, b: &Blob) -> Option<Found> {
        let tag = b.promotion_tag();
        if self.epoch == 0 || tag >> 32 != u64::from(self.epoch) {
            return None;
        }
        let at = (tag & (MADE - 1)) as usize;
        Some(if tag & MADE != 0 {
            Found::Made(at)
        } else {
            Found::Outer(at)
        })
    }

    /// Marks `b` as known from `found` in this window.
    fn mark(&self, b: &Blob, found: Found) {
        let (made, at) = match found {
            Found::Outer(k) => (0, k),
            Found::Made(m) => (MADE, m),
        };
        debug_assert!((at as u64) < MADE, "a window of over 2^31 blobs");
        b.set_promotion_tag(u64::from(self.epoch) << 32 | made | at as u64);
    }

    /// The operand reference of a blob found in the window.
    fn reference(&self, found: Found) -> Ref {
        match found {
            Found::Outer(k) => Ref::Outer(k as u32),
            Found::Made(m) => {
                let (i, k) = self.made_at[m];
                Ref::Made(i as u32, k as u32)
            }
        }
    }

    /// Registers `b` as the next blob from before the window.
    fn register_outer(&mut self, b: &Counted<Blob>) -> Ref {
        self.mark(b, Found::Outer(self.outer.len()));
        self.outer.push(b.clone());
        self.notes.outer_bytes.push(b.bytes());
        Ref::Outer(self.outer.len() as u32 - 1)
    }

    /// Notes a call (registering the blobs it makes); its note is the last of `notes.calls`.
    pub(super) fn note(
        &mut self,
        name: &str,
        stream: StreamId,
        ins: &[&Counted<Blob>],
        outs: &[&Counted<Blob>],
    ) {
        let i = self.notes.calls.len();
        let mut inputs = SmallVec::new();
        for b in ins {
            let r = match self.find(b) {
                Some(found) => self.reference(found),
                None => self.register_outer(b),
            };
            inputs.push(r);
        }
        let mut outputs = SmallVec::new();
        for (k, b) in outs.iter().enumerate() {
            let o = match self.find(b) {
                Some(found) => Ok(self.reference(found)),
                // A blob that an instruction used before the window: this call writes over
                // its values (and may read them, as an in-place op does, or write only some),
                // so it comes from before the window, as an operand read would.
                None if b.last_used_stream.load(Relaxed) != NO_STREAM => Ok(self.register_outer(b)),
                None => {
                    self.mark(b, Found::Made(self.made.len()));
                    self.made.push(((*b).clone(), false));
                    self.made_at.push((i, k));
                    Err(b.bytes() as u64)
                }
            };
            outputs.push(o);
        }
        let note = Note {
            name: hash(name),
            stream,
            inputs,
            outputs,
        };
        self.notes.calls.push(note);
    }

    /// Room for a window of `calls` calls (about as many blobs made, and fewer from before).
    pub(super) fn reserve(&mut self, calls: usize) {
        self.notes.calls.reserve(calls);
        self.made.reserve(calls);
        self.made_at.reserve(calls);
        if self.holding {
            self.held.reserve(2 * calls);
        }
    }

    /// Ends the window: which made blobs are still held, and everything it held.
    pub(super) fn close(&mut self) -> (Notes, Window) {
        let mut w = std::mem::take(self);
        let mut notes = std::mem::take(&mut w.notes);
        notes.kept = (w.made.iter())
            .map(|(b, released)| !released && !b.is_released())
            .collect();
        (notes, w)
    }
}
