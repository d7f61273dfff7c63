//! Global tensors: one logical tensor over the ranks of a [`Placement`], laid out by an
//! [`Sbp`] per grid axis. A global tensor is a [`Tensor`] like any other (its shape and dtype
//! are the logical ones); its values live in its *components*, one local tensor per rank,
//! and each op on it chooses an SBP signature ([`eddy_ops::global::choose`]), boxes the
//! inputs that need it ([`boxing`]) and runs the local op on each component.

mod along;
mod apply;
mod boxing;
#[cfg(feature = "mpi")]
mod comm;
mod held;
mod loss;
#[cfg(feature = "nccl")]
mod nccl;
mod ops;
#[cfg(feature = "mpi")]
mod spread;
mod world;

pub(crate) use apply::{inplace_partial, refuse, refuse_traced, reshape_dims};
pub use boxing::{CollectiveCounts, count_collectives};
pub use eddy_ops::global::{DeviceKind, NdSbp, Placement, ReduceKind, Sbp};
pub(crate) use held::Held;
pub(crate) use ops::{refused_kernel, run, run_many};
pub(crate) use world::surfaced;
pub use world::{World, raw_all_reduce_seconds, set_collective_timeout, spans_processes, world};

use crate::{Error, Result, Shape, Tensor};
use eddy_ops::global::{check_sbp, component_ranges, show_sbp};

/// What a global tensor holds besides its logical shape and dtype.
#[derive(Clone)]
pub(crate) struct Global {
    pub(crate) placement: &'static Placement,
    pub(crate) sbp: NdSbp,
    /// The positions of the placement this process holds.
    pub(crate) held: Held,
    /// The component of each position this process holds, in order (in one process, every
    /// position's).
    pub(crate) parts: Components,
}

impl Global {
    /// The local device of position `i` of the placement.
    #[cfg(feature = "mpi")]
    pub(crate) fn device(&self, i: usize) -> crate::Device {
        self.held.device(self.placement, i)
    }
}

/// The components of a global tensor: inline for grids of up to two ranks, the commonest,
/// so a global op's result allocates no list.
pub(crate) type Components = smallvec::SmallVec<[Tensor; 2]>;

