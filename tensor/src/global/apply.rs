//! The global forms of the tensor API's ops: each states its rule ([`Rule`]) and the local op
//! each rank runs on its components; the op's own function records the gradient as for a
//! local tensor.

use super::run;
use crate::{DType, Error, Result, Shape, Tensor};
use eddy_ops::elementwise::{BinaryOp, CmpOp, UnaryOp};
use eddy_ops::global::{Partials, ReduceKind, Rule, unary_partials};
use eddy_ops::reduce::ReduceOp;
use eddy_ops::{Layout, Scalar};
use smallvec::SmallVec;

/// The rule of a one-input op whose every dim stays where it is.
fn same_dims(rank: usize, partials: Partials) -> Rule {
    Rule::Map {
        dims: (0..rank).map(Some).collect(),
        partials,
    }
}

impl Tensor {
    /// `op(self, rhs)` of global operands (no record). Never inlined: inlined into the local
    /// op's path, it cost every local op sixteen instructions (callgrind).
    #[track_caller]
    #[inline(never)]
    pub(crate) fn global_binary(&self, rhs: &Tensor, op: BinaryOp) -> Result<Tensor> {
        // The commonest global op straight: the layout `run` would find first, without its
        // lists of inputs (about a tenth of a two-rank op's instructions).
        // (`same_layout`'s test for two operands of one shape, spelled out.)
        if let (Some(a), Some(b)) = (self.global(), rhs.global())
            && std::ptr::eq(a.placement, b.placement)
            && a.sbp == b.sbp
            && self.shape() == rhs.shape()
            && !a.sbp.iter().any(|s| matches!(s, super::Sbp::Partial(_)))
            && !crate::graph::is_tracing()
        {
            // Each rank's kernel straight where the dtype needs no conversion (the components
            // of one layout share shapes and devices, and the result keeps `self`'s dtype);
            // else the local op, unrecorded.
            if op.keeps_dtype(self.dtype(), rhs.dtype()) {
                return Tensor::global_handle_with(self, self.dtype(), a, |parts| {
                    for (x, y) in a.parts.iter().zip(&b.parts) {
                        parts.push(match x.binary_flat(y, op) {
                            Some(r) => r?,
                            None => {
                                let _g = crate::no_grad();
                                x.binary(y, op)?
                            }
                        });
                    }
                    Ok(())
                });
            }
            let _g = crate::no_grad();
            // Pushed one by one: collecting `Result`s moved the list through a temporary,
            // stalling on the copy (a sixth of this function's samples).
            let mut parts = super::Components::new();
            for (x, y) in a.parts.iter().zip(&b.parts) {
                parts.push(x.binary(y, op)?);
            }
            let global = super::Global {
                placement: a.placement,
                sbp: eddy_ops::global::nd_sbp_copy(&a.sbp),
                held: a.held.clone(),
                parts,
            };
            return Ok(Tensor::global_handle_like(self, global));
        }
        let shape = if self.shape() == rhs.shape() {
            self.shape().clone()
        } else {
            eddy_ops::broadcast_shapes(op.name(), self.shape(), rhs.shape())?
        };
        run(op.name(), Rule::Binary(op), &[self, rhs], shape, |x, _| {
            x[0].binary(x[1], op)
        })
    }

    /// A comparison of global operands.
    #[track_caller]
    pub(crate) fn global_compare(&self, rhs: &Tensor, op: CmpOp) -> Result<Tensor> {
        let shape = eddy_ops::broadcast_shapes(op.name(), self.shape(), rhs.shape())?;
        run(op.name(), Rule::Broadcast, &[self, rhs], shape, |x, _| {
            x[0].compare(x[1], op)
        })
    }

    /// A comparison of a global tensor with a scalar.
    #[track_caller]
    pub(crate) fn global_compare_scalar(&self, c: Scalar, op: CmpOp) -> Result<Tensor> {
        let rule = same_dims(self.rank(), Partials::None);
        run(op.name(), rule, &[self], self.shape().clone(), |x, _| {
            x[0].compare_scalar(c, op)
        })
    }

