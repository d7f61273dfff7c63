//! Matrix products (`matmul`, batched, with broadcast batch dims) through the `gemm` crate.

use crate::{DType, Error, Result, Shape, Tensor};
use eddy_ops::elementwise::BinaryOp;
use eddy_ops::linalg as km;

impl Tensor {
    /// The matrix product, as PyTorch's `matmul`: 1-D operands are promoted to a row (lhs) or
    /// a column (rhs) and the added dim removed; leading dims broadcast (batched matmul).
    /// `f16`/`bf16` compute in `f32`; integers are exact, their products and sums wrapping in
    /// the dtype (as `torch.mm`'s do).
    ///
    /// # Errors
    ///
    /// `ShapeMismatch` if the inner dims differ or the batch dims do not broadcast;
    /// `DTypeMismatch`, `DeviceMismatch`; `UnsupportedDType` for `bool`; `InvalidArgument` for
    /// 0-dim operands.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let a = Tensor::ones([4, 2, 3], DType::F32)?;
    /// let b = Tensor::ones([3, 5], DType::F32)?;
    /// assert_eq!(a.matmul(&b)?.dims(), &[4, 2, 5]);
    /// assert!(a.matmul(&a).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn matmul(&self, rhs: &Tensor) -> Result<Tensor> {
        self.same_device("matmul", rhs)?;
        km::matmul_operands((self.dtype(), self.rank()), (rhs.dtype(), rhs.rank()))?;
        if self.rank() == 1 {
            // The added row dim is second to last, or last for a 1-D rhs (whose column dim
            // was removed already): 1-D @ 1-D is a 0-dim dot product, as in PyTorch.
            let r = self.unsqueeze(0)?.matmul(rhs)?;
            return r.squeeze(if rhs.rank() == 1 { -1 } else { -2 });
        }
        if rhs.rank() == 1 {
            return self.matmul(&rhs.unsqueeze(1)?)?.squeeze(-1);
        }
        // Shapes are checked before the casts of f16 and integer operands are enqueued (F1).
        let d = km::infer_matmul(self.dims(), rhs.dims())?;
        let (m, k, n) = (d.m, d.k, d.n);
        let dt = self.dtype();
        match dt {
            DType::F32 | DType::F64 | DType::I64 | DType::I32 | DType::U8 => {}
            // A CUDA device multiplies half operands itself (on its tensor cores, summed in
            // f32, rounded once: what the cast below computes, faster).
            DType::F16 | DType::BF16 if matches!(self.device(), crate::Device::Cuda(_)) => {}
            DType::F16 | DType::BF16 => {
                return self
                    .cast(DType::F32)?
                    .matmul(&rhs.cast(DType::F32)?)?
                    .cast(dt);
            }
            DType::Bool => {
                // Arithmetic on `bool` is unsupported, as everywhere (and in `torch.mm`).
                return Err(Error::UnsupportedDType {
                    at: crate::Caller::here(),
                    op: "matmul",
                    dtype: dt,
                });
            }
        }
        let out = if self.is_global() || rhs.is_global() {
            self.global_matmul(rhs, d.shape())?
        } else {
            let la = self.layout().broadcast_to(&d.with(m, k));
            let lb = rhs.layout().broadcast_to(&d.with(k, n));
            let out = self.empty_like_shape(d.shape(), dt)?;
            let macs = eddy_ops::numel_of(&[d.batch.numel(), m, n, k]);
            let k = kernel!(
                "matmul",
                self.device(),
                km::matmul(self.device(), dt, la, lb)
            );
            Tensor::launch_with_work(k, &[self, rhs], &[&out], Some(macs))?;
            out
        };
        let saved = &[self, rhs][saved_operands(self, rhs)];
        Ok(
            out.record_saving("matmul", &[self, rhs], saved, false, |g, ins, _| {
                let (ga, gb) = matmul_grads(g, &ins[0], &ins[1])?;
                Ok(vec![ga, gb])
            }),
        )
    }

    /// `self @ weightᵀ + bias`, PyTorch's `torch.nn.functional.linear` (what [`Linear`]
    /// computes): `self` of shape `[.., in]`, `weight` of `[out, in]`, `bias` of `[out]` (or
    /// one element, broadcast); the result has shape `[.., out]`. For `f32` and `f64` the bias
    /// is added inside the product's instruction, block by block while the block is in cache
    /// (PyTorch's `addmm`): one instruction and one output instead of two, and for 2-D input
    /// the same values, bit for bit, as `self.matmul(&weight.t()?)?.add(bias)`. Other dtypes
    /// compute exactly that.
    ///
    /// [`Linear`]: crate::nn::Linear
    ///
    /// # Errors
    ///
    /// `ShapeMismatch` if `self`'s last dim is not `weight`'s second, or `bias` does not have
    /// `out` elements; `InvalidArgument` for a 0-dim `self` or a `weight` that is not 2-D;
    /// `DTypeMismatch`, `DeviceMismatch`; `UnsupportedDType` for `bool`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let x = Tensor::from_vec(vec![1f32, 2., 3., 4., 5., 6.], [2, 3])?;
    /// let w = Tensor::from_vec(vec![1f32, 0., -1., 0.5, 0.5, 0.5], [2, 3])?;
    /// let b = Tensor::from_vec(vec![10f32, 20.], [2])?;
    /// let y = x.linear(&w, Some(&b))?;
    /// assert_eq!(y.to_vec2::<f32>()?, [[8., 23.], [8., 27.5]]);
    /// assert_eq!(y.to_vec::<f32>()?, x.matmul(&w.t()?)?.add(&b)?.to_vec::<f32>()?);
    /// assert!(x.linear(&w.t()?, None).is_err(), "[2, 3] against a weight of [3, 2]");
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        self.linear_with("linear", weight, bias, false)
    }

    /// `relu(self @ weightᵀ + bias)`: [`linear`](Self::linear) followed by ReLU, as one
    /// instruction for `f32` and `f64` with a bias (PyTorch's `_addmm_activation`). Each block
    /// of the product gets its bias and its ReLU while it is in cache, so the activation costs
    /// no instruction, no pass over memory and no intermediate tensor. The values are bit for
    /// bit those of `self.linear(weight, bias)?.relu()`, and so are the gradients (ReLU's
    /// backward reads the output, whose sign is the input's). Without a bias, or for other
    /// dtypes, it computes exactly that. [`Sequential`] runs a [`Linear`] followed by
    /// [`Relu`] this way.
    ///
    /// [`Linear`]: crate::nn::Linear
    /// [`Relu`]: crate::nn::Relu
    /// [`Sequential`]: crate::nn::Sequential
    ///
    /// # Errors
    ///
    /// Those of [`linear`](Self::linear), with `linear_relu` as the op's name.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1f32, 2., 3., 4., 5., 6.], [2, 3])?;
    /// let w = Tensor::from_vec(vec![1f32, 0., -1., -0.5, 0.5, 0.5], [2, 3])?;
    /// let b = Tensor::from_vec(vec![1f32, -3.], [2])?;
    /// let y = x.linear_relu(&w, Some(&b))?;
    /// assert_eq!(y.to_vec2::<f32>()?, [[0., 0.], [0., 0.5]]); // before ReLU: [[-1, -1], [-1, 0.5]]
    /// assert_eq!(y.to_vec::<f32>()?, x.linear(&w, Some(&b))?.relu()?.to_vec::<f32>()?);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn linear_relu(&self, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        self.linear_with("linear_relu", weight, bias, true)
    }

    /// [`linear`](Self::linear), followed by ReLU if `relu`, under the op name `name`.
    #[track_caller]
    pub(crate) fn linear_with(
        &self,
        name: &'static str,
        weight: &Tensor,
        bias: Option<&Tensor>,
        relu: bool,
    ) -> Result<Tensor> {
        if self.is_global() || weight.is_global() || bias.is_some_and(Tensor::is_global) {
            if let Some(b) = bias
                && let Some(out) = self.global_linear(name, weight, b, relu)?
            {
                return Ok(record_linear(name, out, self, weight, b, relu));
            }
            // The product, the bias and the activation, each global; the product's record
            // gives the weight's gradient as `gᵀ @ x`, laid out like the weight (a transposed
            // `(xᵀ @ g)ᵀ` would be boxed and stepped through strided).
            let product = {
                let _g = crate::no_grad();
                self.matmul(&weight.t()?)?
            };
            let (in_f, out_f) = (weight.dims().get(1).copied(), weight.dims()[0]);
            let mut y = product.record_saving(
                name,
                &[self, weight],
                &[self, weight],
                false,
                move |g, ins, _| {
                    let (x, w) = (&ins[0], &ins[1]);
                    let gx = (x.requires_grad()).then(|| g.matmul(w)).transpose()?;
                    let gw = (w.requires_grad())
                        .then(|| match (x.rank(), in_f) {
                            (2, _) | (_, None) => g.t()?.matmul(x),
                            (_, Some(i)) => {
                                let rows = x.numel() / i.max(1);
                                g.reshape([rows, out_f])?
                                    .t()?
                                    .matmul(&x.reshape([rows, i])?)
                            }
                        })
                        .transpose()?;
                    Ok(vec![gx, gw])
                },
            );
            if let Some(b) = bias {
                y = y.add(b)?;
            }
            return if relu { y.relu() } else { Ok(y) };
        }
        self.same_device(name, weight)?;
        if let Some(b) = bias {
            self.same_device(name, b)?;
        }
        km::infer_linear(
            name,
            (self.dims(), self.dtype()),
            (weight.dims(), weight.dtype()),
            bias.map(|b| (b.dims(), b.dtype())),
        )?;
        let (out_f, in_f) = (weight.dims()[0], weight.dims()[1]);
        let dt = self.dtype();
        let Some(b) = bias.filter(|_| matches!(dt, DType::F32 | DType::F64)) else {
            let y = self.matmul(&weight.t()?)?;
            let y = match bias {
                Some(b) => y.add(b)?,
                None => y,
            };
            return if relu { y.relu() } else { Ok(y) };
        };
        // Rows of the product: every leading dim of `self` together.
        let lead = &self.dims()[..self.rank() - 1];
        let rows = eddy_ops::numel_of(lead);
        // 2-D input is used as it is (strided or not, as `matmul` reads it), without a
        // reshape's handle and autograd node.
        let x = match self.rank() {
            2 => self.clone(),
            _ => self.reshape([rows, in_f])?,
        };
        let out = self.empty_like_shape(Shape::from(&[rows, out_f][..]), dt)?;
        let lc = b.layout().broadcast_to(out.shape());
        // The kernel reads the weight transposed; the record takes the weight itself, so no
        // transpose's handle and node come between it and its gradient.
        let (la, lb) = (x.layout().clone(), weight.layout().transpose(0, 1));
        let macs = Some(eddy_ops::numel_of(&[rows, out_f, in_f]));
        match relu {
            true => {
                let k = kernel!(
                    "linear_relu",
                    x.device(),
                    km::matmul_bias_relu(x.device(), dt, la, lb, lc)
                );
                Tensor::launch_with_work(k, &[&x, weight, b], &[&out], macs)?
            }
            false => {
                let k = kernel!(
                    "linear",
                    x.device(),
                    km::matmul_bias(x.device(), dt, la, lb, lc)
                );
                Tensor::launch_with_work(k, &[&x, weight, b], &[&out], macs)?
            }
        }
        let out = record_linear(name, out, &x, weight, b, relu);
        if self.rank() == 2 {
            return Ok(out);
        }
        let mut dims = lead.to_vec();
        dims.push(out_f);
        out.reshape(dims)
    }
}

