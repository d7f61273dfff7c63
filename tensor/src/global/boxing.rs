//! Boxing: the same logical value laid out by another SBP, axis by axis, through the
//! collectives of [`InProcess`]: on CPU devices each collective is one engine instruction per
//! rank that reads every rank's part and writes that rank's result; across other devices it is
//! the engine's copies and reductions between them. Every collective instruction writes the
//! engine's transport dependence ([`eddy_vm::Vm::transport`]), so they run in program order.

use super::{Global, ReduceKind, Sbp};
use crate::engine::{CHEAP_WORK, Place};
use crate::{Device, Result, Shape, Tensor};
use eddy_ops::global::{Collective, split_range};
use eddy_vm::stream::StreamKind;
use eddy_vm::{Blob, Counted};
use smallvec::SmallVec;
use std::cell::Cell;

/// How many collectives of each kind a closure's boxing ran ([`count_collectives`]).
///
/// # Examples
///
/// ```
/// let c = eddy_tensor::global::CollectiveCounts::default();
/// assert_eq!(c.total(), 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CollectiveCounts {
    /// `S → B`.
    pub all_gather: usize,
    /// `P → B`.
    pub all_reduce: usize,
    /// `P → S`.
    pub reduce_scatter: usize,
    /// `S(i) → S(j)`.
    pub all_to_all: usize,
}

impl CollectiveCounts {
    /// Every collective counted.
    ///
    /// # Examples
    ///
    /// ```
    /// let c = eddy_tensor::global::CollectiveCounts { all_gather: 2, ..Default::default() };
    /// assert_eq!(c.total(), 2);
    /// ```
    pub fn total(&self) -> usize {
        self.all_gather + self.all_reduce + self.reduce_scatter + self.all_to_all
    }
}

thread_local! {
    static COUNTS: Cell<Option<CollectiveCounts>> = const { Cell::new(None) };
}

fn note(f: impl FnOnce(&mut CollectiveCounts)) {
    COUNTS.with(|c| {
        if let Some(mut n) = c.get() {
            f(&mut n);
            c.set(Some(n));
        }
    });
}

/// Runs `f` and counts the collectives its boxing runs on this thread (one per group of
/// ranks a collective spans: a 2×2 grid's axis is two collectives).
///
/// # Examples
///
/// ```
/// use eddy_tensor::{Tensor, DType, global::{count_collectives, Placement, DeviceKind, Sbp}};
/// let vm = eddy_vm::Vm::builder().cpu_devices(2).build()?;
/// eddy_tensor::with_engine(&vm, || {
///     let p = Placement::new(DeviceKind::Cpu, [0, 1])?;
///     let x = Tensor::ones([4], DType::F32)?.to_global(&p, &[Sbp::Split(0)])?;
///     let (b, n) = count_collectives(|| x.to_global(&p, &[Sbp::Broadcast]));
///     assert_eq!((n.all_gather, n.total()), (1, 1));
///     assert_eq!(b?.to_local()?.to_vec::<f32>()?, [1.; 4]);
///     Ok::<(), eddy_tensor::Error>(())
/// })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn count_collectives<R>(f: impl FnOnce() -> R) -> (R, CollectiveCounts) {
    let outer = COUNTS.with(|c| c.replace(Some(CollectiveCounts::default())));
    let r = f();
    let mine = COUNTS.with(|c| c.replace(outer)).unwrap_or_default();
    if outer.is_some() {
        note(|n| {
            n.all_gather += mine.all_gather;
            n.all_reduce += mine.all_reduce;
            n.reduce_scatter += mine.reduce_scatter;
            n.all_to_all += mine.all_to_all;
        });
    }
    (r, mine)
}

/// Which results of a collective to make: `(k, device)` for the group's `k`-th rank's, on
/// `device`.
type Targets = [(usize, Device)];

/// The collectives boxing runs, over the components of one group of ranks (`parts[k]`, the
/// group's `k`-th rank's); each returns the new component of each rank of `targets`, in
/// order. Every rank reduces in the same order, so the results agree bit for bit.
pub(crate) trait Collectives {
    /// Each rank gets the concatenation of every part along `dim`.
    fn all_gather(&self, parts: &[Tensor], targets: &Targets, dim: usize) -> Result<Vec<Tensor>>;
    /// Each rank gets the reduction of every part.
    fn all_reduce(
        &self,
        parts: &[Tensor],
        targets: &Targets,
        kind: ReduceKind,
    ) -> Result<Vec<Tensor>>;
    /// Rank `k` gets its balanced slice along `dim` of the reduction of every part.
    fn reduce_scatter(
        &self,
        parts: &[Tensor],
        targets: &Targets,
        kind: ReduceKind,
        dim: usize,
    ) -> Result<Vec<Tensor>>;
    /// Parts split along `from` become parts split along `to`.
    fn all_to_all(
        &self,
        parts: &[Tensor],
        targets: &Targets,
        from: usize,
        to: usize,
    ) -> Result<Vec<Tensor>>;
}