    /// `where` of global operands.
    #[track_caller]
    pub(crate) fn global_where(&self, on_true: &Tensor, on_false: &Tensor) -> Result<Tensor> {
        let s = eddy_ops::broadcast_shapes("where", on_true.shape(), on_false.shape())?;
        let shape = eddy_ops::broadcast_shapes("where", self.shape(), &s)?;
        let ins = [self, on_true, on_false];
        run("where", Rule::Broadcast, &ins, shape, |x, _| {
            x[0].where_(x[1], x[2])
        })
    }

    /// The elementwise `op` of a global tensor of its own dtype (no record).
    #[track_caller]
    pub(crate) fn global_unary(&self, op: UnaryOp) -> Result<Tensor> {
        let rule = same_dims(self.rank(), unary_partials(op));
        run(op.name(), rule, &[self], self.shape().clone(), |x, _| {
            x[0].unary(op)
        })
    }

    /// A global tensor cast to `dtype` (no record). Casts do not decrease, so extrema pass;
    /// sums do not (a sum of rounded parts is not the rounded sum), nor anything into `bool`.
    #[track_caller]
    pub(crate) fn global_cast(&self, dtype: DType) -> Result<Tensor> {
        let partials = if dtype == DType::Bool {
            Partials::None
        } else {
            Partials::Monotone
        };
        let rule = same_dims(self.rank(), partials);
        run("to_dtype", rule, &[self], self.shape().clone(), |x, _| {
            x[0].to_dtype(dtype)
        })
    }

    /// `self @ rhs` of global operands, of logical shape `shape` (no record).
    #[track_caller]
    pub(crate) fn global_matmul(&self, rhs: &Tensor, shape: Shape) -> Result<Tensor> {
        run("matmul", Rule::Matmul, &[self, rhs], shape, |x, _| {
            x[0].matmul(x[1])
        })
    }

    /// `linear` (ReLU'd if `relu`) of a 2-D global input, weight and bias whose layouts need
    /// no boxing, as one fused local `linear` per component: on every grid axis the input
    /// split by rows with the weight and bias broadcast (data parallel: rows split), the
    /// input broadcast with the weight and bias split by output feature (columns split), or
    /// all three broadcast. The layout is the one the product, the bias's addition and the
    /// activation give one after the other. `None` for anything else (another layout, a
    /// partial operand, shapes or dtypes `linear` refuses): the caller takes those steps
    /// one by one. No record.
    #[track_caller]
    pub(crate) fn global_linear(
        &self,
        name: &'static str,
        weight: &Tensor,
        bias: &Tensor,
        relu: bool,
    ) -> Result<Option<Tensor>> {
        use super::Sbp::{Broadcast as B, Split as S};
        let (Some(x), Some(w), Some(b)) = (self.global(), weight.global(), bias.global()) else {
            return Ok(None);
        };
        let (d, wd) = (self.dims(), weight.dims());
        if crate::graph::is_tracing()
            || !std::ptr::eq(x.placement, w.placement)
            || !std::ptr::eq(x.placement, b.placement)
            || d.len() != 2
            || wd.len() != 2
            || d[1] != wd[1]
            || bias.dims() != [wd[0]]
            || !matches!(self.dtype(), DType::F32 | DType::F64)
            || weight.dtype() != self.dtype()
            || bias.dtype() != self.dtype()
        {
            return Ok(None);
        }
        let mut sbp = super::NdSbp::new();
        for ((sx, sw), sb) in x.sbp.iter().zip(&w.sbp).zip(&b.sbp) {
            sbp.push(match (sx, sw, sb) {
                (S(0), B, B) => S(0),
                (B, S(0), S(0)) => S(1),
                (B, B, B) => B,
                _ => return Ok(None),
            });
        }
        let parts = {
            let _g = crate::no_grad();
            (x.parts.iter().zip(&w.parts).zip(&b.parts))
                .map(|((x, w), b)| x.linear_with(name, w, Some(b), relu))
                .collect::<Result<super::Components>>()?
        };
        let shape = Shape::from(&[d[0], wd[0]][..]);
        Ok(Some(super::global_of(
            shape,
            x.placement,
            &x.held,
            &sbp,
            parts,
        )))
    }

    /// `cat` of global operands along `dim`, of logical shape `shape` (no record): each rank
    /// joins its components, the joined dim whole and the others as they are split.
    #[track_caller]
    pub(crate) fn global_cat(tensors: &[&Tensor], dim: usize, shape: Shape) -> Result<Tensor> {
        let rule = Rule::Cat {
            rank: shape.dims().len(),
            dim,
        };
        run("cat", rule, tensors, shape, |x, _| {
            Tensor::cat(x, dim as isize)
        })
    }

