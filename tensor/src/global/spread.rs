//! Boxing across processes (feature `mpi`). A group of ranks that spans processes first
//! gathers every rank's part into each process, as one engine instruction (`exchange`): it
//! reads this process's parts, hands their bytes to the communication thread for one
//! all-gather over the processes, and writes the other processes' parts. Then each process
//! runs the group's collective on those parts as in one process, for the ranks it holds.
//! Every process reduces the parts in the group's order, so their results agree bit for bit,
//! and equal the one-process result.
//!
//! Every process takes part in every such all-gather, also one whose group holds none of its
//! ranks (sending nothing): the processes' collectives then follow the program alone, one
//! order for all, and each carries the fingerprint that catches a program that branched.

use super::comm::{self, Call};
use super::{Global, Placement, ReduceKind, Sbp, show_sbp};
use crate::engine::Place;
use crate::{Caller, Result, Shape, Tensor};
use eddy_ops::global::component_ranges;
use eddy_vm::instruction::{ComputeCtx, InstructionPolicy, Kernel};
use eddy_vm::stream::StreamKind;
use eddy_vm::stream::transport::{Ticket, TransportStream};
use eddy_vm::{Blob, Counted};
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::collections::HashMap;

/// Every rank's part of group `group` (positions of `g`'s placement, laid out by `cur`, of
/// logical `dims`), in the group's order: this process's `mine` (`(k, part)` of the group's
/// `k`-th rank), the others' received, on this process's first device. `at`: the user's
/// call, which the fingerprint carries.
pub(super) fn exchange(
    g: &Global,
    dims: &[usize],
    group: &[usize],
    cur: &[Sbp],
    mine: &[(usize, Tensor)],
    at: Caller,
) -> Result<Vec<Tensor>> {
    let (p, held) = (g.placement, &g.held);
    let dtype = g.parts[0].dtype();
    let shapes: Vec<Vec<usize>> = (group.iter())
        .map(|&i| {
            component_ranges(dims, p, cur, i)
                .iter()
                .map(|r| r.len())
                .collect()
        })
        .collect();
    let bytes: Vec<usize> = (shapes.iter())
        .map(|s| s.iter().product::<usize>() * dtype.size_in_bytes())
        .collect();
    let processes = super::world()?.size;
    let mut counts = vec![0usize; processes];
    let mut at_in: Vec<usize> = Vec::with_capacity(group.len());
    for (k, &i) in group.iter().enumerate() {
        at_in.push(counts[held.process(p, i)]);
        counts[held.process(p, i)] += bytes[k];
    }
    let starts: Vec<usize> = (counts.iter())
        .scan(0, |s, &c| {
            let d = *s;
            *s += c;
            Some(d)
        })
        .collect();
    // Where each rank's bytes lie in what every process receives.
    let offsets: Vec<usize> = (group.iter().enumerate())
        .map(|(k, &i)| starts[held.process(p, i)] + at_in[k])
        .collect();
    let engine = g.parts[0].engine_ref();
    let device = g.device(held.position(0));
    let ins: Vec<Tensor> = (mine.iter())
        .map(|(_, t)| t.contiguous())
        .collect::<Result<_>>()?;
    let size = dtype.size_in_bytes();
    let sends: Vec<(usize, usize)> = (ins.iter())
        .map(|t| (t.layout().offset * size, t.numel() * size))
        .collect();
    let mut every: Vec<Option<Tensor>> = vec![None; group.len()];
    for ((k, _), t) in mine.iter().zip(&ins) {
        every[*k] = Some(t.clone());
    }
    let mut outs = Vec::new();
    let mut receives = Vec::new();
    // The process each received part comes from, and its bytes (for NCCL's receives).
    #[cfg(feature = "nccl")]
    let mut from = Vec::new();
    for (k, slot) in every.iter_mut().enumerate() {
        if slot.is_none() {
            let place = Place::on("exchange", engine.share(), device)?;
            let t = Tensor::empty_on(place, Shape::from(shapes[k].clone()), dtype)?;
            if bytes[k] > 0 {
                outs.push(t.clone());
                receives.push((offsets[k], bytes[k]));
                #[cfg(feature = "nccl")]
                from.push((held.process(p, group[k]), bytes[k]));
            }
            *slot = Some(t);
        }
    }
    if counts.iter().any(|&c| c > 0) {
        let layout = layout_text(p, cur, Some(p.ranks()[group[0]]));
        let small = counts.iter().all(|&c| c <= comm::CARRY);
        let call = Call {
            op: "exchange",
            layout,
            dtype,
            dims: dims.into(),
            at,
            bytes: counts[super::world()?.rank],
        };
        #[cfg(feature = "nccl")]
        if let crate::Device::Cuda(_) = device {
            // Device memory: NCCL moves it.
            let kernel = super::nccl::Exchange {
                call: Some(call),
                moves: super::nccl::Moves {
                    sends,
                    receives: from,
                },
            };
            let ins: Vec<&Counted<Blob>> = ins.iter().map(Tensor::blob).collect();
            let mut writes: Vec<&Counted<Blob>> = outs.iter().map(Tensor::blob).collect();
            writes.push(engine.transport());
            let stream = Place::on("exchange", engine.share(), device)?.loc.stream();
            let _turn = engine.transport_turn();
            engine
                .run_op(stream, kernel, &ins, &writes, false)
                .map_err(crate::Error::Vm)?;
            return Ok(every
                .into_iter()
                .map(|t| t.expect("every rank's part"))
                .collect());
        }
        let work: Work = Box::new(move |w, ins, outs| {
            let mut send = Vec::with_capacity(sends.iter().map(|s| s.1).sum());
            for (b, &(at, n)) in ins.iter().zip(&sends) {
                // SAFETY: the engine keeps the inputs readable until the work is done.
                send.extend_from_slice(&unsafe { b.bytes_ref() }[at..at + n]);
            }
            let all = comm::all_gather_bytes_on(w, call, send, counts)?;
            for (b, &(at, n)) in outs.iter().zip(&receives) {
                // SAFETY: the engine keeps the outputs exclusively writable until the work
                // is done.
                unsafe { b.bytes_mut()[..n].copy_from_slice(&all[at..at + n]) };
            }
            Ok(())
        });
        let ins: Vec<&Counted<Blob>> = ins.iter().map(Tensor::blob).collect();
        let outs: Vec<&Counted<Blob>> = outs.iter().map(Tensor::blob).collect();
        submit("exchange", engine, device, at, &ins, &outs, work, small)?;
    }
    Ok(every
        .into_iter()
        .map(|t| t.expect("every rank's part"))
        .collect())
}

