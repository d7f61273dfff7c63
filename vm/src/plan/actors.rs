//! The actor runtime: a plan's steps as actors that hand registers on by message.
//!
//! Each step is an actor. Each value one step makes and others read is a *register* with a set
//! number of *slots*, each slot its own memory; so is each ordering between two steps that
//! touch one blob of the run (a zero-byte register). An actor acts on its next run when every
//! register it reads has a readable slot of that run and every register it writes has a free
//! slot. Acting, it runs its kernel, then sends each reader of its registers a "readable"
//! message and each producer of what it read an acknowledgement; a slot is free again once
//! every reader has acknowledged it. That is the back-pressure: a producer whose slots are all
//! out stops, with no central scheduler. With one slot a producer waits for its readers before
//! it makes the next run's value; with two, producer and reader work on consecutive runs at
//! once, so consecutive runs pipeline.
//!
//! Actors run on the runtime's threads (an actor on one thread at a time; its state behind its
//! own lock, which a sender holds only to post a message). A run ends when its last actor has
//! acted: its written blobs get their errors, the engine's instruction for it completes (an
//! event) and the engine is woken. Dropping the runtime stops its threads once their work is
//! done; a run cannot be in flight then, as the engine's instruction for it holds the plan.

use super::Slot;
use super::board::{Board, Taken, Wire};
use super::failures::{all_inherited, inherited, record, settle};
use crate::Counted;
use crate::alloc::DeviceAllocator;
use crate::blob::Blob;
use crate::error::{Caller, Error};
use crate::instruction::{ComputeCtx, Kernel};
use crate::shared::Shared;
use crate::stream::{Event, StreamId, StreamPolicy};
use parking_lot::Mutex;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

/// How a plan runs its steps as actors.
///
/// # Examples
///
/// ```
/// use eddy_vm::plan::Actors;
/// let a = Actors::new(2, 4);
/// assert_eq!((a.slots(), a.threads()), (2, 4));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Actors {
    slots: usize,
    threads: usize,
}

impl Actors {
    /// Registers of `slots` slots (at least 1), actors on `threads` threads (at least 1).
    pub fn new(slots: usize, threads: usize) -> Actors {
        Actors {
            slots: slots.max(1),
            threads: threads.max(1),
        }
    }

    /// The slots of each register.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The runtime's threads.
    pub fn threads(&self) -> usize {
        self.threads
    }
}

/// The stand-in a step keeps for the kernel its actor runs.
pub(super) struct Moved(pub(super) String);

impl Kernel for Moved {
    fn name(&self) -> &str {
        &self.0
    }
    fn compute(
        &mut self,
        _: &[Counted<Blob>],
        _: &[Counted<Blob>],
        _: &mut ComputeCtx<'_>,
    ) -> crate::Result<()> {
        Err(Error::kernel(&self.0, "the kernel runs in its actor"))
    }
}

/// A register of the plan: who makes it, who reads it, and each slot's blob.
pub(super) struct Register {
    pub(super) producer: usize,
    /// Each reader, and the register's position among the reader's inputs.
    pub(super) consumers: Vec<(usize, usize)>,
    /// The temporary it holds (`None`: an ordering only), and its blob per slot.
    pub(super) temp: Option<usize>,
    pub(super) blobs: Vec<Counted<Blob>>,
}

/// What the runtime needs of one step.
pub(super) struct ActorSpec {
    pub(super) kernel: Box<dyn Kernel>,
    pub(super) inputs: Vec<Slot>,
    pub(super) outputs: Vec<Slot>,
    pub(super) depends: Option<Vec<Vec<usize>>>,
    pub(super) at: Caller,
    /// The registers it reads and writes.
    pub(super) consumes: Vec<usize>,
    pub(super) produces: Vec<usize>,
}

/// Where the runtime runs kernels.
pub(super) struct Place {
    pub(super) stream: StreamId,
    pub(super) policy: Arc<dyn StreamPolicy>,
    pub(super) allocator: Arc<DeviceAllocator>,
    pub(super) engine: Weak<Shared>,
}