    /// `index_select` of global operands along `dim`, of logical shape `shape` (no record).
    #[track_caller]
    pub(crate) fn global_index_select(
        &self,
        dim: usize,
        index: &Tensor,
        shape: Shape,
    ) -> Result<Tensor> {
        let rule = Rule::IndexSelect {
            rank: shape.dims().len(),
            dim,
        };
        run("index_select", rule, &[self, index], shape, |x, _| {
            x[0].index_select(dim as isize, x[1])
        })
    }

    /// `index_select`'s backward of global operands: `self`'s slices added into zeros of
    /// logical shape `shape` at `idx` along `dim` (no record).
    #[track_caller]
    pub(crate) fn global_add_at_index(
        &self,
        idx: &Tensor,
        shape: &Shape,
        dim: usize,
    ) -> Result<Tensor> {
        let rule = Rule::IndexAdd {
            rank: shape.dims().len(),
            dim,
        };
        run("index_add", rule, &[self, idx], shape.clone(), |x, dims| {
            x[0].add_at_index(x[1], &Shape(dims.into()), dim)
        })
    }

    /// The reduction `op` over the dims marked in `reduced` of a global tensor, of logical
    /// shape `shape` (no record). Sums, maxima and minima over a split dim give partials; a
    /// product or a position (`argmax`) keeps only the splits of the other dims; a mean is a
    /// sum divided by the logical count (the caller's), so uneven splits weigh right.
    #[track_caller]
    pub(crate) fn global_reduce(
        &self,
        op: ReduceOp,
        reduced: &[bool],
        keepdim: bool,
        shape: Shape,
    ) -> Result<Tensor> {
        let kind = match op {
            ReduceOp::Sum => Some(ReduceKind::Sum),
            ReduceOp::Max => Some(ReduceKind::Max),
            ReduceOp::Min => Some(ReduceKind::Min),
            _ => None,
        };
        let rule = match kind {
            Some(kind) => Rule::Reduce {
                kind,
                rank: self.rank(),
                reduced: reduced.into(),
                keepdim,
            },
            // A product or a position: only the kept dims may stay split, and no partial
            // passes (a product of sums is no sum of products; a maximum's position needs
            // the values).
            None => Rule::Map {
                dims: (0..self.rank())
                    .map(|d| {
                        let before = reduced[..d].iter().filter(|&&r| r).count();
                        (!reduced[d]).then(|| if keepdim { d } else { d - before })
                    })
                    .collect(),
                partials: Partials::None,
            },
        };
        let dims: SmallVec<[isize; 4]> = (0..self.rank() as isize)
            .filter(|&d| reduced[d as usize])
            .collect();
        run(op.name(), rule, &[self], shape, |x, out| match op {
            // A component with nothing along a split reduced dim (more ranks than rows): the
            // identity of its partial extremum.
            ReduceOp::Max | ReduceOp::Min if x[0].numel() == 0 => {
                let v = match op {
                    ReduceOp::Max => f64::NEG_INFINITY,
                    _ => f64::INFINITY,
                };
                x[0].new_filled(Shape(out.into()), x[0].dtype(), v)
            }
            ReduceOp::Sum => x[0].sum(&dims, keepdim),
            ReduceOp::Max => x[0].amax(&dims, keepdim),
            ReduceOp::Min => x[0].amin(&dims, keepdim),
            ReduceOp::Prod => x[0].prod(&dims, keepdim),
            ReduceOp::ArgMax => x[0].argmax(dims[0], keepdim),
            ReduceOp::ArgMin => x[0].argmin(dims[0], keepdim),
            ReduceOp::Mean => x[0].mean(&dims, keepdim),
        })
    }

    /// Softmax (or log-softmax) over dim `d` of a global tensor (no record).
    #[track_caller]
    pub(crate) fn global_softmax(&self, d: usize, log: bool) -> Result<Tensor> {
        let rule = Rule::Map {
            dims: (0..self.rank()).map(|i| (i != d).then_some(i)).collect(),
            partials: Partials::None,
        };
        let op = if log { "log_softmax" } else { "softmax" };
        run(op, rule, &[self], self.shape().clone(), |x, _| {
            if log {
                x[0].log_softmax(d as isize)
            } else {
                x[0].softmax(d as isize)
            }
        })
    }