/// `out`, the value of `x.linear(weight, Some(b))` (ReLU'd if `relu`) computed by one fused
/// kernel per device, recorded for autograd under `name`.
#[track_caller]
fn record_linear(
    name: &'static str,
    out: Tensor,
    x: &Tensor,
    weight: &Tensor,
    b: &Tensor,
    relu: bool,
) -> Tensor {
    let saved = &[x, weight][saved_operands(x, weight)];
    out.record_saving(name, &[x, weight, b], saved, relu, move |g, ins, y| {
        // ReLU's backward masks by the output, which is positive exactly where the
        // product plus bias was.
        let masked;
        let g = match relu {
            true => {
                masked = y.binary(g, BinaryOp::ReluBackward)?;
                &masked
            }
            false => g,
        };
        let (x, w) = (&ins[0], &ins[1]);
        // `x @ wᵀ`: the input's gradient `g @ w` (as `matmul`'s backward gives it), the
        // weight's `gᵀ @ x`, contiguous like the weight.
        let gx = (x.requires_grad())
            .then(|| match col_major(x) {
                true => w.t()?.matmul(&g.t()?)?.t(),
                false => g.matmul(w),
            })
            .transpose()?;
        let gw = (w.requires_grad()).then(|| g.t()?.matmul(x)).transpose()?;
        let gb = ins[2]
            .requires_grad()
            .then(|| g.sum_to(ins[2].shape()))
            .transpose()?;
        Ok(vec![gx, gw, gb])
    })
}

