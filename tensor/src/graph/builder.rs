//! The bookkeeping of a trace: which plan slot each blob of the captured calls becomes, and
//! the checks that refuse a closure whose trace a replay could not reproduce.
//!
//! A replay runs the captured calls, nothing else: the closure is not called again. So a
//! closure is refused (with `InvalidArgument`, before anything runs) where a replay would
//! differ from calling it again eagerly:
//!
//! - its ops run on another device than its inputs (a copy to another device inside);
//! - it uses a tensor made during the trace by no captured call (another thread's op, an op
//!   on another engine): nothing would write it at a replay;
//! - it keeps a view of an input beyond the run: at a replay it would still view the first
//!   run's input;
//! - it reads a tensor from before the trace that nothing holds after it (state it replaced,
//!   such as a recurrent state in an `Rc`): a replay would read the old value again;
//! - it makes a tensor that outlives it from nothing (state made on a first call).
//!
//! Whatever the reason a trace is refused, the tensors it made that are still held outside
//! the closure carry the refusal as their error: they have no values.

use super::OutSpec;
use crate::{Caller, Error, Tensor};
use eddy_vm::plan::{Captured, Slot};
use eddy_vm::{Blob, Counted, StreamId};
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

/// Maps the trace's blobs to the plan's slots.
pub(super) struct Builder {
    /// Blobs made after this id were made by the trace.
    floor: u64,
    slots: HashMap<u64, Slot>,
    pub(super) out_sizes: Vec<usize>,
    pub(super) temp_sizes: Vec<usize>,
    pub(super) fixed: Vec<Counted<Blob>>,
    /// The trace's blobs, by id, kept to check what outlived the trace.
    made: HashMap<u64, Counted<Blob>>,
    /// Every blob the trace made, for a refusal to mark those still held.
    all_made: Vec<Counted<Blob>>,
    /// The blobs some captured call writes.
    written: HashSet<u64>,
    /// How many handles each input's blob had before the trace.
    input_holders: Vec<usize>,
    /// The call that first wrote each blob, by id.
    makers: HashMap<u64, Caller>,
}

/// Why a trace is refused: the message of its `InvalidArgument`.
pub(super) type Refusal = String;

impl Builder {
    /// The builder of a trace on inputs `xs`, before the closure runs: blobs made after
    /// `floor` are the trace's.
    pub(super) fn new(xs: &[Tensor], floor: u64) -> Builder {
        let slots = xs
            .iter()
            .enumerate()
            .map(|(k, x)| (x.blob().id(), Slot::Input(k)))
            .collect();
        Builder {
            floor,
            slots,
            out_sizes: Vec::new(),
            temp_sizes: Vec::new(),
            fixed: Vec::new(),
            made: HashMap::new(),
            all_made: Vec::new(),
            written: HashSet::new(),
            input_holders: xs.iter().map(|x| x.blob().holders()).collect(),
            makers: HashMap::new(),
        }
    }

    /// Notes the blobs of a captured op: a blob made before the trace and not an input is
    /// fixed; one made by it is kept until its slot is known.
    pub(super) fn note(&mut self, op: &Captured) {
        for o in &op.outputs {
            self.written.insert(o.id());
            self.makers.entry(o.id()).or_insert(op.at);
        }
        for x in op.inputs.iter().chain(&op.outputs) {
            if self.slots.contains_key(&x.id()) {
                continue;
            }
            if x.id() > self.floor {
                if let Entry::Vacant(e) = self.made.entry(x.id()) {
                    e.insert(x.clone());
                    self.all_made.push(x.clone());
                }
            } else {
                self.slots.insert(x.id(), Slot::Fixed(self.fixed.len()));
                self.fixed.push(x.clone());
            }
        }
    }

    /// Where a returned tensor comes from.
    pub(super) fn output(&mut self, t: &Tensor) -> OutSpec {
        let (dtype, layout) = (t.dtype(), t.layout().clone());
        let id = t.blob().id();
        match self.slots.get(&id) {
            Some(Slot::Input(k)) => return OutSpec::Input { input: *k, layout },
            Some(Slot::Output(k)) => {
                return OutSpec::Made {
                    blob: *k,
                    dtype,
                    layout,
                };
            }
            Some(Slot::Fixed(_)) | Some(Slot::Temp(_)) | None => {}
        }
        if id > self.floor {
            let k = self.out_sizes.len();
            self.out_sizes.push(t.blob().bytes());
            self.slots.insert(id, Slot::Output(k));
            if self.made.remove(&id).is_none() {
                self.all_made.push(t.blob().clone());
            }
            OutSpec::Made {
                blob: k,
                dtype,
                layout,
            }
        } else {
            OutSpec::Fixed {
                blob: t.blob().clone(),
                dtype,
                layout,
                loc: t.place().loc,
            }
        }
    }

