//! Views: new layouts over the same storage, no copy. Writes through a view are ordered against
//! reads of the base and other views because the engine tracks dependences per storage.

use crate::{Error, Layout, Result, Shape, Tensor};
use eddy_ops::norm_dim;

impl Tensor {
    /// The same elements with another shape; a view when the tensor is contiguous, else a copy.
    ///
    /// # Errors
    ///
    /// `ElementCountMismatch` if the element counts differ.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([2, 3])?;
    /// assert_eq!(t.to_vec2::<f32>()?, vec![vec![0., 1., 2.], vec![3., 4., 5.]]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn reshape(&self, shape: impl Into<Shape>) -> Result<Tensor> {
        let shape = shape.into();
        // Checked before the copy a strided tensor needs.
        let layout = eddy_ops::view::reshape("reshape", self.dims(), shape, 0)?;
        let src = self.contiguous()?;
        let layout = Layout {
            offset: src.layout().offset,
            ..layout
        };
        let in_shape = self.shape().clone();
        let to = layout.shape.clone();
        let view = src.viewed(
            "reshape",
            layout,
            || crate::global::reshape_dims(self.dims(), to.dims()),
            |c, d| c.reshape(d),
        )?;
        Ok(view.record("reshape", &[self], move |g, _, _| {
            Ok(vec![Some(g.reshape(in_shape.clone())?)])
        }))
    }

    /// A view with another shape; unlike [`reshape`](Self::reshape) it never copies.
    ///
    /// # Errors
    ///
    /// `ElementCountMismatch`, or `InvalidArgument` if the tensor is not contiguous.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([2, 3])?;
    /// let v = t.view([3, 2])?;
    /// assert!(v.shares_storage(&t));
    /// assert_eq!(v.to_vec2::<f32>()?, [[0., 1.], [2., 3.], [4., 5.]]);
    /// assert!(t.t()?.view([6]).is_err()); // not contiguous: use reshape
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn view(&self, shape: impl Into<Shape>) -> Result<Tensor> {
        if !self.is_contiguous() {
            return Err(Error::invalid(
                "view",
                "the tensor is not contiguous; use reshape (which copies)",
            ));
        }
        self.reshape(shape)
    }

    /// All elements as one dim.
    ///
    /// # Errors
    ///
    /// None in practice (as [`reshape`](Self::reshape)).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([2, 3])?;
    /// let f = t.t()?.flatten_all()?;
    /// assert_eq!(f.dims(), &[6]);
    /// assert_eq!(f.to_vec::<f32>()?, [0., 3., 1., 4., 2., 5.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn flatten_all(&self) -> Result<Tensor> {
        self.reshape([self.numel()])
    }

    /// Dims `start..=end` merged into one, as PyTorch's `flatten(start_dim, end_dim)`; negative
    /// dims count from the end, and a 0-d tensor becomes a 1-d tensor of one element.
    ///
    /// # Errors
    ///
    /// `InvalidDim` if a dim is out of range; `InvalidArgument` if `start` comes after `end`
    /// or the merged size overflows `usize` (possible only beside a dim of size 0).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::zeros([2, 3, 4, 5], DType::F32)?;
    /// assert_eq!(t.flatten(1, 2)?.dims(), &[2, 12, 5]);
    /// assert_eq!(t.flatten(-2, -1)?.dims(), &[2, 3, 20]);
    /// assert_eq!(Tensor::scalar(7f32)?.flatten(0, -1)?.to_vec::<f32>()?, [7.]);
    /// assert!(t.flatten(2, 1).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn flatten(&self, start: isize, end: isize) -> Result<Tensor> {
        let dims = self.dims();
        // A 0-d tensor takes dims 0 and -1, as a 1-d one does.
        let rank = dims.len().max(1);
        let (s, e) = (
            norm_dim("flatten", start, rank)?,
            norm_dim("flatten", end, rank)?,
        );
        if s > e {
            return Err(Error::invalid(
                "flatten",
                format!("start_dim {start} comes after end_dim {end}"),
            ));
        }
        if dims.is_empty() {
            return self.reshape([1usize]);
        }
        // The merged size is at most the element count, unless another dim is 0.
        let Some(merged) = dims[s..=e]
            .iter()
            .try_fold(1usize, |p, &d| p.checked_mul(d))
        else {
            let message = format!("dims {s} to {e} of {dims:?} overflow");
            return Err(Error::invalid("flatten", message));
        };
        let mut shape = dims[..s].to_vec();
        shape.push(merged);
        shape.extend_from_slice(&dims[e + 1..]);
        self.reshape(shape)
    }

    /// Swaps dims `a` and `b`.
    ///
    /// # Errors
    ///
    /// `InvalidDim`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([2, 3])?;
    /// let tt = t.transpose(0, 1)?;
    /// assert_eq!(tt.to_vec2::<f32>()?, [[0., 3.], [1., 4.], [2., 5.]]);
    /// assert!(t.transpose(0, 2).is_err());
    /// let s = Tensor::scalar(1f32)?; // a 0-d tensor takes dim 0 or -1, as in PyTorch
    /// assert_eq!(s.transpose(0, -1)?.dims(), &[] as &[usize]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn transpose(&self, a: isize, b: isize) -> Result<Tensor> {
        let (a, b) = eddy_ops::view::transposed_dims(self.rank(), a, b)?;
        if self.rank() == 0 {
            return Ok(self.with_layout(self.layout().clone()).record(
                "transpose",
                &[self],
                |g, _, _| Ok(vec![Some(g.clone())]),
            ));
        }
        let swapped = |i: usize| {
            if i == a {
                b
            } else if i == b {
                a
            } else {
                i
            }
        };
        let view = self.viewed(
            "transpose",
            self.layout().transpose(a, b),
            || (0..self.rank()).map(|i| Some(swapped(i))).collect(),
            |c, _| c.transpose(a as isize, b as isize),
        )?;
        Ok(view.record("transpose", &[self], move |g, _, _| {
            Ok(vec![Some(g.transpose(a as isize, b as isize)?)])
        }))
    }

    /// The transpose of a matrix (the last two dims swapped); a 0-d or 1-d tensor is returned
    /// as it is, as PyTorch's `t`.
    ///
    /// # Errors
    ///
    /// None for now; a `Result` like the other views.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([2, 3])?;
    /// assert_eq!(t.t()?.dims(), &[3, 2]);
    /// assert_eq!(t.reshape([1, 2, 3])?.t()?.dims(), &[1, 3, 2]); // the last two dims
    /// assert_eq!(t.flatten_all()?.t()?.dims(), &[6]); // 1-d: unchanged
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn t(&self) -> Result<Tensor> {
        if self.rank() < 2 {
            return self.transpose(0, 0);
        }
        self.transpose(-2, -1)
    }

    /// Reorders dims: dim `i` of the result is dim `perm[i]`.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if `perm` is not a permutation of the dims.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let x = Tensor::zeros([2, 3, 4], DType::F32)?;
    /// assert_eq!(x.permute(&[2, 0, 1])?.dims(), &[4, 2, 3]);
    /// assert!(x.permute(&[0, 0, 1]).is_err()); // not a permutation
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn permute(&self, perm: &[isize]) -> Result<Tensor> {
        let r = self.rank();
        let p = eddy_ops::view::permutation(perm, r)?;
        let mut inv = vec![0isize; r];
        for (i, &d) in p.iter().enumerate() {
            inv[d] = i as isize;
        }
        let view = self.viewed(
            "permute",
            self.layout().permute(&p),
            || (0..r).map(|d| p.iter().position(|&q| q == d)).collect(),
            |c, _| c.permute(perm),
        )?;
        Ok(view.record("permute", &[self], move |g, _, _| {
            Ok(vec![Some(g.permute(&inv)?)])
        }))
    }

    /// Elements `start..start + len` of dim `dim`.
    ///
    /// # Errors
    ///
    /// `InvalidDim`; `IndexOutOfRange` if the range leaves the dim.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::arange(0.0, 5.0, 1.0, DType::I64)?;
    /// assert_eq!(t.narrow(0, 1, 3)?.to_vec::<i64>()?, vec![1, 2, 3]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn narrow(&self, dim: isize, start: usize, len: usize) -> Result<Tensor> {
        let (d, l) = eddy_ops::view::narrow("narrow", self.layout(), dim, start, len)?;
        let in_shape = self.shape().clone();
        let dtype = self.dtype();
        let view = self.viewed(
            "narrow",
            l,
            || (0..self.rank()).map(|i| (i != d).then_some(i)).collect(),
            |c, _| c.narrow(d as isize, start, len),
        )?;
        Ok(view.record("narrow", &[self], move |g, _, _| {
            let z = g.new_filled(in_shape.clone(), dtype, 0.0)?;
            z.narrow(d as isize, start, len)?.copy_(g)?;
            Ok(vec![Some(z)])
        }))
    }

    /// Every `step`-th element of dim `dim`, from the first (a view): PyTorch's `x[::step]`.
    ///
    /// # Errors
    ///
    /// `InvalidDim`; `InvalidArgument` for a step of 0.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::arange(0.0, 7.0, 1.0, DType::I64)?;
    /// assert_eq!(t.step(0, 3)?.to_vec::<i64>()?, vec![0, 3, 6]);
    /// assert_eq!(t.narrow(0, 1, 5)?.step(0, 2)?.to_vec::<i64>()?, vec![1, 3, 5]);
    /// assert!(t.step(0, 0).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn step(&self, dim: isize, step: usize) -> Result<Tensor> {
        let d = norm_dim("step", dim, self.rank())?;
        if step == 0 {
            return Err(Error::invalid("step", "slice step must be positive"));
        }
        if step == 1 {
            return Ok(self.clone());
        }
        let mut l = self.layout().clone();
        let size = l.shape.0[d];
        l.shape.0[d] = size.div_ceil(step);
        // A dim of one element (or none) is never stepped over: its stride stays.
        if l.shape.0[d] > 1 {
            l.strides[d] = l.strides[d].saturating_mul(step);
        }
        let in_shape = self.shape().clone();
        let dtype = self.dtype();
        // A global tensor steps each component along a whole dim (a split one is gathered).
        let view = self.viewed(
            "step",
            l,
            || (0..self.rank()).map(|i| (i != d).then_some(i)).collect(),
            |c, _| c.step(d as isize, step),
        )?;
        Ok(view.record("step", &[self], move |g, _, _| {
            let z = g.new_filled(in_shape.clone(), dtype, 0.0)?;
            z.step(d as isize, step)?.copy_(g)?;
            Ok(vec![Some(z)])
        }))
    }

    /// `narrow` over a half-open range (`t.slice(0, 1..3)`).
    ///
    /// # Errors
    ///
    /// As [`narrow`](Self::narrow); `InvalidArgument` if `range.end < range.start`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([2, 3])?;
    /// assert_eq!(t.slice(1, 1..3)?.to_vec2::<f32>()?, [[1., 2.], [4., 5.]]);
    /// assert!(t.slice(1, 2..4).is_err()); // past the end
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn slice(&self, dim: isize, range: std::ops::Range<usize>) -> Result<Tensor> {
        if range.end < range.start {
            return Err(Error::invalid("slice", format!("empty range {range:?}")));
        }
        self.narrow(dim, range.start, range.end - range.start)
    }

    /// Index `index` of dim `dim`, which is removed (a view).
    ///
    /// # Errors
    ///
    /// `InvalidDim`, `IndexOutOfRange`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([2, 3])?;
    /// assert_eq!(t.select(0, 1)?.to_vec::<f32>()?, [3., 4., 5.]);
    /// assert_eq!(t.select(1, 0)?.dims(), &[2]);
    /// assert!(t.select(0, 2).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn select(&self, dim: isize, index: usize) -> Result<Tensor> {
        let d = norm_dim("select", dim, self.rank())?;
        if index >= self.dims()[d] {
            return Err(Error::IndexOutOfRange {
                at: crate::Caller::here(),
                op: "select",
                index: index as i64,
                size: self.dims()[d],
            });
        }
        self.narrow(d as isize, index, 1)?.squeeze(d as isize)
    }

    /// Removes dim `dim` if its size is 1 (otherwise returns the tensor unchanged, as PyTorch).
    ///
    /// # Errors
    ///
    /// `InvalidDim`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let x = Tensor::zeros([1, 3], DType::F32)?;
    /// assert_eq!(x.squeeze(0)?.dims(), &[3]);
    /// assert_eq!(x.squeeze(1)?.dims(), &[1, 3]); // size 3: unchanged
    /// assert_eq!(Tensor::scalar(2f32)?.squeeze(-1)?.dims(), &[] as &[usize]); // 0-d: dim 0 or -1
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn squeeze(&self, dim: isize) -> Result<Tensor> {
        let (d, l) = eddy_ops::view::squeeze(self.layout(), dim)?;
        let Some(l) = l else {
            return Ok(self.clone());
        };
        let in_shape = self.shape().clone();
        let view = self.viewed(
            "squeeze",
            l,
            || {
                (0..self.rank())
                    .map(|i| (i != d).then(|| i - usize::from(i > d)))
                    .collect()
            },
            |c, _| c.squeeze(d as isize),
        )?;
        Ok(view.record("squeeze", &[self], move |g, _, _| {
            Ok(vec![Some(g.reshape(in_shape.clone())?)])
        }))
    }

    /// Inserts a dim of size 1 at `dim` (`-1` appends).
    ///
    /// # Errors
    ///
    /// `InvalidDim` unless `-(rank+1) <= dim <= rank`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let x = Tensor::zeros([3], DType::F32)?;
    /// assert_eq!(x.unsqueeze(0)?.dims(), &[1, 3]);
    /// assert_eq!(x.unsqueeze(-1)?.dims(), &[3, 1]);
    /// assert!(x.unsqueeze(2).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn unsqueeze(&self, dim: isize) -> Result<Tensor> {
        let l = eddy_ops::view::unsqueeze(self.layout(), dim)?;
        // Checked above: the new dim's place.
        let at = if dim < 0 {
            dim + self.rank() as isize + 1
        } else {
            dim
        } as usize;
        let in_shape = self.shape().clone();
        let view = self.viewed(
            "unsqueeze",
            l,
            || {
                (0..self.rank())
                    .map(|i| Some(i + usize::from(i >= at)))
                    .collect()
            },
            |c, _| c.unsqueeze(dim),
        )?;
        Ok(view.record("unsqueeze", &[self], move |g, _, _| {
            Ok(vec![Some(g.reshape(in_shape.clone())?)])
        }))
    }

    /// Broadcasts to `shape` without copying (new and size-1 dims get stride 0). Writing in place
    /// into the result is refused (`OverlappingWrite`).
    ///
    /// # Errors
    ///
    /// `ShapeMismatch` if `self` does not broadcast to `shape`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let row = Tensor::from_vec(vec![1f32, 2.], [2])?;
    /// let b = row.broadcast_to([3, 2])?;
    /// assert_eq!(b.to_vec2::<f32>()?, [[1., 2.], [1., 2.], [1., 2.]]);
    /// assert!(b.shares_storage(&row)); // no copy
    /// assert!(row.broadcast_to([3]).is_err());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn broadcast_to(&self, shape: impl Into<Shape>) -> Result<Tensor> {
        let shape = shape.into();
        // F2: a view's element count must not overflow either.
        eddy_ops::view::check_broadcast(self.shape(), &shape, self.dtype())?;
        if &shape == self.shape() {
            return Ok(self.clone());
        }
        let shift = shape.rank() - self.rank();
        let view = self.viewed(
            "expand",
            self.layout().broadcast_to(&shape),
            || {
                (0..self.rank())
                    .map(|i| (self.dims()[i] == shape.dims()[i + shift]).then_some(i + shift))
                    .collect()
            },
            |c, d| c.broadcast_to(d),
        )?;
        if !crate::autograd::records(&[self]) {
            return Ok(view);
        }
        let in_shape = self.shape().clone();
        Ok(view.record("expand", &[self], move |g, _, _| {
            Ok(vec![Some(g.sum_to(&in_shape)?)])
        }))
    }

    /// PyTorch's name for [`broadcast_to`](Self::broadcast_to).
    ///
    /// # Errors
    ///
    /// As `broadcast_to`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let col = Tensor::from_vec(vec![1i64, 2], [2, 1])?;
    /// assert_eq!(col.expand([2, 3])?.to_vec2::<i64>()?, [[1, 1, 1], [2, 2, 2]]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn expand(&self, shape: impl Into<Shape>) -> Result<Tensor> {
        self.broadcast_to(shape)
    }

    /// A dense row-major tensor with the same values: `self` if already contiguous, else a copy.
    ///
    /// # Errors
    ///
    /// Only engine errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([2, 3])?;
    /// let tt = t.t()?;
    /// let c = tt.contiguous()?;
    /// assert!(c.is_contiguous() && !c.shares_storage(&t));
    /// assert_eq!(c.to_vec::<f32>()?, tt.to_vec::<f32>()?);
    /// assert!(t.contiguous()?.shares_storage(&t)); // already contiguous: itself
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn contiguous(&self) -> Result<Tensor> {
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        // A copy of every element: the values known on the host stay known.
        let out = Tensor::empty_with_range(
            self.place(),
            self.shape().clone(),
            self.dtype(),
            self.known_range(),
        )?;
        let k = kernel!(
            "copy",
            self.device(),
            eddy_ops::copy::copy(
                self.device(),
                self.layout().clone(),
                self.dtype(),
                out.layout().clone(),
                out.dtype(),
            )
        );
        Tensor::launch(k, &[self], &[&out])?;
        out.range_is_filled();
        Ok(out.record("contiguous", &[self], |g, _, _| Ok(vec![Some(g.clone())])))
    }
}

