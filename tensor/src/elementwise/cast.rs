//! Casts between dtypes and copies between devices.

use crate::engine::Place;
use crate::{DType, Device, Result, Tensor};
use eddy_ops::copy;

impl Tensor {
    /// Casts to `dtype` if it differs (an op recorded for autograd).
    /// `self` if it already has `dtype` (borrowed: no reference-count traffic on the per-op
    /// path), else a converted copy.
    #[track_caller]
    pub(crate) fn cast_ref(&self, dtype: DType) -> Result<std::borrow::Cow<'_, Tensor>> {
        if self.dtype() == dtype {
            Ok(std::borrow::Cow::Borrowed(self))
        } else {
            self.to_dtype(dtype).map(std::borrow::Cow::Owned)
        }
    }

    #[track_caller]
    pub(crate) fn cast(&self, dtype: DType) -> Result<Tensor> {
        if self.dtype() == dtype {
            Ok(self.clone())
        } else {
            self.to_dtype(dtype)
        }
    }

    /// A copy converted to `dtype`, as PyTorch's casts: integers wrap modulo 2^bits, floats
    /// truncate toward zero into integers (see [`eddy_ops::cast`]).
    ///
    /// # Errors
    ///
    /// Only engine errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::from_vec(vec![1.7f32, -2.5], [2])?.to_dtype(DType::I64)?;
    /// assert_eq!(t.to_vec::<i64>()?, vec![1, -2]);
    /// let u = Tensor::from_vec(vec![300i64, -1], [2])?.to_dtype(DType::U8)?;
    /// assert_eq!(u.to_vec::<u8>()?, vec![44, 255]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        let out = if self.is_global() {
            self.global_cast(dtype)?
        } else {
            let out = self.empty_like_shape(self.shape().clone(), dtype)?;
            let k = kernel!(
                "copy",
                self.device(),
                copy::copy(
                    self.device(),
                    self.layout().clone(),
                    self.dtype(),
                    out.layout().clone(),
                    dtype,
                )
            );
            Tensor::launch(k, &[self], &[&out])?;
            out
        };
        let from = self.dtype();
        if !(from.is_float() && dtype.is_float()) {
            return Ok(out);
        }
        Ok(out.record("to_dtype", &[self], move |g, _, _| {
            Ok(vec![Some(g.cast(from)?)])
        }))
    }

    /// A copy of the tensor on `device` (itself if it is there already), as PyTorch's `to`.
    ///
    /// The copy is an instruction on the destination's stream like any other op: it returns at
    /// once, runs after every earlier write of the source, and every later op on either side
    /// is ordered after it as its reads and writes require. Gradients flow back to the source's
    /// device.
    ///
    /// # Errors
    ///
    /// `DeviceUnavailable` if the tensor's engine has no such device (a CPU device past
    /// [`VmBuilder::cpu_devices`](eddy_vm::VmBuilder::cpu_devices), or CUDA in a build without
    /// it); `Unsupported` for a pair of devices with no copy between them.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{with_engine, Device, Error, Tensor};
    /// let vm = eddy_vm::Vm::builder().cpu_devices(2).build()?;
    /// let t = with_engine(&vm, || Tensor::from_vec(vec![1f32, 2.], [2]))?;
    /// let u = t.to_device(Device::Cpu(1))?;
    /// assert_eq!((u.device(), u.to_vec::<f32>()?), (Device::Cpu(1), vec![1., 2.]));
    /// assert!(matches!(t.add(&u), Err(Error::DeviceMismatch { .. })));
    /// assert!(matches!(t.to_device(Device::Cuda(0)), Err(Error::DeviceUnavailable { .. })));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn to_device(&self, device: Device) -> Result<Tensor> {
        if device == self.device() {
            return Ok(self.clone());
        }
        let place = Place::on("to_device", self.engine_ref().share(), device)?;
        // Between device kinds the copy moves whole storage ranges: a strided source is made
        // contiguous on its own device first.
        let src = if self.device().is_cpu() != device.is_cpu() && !self.is_contiguous() {
            &self.contiguous()?
        } else {
            self
        };
        let k = kernel!(
            "to_device",
            device,
            copy::transfer(src.device(), device, src.dtype(), src.layout().clone())
        );
        let out = Tensor::empty_on(place, src.shape().clone(), src.dtype())?;
        // Between the host and a CUDA device, on that device's copy stream of the direction.
        let (on, kind) = copy::transfer_stream(src.device(), device);
        let stream = self.engine().stream_of(on, kind);
        let work = Some(2 * src.numel());
        Tensor::launch_on(stream, k, &[src], &[&out], work)?;
        if !self.dtype().is_float() {
            return Ok(out);
        }
        let from = self.device();
        Ok(out.record("to_device", &[self], move |g, _, _| {
            Ok(vec![Some(g.to_device(from)?)])
        }))
    }
}