struct Actor {
    kernel: Mutex<Box<dyn Kernel>>,
    inputs: Vec<Slot>,
    outputs: Vec<Slot>,
    depends: Option<Vec<Vec<usize>>>,
    at: Caller,
}

/// One run, as the actors see it.
pub(super) struct RunRec {
    pub(super) instr_id: u64,
    pub(super) inputs: Vec<Counted<Blob>>,
    pub(super) outputs: Vec<Counted<Blob>>,
    /// Every blob the run writes, with the slot it is (`None`: no slot, never failed).
    pub(super) written: Vec<(Counted<Blob>, Option<Slot>)>,
    /// The actors that have not acted on it.
    remaining: AtomicUsize,
    /// The slots that carry an error, and the error.
    failed: Mutex<Vec<(Slot, Error)>>,
    /// The first kernel error.
    root: Mutex<Option<Error>>,
    done: Arc<RunDone>,
}

impl RunRec {
    pub(super) fn new(
        instr_id: u64,
        inputs: Vec<Counted<Blob>>,
        outputs: Vec<Counted<Blob>>,
        written: Vec<(Counted<Blob>, Option<Slot>)>,
        failed: Vec<(Slot, Error)>,
    ) -> RunRec {
        RunRec {
            instr_id,
            inputs,
            outputs,
            written,
            remaining: AtomicUsize::new(0),
            failed: Mutex::new(failed),
            root: Mutex::new(None),
            done: Arc::new(RunDone(AtomicBool::new(false))),
        }
    }

    /// Complete once the run's last actor has acted and its blobs carry their errors.
    pub(super) fn done(&self) -> Arc<dyn Event> {
        self.done.clone()
    }
}

/// The end of a run, as an event the engine's instruction completes with.
struct RunDone(AtomicBool);

impl Event for RunDone {
    fn is_complete(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

struct Rt {
    board: Board<Arc<RunRec>>,
    actors: Vec<Actor>,
    /// Per register: the temporary it holds (`None`: an ordering only), its blob per slot.
    registers: Vec<(Option<usize>, Vec<Counted<Blob>>)>,
    fixed: Vec<Counted<Blob>>,
    place: Place,
    /// The next run's id, held while a run is handed to every actor (so all see one order).
    next: Mutex<u64>,
}

/// The runtime of one plan: its actors and threads.
pub(super) struct Runtime {
    rt: Arc<Rt>,
    threads: Vec<JoinHandle<()>>,
}

impl Runtime {
    /// Starts `config.threads()` threads for `actors` passing `registers` of `config.slots()`
    /// slots each.
    pub(super) fn new(
        actors: Vec<ActorSpec>,
        registers: Vec<Register>,
        fixed: Vec<Counted<Blob>>,
        place: Place,
        config: Actors,
    ) -> std::io::Result<Runtime> {
        let (mut consumes, mut produces) = (Vec::new(), Vec::new());
        let actors = actors
            .into_iter()
            .map(|a| {
                consumes.push(a.consumes);
                produces.push(a.produces);
                Actor {
                    kernel: Mutex::new(a.kernel),
                    inputs: a.inputs,
                    outputs: a.outputs,
                    depends: a.depends,
                    at: a.at,
                }
            })
            .collect();
        let (wires, registers) = registers
            .into_iter()
            .map(|r| {
                let wire = Wire {
                    producer: r.producer,
                    consumers: r.consumers,
                };
                (wire, (r.temp, r.blobs))
            })
            .unzip();
        let rt = Arc::new(Rt {
            board: Board::new(wires, consumes, produces, config.slots()),
            actors,
            registers,
            fixed,
            place,
            next: Mutex::new(0),
        });
        let mut threads = Vec::with_capacity(config.threads());
        for i in 0..config.threads() {
            let mine = rt.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("eddy-actors-{i}"))
                .spawn(move || mine.work());
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => {
                    // The threads started so far stop with the runtime.
                    drop(Runtime { rt, threads });
                    return Err(e);
                }
            }
        }
        Ok(Runtime { rt, threads })
    }