    /// Every blob the trace made that is not an output becomes a temporary, in order of first
    /// use.
    pub(super) fn temps_from(&mut self, ops: &[Captured]) {
        for op in ops {
            for x in op.inputs.iter().chain(&op.outputs) {
                if x.id() > self.floor && !self.slots.contains_key(&x.id()) {
                    self.slots.insert(x.id(), Slot::Temp(self.temp_sizes.len()));
                    self.temp_sizes.push(x.bytes());
                }
            }
        }
    }

    /// Checks what a replay could not reproduce (see the module's docs), once every handle of
    /// the trace (its results, the inputs' aliases) is gone. The blobs made and kept outside
    /// the closure (a parameter's `grad` after a `backward` inside) become fixed blobs of the
    /// plan: each run writes them, so they hold the last run's values, as after an eager call.
    pub(super) fn check(
        &mut self,
        ops: &[Captured],
        xs: &[Tensor],
        vm: &eddy_vm::Vm,
        stream: StreamId,
    ) -> std::result::Result<(), Refusal> {
        let device = |s: StreamId| {
            vm.stream_policy(s)
                .map_or_else(|| s.to_string(), |p| p.device().to_string())
        };
        if let Some(op) = ops.iter().find(|op| op.stream != stream) {
            let (other, device) = (device(op.stream), device(stream));
            return Err(format!(
                "the closure's `{}` runs on {other}, its inputs live on {device}: a graph \
                 runs on its inputs' device (copy the results after the run)",
                op.kernel.name()
            ));
        }
        // Made by the trace (read by a call, or returned) and written by none of its calls.
        let unwritten =
            (self.all_made.iter()).find(|b| b.bytes() > 0 && !self.written.contains(&b.id()));
        if unwritten.is_some() {
            return Err(
                "the closure uses a tensor made during the trace but not made by the \
                        closure's ops (by another thread, say): a replay would not compute it"
                    .into(),
            );
        }
        for (k, x) in xs.iter().enumerate() {
            if x.blob().holders() > self.input_holders[k] {
                return Err(format!(
                    "the closure keeps a view of input {k} beyond the run: at a replay it \
                     would still view the first run's input (return it instead)"
                ));
            }
        }
        if let Some(op) = (ops.iter())
            .find(|op| (op.inputs.iter()).any(|b| b.id() <= self.floor && b.holders() == 0))
        {
            return Err(format!(
                "the closure's `{}` reads a tensor that nothing holds after the trace: state \
                 the closure replaces would be read as it was at the trace by every replay",
                op.kernel.name()
            ));
        }
        self.keep_escapes(ops)
    }

    /// The blobs the trace made that a tensor outside the closure still views become fixed
    /// blobs of the plan. One whose first writer reads nothing (state the closure made, such
    /// as a zeroed buffer) refuses the graph: each run would make it again.
    fn keep_escapes(&mut self, ops: &[Captured]) -> std::result::Result<(), Refusal> {
        let mut kept: Vec<(u64, Counted<Blob>)> = self
            .made
            .iter()
            .filter(|(_, b)| b.holders() > 0)
            .map(|(id, b)| (*id, b.clone()))
            .collect();
        kept.sort_unstable_by_key(|k| k.0);
        let first = |id: u64| {
            ops.iter()
                .find(|op| op.outputs.iter().any(|o| o.id() == id))
        };
        let made_anew = kept
            .iter()
            .find_map(|(id, _)| first(*id).filter(|op| op.inputs.is_empty()));
        if let Some(op) = made_anew {
            return Err(format!(
                "the closure makes a tensor (with `{}`) that outlives it: state made on a first \
                 call would be made again at every run; take one eager step first, or return \
                 the tensor",
                op.kernel.name()
            ));
        }
        for (id, b) in kept {
            self.made.remove(&id);
            self.slots.insert(id, Slot::Fixed(self.fixed.len()));
            self.fixed.push(b);
        }
        Ok(())
    }

    /// The trace is refused: each tensor it made that is still held outside the closure
    /// carries the error (it has no values), naming the call that made it.
    pub(super) fn refuse(&self) {
        for b in self.all_made.iter().filter(|b| b.holders() > 0) {
            let at = self.makers.get(&b.id()).copied().unwrap_or(Caller::UNKNOWN);
            b.poison_with(&eddy_vm::Error::InvalidArgument {
                at,
                op: "graph".into(),
                message: "this tensor was made inside a graph's closure that was refused: it \
                          has no values"
                    .into(),
            });
        }
    }

    pub(super) fn slot(&self, x: &Counted<Blob>) -> Slot {
        self.slots[&x.id()]
    }
}

/// The typed error of a refusal at `at`.
pub(super) fn refused(at: Caller, message: Refusal) -> Error {
    Error::InvalidArgument {
        at,
        op: "graph",
        message,
    }
}
