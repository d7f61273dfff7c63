//! Cross-entropy and negative log-likelihood of global scores: each rank's rows give their part of the sum, the mean is
//! over the logical count, and the gradient is built from global ops.

use super::run;
use crate::{DType, Result, Shape, Tensor};
use eddy_ops::global::{Rule, Sbp};
use eddy_ops::nn::IGNORE_INDEX;

impl Tensor {
    /// `target` laid out beside global scores `self` (its rows split where the scores' rows
    /// are); a global target as it is; a local `self` with a global target refused.
    #[track_caller]
    fn rows_beside(&self, op: &'static str, target: &Tensor) -> Result<Tensor> {
        match (self.global(), target.global()) {
            (Some(g), None) => {
                // The rows beside the scores' rows: split where they are split.
                let sbp: super::NdSbp = (g.sbp.iter())
                    .map(|s| match s {
                        Sbp::Split(0) => Sbp::Split(0),
                        _ => Sbp::Broadcast,
                    })
                    .collect();
                target.to_global(g.placement, &sbp)
            }
            (None, _) => Err(super::mismatch(op, self, target)),
            _ => Ok(target.clone()),
        }
    }

    /// `cross_entropy` of global scores `[N, C]` against class indices `[N]` (or class
    /// probabilities `[N, C]`); a local target is laid out beside the scores first.
    #[track_caller]
    pub(crate) fn global_cross_entropy(&self, target: &Tensor) -> Result<Tensor> {
        const OP: &str = "cross_entropy";
        let target = self.rows_beside(OP, target)?;
        if self.rank() != 2 {
            return Err(super::refuse(OP, self));
        }
        let lp = self.log_softmax(1)?;
        if target.dtype().is_float() {
            eddy_ops::nn::check_same_shape(OP, self.dims(), target.dims())?;
            return lp
                .mul(&target.cast(lp.dtype())?)?
                .sum(&[1], false)?
                .mean_all()?
                .neg();
        }
        lp.global_nll(OP, &target)
    }

    /// `nll_loss` of global log-probabilities `[N, C]` against class indices `[N]`; a local
    /// target is laid out beside them first.
    #[track_caller]
    pub(crate) fn global_nll_loss(&self, target: &Tensor) -> Result<Tensor> {
        const OP: &str = "nll_loss";
        let target = self.rows_beside(OP, target)?;
        if self.rank() != 2 {
            return Err(super::refuse(OP, self));
        }
        self.global_nll(OP, &target)
    }

    /// The mean negative log-likelihood (as op `op`) of global log-probabilities `self`
    /// against global class indices, ignored targets left out of the sum and the count.
    #[track_caller]
    fn global_nll(&self, op: &'static str, target: &Tensor) -> Result<Tensor> {
        eddy_ops::nn::check_class_targets(
            op,
            (self.dims(), self.dtype()),
            (target.dims(), target.dtype()),
        )?;
        // Each rank's rows: its mean (whose kernel checks the targets) times its count.
        let sum = run(
            op,
            Rule::RowLoss,
            &[self, target],
            Shape::default(),
            |x, _| {
                let n = x[1].ne_scalar(IGNORE_INDEX as f64)?.sum_all()?;
                let mean = x[0].nll_loss(x[1])?;
                let part = mean.mul(&n.to_dtype(mean.dtype())?)?;
                n.gt_scalar(0.0)?.where_(&part, &part.zeros_like()?)
            },
        )?;
        let classes = self.beside(crate::engine::with_engine(self.engine(), || {
            Tensor::arange(0.0, self.dims()[1] as f64, 1.0, DType::I64)
        })?)?;
        let t = target.to_dtype(DType::I64)?;
        let sum = sum.record(op, &[self], move |gr, _, _| {
            let hit = t.unsqueeze(1)?.eq(&classes)?.to_dtype(gr.dtype())?;
            Ok(vec![Some(hit.mul(gr)?.neg()?)])
        });
        let count = target.ne_scalar(IGNORE_INDEX as f64)?.sum_all()?;
        sum.div(&count.to_dtype(sum.dtype())?)
    }
}