impl Tensor {
    /// Whether `self` is a global tensor ([`to_global`](Self::to_global)).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType, global::{Placement, DeviceKind, Sbp}};
    /// let vm = eddy_vm::Vm::builder().cpu_devices(2).build()?;
    /// eddy_tensor::with_engine(&vm, || {
    ///     let x = Tensor::ones([4], DType::F32)?;
    ///     assert!(!x.is_global());
    ///     let p = Placement::new(DeviceKind::Cpu, [0, 1])?;
    ///     assert!(x.to_global(&p, &[Sbp::Split(0)])?.is_global());
    ///     Ok::<(), eddy_tensor::Error>(())
    /// })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn is_global(&self) -> bool {
        self.global().is_some()
    }

    /// A global tensor's placement; `None` for a local tensor.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType, global::{Placement, DeviceKind, Sbp}};
    /// let vm = eddy_vm::Vm::builder().cpu_devices(2).build()?;
    /// eddy_tensor::with_engine(&vm, || {
    ///     let p = Placement::new(DeviceKind::Cpu, [0, 1])?;
    ///     let x = Tensor::ones([4], DType::F32)?.to_global(&p, &[Sbp::Broadcast])?;
    ///     assert_eq!(x.placement(), Some(&p));
    ///     Ok::<(), eddy_tensor::Error>(())
    /// })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn placement(&self) -> Option<&Placement> {
        self.global().map(|g| g.placement)
    }

    /// A global tensor's SBP per grid axis; `None` for a local tensor.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType, global::{Placement, DeviceKind, Sbp}};
    /// let vm = eddy_vm::Vm::builder().cpu_devices(2).build()?;
    /// eddy_tensor::with_engine(&vm, || {
    ///     let p = Placement::new(DeviceKind::Cpu, [0, 1])?;
    ///     let x = Tensor::ones([4], DType::F32)?.to_global(&p, &[Sbp::Split(0)])?;
    ///     assert_eq!(x.sbp(), Some(&[Sbp::Split(0)][..]));
    ///     Ok::<(), eddy_tensor::Error>(())
    /// })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sbp(&self) -> Option<&[Sbp]> {
        self.global().map(|g| g.sbp.as_slice())
    }

    /// The components this process holds, in the placement's rank order (`[self]` for a
    /// local tensor). In one process, every rank's.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType, global::{Placement, DeviceKind, Sbp}};
    /// let vm = eddy_vm::Vm::builder().cpu_devices(2).build()?;
    /// eddy_tensor::with_engine(&vm, || {
    ///     let p = Placement::new(DeviceKind::Cpu, [0, 1])?;
    ///     let x = Tensor::arange(0.0, 5.0, 1.0, DType::F32)?.to_global(&p, &[Sbp::Split(0)])?;
    ///     let parts = x.local_components();
    ///     assert_eq!(parts[0].to_vec::<f32>()?, [0., 1., 2.]); // balanced: 3 and 2
    ///     assert_eq!(parts[1].to_vec::<f32>()?, [3., 4.]);
    ///     assert_eq!(parts[1].device().to_string(), "cpu:1");
    ///     Ok::<(), eddy_tensor::Error>(())
    /// })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn local_components(&self) -> Vec<Tensor> {
        match self.global() {
            Some(g) => g.parts.to_vec(),
            None => vec![self.clone()],
        }
    }

    /// A global tensor on `placement` laid out by `sbp` (one per grid axis).
    ///
    /// From a local tensor, `self` is the logical value: each rank takes its part (a slice
    /// for `Split`, the whole for `Broadcast`; for `Partial(Sum)` the first rank along the
    /// axis holds it and the others zeros, for `Max` and `Min` every rank holds it). From a
    /// global tensor, a *boxing*: the same logical value laid out anew, also on another
    /// placement or device kind. Differentiable: the gradient comes back laid out as `self`.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for an SBP the tensor or the placement cannot hold (a split dim out
    /// of range, a count other than the grid's axes, partial axes of two kinds);
    /// `DeviceUnavailable` for a rank whose device the engine lacks.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType, global::{Placement, DeviceKind, Sbp}};
    /// let vm = eddy_vm::Vm::builder().cpu_devices(3).build()?;
    /// eddy_tensor::with_engine(&vm, || {
    ///     let p = Placement::new(DeviceKind::Cpu, [0, 1, 2])?;
    ///     let x = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([3, 2])?;
    ///     let s = x.to_global(&p, &[Sbp::Split(0)])?;
    ///     let b = s.to_global(&p, &[Sbp::Broadcast])?; // an all-gather
    ///     assert_eq!(b.to_local()?.to_vec::<f32>()?, x.to_vec::<f32>()?);
    ///     assert_eq!(format!("{s:?}").lines().next().unwrap(), "Tensor[dims [3, 2], f32, cpu:[0, 1, 2], S(0)] tensor([[0.0000, 1.0000],");
    ///     Ok::<(), eddy_tensor::Error>(())
    /// })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn to_global(&self, placement: &Placement, sbp: &[Sbp]) -> Result<Tensor> {
        if crate::graph::is_tracing() {
            return Err(refuse_traced("to_global"));
        }
        check_sbp("to_global", self.rank(), placement, sbp)?;
        let out = match self.global() {
            Some(g) if *g.placement == *placement => {
                let parts = {
                    let _g = crate::no_grad();
                    boxing::boxing(self, sbp)?
                };
                global_of(
                    self.shape().clone(),
                    g.placement,
                    &g.held,
                    sbp,
                    parts.into(),
                )
            }
            Some(g) => {
                // Another placement: the whole value, then each new rank's part of it.
                let whole = {
                    let _g = crate::no_grad();
                    let b: NdSbp = g.sbp.iter().map(|_| Sbp::Broadcast).collect();
                    boxing::boxing(self, &b)?.swap_remove(0)
                };
                scatter(&whole, placement, sbp)?
            }
            None => {
                let _g = crate::no_grad();
                scatter(self, placement, sbp)?
            }
        };
        let from = self.global().map(|g| (g.placement, g.sbp.clone()));
        let device = self.device();
        Ok(out.record("to_global", &[self], move |g, _, _| {
            Ok(vec![Some(match &from {
                Some((p, s)) => g.to_global(p, s)?,
                None => g.to_full_local()?.to_device(device)?,
            })])
        }))
    }

    /// This process's component of a global tensor: the first of its ranks' (in one process,
    /// the placement's first rank's); `self` for a local tensor. Differentiable.
    ///
    /// # Errors
    ///
    /// None today; `Result` for the ranks of other processes.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType, global::{Placement, DeviceKind, Sbp}};
    /// let vm = eddy_vm::Vm::builder().cpu_devices(2).build()?;
    /// eddy_tensor::with_engine(&vm, || {
    ///     let p = Placement::new(DeviceKind::Cpu, [0, 1])?;
    ///     let x = Tensor::arange(0.0, 4.0, 1.0, DType::F32)?.to_global(&p, &[Sbp::Split(0)])?;
    ///     assert_eq!(x.to_local()?.to_vec::<f32>()?, [0., 1.]);
    ///     Ok::<(), eddy_tensor::Error>(())
    /// })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn to_local(&self) -> Result<Tensor> {
        let Some(g) = self.global() else {
            return Ok(self.clone());
        };
        let local = g.parts[0].alias_unknown();
        // The gradient: the component's at the first rank, zeros at the others; a broadcast
        // axis reads as a partial sum of them, so the logical gradient is the component's.
        let (placement, sbp, held) = (g.placement, g.sbp.clone(), g.held.clone());
        let shape = self.shape().clone();
        let others: Vec<Tensor> = g.parts[1..].to_vec();
        Ok(local.record("to_local", &[self], move |gr, _, _| {
            let _g = crate::no_grad();
            let mut parts = vec![gr.clone()];
            for o in &others {
                parts.push(o.zeros_like()?);
            }
            let sbp: NdSbp = (sbp.iter())
                .map(|s| match s {
                    Sbp::Split(d) => Sbp::Split(*d),
                    _ => Sbp::PARTIAL_SUM,
                })
                .collect();
            Ok(vec![Some(global_of(
                shape.clone(),
                placement,
                &held,
                &sbp,
                parts.into(),
            ))])
        }))
    }

    /// The global tensor whose components are `parts`, one per rank of `placement` in order,
    /// laid out by `sbp`: what each rank computed on its own (for a `Partial` axis, its part
    /// of the sum, maximum or minimum). The logical shape follows from the parts' shapes.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for a count of parts other than the ranks', a part on another
    /// device than its rank's, parts of two dtypes, or shapes that no balanced split of one
    /// logical shape gives; as [`to_global`](Self::to_global) for the SBP.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, Device, global::{Placement, DeviceKind, Sbp}};
    /// let vm = eddy_vm::Vm::builder().cpu_devices(2).build()?;
    /// eddy_tensor::with_engine(&vm, || {
    ///     let p = Placement::new(DeviceKind::Cpu, [0, 1])?;
    ///     let a = Tensor::from_vec(vec![1f32, 2.], [2])?;
    ///     let b = Tensor::from_vec(vec![10f32, 20.], [2])?.to_device(Device::Cpu(1))?;
    ///     let sum = Tensor::from_components(&p, &[Sbp::PARTIAL_SUM], vec![a.clone(), b.clone()])?;
    ///     assert_eq!(sum.to_vec::<f32>()?, [11., 22.]);
    ///     let cat = Tensor::from_components(&p, &[Sbp::Split(0)], vec![a, b])?;
    ///     assert_eq!(cat.dims(), &[4]);
    ///     Ok::<(), eddy_tensor::Error>(())
    /// })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn from_components(
        placement: &Placement,
        sbp: &[Sbp],
        parts: Vec<Tensor>,
    ) -> Result<Tensor> {
        const OP: &str = "from_components";
        let bad = |m: String| Err(Error::invalid(OP, m));
        let held = Held::of(OP, placement)?;
        let n = held.count(placement.len());
        if parts.len() != n {
            return bad(format!(
                "{} parts for the {n} ranks of {placement} this process holds",
                parts.len(),
            ));
        }
        let rank = parts[0].rank();
        check_sbp(OP, rank, placement, sbp)?;
        for (k, t) in parts.iter().enumerate() {
            let i = held.position(k);
            let want = held.device(placement, i);
            if t.is_global() || t.device() != want || t.dtype() != parts[0].dtype() {
                return bad(format!(
                    "part {k} is a {} tensor on {}; rank {} is {want} and part 0 is {}",
                    t.dtype(),
                    describe(t),
                    placement.ranks()[i],
                    parts[0].dtype()
                ));
            }
        }
        // Every position's dims: this process's parts', and the others' from their processes.
        let every = positions_dims(placement, &held, &parts)?;
        // Along a split dim, the parts of the ranks that differ only on the splitting axes
        // add up to the logical size.
        let mut dims = every[0].clone();
        for (d, n) in dims.iter_mut().enumerate() {
            let splitting: Vec<usize> = (0..sbp.len())
                .filter(|&a| sbp[a] == Sbp::Split(d))
                .collect();
            if !splitting.is_empty() {
                *n = (0..placement.len())
                    .filter(|&i| {
                        let c = placement.coord(i);
                        (0..sbp.len()).all(|a| splitting.contains(&a) || c[a] == 0)
                    })
                    .map(|i| every[i][d])
                    .sum();
            }
        }
        for (i, got) in every.iter().enumerate() {
            let want: Vec<usize> = component_ranges(&dims, placement, sbp, i)
                .iter()
                .map(|r| r.len())
                .collect();
            if *got != want {
                return bad(format!(
                    "the part of rank position {i} has dims {got:?}; a balanced split of \
                     {dims:?} by {} gives {want:?}",
                    show_sbp(sbp)
                ));
            }
        }
        let parts = parts.iter().map(Tensor::detach).collect();
        Ok(global_of(
            Shape::from(dims),
            placement.interned(),
            &held,
            sbp,
            parts,
        ))
    }

    /// The logical value of a global tensor as a local tensor on its first rank's device
    /// (boxed to `B` first); `self` for a local tensor.
    #[track_caller]
    pub(crate) fn to_full_local(&self) -> Result<Tensor> {
        match self.global() {
            Some(g) => {
                let b: NdSbp = g.sbp.iter().map(|_| Sbp::Broadcast).collect();
                Ok(boxing::boxing(self, &b)?.swap_remove(0))
            }
            None => Ok(self.clone()),
        }
    }
}