/// The collectives of ranks in this process: copies between its devices and reductions, each
/// an engine instruction.
pub(crate) struct InProcess;

/// The reduction by `kind` of `take` of each part, in the parts' order (the same on every
/// rank, so every rank gets the same bits), as a dense tensor.
fn reduced(
    parts: &[Tensor],
    kind: ReduceKind,
    take: impl Fn(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    let mut acc = take(&parts[0])?;
    for p in &parts[1..] {
        let t = take(p)?;
        acc = match kind {
            ReduceKind::Sum => acc.add(&t),
            ReduceKind::Max => acc.maximum(&t),
            ReduceKind::Min => acc.minimum(&t),
        }?;
    }
    acc.contiguous()
}

/// The concatenation along `dim` of `take` of each part, in the parts' order.
fn joined(
    parts: &[Tensor],
    dim: usize,
    take: impl Fn(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    let pieces = parts.iter().map(take).collect::<Result<Vec<_>>>()?;
    Tensor::cat(&pieces.iter().collect::<Vec<_>>(), dim as isize)
}

/// Collective `c` over `parts` (each target's result on its device) as one engine
/// instruction per target, each reading every part and writing its rank's result (an
/// all-reduce's later targets read the first target's result instead), on that rank's
/// device's collective stream (its compute stream in an engine without one), and each
/// writing the transport dependence; `None` where the devices have no kernel for it.
fn one_instruction(
    c: Collective,
    parts: &[Tensor],
    targets: &Targets,
) -> Result<Option<Vec<Tensor>>> {
    if let Some(perm) = common_order(parts) {
        // Parts laid out alike in another order (a transposed product's): the collective runs
        // over their storage order, dense, and its results are viewed back.
        let order: SmallVec<[isize; 4]> = perm.iter().map(|&d| d as isize).collect();
        let mut back: SmallVec<[isize; 4]> = order.clone();
        for (i, &d) in perm.iter().enumerate() {
            back[d] = i as isize;
        }
        let views = (parts.iter())
            .map(|t| t.permute(&order))
            .collect::<Result<Vec<_>>>()?;
        let at = |d: usize| perm.iter().position(|&p| p == d).expect("a permutation");
        let c = match c {
            Collective::AllGather { dim } => Collective::AllGather { dim: at(dim) },
            c @ Collective::AllReduce { .. } => c,
            Collective::ReduceScatter { kind, dim } => {
                Collective::ReduceScatter { kind, dim: at(dim) }
            }
            Collective::AllToAll { from, to } => Collective::AllToAll {
                from: at(from),
                to: at(to),
            },
        };
        return match one_instruction(c, &views, targets)? {
            Some(outs) => Ok(Some(
                outs.iter()
                    .map(|t| t.permute(&back))
                    .collect::<Result<_>>()?,
            )),
            None => Ok(None),
        };
    }
    let every: SmallVec<[Device; 8]> = (parts.iter().map(Tensor::device))
        .chain(targets.iter().map(|t| t.1))
        .collect();
    if !every.iter().all(|d| d.is_cpu()) {
        return Ok(None);
    }
    let (vm, engine) = (parts[0].engine_ref(), parts[0].engine());
    let shapes: Vec<Shape> = parts.iter().map(|t| t.shape().clone()).collect();
    let mut outs: Vec<Tensor> = Vec::with_capacity(targets.len());
    // One collective's instructions together: no other thread's comes between them.
    let _turn = engine.transport_turn();
    for &(k, d) in targets {
        // An all-reduce reduces once: the later targets copy the first one's result, the same
        // bits, reading one tensor where the reduction reads every part.
        let copied = match (c, outs.first()) {
            (Collective::AllReduce { .. }, Some(first)) => Some(first),
            _ => None,
        };
        let pair;
        let (srcs, devices): (&[Tensor], &[Device]) = match copied {
            Some(first) => {
                pair = [first.device(), d];
                (std::slice::from_ref(first), &pair)
            }
            None => (parts, &every),
        };
        let layouts = srcs.iter().map(|t| t.layout().clone()).collect();
        let kernel = eddy_ops::copy::collective(c, devices, parts[0].dtype(), layouts, k)
            .expect("a kernel for CPU devices");
        let place = Place::on(c.name(), vm.share(), d)?;
        let compute = place.loc.stream();
        let out = Tensor::empty_on(place, c.out_shape(&shapes, k), parts[0].dtype())?;
        if out.numel() > 0 {
            // On the rank's device, so that its allocator makes the result.
            let stream = engine
                .stream_of(d, StreamKind::Collective)
                .unwrap_or(compute);
            let writes = [out.blob(), engine.transport()];
            let work = (srcs.iter()).fold(out.numel(), |a, t| a.saturating_add(t.numel()));
            let ins: SmallVec<[&Counted<Blob>; 8]> = srcs.iter().map(Tensor::blob).collect();
            let ran = engine.run_op(stream, kernel, &ins, &writes, work <= CHEAP_WORK);
            if let Err(e) = ran {
                let i: Vec<&Tensor> = parts.iter().collect();
                return Err(super::refused_kernel(e, &i, &[&out]));
            }
        }
        outs.push(out);
    }
    Ok(Some(outs))
}

/// The order of dims, outermost first, in which every part is dense, where that is one order
/// for all and not their own (parts that are transposes of dense tensors); `None` otherwise.
fn common_order(parts: &[Tensor]) -> Option<SmallVec<[usize; 4]>> {
    if parts.iter().all(Tensor::is_contiguous) {
        return None;
    }
    let order = |t: &Tensor| {
        let l = t.layout();
        let mut perm: SmallVec<[usize; 4]> = (0..l.strides.len()).collect();
        perm.sort_by_key(|&d| std::cmp::Reverse(l.strides[d]));
        l.permute(&perm).is_contiguous().then_some(perm)
    };
    let first = order(&parts[0])?;
    parts[1..]
        .iter()
        .all(|t| order(t).as_ref() == Some(&first))
        .then_some(first)
}

impl Collectives for InProcess {
    fn all_gather(&self, parts: &[Tensor], targets: &Targets, dim: usize) -> Result<Vec<Tensor>> {
        note(|n| n.all_gather += 1);
        if let Some(v) = one_instruction(Collective::AllGather { dim }, parts, targets)? {
            return Ok(v);
        }
        (targets.iter())
            .map(|&(_, d)| joined(parts, dim, |t| t.to_device(d)))
            .collect()
    }

    fn all_reduce(
        &self,
        parts: &[Tensor],
        targets: &Targets,
        kind: ReduceKind,
    ) -> Result<Vec<Tensor>> {
        note(|n| n.all_reduce += 1);
        if let Some(v) = one_instruction(Collective::AllReduce { kind }, parts, targets)? {
            return Ok(v);
        }
        (targets.iter())
            .map(|&(_, d)| reduced(parts, kind, |t| t.to_device(d)))
            .collect()
    }

    fn reduce_scatter(
        &self,
        parts: &[Tensor],
        targets: &Targets,
        kind: ReduceKind,
        dim: usize,
    ) -> Result<Vec<Tensor>> {
        note(|n| n.reduce_scatter += 1);
        let c = Collective::ReduceScatter { kind, dim };
        if let Some(v) = one_instruction(c, parts, targets)? {
            return Ok(v);
        }
        let (n, p) = (parts[0].dims()[dim], parts.len());
        (targets.iter())
            .map(|&(k, d)| {
                let r = split_range(n, p, k);
                reduced(parts, kind, |t| {
                    t.narrow(dim as isize, r.start, r.len())?.to_device(d)
                })
            })
            .collect()
    }

    fn all_to_all(
        &self,
        parts: &[Tensor],
        targets: &Targets,
        from: usize,
        to: usize,
    ) -> Result<Vec<Tensor>> {
        note(|n| n.all_to_all += 1);
        if let Some(v) = one_instruction(Collective::AllToAll { from, to }, parts, targets)? {
            return Ok(v);
        }
        let (n, p) = (parts[0].dims()[to], parts.len());
        (targets.iter())
            .map(|&(k, d)| {
                let r = split_range(n, p, k);
                joined(parts, from, |q| {
                    q.narrow(to as isize, r.start, r.len())?.to_device(d)
                })
            })
            .collect()
    }
}

/// The components of a group of `p` ranks holding `B` laid out as `to` without moving data
/// (`mine`: the group's `k`-th rank's component, for the ranks this process holds): a slice
/// each for `S`, the value at the first rank and zeros at the others for `P(sum)`, the value
/// at every rank for `P(max)` and `P(min)`.
fn from_broadcast(mine: Vec<(usize, Tensor)>, p: usize, to: Sbp) -> Result<Vec<Tensor>> {
    match to {
        Sbp::Broadcast => Ok(mine.into_iter().map(|(_, t)| t).collect()),
        Sbp::Partial(ReduceKind::Max | ReduceKind::Min) => {
            mine.iter().map(|(_, t)| owned(t)).collect()
        }
        Sbp::Split(d) => (mine.iter())
            .map(|(k, t)| {
                let r = split_range(t.dims()[d], p, *k);
                owned(&t.narrow(d as isize, r.start, r.len())?)
            })
            .collect(),
        Sbp::Partial(ReduceKind::Sum) => (mine.iter())
            .map(|(k, t)| if *k == 0 { owned(t) } else { t.zeros_like() })
            .collect(),
    }
}

/// A copy of `t` in storage of its own, dense: a boxing's components never share storage
/// with its input's, so an in-place update of one leaves the other as it was.
pub(super) fn owned(t: &Tensor) -> Result<Tensor> {
    t.to_dtype(t.dtype())
}

/// `S(d) → P(kind)` without a collective where the kind has an identity to fill with (zero
/// for sums, infinities for float extrema): each rank's slice in a tensor of the identity.
/// `sizes` are every rank's sizes along `d`, `mine` the components this process holds.
fn split_to_partial(
    mine: &[(usize, Tensor)],
    sizes: &[usize],
    d: usize,
    kind: ReduceKind,
) -> Result<Option<Vec<Tensor>>> {
    let Some((_, first)) = mine.first() else {
        return Ok(Some(Vec::new()));
    };
    let fill = match kind {
        ReduceKind::Sum => 0.0,
        _ if !first.dtype().is_float() => return Ok(None),
        ReduceKind::Max => f64::NEG_INFINITY,
        ReduceKind::Min => f64::INFINITY,
    };
    let n: usize = sizes.iter().sum();
    let mut v = Vec::with_capacity(mine.len());
    for (k, t) in mine {
        let at: usize = sizes[..*k].iter().sum();
        let mut shape = t.shape().clone();
        shape.0[d] = n;
        let full = t.new_filled(shape, t.dtype(), fill)?;
        full.narrow(d as isize, at, t.dims()[d])?.copy_(t)?;
        v.push(full);
    }
    Ok(Some(v))
}

/// What boxing needs of the tensor it lays out anew: where it lives and its logical dims.
struct Boxed<'a> {
    g: &'a Global,
    dims: &'a [usize],
}

/// `t`'s components (this process's) laid out by `to`: axis by axis, the axes after the
/// first that differs made `B` from the last inwards, that axis converted, then the later
/// axes laid out from `B` (so a split along an axis always divides what the earlier axes
/// left).
#[track_caller]
pub(super) fn boxing(t: &Tensor, to: &[Sbp]) -> Result<Vec<Tensor>> {
    let g = t.global().expect("a global tensor");
    let Some(first) = (0..to.len()).find(|&a| g.sbp[a] != to[a]) else {
        return Ok(g.parts.to_vec());
    };
    let b = Boxed { g, dims: t.dims() };
    let (mut cur, mut parts) = (g.sbp.clone(), g.parts.to_vec());
    for a in (first + 1..to.len()).rev() {
        parts = axis(&b, parts, &cur, a, Sbp::Broadcast)?;
        cur[a] = Sbp::Broadcast;
    }
    parts = axis(&b, parts, &cur, first, to[first])?;
    cur[first] = to[first];
    for (a, &s) in to.iter().enumerate().skip(first + 1) {
        parts = axis(&b, parts, &cur, a, s)?;
        cur[a] = s;
    }
    Ok(parts)
}

/// Converts grid axis `a` from `cur[a]` to `to`, group by group of ranks along it (`parts`:
/// this process's components, laid out by `cur`).
#[track_caller]
fn axis(b: &Boxed<'_>, parts: Vec<Tensor>, cur: &[Sbp], a: usize, to: Sbp) -> Result<Vec<Tensor>> {
    use Sbp::{Broadcast as B, Partial as P, Split as S};
    let from = cur[a];
    if from == to {
        return Ok(parts);
    }
    let (p, held) = (b.g.placement, &b.g.held);
    let grid = p.grid_dims();
    // The ranks along axis `a` are `stride` apart; a group starts where that coordinate is 0.
    let stride: usize = grid[a + 1..].iter().product();
    let mut out: SmallVec<[Option<Tensor>; 4]> = SmallVec::from_elem(None, parts.len());
    for start in 0..p.len() {
        if !(start / stride).is_multiple_of(grid[a]) {
            continue;
        }
        let group: SmallVec<[usize; 8]> = (0..grid[a]).map(|k| start + k * stride).collect();
        // The group's ranks this process holds: (k in the group, slot in `parts`).
        let here: SmallVec<[(usize, usize); 4]> = (group.iter().enumerate())
            .filter_map(|(k, &i)| held.slot(i).map(|s| (k, s)))
            .collect();
        let spread = group
            .iter()
            .any(|&i| held.process(p, i) != held.process(p, group[0]));
        if here.is_empty() && !spread {
            continue; // another process's group
        }
        let targets: SmallVec<[(usize, Device); 4]> = (here.iter())
            .map(|&(k, _)| (k, held.device(p, group[k])))
            .collect();
        let mine: Vec<(usize, Tensor)> = here.iter().map(|&(k, s)| (k, parts[s].clone())).collect();
        let sizes = |d: usize| -> Vec<usize> {
            (group.iter())
                .map(|&i| eddy_ops::global::component_ranges(b.dims, p, cur, i)[d].len())
                .collect()
        };
        let c = InProcess;
        // Every rank's part of the group: this process's, and the others' received. (The
        // closure loses the caller's line: taken here.)
        let at = crate::Caller::here();
        let every = || -> Result<Vec<Tensor>> {
            if !spread {
                return Ok(mine.iter().map(|(_, t)| t.clone()).collect());
            }
            exchange(b, &group, cur, &mine, at)
        };
        let new = match (from, to) {
            (S(d), B) => c.all_gather(&every()?, &targets, d)?,
            (P(k), B) => match reduced_across(b, &group, cur, &mine, k, spread, at)? {
                Some(t) => vec![t],
                None => c.all_reduce(&every()?, &targets, k)?,
            },
            (P(k), S(d)) => c.reduce_scatter(&every()?, &targets, k, d)?,
            (S(i), S(j)) => c.all_to_all(&every()?, &targets, i, j)?,
            (S(d), P(k)) => match split_to_partial(&mine, &sizes(d), d, k)? {
                Some(v) => v,
                None => {
                    let all = c.all_gather(&every()?, &targets, d)?;
                    let all = here.iter().map(|&(k, _)| k).zip(all).collect();
                    from_broadcast(all, group.len(), to)?
                }
            },
            (P(k), P(_)) => {
                let all = c.all_reduce(&every()?, &targets, k)?;
                let all = here.iter().map(|&(k, _)| k).zip(all).collect();
                from_broadcast(all, group.len(), to)?
            }
            (B, _) => from_broadcast(mine, group.len(), to)?,
        };
        if grid.len() == 1 && here.iter().enumerate().all(|(j, &(_, s))| s == j) {
            // One group, whose components are this process's in order: they are the result.
            return Ok(new);
        }
        for (&(_, s), t) in here.iter().zip(new) {
            out[s] = Some(t);
        }
    }
    Ok(out
        .into_iter()
        .map(|t| t.expect("every position is in one group"))
        .collect())
}

/// `P(kind) → B` of a group spread over processes by one all-reduce between them, where that
/// gives the one-process bits ([`spread::all_reduce`](super::spread::all_reduce)); `None`
/// where it does not, or the group is in one process.
fn reduced_across(
    b: &Boxed<'_>,
    group: &[usize],
    cur: &[Sbp],
    mine: &[(usize, Tensor)],
    kind: ReduceKind,
    spread: bool,
    at: crate::Caller,
) -> Result<Option<Tensor>> {
    if !spread {
        return Ok(None);
    }
    #[cfg(feature = "mpi")]
    {
        let r = super::spread::all_reduce(b.g, b.dims, group, cur, mine, kind, at)?;
        if r.is_some() {
            note(|n| n.all_reduce += 1);
        }
        Ok(r)
    }
    #[cfg(not(feature = "mpi"))]
    {
        let _ = (b, group, cur, mine, kind, at);
        unreachable!("a placement over several processes without the `mpi` feature")
    }
}

/// Every rank's part of a group spread over processes, in the group's order: this process's
/// `mine`, the others' received from their processes (on this process's first device); `at`
/// is the user's call.
fn exchange(
    b: &Boxed<'_>,
    group: &[usize],
    cur: &[Sbp],
    mine: &[(usize, Tensor)],
    at: crate::Caller,
) -> Result<Vec<Tensor>> {
    #[cfg(feature = "mpi")]
    {
        super::spread::exchange(b.g, b.dims, group, cur, mine, at)
    }
    #[cfg(not(feature = "mpi"))]
    {
        // A placement spreads over processes only in a world of several, which needs `mpi`.
        let _ = (b, group, cur, mine, at);
        unreachable!("a placement over several processes without the `mpi` feature")
    }
}