/// `P → B` of a group with one rank in every process, by one all-reduce straight from this
/// process's part into its result (no copies, half the bytes of an exchange), where the
/// result is the same bits on every process and as in one process: any of at most
/// [`comm::CARRY`] bytes where fingerprints are exchanged (carried with them and reduced in
/// process order, a NaN winning a maximum or a minimum), and otherwise MPI's own for an
/// integer maximum or minimum or a sum of two (which MPI and one process both compute as
/// `a + b`). `None` elsewhere: a sum of three or more, whose order MPI does not fix; a float
/// maximum or minimum, where MPI fixes neither what a NaN gives nor which zero wins; a dtype
/// MPI does not reduce.
pub(super) fn all_reduce(
    g: &Global,
    dims: &[usize],
    group: &[usize],
    cur: &[Sbp],
    mine: &[(usize, Tensor)],
    kind: ReduceKind,
    at: Caller,
) -> Result<Option<Tensor>> {
    use crate::DType::{F32, F64, I32, I64};
    let (p, held) = (g.placement, &g.held);
    let w = super::world()?;
    let one_each = group.len() == w.size
        && (0..group.len()).all(|k| held.process(p, group[k]) == k)
        && mine.len() == 1;
    let dtype = g.parts[0].dtype();
    // Carried only where the fingerprints are exchanged (`EDDY_FINGERPRINTS` not `off`).
    let bytes = mine.first().map_or(0, |m| m.1.numel()) * dtype.size_in_bytes();
    let carried = bytes <= comm::CARRY && comm::fingerprints();
    let by_mpi = match kind {
        ReduceKind::Sum => group.len() == 2,
        ReduceKind::Max | ReduceKind::Min => !dtype.is_float(),
    };
    // Device memory takes the exchange (NCCL's, where built with it).
    let on_host = mine.first().is_some_and(|m| m.1.device().is_cpu());
    if !one_each || !on_host || !(carried || by_mpi) || !matches!(dtype, F32 | F64 | I32 | I64) {
        return Ok(None);
    }
    let x = mine[0].1.contiguous()?;
    let engine = x.engine_ref();
    let device = x.device();
    let place = Place::on("all_reduce", engine.share(), device)?;
    let out = Tensor::empty_on(place, x.shape().clone(), dtype)?;
    if x.numel() == 0 {
        return Ok(Some(out));
    }
    let call = Call {
        op: match kind {
            ReduceKind::Sum => "all_reduce(sum)",
            ReduceKind::Max => "all_reduce(max)",
            ReduceKind::Min => "all_reduce(min)",
        },
        layout: layout_text(p, cur, None),
        dtype,
        dims: dims.into(),
        at,
        bytes: x.numel() * dtype.size_in_bytes(),
    };
    let (offset, n) = (x.layout().offset * dtype.size_in_bytes(), x.numel());
    let work: Work = Box::new(move |w, ins, outs| {
        use crate::DType::{F32, F64, I32};
        // SAFETY: the engine keeps the input readable and the output exclusively writable
        // until the work is done; MPI uses them only until then, or for ever after a timeout,
        // when both are kept (`failed`).
        let (send, recv) = unsafe {
            (
                ins[0].bytes_ref().as_ptr() as usize + offset,
                outs[0].bytes_mut().as_mut_ptr() as usize,
            )
        };
        match dtype {
            F32 => comm::all_reduce_on::<f32>(w, call, kind, send, recv, n),
            F64 => comm::all_reduce_on::<f64>(w, call, kind, send, recv, n),
            I32 => comm::all_reduce_on::<i32>(w, call, kind, send, recv, n),
            _ => comm::all_reduce_on::<i64>(w, call, kind, send, recv, n),
        }
    });
    submit(
        "all_reduce",
        engine,
        device,
        at,
        &[x.blob()],
        &[out.blob()],
        work,
        bytes <= comm::CARRY,
    )?;
    Ok(Some(out))
}