/// The global tensor of `shape` over `parts` (one per position of `placement`).
pub(crate) fn global_of(
    shape: Shape,
    placement: &'static Placement,
    held: &Held,
    sbp: &[Sbp],
    parts: Components,
) -> Tensor {
    let dtype = parts[0].dtype();
    Tensor::global_handle(
        shape,
        dtype,
        Global {
            placement,
            sbp: eddy_ops::global::nd_sbp_copy(sbp),
            held: held.clone(),
            parts,
        },
    )
}

/// `whole` (a local tensor, the logical value) laid out on `placement` by `sbp`: each
/// position's part of it, on its device.
#[track_caller]
fn scatter(whole: &Tensor, placement: &Placement, sbp: &[Sbp]) -> Result<Tensor> {
    let held = Held::of("to_global", placement)?;
    let mut parts = Vec::with_capacity(held.count(placement.len()));
    for k in 0..held.count(placement.len()) {
        let i = held.position(k);
        let mut c = whole.clone();
        for (d, r) in component_ranges(whole.dims(), placement, sbp, i)
            .iter()
            .enumerate()
        {
            if r.len() != whole.dims()[d] {
                c = c.narrow(d as isize, r.start, r.len())?;
            }
        }
        let c = c.to_device(held.device(placement, i))?;
        // Storage of its own: an in-place update of the global tensor leaves `whole` alone.
        let c = if c.shares_storage(whole) {
            boxing::owned(&c)?
        } else {
            c.contiguous()?
        };
        let coord = placement.coord(i);
        let zero = (sbp.iter().enumerate())
            .any(|(a, s)| *s == Sbp::Partial(ReduceKind::Sum) && coord[a] != 0);
        parts.push(if zero { c.zeros_like()? } else { c });
    }
    Ok(global_of(
        whole.shape().clone(),
        placement.interned(),
        &held,
        sbp,
        parts.into(),
    ))
}

