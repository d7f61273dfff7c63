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
use super::{Global, ReduceKind, Sbp, show_sbp};
use crate::engine::Place;
use crate::{Caller, Result, Shape, Tensor};
use eddy_ops::global::component_ranges;
use eddy_vm::instruction::{ComputeCtx, Kernel};
use eddy_vm::stream::StreamKind;
use eddy_vm::{Blob, Counted};

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
    for (k, slot) in every.iter_mut().enumerate() {
        if slot.is_none() {
            let place = Place::on("exchange", engine.share(), device)?;
            let t = Tensor::empty_on(place, Shape::from(shapes[k].clone()), dtype)?;
            if bytes[k] > 0 {
                outs.push(t.clone());
                receives.push((offsets[k], bytes[k]));
            }
            *slot = Some(t);
        }
    }
    if counts.iter().any(|&c| c > 0) {
        let layout = format!(
            "{p} {} axis group from {}",
            show_sbp(cur),
            p.ranks()[group[0]]
        );
        let kernel = Exchange {
            call: Some(Call {
                op: "exchange",
                layout,
                dtype,
                dims: dims.to_vec(),
                at,
                bytes: counts[super::world()?.rank],
            }),
            counts,
            sends,
            receives,
        };
        let vm = engine;
        let compute = Place::on("exchange", vm.share(), device)?.loc.stream();
        let stream = vm
            .stream_of(device, StreamKind::Collective)
            .unwrap_or(compute);
        let blobs_in: Vec<&Counted<Blob>> = ins.iter().map(Tensor::blob).collect();
        let mut writes: Vec<&Counted<Blob>> = outs.iter().map(Tensor::blob).collect();
        writes.push(vm.transport());
        let _turn = vm.transport_turn();
        vm.run_op(stream, kernel, &blobs_in, &writes, false)
            .map_err(crate::Error::Vm)?;
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
    if !one_each || !(carried || by_mpi) || !matches!(dtype, F32 | F64 | I32 | I64) {
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
    let kernel = AllReduce {
        call: Some(Call {
            op: match kind {
                ReduceKind::Sum => "all_reduce(sum)",
                ReduceKind::Max => "all_reduce(max)",
                ReduceKind::Min => "all_reduce(min)",
            },
            layout: format!("{p} {}", show_sbp(cur)),
            dtype,
            dims: dims.to_vec(),
            at,
            bytes: x.numel() * dtype.size_in_bytes(),
        }),
        kind,
        dtype,
        offset: x.layout().offset * dtype.size_in_bytes(),
        n: x.numel(),
    };
    let compute = Place::on("all_reduce", engine.share(), device)?
        .loc
        .stream();
    let stream = engine
        .stream_of(device, StreamKind::Collective)
        .unwrap_or(compute);
    let _turn = engine.transport_turn();
    engine
        .run_op(
            stream,
            kernel,
            &[x.blob()],
            &[out.blob(), engine.transport()],
            false,
        )
        .map_err(crate::Error::Vm)?;
    Ok(Some(out))
}

/// The instruction of one all-reduce over the processes.
struct AllReduce {
    call: Option<Call>,
    kind: ReduceKind,
    dtype: crate::DType,
    /// Where the part's elements start in its blob, in bytes.
    offset: usize,
    n: usize,
}

impl Kernel for AllReduce {
    fn name(&self) -> &str {
        "exchange"
    }

    fn compute(
        &mut self,
        inputs: &[Counted<Blob>],
        outputs: &[Counted<Blob>],
        _: &mut ComputeCtx<'_>,
    ) -> eddy_vm::Result<()> {
        use crate::DType::{F32, F64, I32};
        let call = self.call.take().expect("an all-reduce runs once");
        // SAFETY: the engine runs this instruction with its input readable and its output
        // exclusively writable, both alive until it returns; MPI uses them only until then,
        // or for ever after a timeout, when both are kept below.
        let (send, recv) = unsafe {
            (
                inputs[0].bytes_ref().as_ptr() as usize + self.offset,
                outputs[0].bytes_mut().as_mut_ptr() as usize,
            )
        };
        let (kind, n) = (self.kind, self.n);
        let r = match self.dtype {
            F32 => comm::all_reduce_raw::<f32>(call, kind, send, recv, n),
            F64 => comm::all_reduce_raw::<f64>(call, kind, send, recv, n),
            I32 => comm::all_reduce_raw::<i32>(call, kind, send, recv, n),
            _ => comm::all_reduce_raw::<i64>(call, kind, send, recv, n),
        };
        r.map_err(|m| {
            if comm::broken() {
                // The request may still be pending: MPI may read and write these later.
                std::mem::forget(inputs[0].clone());
                std::mem::forget(outputs[0].clone());
            }
            eddy_vm::Error::kernel("exchange", m)
        })
    }

    fn fusable(&self) -> bool {
        false
    }
}

/// The instruction of one exchange: this process's parts out, the others' in.
struct Exchange {
    /// What the fingerprint says; taken when the instruction runs.
    call: Option<Call>,
    /// The bytes each process sends.
    counts: Vec<usize>,
    /// Where this process's parts' bytes lie in its inputs: (offset, length).
    sends: Vec<(usize, usize)>,
    /// Where each output's bytes lie in what every process receives: (offset, length).
    receives: Vec<(usize, usize)>,
}

impl Kernel for Exchange {
    fn name(&self) -> &str {
        "exchange"
    }

    fn compute(
        &mut self,
        inputs: &[Counted<Blob>],
        outputs: &[Counted<Blob>],
        _: &mut ComputeCtx<'_>,
    ) -> eddy_vm::Result<()> {
        let mut send = Vec::with_capacity(self.sends.iter().map(|s| s.1).sum());
        for (b, &(at, n)) in inputs.iter().zip(&self.sends) {
            // SAFETY: the engine runs this instruction with its inputs readable.
            send.extend_from_slice(&unsafe { b.bytes_ref() }[at..at + n]);
        }
        let call = self.call.take().expect("an exchange runs once");
        let all = comm::all_gather_bytes(call, send, std::mem::take(&mut self.counts))
            .map_err(|m| eddy_vm::Error::kernel("exchange", m))?;
        for (b, &(at, n)) in outputs.iter().zip(&self.receives) {
            // SAFETY: the engine runs this instruction with exclusive access to its outputs
            // (the last, the transport dependence, is not written).
            unsafe { b.bytes_mut()[..n].copy_from_slice(&all[at..at + n]) };
        }
        Ok(())
    }

    fn fusable(&self) -> bool {
        false
    }
}
