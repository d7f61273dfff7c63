//! The global forms of the ops that work along one dim: running sums and products, sorting
//! (values and positions), `gather` and the scattering half of `scatter_add`. The dim they
//! work along stays whole on every rank; the others stay as they are split.

use super::{run, run_many};
use crate::{Result, Shape, Tensor};
use eddy_ops::global::{Partials, Rule};

/// The rule of a one-input op along dim `d` of a tensor of `rank` dims that passes the
/// partial inputs `partials`.
fn along(rank: usize, d: usize, partials: Partials) -> Rule {
    Rule::Map {
        dims: (0..rank).map(|k| (k != d).then_some(k)).collect(),
        partials,
    }
}

impl Tensor {
    /// `cumsum` or `cumprod` (`op`) of a global tensor along `d`, its local form `local` (no
    /// record). A running sum of partial sums is the sum of their running sums, for floats
    /// (integers widen to `i64`, where the parts' wrapped sum and the sum of their widened
    /// parts differ).
    #[track_caller]
    pub(crate) fn global_cumulative(
        &self,
        op: &'static str,
        d: usize,
        local: fn(&Tensor, isize) -> Result<Tensor>,
    ) -> Result<Tensor> {
        let partials = if op == "cumsum" && self.dtype().is_float() {
            Partials::Sum
        } else {
            Partials::None
        };
        let rule = along(self.rank(), d, partials);
        run(op, rule, &[self], self.shape().clone(), |x, _| {
            local(x[0], d as isize)
        })
    }

    /// The values and positions of `sort` or `topk` (`op`) of a global tensor along `d`, of
    /// logical shape `shape`, each rank ordering its whole rows (no record).
    #[track_caller]
    pub(crate) fn global_ordered(
        &self,
        op: &'static str,
        d: usize,
        k: Option<usize>,
        descending: bool,
        shape: Shape,
    ) -> Result<(Tensor, Tensor)> {
        let rule = along(self.rank(), d, Partials::None);
        let mut v = run_many(op, rule, &[self], shape, |x, _| {
            let (v, i) = x[0].ordered(op, d as isize, k, descending)?;
            Ok(vec![v, i])
        })?;
        let i = v.pop().expect("the positions");
        Ok((v.pop().expect("the values"), i))
    }

    /// `gather` (as op `op`) of global values and index along `d` (no record).
    #[track_caller]
    pub(crate) fn global_gather(&self, op: &'static str, d: usize, idx: &Tensor) -> Result<Tensor> {
        let rule = Rule::Gather { dim: d };
        run(op, rule, &[self, idx], idx.shape().clone(), |x, _| {
            x[0].gather_impl(op, d as isize, x[1])
        })
    }

    /// `zeros(shape)` with the global `self` added at `idx`'s positions along `d` (the
    /// scattering half of `scatter_add`; no record).
    #[track_caller]
    pub(crate) fn global_add_at_gathered(
        &self,
        idx: &Tensor,
        shape: &Shape,
        d: usize,
    ) -> Result<Tensor> {
        let rule = Rule::ScatterAdd { dim: d };
        run(
            "scatter_add",
            rule,
            &[self, idx],
            shape.clone(),
            |x, dims| x[0].add_at_gathered(x[1], &Shape(dims.into()), d),
        )
    }
}
