//! Ops defined outside Eddy: a host kernel over contiguous slices, run as an ordinary engine
//! instruction (ordered, asynchronous, errors at sync), with an optional backward made of
//! existing ops.

use crate::{Elem, Error, Result, Shape, Tensor};
use eddy_ops::FnKernel;
use eddy_ops::kernel::{input, output};

/// The gradient of a custom op: `backward(grad_of_output, inputs, output)` returns one optional
/// gradient per input, each shaped like its input.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{CustomBackward, Tensor};
/// // The gradient of y = 2x: twice the output's gradient.
/// let double: Box<CustomBackward> = Box::new(|g, _ins, _out| Ok(vec![Some(g.mul_scalar(2.0)?)]));
/// let x = Tensor::from_vec(vec![1f32], [1])?;
/// let grads = double(&x.ones_like()?, &[x.clone()], &x)?;
/// assert_eq!(grads[0].as_ref().unwrap().to_vec::<f32>()?, [2.]);
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
pub type CustomBackward =
    dyn Fn(&Tensor, &[Tensor], &Tensor) -> Result<Vec<Option<Tensor>>> + Send + Sync;

impl Tensor {
    /// Runs a user kernel `f(inputs, output)` over the values of `inputs` (all of dtype `T`,
    /// made contiguous first) into a fresh tensor of `out_shape` and dtype `T`.
    ///
    /// The call returns at once: `f` runs on the engine after every earlier writer of the
    /// inputs. An `Err(message)` from `f` poisons the output and surfaces at its next sync as
    /// `Error::Vm(Kernel { op: name, .. })`. Inputs must share one engine and device.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` with no inputs or with `T = bool` (use [`Bool8`](crate::Bool8), the
    /// storage type of `bool` tensors); `DTypeMismatch` if an input is not `T`;
    /// `DeviceMismatch`; engine errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, -2.0, 3.0], [3])?;
    /// let y = Tensor::custom_map::<f32, _>("square_plus_one", &[&x], [3], |ins, out| {
    ///     for (o, v) in out.iter_mut().zip(ins[0]) {
    ///         *o = v * v + 1.0;
    ///     }
    ///     Ok(())
    /// })?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![2.0, 5.0, 10.0]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn custom_map<T, F>(
        name: &'static str,
        inputs: &[&Tensor],
        out_shape: impl Into<Shape>,
        mut f: F,
    ) -> Result<Tensor>
    where
        T: Elem,
        F: FnMut(&[&[T]], &mut [T]) -> std::result::Result<(), String> + Send + 'static,
    {
        if !T::ANY_BITS {
            // A kernel over `&[bool]` would view stored bytes as `bool` in place.
            return Err(Error::invalid(
                name,
                "a custom op over bool tensors takes their storage type, Bool8",
            ));
        }
        let Some(first) = inputs.first() else {
            return Err(Error::invalid(name, "a custom op needs at least one input"));
        };
        for t in inputs {
            first.same_device(name, t)?;
            if t.dtype() != T::DTYPE {
                return Err(Error::DTypeMismatch {
                    at: crate::Caller::here(),
                    op: name,
                    lhs: T::DTYPE,
                    rhs: t.dtype(),
                });
            }
        }
        if !first.device().is_cpu() {
            // The closure reads host slices: it runs only where the memory is the host's.
            return Err(Error::Unsupported {
                at: crate::Caller::here(),
                op: name,
                device: first.device(),
            });
        }
        let shape = out_shape.into();
        if shape.checked_numel().is_none() {
            return Err(Error::ShapeOverflow {
                at: crate::Caller::here(),
                shape: shape.dims().to_vec(),
                dtype: T::DTYPE,
            });
        }
        let mut ins = Vec::with_capacity(inputs.len());
        for t in inputs {
            ins.push(t.contiguous()?);
        }
        let out = first.empty_like_shape(shape, T::DTYPE)?;
        let lens: Vec<(usize, usize)> =
            ins.iter().map(|t| (t.layout().offset, t.numel())).collect();
        let n_out = out.numel();
        let kernel = FnKernel::new(name, move |bi, bo| {
            // SAFETY: the engine runs this kernel while its instruction reads `bi` and writes
            // `bo` (a fresh blob, so no input aliases it); every input blob holds `T`s.
            let slices: Vec<&[T]> = bi
                .iter()
                .zip(&lens)
                .map(|(b, &(off, n))| unsafe { &input::<T>(b)[off..off + n] })
                .collect();
            // SAFETY: as above; the output is taken once.
            let o = unsafe { &mut output::<T>(&bo[0])[..n_out] };
            f(&slices, o)
        });
        let refs: Vec<&Tensor> = ins.iter().collect();
        // A user's kernel: its cost is unknown, so it is never run on the calling thread.
        Tensor::launch_with_work(kernel, &refs, &[&out], None)?;
        Ok(out)
    }

    /// Gives a custom op's output a gradient: `backward(grad, inputs, output)`, made of tensor
    /// ops, returns one optional gradient per input. Recorded only when grad mode is on and an
    /// input requires grad.
    ///
    /// The backward may read the values of `inputs` and of the output, so an in-place write to
    /// any of them between the forward and the backward makes the backward fail with
    /// `Autograd`, as PyTorch does for saved tensors. It must return one entry per input, each
    /// `None` or of that input's shape (else `Autograd`).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![3.0f32], [1])?.requires_grad_(true)?;
    /// let y = Tensor::custom_map::<f32, _>("square", &[&x], [1], |i, o| {
    ///     o[0] = i[0][0] * i[0][0];
    ///     Ok(())
    /// })?
    /// .with_backward("square", &[&x], |g, ins, _| Ok(vec![Some(g.mul(&ins[0].mul_scalar(2.0)?)?)]));
    /// y.sum_all()?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![6.0]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn with_backward(
        self,
        name: &'static str,
        inputs: &[&Tensor],
        backward: impl Fn(&Tensor, &[Tensor], &Tensor) -> Result<Vec<Option<Tensor>>>
        + Send
        + Sync
        + 'static,
    ) -> Tensor {
        self.record_saving(name, inputs, inputs, true, backward)
    }
}