    /// Hands `run` to every actor.
    pub(super) fn start(&self, mut run: RunRec) {
        let rt = &self.rt;
        run.remaining = AtomicUsize::new(rt.actors.len());
        let run = Arc::new(run);
        if rt.actors.is_empty() {
            rt.finish(&run);
            return;
        }
        let mut next = rt.next.lock();
        rt.board.start(*next, run);
        *next += 1;
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.rt.board.stop();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Rt {
    /// A runtime thread: acts for the queued actors until the runtime stops.
    fn work(&self) {
        while let Some(a) = self.board.next() {
            // Act until the condition fails (then a message queues it again).
            while let Some(t) = self.board.take(a) {
                self.act(a, &t);
                self.board.acted(a, &t);
                if t.run.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
                    self.finish(&t.run);
                }
            }
        }
    }

    /// The blob of `slot` for actor `a` acting with `t`.
    fn blob<'a>(&'a self, a: usize, t: &'a Taken<Arc<RunRec>>, slot: Slot) -> &'a Counted<Blob> {
        match slot {
            Slot::Input(k) => &t.run.inputs[k],
            Slot::Output(k) => &t.run.outputs[k],
            Slot::Fixed(k) => &self.fixed[k],
            Slot::Temp(k) => {
                let (consumes, produces) = self.board.registers(a);
                let mine = |regs: &[usize], slots: &[usize]| {
                    regs.iter()
                        .zip(slots)
                        .find(|(r, _)| self.registers[**r].0 == Some(k))
                        .map(|(r, s)| &self.registers[*r].1[*s])
                };
                mine(produces, &t.write)
                    .or_else(|| mine(consumes, &t.read))
                    .expect("a temporary a step touches is one of its registers")
            }
        }
    }

    /// Runs actor `a`'s kernel on `t` (unless every output inherits a failed input), and
    /// records the errors of its outputs.
    fn act(&self, a: usize, t: &Taken<Arc<RunRec>>) {
        let actor = &self.actors[a];
        // The errors its outputs inherit from failed inputs.
        let mut inh = Vec::new();
        let (n, depends) = (actor.outputs.len(), actor.depends.as_deref());
        inherited(&t.run.failed.lock(), &actor.inputs, n, depends, &mut inh);
        let result = if all_inherited(&inh) {
            None
        } else {
            let ins: Vec<Counted<Blob>> = (actor.inputs.iter())
                .map(|&s| self.blob(a, t, s).clone())
                .collect();
            let outs: Vec<Counted<Blob>> = (actor.outputs.iter())
                .map(|&s| self.blob(a, t, s).clone())
                .collect();
            let mut ctx = ComputeCtx {
                instr_id: t.run.instr_id,
                stream_id: self.place.stream,
                stream: &*self.place.policy,
                allocator: &self.place.allocator,
                completion: None,
            };
            let mut kernel = actor.kernel.lock();
            let r = catch_unwind(AssertUnwindSafe(|| kernel.compute(&ins, &outs, &mut ctx)));
            Some(match r {
                Ok(r) => r.map_err(|e| e.with_instr_id(t.run.instr_id).at(actor.at)),
                Err(panic) => Err(Error::KernelPanic {
                    at: actor.at,
                    op: kernel.name().to_string(),
                    instr_id: t.run.instr_id,
                    message: crate::error::panic_message(&*panic),
                }),
            })
        };
        let error = result.as_ref().and_then(|r| r.as_ref().err());
        record(&mut t.run.failed.lock(), &actor.outputs, &inh, error);
        if let Some(Err(e)) = result {
            t.run.root.lock().get_or_insert(e);
        }
    }

    /// The end of a run: each written blob carries its error or none, the first kernel error
    /// goes to the engine's list, and the engine learns the run is done.
    fn finish(&self, run: &RunRec) {
        settle(run.written.iter().map(|(b, s)| (b, *s)), &run.failed.lock());
        let engine = self.place.engine.upgrade();
        if let (Some(e), Some(sh)) = (run.root.lock().take(), &engine) {
            sh.record_error(run.instr_id, e);
        }
        run.done.0.store(true, Ordering::Release);
        if let Some(sh) = engine {
            sh.pending.notifier.notify();
        }
    }
}

/// The registers of a plan run by actors: who makes and who reads each, and which registers
/// each step reads and writes.
pub(super) struct Wiring {
    /// Per register: its producer, its readers and the temporary it holds.
    pub(super) registers: Vec<(usize, Vec<usize>, Option<usize>)>,
    /// Per step: the registers it reads, then those it writes.
    pub(super) consumes: Vec<Vec<usize>>,
    pub(super) produces: Vec<Vec<usize>>,
}

impl Wiring {
    /// A register per temporary (made by one step, read by later ones) and a zero-byte one per
    /// ordering two steps need on a blob of the run (one writes what the other reads or
    /// writes). A step's position among its reader's registers is where the reader finds it.
    ///
    /// # Errors
    ///
    /// A message for a temporary written by two steps, or read before it is written.
    pub(super) fn of(steps: &[super::Step], temps: usize) -> Result<Wiring, String> {
        let n = steps.len();
        let mut wiring = Wiring {
            registers: Vec::new(),
            consumes: vec![Vec::new(); n],
            produces: vec![Vec::new(); n],
        };
        let add = |w: &mut Wiring, producer: usize, readers: Vec<usize>, temp| {
            let r = w.registers.len();
            w.produces[producer].push(r);
            for &c in &readers {
                w.consumes[c].push(r);
            }
            w.registers.push((producer, readers, temp));
        };
        // Temporaries.
        let mut producer: Vec<Option<usize>> = vec![None; temps];
        let mut readers: Vec<Vec<usize>> = vec![Vec::new(); temps];
        for (i, s) in steps.iter().enumerate() {
            for &x in &s.inputs {
                if let Slot::Temp(k) = x {
                    if producer[k].is_none() {
                        return Err(format!(
                            "temporary {k} is read by step {i} before a step writes it"
                        ));
                    }
                    if !readers[k].contains(&i) && producer[k] != Some(i) {
                        readers[k].push(i);
                    }
                }
            }
            for &x in &s.outputs {
                if let Slot::Temp(k) = x {
                    if let Some(p) = producer[k].filter(|&p| p != i) {
                        return Err(format!(
                            "temporary {k} is written by steps {p} and {i}: a register has one producer"
                        ));
                    }
                    producer[k] = Some(i);
                }
            }
        }
        for k in 0..temps {
            if let Some(p) = producer[k] {
                add(&mut wiring, p, std::mem::take(&mut readers[k]), Some(k));
            }
        }
        // Orderings on the run's other blobs: a read after a write, a write after reads or
        // after a write.
        let mut edges: Vec<(usize, usize)> = Vec::new();
        let mut others: Vec<Slot> = Vec::new();
        for s in steps {
            for &x in s.inputs.iter().chain(&s.outputs) {
                if !matches!(x, Slot::Temp(_)) && !others.contains(&x) {
                    others.push(x);
                }
            }
        }
        for x in others {
            let (mut writer, mut reads): (Option<usize>, Vec<usize>) = (None, Vec::new());
            for (i, s) in steps.iter().enumerate() {
                let (r, w) = (s.inputs.contains(&x), s.outputs.contains(&x));
                if !(r || w) {
                    continue;
                }
                if let Some(p) = writer.filter(|&p| p != i) {
                    edges.push((p, i));
                }
                if w {
                    edges.extend(reads.iter().filter(|&&q| q != i).map(|&q| (q, i)));
                    writer = Some(i);
                    reads.clear();
                } else {
                    reads.push(i);
                }
            }
        }
        edges.sort_unstable();
        edges.dedup();
        for (p, c) in edges {
            add(&mut wiring, p, vec![c], None);
        }
        Ok(wiring)
    }
}