/// The dims of the part at every position of `placement`, where this process holds `parts`
/// (its positions', `held`): the others' come from their processes.
#[track_caller]
fn positions_dims(placement: &Placement, held: &Held, parts: &[Tensor]) -> Result<Vec<Vec<usize>>> {
    if !held.is_spread() {
        return Ok(parts.iter().map(|t| t.dims().to_vec()).collect());
    }
    // A table of every position's dims, each process filling its rows: their sum is the
    // whole table.
    let (n, rank) = (placement.len(), parts[0].rank());
    let mut table = vec![0i64; n * (rank + 1)];
    for (k, t) in parts.iter().enumerate() {
        let row = &mut table[held.position(k) * (rank + 1)..][..rank + 1];
        row[0] = 1;
        for (r, &d) in row[1..].iter_mut().zip(t.dims()) {
            *r = d as i64;
        }
    }
    let mine = Tensor::from_vec(table, [n, rank + 1])?;
    let all = world()?
        .all_reduce(&mine, ReduceKind::Sum)?
        .to_vec::<i64>()?;
    (all.chunks(rank + 1).enumerate())
        .map(|(i, row)| match row[0] {
            1 => Ok(row[1..].iter().map(|&d| d as usize).collect()),
            _ => Err(Error::invalid(
                "from_components",
                format!("rank position {i} of {placement} got a part of rank other than {rank}, or none, in its process"),
            )),
        })
        .collect()
}

/// The text of a global tensor's layout, as `cpu:[0, 1], S(0)`.
pub(crate) fn describe(t: &Tensor) -> String {
    match t.global() {
        Some(g) => format!("{}, {}", g.placement, show_sbp(&g.sbp)),
        None => t.device().to_string(),
    }
}

/// `PlacementMismatch` for `op` between `a` and `b`.
#[track_caller]
pub(crate) fn mismatch(op: &'static str, a: &Tensor, b: &Tensor) -> Error {
    Error::PlacementMismatch {
        op,
        lhs: describe(a),
        rhs: describe(b),
        at: crate::Caller::here(),
    }
}