    /// The view `l` of `self`: itself with that layout for a local tensor; for a global one,
    /// the view `local` of each component (given the component's dims), where input dim `i`
    /// of a global tensor becomes output dim `dims()[i]` (`None`: it cannot stay split).
    #[inline]
    #[track_caller]
    pub(crate) fn viewed(
        &self,
        op: &'static str,
        l: Layout,
        dims: impl FnOnce() -> SmallVec<[Option<usize>; 4]>,
        local: impl Fn(&Tensor, &[usize]) -> Result<Tensor>,
    ) -> Result<Tensor> {
        if !self.is_global() {
            return Ok(self.with_layout(l));
        }
        self.global_view(op, l.shape, dims(), &local)
    }

    #[cold]
    #[track_caller]
    fn global_view(
        &self,
        op: &'static str,
        shape: Shape,
        dims: SmallVec<[Option<usize>; 4]>,
        local: &dyn Fn(&Tensor, &[usize]) -> Result<Tensor>,
    ) -> Result<Tensor> {
        let rule = Rule::Map {
            dims,
            partials: Partials::All,
        };
        run(op, rule, &[self], shape, |x, d| local(x[0], d))
    }
}

impl Tensor {
    /// `value` everywhere, laid out as `self` (a partial axis becomes `B`: the value is the
    /// logical one).
    pub(crate) fn global_full_like(&self, value: f64) -> Result<Tensor> {
        let g = self.global().expect("global");
        let sbp = whole_values(&g.sbp);
        let parts = (g.parts.iter())
            .map(|c| c.full_like(value))
            .collect::<Result<_>>()?;
        Ok(super::global_of(
            self.shape().clone(),
            g.placement,
            &g.held,
            &sbp,
            parts,
        ))
    }

    /// The local tensor `full` (a logical value, random say) laid out as `self`, partial axes
    /// as `B`: random values on any placement equal the one-device tensor of the same seed.
    pub(crate) fn global_like(&self, full: Tensor) -> Result<Tensor> {
        let g = self.global().expect("global");
        let sbp = whole_values(&g.sbp);
        let _g = crate::no_grad();
        full.to_global(g.placement, &sbp)
    }

    /// `t`, a tensor an op built on the host for its operand `self` (a mask, an index), laid
    /// out `B` on `self`'s placement where `self` is global; `t` itself beside a local one.
    #[track_caller]
    pub(crate) fn beside(&self, t: Tensor) -> Result<Tensor> {
        match self.global() {
            Some(g) => {
                let b: super::NdSbp = g.sbp.iter().map(|_| super::Sbp::Broadcast).collect();
                let _g = crate::no_grad();
                t.to_global(g.placement, &b)
            }
            None => Ok(t),
        }
    }

    /// `value` everywhere in a tensor of `shape` and `dtype` on `self`'s placement, `B` on
    /// every axis.
    pub(crate) fn global_filled(&self, shape: Shape, dtype: DType, value: f64) -> Result<Tensor> {
        let g = self.global().expect("global");
        let sbp: super::NdSbp = g.sbp.iter().map(|_| super::Sbp::Broadcast).collect();
        let parts = (g.parts.iter())
            .map(|c| c.new_filled(shape.clone(), dtype, value))
            .collect::<Result<_>>()?;
        Ok(super::global_of(shape, g.placement, &g.held, &sbp, parts))
    }
}