/// Which of `[a, b]` the gradients of `a @ b` read: each operand's gradient reads the other.
pub(crate) fn saved_operands(a: &Tensor, b: &Tensor) -> std::ops::Range<usize> {
    match (a.requires_grad(), b.requires_grad()) {
        (true, true) => 0..2,
        (true, false) => 1..2,
        (false, _) => 0..1,
    }
}

/// Whether `t` is a column-major 2-D operand (a transposed view, as `Linear`'s `w.t()`).
fn col_major(t: &Tensor) -> bool {
    t.rank() == 2 && t.layout().strides[0] == 1 && t.dims()[0] > 1
}

/// The gradients of `a @ b` for an incoming gradient `g`, for the operands that require one.
#[track_caller]
pub(crate) fn matmul_grads(
    g: &Tensor,
    a: &Tensor,
    b: &Tensor,
) -> Result<(Option<Tensor>, Option<Tensor>)> {
    // A column-major 2-D operand (a transposed view, as `Linear`'s `w.t()`) gets its gradient
    // column-major too, `(gᵀa)ᵀ` rather than `aᵀg`, so that the transpose's backward hands the
    // weight a contiguous gradient (the optimizer's update then streams instead of striding).
    let ga = a
        .requires_grad()
        .then(|| match col_major(a) && g.rank() == 2 {
            true => b.matmul(&g.t()?)?.t(),
            false => g.matmul(&b.t()?)?.sum_to(a.shape()),
        })
        .transpose()?;
    let gb = b
        .requires_grad()
        .then(|| match col_major(b) && g.rank() == 2 {
            true => g.t()?.matmul(a)?.t(),
            false => a.t()?.matmul(g)?.sum_to(b.shape()),
        })
        .transpose()?;
    Ok((ga, gb))
}