/// The layout a collective's fingerprint names: placement `p`, SBPs `cur` and, for an
/// exchange within an axis group, the group's first rank. Made once for each distinct one and
/// kept (a program has few): a loop's collectives then format nothing.
fn layout_text(p: &'static Placement, cur: &[Sbp], group_from: Option<u32>) -> &'static str {
    type Key = (usize, SmallVec<[Sbp; 2]>, Option<u32>);
    static TEXTS: Mutex<Option<HashMap<Key, &'static str>>> = Mutex::new(None);
    thread_local! {
        // This thread's last one: a loop asks for the same layout again and again.
        static LAST: std::cell::RefCell<Option<(Key, &'static str)>> =
            const { std::cell::RefCell::new(None) };
    }
    let addr = p as *const Placement as usize;
    let hit = LAST.with_borrow(|l| match l {
        Some(((a, s, g), text)) if *a == addr && s[..] == *cur && *g == group_from => Some(*text),
        _ => None,
    });
    if let Some(text) = hit {
        return text;
    }
    let key: Key = (addr, cur.into(), group_from);
    let mut texts = TEXTS.lock();
    let texts = texts.get_or_insert_with(HashMap::new);
    let text = *texts.entry(key.clone()).or_insert_with(|| {
        let text = match group_from {
            Some(r) => format!("{p} {} axis group from {r}", show_sbp(cur)),
            None => format!("{p} {}", show_sbp(cur)),
        };
        Box::leak(text.into_boxed_str())
    });
    LAST.set(Some((key, text)));
    text
}

/// A collective's work on the communication thread, given the world and the instruction's
/// inputs and outputs (the transport dependence left out): the error's text on failure.
type Work = Box<
    dyn FnOnce(&comm::Wire, &[Counted<Blob>], &[Counted<Blob>]) -> std::result::Result<(), String>
        + Send,
>;

/// Submits `work` (of op `op`) over `ins` and `outs` (on `device`), writing the engine's transport
/// dependence too: on the engine's transport stream, handed to the communication thread
/// ([`Handed`]); elsewhere (an engine without one, or a device other than `cpu:0`, whose
/// memory the stream does not allocate), waited for on the device's collective stream, or its
/// compute stream ([`Waited`]). `small`: few bytes from each process, so that an idle engine
/// may run it at once on this thread (MPI's own time is then most of its cost).
#[allow(clippy::too_many_arguments)]
fn submit(
    op: &'static str,
    vm: &crate::engine::VmRef,
    device: crate::Device,
    at: Caller,
    ins: &[&Counted<Blob>],
    outs: &[&Counted<Blob>],
    work: Work,
    small: bool,
) -> Result<()> {
    let transport = vm
        .stream_of(eddy_vm::Device::CPU, StreamKind::Transport)
        .filter(|_| device == crate::Device::Cpu(0));
    let _turn = vm.transport_turn();
    if let Some(stream) = transport {
        let mut outputs: Vec<Counted<Blob>> = outs.iter().map(|&b| b.clone()).collect();
        outputs.push(vm.transport().clone());
        let handed = Handed {
            inputs: ins.iter().map(|&b| b.clone()).collect(),
            outputs,
            at,
            work: Some(work),
        };
        return vm.run(stream, handed).map_err(crate::Error::Vm);
    }
    let compute = Place::on(op, vm.share(), device)?.loc.stream();
    let stream = vm
        .stream_of(device, StreamKind::Collective)
        .unwrap_or(compute);
    let mut writes = outs.to_vec();
    writes.push(vm.transport());
    vm.run_op(stream, Waited(Some(work)), ins, &writes, small)
        .map_err(crate::Error::Vm)
}

/// The error of a collective that failed with `m`. After a timeout MPI may still read and
/// write the buffers of the pending request: they are kept for ever.
fn failed(ins: &[Counted<Blob>], outs: &[Counted<Blob>], m: String) -> eddy_vm::Error {
    if comm::broken() {
        for b in ins.iter().chain(outs) {
            std::mem::forget(b.clone());
        }
    }
    eddy_vm::Error::kernel("exchange", m)
}

/// A collective's blobs, owned for the communication thread.
type Blobs = SmallVec<[Counted<Blob>; 2]>;

/// A collective run on the communication thread and waited for, on a device's stream.
struct Waited(Option<Work>);

impl Kernel for Waited {
    fn name(&self) -> &str {
        "exchange"
    }

    fn compute(
        &mut self,
        inputs: &[Counted<Blob>],
        outputs: &[Counted<Blob>],
        _: &mut ComputeCtx<'_>,
    ) -> eddy_vm::Result<()> {
        let work = self.0.take().expect("a collective runs once");
        // The last output is the transport dependence.
        let (ins, outs): (Blobs, Blobs) = (
            inputs.iter().cloned().collect(),
            outputs[..outputs.len() - 1].iter().cloned().collect(),
        );
        comm::on_thread(move |w| Ok(work(w, &ins, &outs).map_err(|m| failed(&ins, &outs, m))))
            .map_err(|m| eddy_vm::Error::kernel("exchange", m))?
    }

    fn fusable(&self) -> bool {
        false
    }
}

/// A collective on the engine's transport stream: its compute hands the work to the
/// communication thread and returns; the stream's ticket, dropped there, marks it done. It
/// handles poison itself, there: an input that a collective launched before it poisoned is
/// known only once that one has run.
struct Handed {
    inputs: Vec<Counted<Blob>>,
    /// The outputs, the transport dependence last.
    outputs: Vec<Counted<Blob>>,
    at: Caller,
    work: Option<Work>,
}

impl InstructionPolicy for Handed {
    fn name(&self) -> &str {
        "exchange"
    }
    fn inputs(&self) -> &[Counted<Blob>] {
        &self.inputs
    }
    fn outputs(&self) -> &[Counted<Blob>] {
        &self.outputs
    }
    fn handles_poison(&self) -> bool {
        true
    }
    fn caller(&self) -> Caller {
        self.at
    }
    fn compute(&mut self, ctx: &mut ComputeCtx<'_>) -> eddy_vm::Result<()> {
        let outs = self.outputs[..self.outputs.len() - 1].to_vec();
        if outs.iter().any(|o| o.is_poisoned()) {
            return Ok(()); // its memory could not be had: poisoned by the engine, skipped
        }
        let Some(stream) = ctx.stream().as_any().downcast_ref::<TransportStream>() else {
            return Err(eddy_vm::Error::kernel(
                "exchange",
                "not on a transport stream",
            ));
        };
        let landing = Landing {
            inputs: self.inputs.clone(),
            outputs: outs,
            failure: Some(eddy_vm::Error::kernel(
                "exchange",
                "the communication thread stopped before the collective ran",
            )),
            _ticket: stream.ticket(),
        };
        let work = self.work.take().expect("a collective runs once");
        let launched = comm::launch(move |w| {
            let mut l = landing;
            l.failure = match l.inputs.iter().find_map(|b| b.poison()) {
                Some(e) => Some(e),
                None => work(w, &l.inputs, &l.outputs)
                    .map_err(|m| failed(&l.inputs, &l.outputs, m))
                    .err(),
            };
        });
        match launched {
            true => Ok(()),
            false => Err(eddy_vm::Error::kernel(
                "exchange",
                "the communication thread has stopped",
            )),
        }
    }
}

/// What a handed collective leaves on the communication thread: dropped there once it ran
/// (or with the work, if it never runs), it poisons the outputs if the collective failed,
/// then its ticket marks the instruction done.
struct Landing {
    inputs: Vec<Counted<Blob>>,
    outputs: Vec<Counted<Blob>>,
    failure: Option<eddy_vm::Error>,
    _ticket: Ticket,
}

impl Drop for Landing {
    fn drop(&mut self) {
        if let Some(e) = &self.failure {
            for o in &self.outputs {
                o.poison_with(e);
            }
        }
    }
}