impl Tensor {
    /// The in-place `op` on a global `self` with `src` laid out to match: `f` on each rank's
    /// components. Along a split or broadcast axis `src` is split alike or whole; along a
    /// partial axis of kind `k`, as `partial(k)` says (`P(sum)` for a sum's `add_`, so each
    /// rank adds its part; `B` for its `mul_`), and an op with nothing there is refused
    /// (`NoSbpRule`), as one that would take the update once per rank. A local `src` is a
    /// logical value, laid out first.
    #[track_caller]
    pub(crate) fn global_inplace(
        &self,
        op: &'static str,
        src: Option<&Tensor>,
        partial: impl Fn(ReduceKind) -> Option<super::Sbp>,
        f: impl Fn(&Tensor, Option<&Tensor>) -> Result<Tensor>,
    ) -> Result<Tensor> {
        if crate::graph::is_tracing() {
            return Err(refuse_traced(op));
        }
        let Some(g) = self.global() else {
            return Err(super::mismatch(op, self, src.expect("a global operand")));
        };
        let parts: Vec<Tensor> = match src {
            Some(s) => {
                let need = (g.sbp.iter())
                    .map(|sb| match sb {
                        super::Sbp::Split(d) => {
                            Some(eddy_ops::global::aligned(s.dims(), self.dims(), *d))
                        }
                        super::Sbp::Partial(k) => partial(*k),
                        super::Sbp::Broadcast => Some(super::Sbp::Broadcast),
                    })
                    .collect::<Option<super::NdSbp>>()
                    .ok_or_else(|| refuse(op, self))?;
                let _g = crate::no_grad();
                let s = match s.global() {
                    Some(sg) if sg.placement != g.placement => {
                        return Err(super::mismatch(op, self, s));
                    }
                    Some(_) => s.clone(),
                    None => s.to_global(g.placement, &need)?,
                };
                super::boxing::boxing(&s, &need)?
            }
            None if g.sbp.iter().any(|s| matches!(s, super::Sbp::Partial(_))) => {
                return Err(refuse(op, self));
            }
            None => Vec::new(),
        };
        // Each component's own in-place op counts the write in its version, which is the
        // global handle's (`version_blob`).
        for (i, c) in g.parts.iter().enumerate() {
            f(c, parts.get(i))?;
        }
        Ok(self.clone())
    }
}

/// `sbp` with each partial axis `B`: the layout of a tensor that holds logical values.
fn whole_values(sbp: &[super::Sbp]) -> super::NdSbp {
    (sbp.iter())
        .map(|s| match s {
            super::Sbp::Partial(_) => super::Sbp::Broadcast,
            s => *s,
        })
        .collect()
}

/// `InvalidArgument` for a global `op` in a compiled graph's closure, or a global input to
/// a graph: a plan replays the ops it traced on the components it saw, so a global tensor's
/// components would be read as state from outside, not as this run's values.
#[cold]
#[track_caller]
pub(crate) fn refuse_traced(op: &'static str) -> Error {
    Error::invalid(
        op,
        "global tensors cannot be used in a compiled graph (run its steps eagerly)",
    )
}

/// `NoSbpRule` for `op`, which has no global form, on the global `t`.
#[cold]
#[track_caller]
pub(crate) fn refuse(op: &'static str, t: &Tensor) -> Error {
    Error::NoSbpRule {
        op: op.to_string(),
        placement: super::describe(t),
        inputs: format!(
            "[{}]",
            t.sbp().map(eddy_ops::global::show_sbp).unwrap_or_default()
        ),
        at: crate::Caller::here(),
    }
}

/// Input dim → output dim of a reshape from `from` to `to`: a dim stays (and may stay split)
/// where the output has a dim of its size after the same number of elements before it.
pub(crate) fn reshape_dims(from: &[usize], to: &[usize]) -> SmallVec<[Option<usize>; 4]> {
    let mut before_to: SmallVec<[usize; 4]> = SmallVec::new();
    let mut p = 1usize;
    for &n in to {
        before_to.push(p);
        p = p.saturating_mul(n);
    }
    let mut p = 1usize;
    from.iter()
        .map(|&n| {
            let here = p;
            p = p.saturating_mul(n);
            (0..to.len()).find(|&o| to[o] == n && before_to[o] == here)
        })
        .collect()
}

/// What the operand of the in-place `op` needs along a partial axis of kind `k` of the tensor
/// it updates: the operand's SBP of the signature of `op` that keeps `P(k)` (`P(sum)` for a
/// sum's `add_`, `B` for its `mul_`), if there is one.
pub(crate) fn inplace_partial(op: BinaryOp, k: ReduceKind) -> Option<super::Sbp> {
    let p = super::Sbp::Partial(k);
    (Rule::Binary(op).signatures(&[&[1], &[1]], &[1]).into_iter())
        .find(|s| s.inputs[0] == p && s.output == p)
        .map(|s| s.inputs[1])
}