/// Splitting into pieces (views) and reversing (a copy).
impl Tensor {
    /// Views of consecutive pieces of `size` along `dim`; the last is shorter when `size` does
    /// not divide the dim (PyTorch's `split` with an int). Differentiable.
    ///
    /// # Errors
    ///
    /// `InvalidDim`; `InvalidArgument` for `size` 0 on a non-empty dim; `Vm(OutOfMemory)` when
    /// the host cannot hold that many views (size 1 over a `[2^62, 0]` tensor).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::arange(0.0, 5.0, 1.0, DType::F32)?;
    /// let parts = t.split(2, 0)?;
    /// assert_eq!(parts.len(), 3);
    /// assert_eq!(parts[2].to_vec::<f32>()?, [4.0]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn split(&self, size: usize, dim: isize) -> Result<Vec<Tensor>> {
        let d = eddy_ops::view::check_split(self.dims(), size, dim)?;
        let n = self.dims()[d];
        if n == 0 {
            return Ok(vec![self.clone()]);
        }
        let mut parts = crate::host::views_reserve("split", n.div_ceil(size))?;
        for s in (0..n).step_by(size) {
            parts.push(self.narrow(d as isize, s, size.min(n - s))?);
        }
        Ok(parts)
    }

    /// Views of consecutive pieces with the given `sizes` along `dim`, which must add up to the
    /// dim's size (PyTorch's `split` with a list).
    ///
    /// # Errors
    ///
    /// `InvalidDim`; `InvalidArgument` if the sizes do not add up.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([2, 3])?;
    /// let parts = t.split_sizes(&[1, 2], 1)?;
    /// assert_eq!(parts[1].to_vec::<f32>()?, [1.0, 2.0, 4.0, 5.0]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn split_sizes(&self, sizes: &[usize], dim: isize) -> Result<Vec<Tensor>> {
        let d = eddy_ops::view::check_split_sizes(self.dims(), sizes, dim)?;
        let (mut parts, mut start) = (Vec::with_capacity(sizes.len()), 0);
        for &s in sizes {
            parts.push(self.narrow(d as isize, start, s)?);
            start += s;
        }
        Ok(parts)
    }

    /// At most `chunks` views of equal size `⌈n / chunks⌉` along `dim` (the last may be
    /// smaller, and there are fewer when the dim is short; an empty dim gives `chunks` empty
    /// views), as PyTorch's `chunk`.
    ///
    /// # Errors
    ///
    /// `InvalidDim`; `InvalidArgument` for 0 chunks; `Vm(OutOfMemory)` as [`split`](Self::split).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?;
    /// let c = t.chunk(4, 0)?;
    /// assert_eq!(c.iter().map(|p| p.numel()).collect::<Vec<_>>(), [2, 2, 2]);
    /// assert_eq!(Tensor::zeros([0, 2], DType::F32)?.chunk(3, 0)?.len(), 3); // 3 empty pieces
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn chunk(&self, chunks: usize, dim: isize) -> Result<Vec<Tensor>> {
        let (d, size) = eddy_ops::view::chunk_size(self.dims(), chunks, dim)?;
        if size == 0 {
            // As PyTorch: an empty dim gives `chunks` empty pieces, not one.
            let mut parts = crate::host::views_reserve("chunk", chunks)?;
            for _ in 0..chunks {
                parts.push(self.narrow(d as isize, 0, 0)?);
            }
            return Ok(parts);
        }
        self.split(size, dim)
    }

    /// The slices along `dim`, each without it (views), as PyTorch's `unbind`.
    ///
    /// # Errors
    ///
    /// `InvalidDim`; `Vm(OutOfMemory)` when the host cannot hold that many views (dim 0 of a
    /// `[2^62, 0]` tensor).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([2, 3])?;
    /// let cols = t.unbind(1)?;
    /// assert_eq!(cols[2].to_vec::<f32>()?, [2.0, 5.0]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn unbind(&self, dim: isize) -> Result<Vec<Tensor>> {
        let d = norm_dim("unbind", dim, self.rank())?;
        let mut parts = crate::host::views_reserve("unbind", self.dims()[d])?;
        for i in 0..self.dims()[d] {
            parts.push(self.select(d as isize, i)?);
        }
        Ok(parts)
    }

    /// A copy with the order of elements reversed along each of `dims`. Differentiable.
    ///
    /// # Errors
    ///
    /// `InvalidDim`; `InvalidArgument` if a dim is named twice.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([2, 3])?;
    /// assert_eq!(t.flip(&[1])?.to_vec::<f32>()?, [2.0, 1.0, 0.0, 5.0, 4.0, 3.0]);
    /// assert_eq!(t.flip(&[0, -1])?.to_vec::<f32>()?, [5.0, 4.0, 3.0, 2.0, 1.0, 0.0]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn flip(&self, dims: &[isize]) -> Result<Tensor> {
        let r = self.rank();
        let mut seen = smallvec::SmallVec::<[bool; 8]>::from_elem(false, r);
        for &dim in dims {
            let d = norm_dim("flip", dim, r.max(1))?;
            if r == 0 {
                continue;
            }
            if std::mem::replace(&mut seen[d], true) {
                return Err(Error::invalid(
                    "flip",
                    format!("dim {d} named twice in {dims:?}"),
                ));
            }
        }
        if self.numel() == 0 {
            // Nothing to move (a copy still, as below); the index of a dim of 2^62 entries
            // would not fit in memory.
            return self.to_dtype(self.dtype());
        }
        let mut out = None::<Tensor>;
        for d in (0..r).filter(|&d| seen[d] && self.dims()[d] > 1) {
            let n = self.dims()[d] as i64;
            let rev = self.beside(crate::with_engine(self.engine(), || {
                Tensor::from_vec((0..n).rev().collect::<Vec<i64>>(), [n as usize])
            })?)?;
            out = Some(
                out.as_ref()
                    .unwrap_or(self)
                    .index_select(d as isize, &rev)?,
            );
        }
        // Nothing to reverse: still a copy, as PyTorch's `flip`.
        match out {
            Some(out) => Ok(out),
            None => self.to_dtype(self.dtype()),
        }
    }
}
