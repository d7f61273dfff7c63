//! Tensor–tensor ops with broadcasting and dtype promotion, comparisons, `where_` and the
//! logical ops.

use crate::{DType, Error, Result, Scalar, Shape, Tensor};
use eddy_ops::elementwise::{self as ew, BinaryOp, CmpOp, Operand};
use eddy_ops::{Lay, broadcast_shapes};

impl Tensor {
    /// What inference needs of this tensor as an operand.
    #[inline]
    pub(crate) fn operand(&self) -> Operand<'_> {
        Operand::new(self.shape(), self.dtype(), self.device())
    }

    /// Checks operands of a binary op and returns (output shape, compute dtype).
    #[track_caller]
    pub(super) fn binary_prep(&self, op: &'static str, rhs: &Tensor) -> Result<(Shape, DType)> {
        self.same_device(op, rhs)?;
        ew::infer_binary(op, self.operand(), rhs.operand())
    }

    #[track_caller]
    pub(crate) fn binary(&self, rhs: &Tensor, op: BinaryOp) -> Result<Tensor> {
        let dt = self.dtype();
        // The common case first: one dtype that needs no conversion, one shape, each operand
        // dense or a splat (`sum(y).broadcast_to(..)`), one engine. It skips the broadcast,
        // the casts and the layout analysis (about a sixth of a 16-element op's
        // instructions); the general path below gives the same result for it.
        'flat: {
            if !(op.keeps_dtype(dt, rhs.dtype())
                && self.shape() == rhs.shape()
                && self.same_place(rhs)
                && !(self.is_global() | rhs.is_global()))
            {
                break 'flat;
            }
            let Some(out) = self.binary_flat(rhs, op) else {
                break 'flat;
            };
            return Ok(Tensor::record_binary(out?, op, self, rhs));
        }
        if self.is_global() | rhs.is_global() {
            let out = self.global_binary(rhs, op)?;
            return Ok(Tensor::record_binary(out, op, self, rhs));
        }
        // Off the flat path above, which takes no bool operand.
        if op == BinaryOp::Sub && (dt == DType::Bool || rhs.dtype() == DType::Bool) {
            // As PyTorch: `-` with a bool operand is refused (use `logical_xor` or `~`).
            return Err(Error::UnsupportedDType {
                at: crate::Caller::here(),
                op: "sub",
                dtype: DType::Bool,
            });
        }
        let (shape, dt) = self.binary_prep(op.name(), rhs)?;
        if dt == DType::Bool {
            // PyTorch's arithmetic on two bool operands: `+` and `maximum` are `or`, `*` and
            // `minimum` are `and` (what the kernels compute on 0/1 bytes).
            match op {
                BinaryOp::Add | BinaryOp::Maximum => return self.compare(rhs, CmpOp::Or),
                BinaryOp::Mul | BinaryOp::Minimum => return self.compare(rhs, CmpOp::And),
                _ => {}
            }
        }
        let dt = ew::binary_dtype(op, dt)?;
        let (a, b) = (self.cast_ref(dt)?, rhs.cast_ref(dt)?);
        let (a, b) = (&*a, &*b);
        let out = self.empty_like_shape(shape, dt)?;
        let (la, lb) = (a.lay_for(out.shape()), b.lay_for(out.shape()));
        let k = kernel!(
            op.name(),
            self.device(),
            ew::binary(self.device(), op, dt, la, lb)
        );
        Tensor::launch(k, &[a, b], &[&out])?;
        Ok(Tensor::record_binary(out, op, a, b))
    }

    /// `op(self, rhs)` of local operands of one shape, one place and dtypes that need no
    /// conversion ([`BinaryOp::keeps_dtype`]), each dense or a splat: the kernel straight, unrecorded;
    /// `None` for other layouts.
    #[inline(always)]
    #[track_caller]
    pub(crate) fn binary_flat(&self, rhs: &Tensor, op: BinaryOp) -> Option<Result<Tensor>> {
        // Both dense tested apart: going through the `Option`s of the general test cost
        // the commonest op about fifteen instructions (callgrind).
        let (la, lb) = if self.is_contiguous() && rhs.is_contiguous() {
            let dense = |t: &Tensor| Lay::Dense(t.layout().offset);
            (dense(self), dense(rhs))
        } else {
            (self.flat_lay()?, rhs.flat_lay()?)
        };
        Some(self.launch_flat(rhs, op, la, lb))
    }

    /// The launch of [`binary_flat`](Self::binary_flat) (a function of its own, not a closure,
    /// so that an error names the user's call).
    #[inline(always)]
    #[track_caller]
    fn launch_flat(&self, rhs: &Tensor, op: BinaryOp, la: Lay, lb: Lay) -> Result<Tensor> {
        let dt = self.dtype();
        // The kernel before the output: built right before the launch, its fields were
        // still in the store buffer when the launch copied them in wider pieces, a
        // store-forwarding stall (a sixth of `launch`'s samples).
        let k = kernel!(
            op.name(),
            self.device(),
            ew::binary(self.device(), op, dt, la, lb)
        );
        let out = self.empty_like_shape(self.shape().clone(), dt)?;
        Tensor::launch(k, &[self, rhs], &[&out])?;
        Ok(out)
    }

    /// Records `out = op(a, b)` for autograd (`a` and `b` already of `out`'s dtype), unless the
    /// op has no gradient there.
    pub(super) fn record_binary(out: Tensor, op: BinaryOp, a: &Tensor, b: &Tensor) -> Tensor {
        // The backward ops run inside a backward, where nothing is recorded.
        if !out.dtype().is_float() || matches!(op, BinaryOp::ReluBackward | BinaryOp::GeluBackward)
        {
            return out;
        }
        // What each backward reads: `a` and `b` for mul, pow, maximum, minimum; `b` and the
        // output for div; nothing for add and sub.
        let (saved, reads_y): (&[&Tensor], bool) = match op {
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::ReluBackward | BinaryOp::GeluBackward => {
                (&[], false)
            }
            BinaryOp::FloorDiv | BinaryOp::Rem => (&[a, b], false),
            BinaryOp::Div => (&[b], true),
            BinaryOp::Pow => (&[a, b], true),
            BinaryOp::Mul | BinaryOp::Maximum | BinaryOp::Minimum => (&[a, b], false),
        };
        out.record_saving(op.name(), &[a, b], saved, reads_y, move |g, ins, y| {
            let (a, b) = (&ins[0], &ins[1]);
            let need = |t: &Tensor| t.requires_grad();
            let (ga, gb) = match op {
                BinaryOp::Add => (Some(g.clone()), Some(g.clone())),
                BinaryOp::Sub => (Some(g.clone()), need(b).then(|| g.neg()).transpose()?),
                BinaryOp::Mul => (
                    need(a).then(|| g.mul(b)).transpose()?,
                    need(b).then(|| g.mul(a)).transpose()?,
                ),
                BinaryOp::Div => (
                    need(a).then(|| g.div(b)).transpose()?,
                    need(b).then(|| g.mul(y)?.div(b)?.neg()).transpose()?,
                ),
                // As PyTorch's `pow_backward_self`/`_exponent`: the base's gradient is 0 where
                // the exponent is 0, and the exponent's is 0 where the base is 0 and the
                // exponent non-negative (the plain formulas give 0·inf = NaN there).
                BinaryOp::Pow => {
                    let zero = g.new_filled(Shape::default(), g.dtype(), 0.0)?;
                    let ga = need(a)
                        .then(|| {
                            let d = g.mul(b)?.mul(&a.pow(&b.sub_scalar(1.0)?)?)?;
                            b.eq_scalar(0.0)?.where_(&zero, &d)
                        })
                        .transpose()?;
                    let gb = need(b)
                        .then(|| {
                            let d = g.mul(y)?.mul(&a.log()?)?;
                            a.eq_scalar(0.0)?
                                .logical_and(&b.ge_scalar(0.0)?)?
                                .where_(&zero, &d)
                        })
                        .transpose()?;
                    (ga, gb)
                }
                // Ties split the gradient in halves, as PyTorch's `maximum`/`minimum`; where
                // either side is NaN both get all of it.
                BinaryOp::Maximum | BinaryOp::Minimum => {
                    let (a_loses, b_loses) = if op == BinaryOp::Maximum {
                        (a.lt(b)?, a.gt(b)?)
                    } else {
                        (a.gt(b)?, a.lt(b)?)
                    };
                    let z = g.new_filled(Shape::default(), g.dtype(), 0.0)?;
                    let shared = a.eq(b)?.where_(&g.mul_scalar(0.5)?, g)?;
                    (
                        Some(a_loses.where_(&z, &shared)?),
                        Some(b_loses.where_(&z, &shared)?),
                    )
                }
                BinaryOp::ReluBackward | BinaryOp::GeluBackward => (None, None),
                // As PyTorch: `floor_divide` is flat, `remainder` is `a - ⌊a/b⌋·b`.
                BinaryOp::FloorDiv => (Some(g.zeros_like()?), Some(g.zeros_like()?)),
                BinaryOp::Rem => (
                    Some(g.clone()),
                    need(b)
                        .then(|| g.mul(&a.floor_divide(b)?)?.neg())
                        .transpose()?,
                ),
            };
            Ok(vec![
                ga.map(|t| t.sum_to(a.shape())).transpose()?,
                gb.map(|t| t.sum_to(b.shape())).transpose()?,
            ])
        })
    }

    #[track_caller]
    pub(crate) fn compare(&self, rhs: &Tensor, op: CmpOp) -> Result<Tensor> {
        if self.is_global() || rhs.is_global() {
            return self.global_compare(rhs, op);
        }
        let (shape, dt) = self.binary_prep(op.name(), rhs)?;
        self.compare_in(rhs, op, shape, dt)
    }

    /// Compares with the scalar `c` as it is: in a dtype that holds both (see `cmp_scalar`),
    /// never wrapped into `self`'s, so `u8` 255 is not equal to 511. (PyTorch wraps an integer
    /// scalar into an integer tensor's dtype first: a deliberate difference.)
    #[track_caller]
    pub(crate) fn compare_scalar(&self, c: Scalar, op: CmpOp) -> Result<Tensor> {
        if self.is_global() {
            return self.global_compare_scalar(c, op);
        }
        let rhs = self.cmp_scalar(c)?;
        let dt = self.dtype().promote(rhs.dtype());
        self.compare_in(&rhs, op, self.shape().clone(), dt)
    }

    #[track_caller]
    fn compare_in(&self, rhs: &Tensor, op: CmpOp, shape: Shape, dt: DType) -> Result<Tensor> {
        let (a, b) = (self.cast_ref(dt)?, rhs.cast_ref(dt)?);
        let (a, b) = (&*a, &*b);
        let out = self.empty_like_shape(shape, DType::Bool)?;
        let (la, lb) = (a.lay_for(out.shape()), b.lay_for(out.shape()));
        let k = kernel!(
            op.name(),
            self.device(),
            ew::compare(self.device(), op, dt, la, lb)
        );
        Tensor::launch(k, &[a, b], &[&out])?;
        Ok(out)
    }

    /// `cond ? on_true : on_false`, elementwise, with broadcasting; `self` is the `Bool` condition.
    ///
    /// # Errors
    ///
    /// `UnsupportedDType` if `self` is not `Bool`; `ShapeMismatch`, `DeviceMismatch`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![-1f32, 2.], [2])?;
    /// let y = x.gt_scalar(0.0)?.where_(&x, &x.zeros_like()?)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![0., 2.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn where_(&self, on_true: &Tensor, on_false: &Tensor) -> Result<Tensor> {
        if self.dtype() != DType::Bool {
            return Err(Error::UnsupportedDType {
                at: crate::Caller::here(),
                op: "where",
                dtype: self.dtype(),
            });
        }
        let (s1, dt) = on_true.binary_prep("where", on_false)?;
        self.same_device("where", on_true)?;
        let shape = broadcast_shapes("where", self.shape(), &s1)?;
        let (a, b) = (on_true.cast(dt)?, on_false.cast(dt)?);
        let out = if self.is_global() || a.is_global() || b.is_global() {
            self.global_where(&a, &b)?
        } else {
            let out = self.empty_like_shape(shape.clone(), dt)?;
            let k = kernel!(
                "where",
                self.device(),
                ew::where_(
                    self.device(),
                    dt,
                    self.layout().broadcast_to(&shape),
                    a.layout().broadcast_to(&shape),
                    b.layout().broadcast_to(&shape),
                )
            );
            Tensor::launch(k, &[self, &a, &b], &[&out])?;
            out
        };
        let cond = self.detach();
        Ok(out.record_saving(
            "where",
            &[&a, &b],
            &[&cond.clone()],
            false,
            move |g, ins, _| {
                let z = g.zeros_like()?;
                Ok(vec![
                    Some(cond.where_(g, &z)?.sum_to(ins[0].shape())?),
                    Some(cond.where_(&z, g)?.sum_to(ins[1].shape())?),
                ])
            },
        ))
    }

    /// The dtype of [`scalar_like`](Self::scalar_like)`(c)`: that of `self op c`.
    pub(super) fn scalar_dtype(&self, c: Scalar) -> DType {
        self.dtype().with_scalar(c)
    }

    /// A 0-dim tensor of `c` in the dtype of `self op c`.
    #[track_caller]
    pub(super) fn scalar_like(&self, c: Scalar) -> Result<Tensor> {
        self.new_filled(Shape::default(), self.scalar_dtype(c), c.to_f64())
    }

    /// The right operand of a comparison with the scalar `c`: as [`scalar_like`](Self::scalar_like)
    /// (a float `c` beside an integer tensor compares in `f32`, as PyTorch's promotion does),
    /// but an integer `c` outside an integer (or bool) dtype's range is kept in `i64` (or
    /// `f64` beyond that), so that it is compared as it is, not clamped into the range: a
    /// `u8` 255 is not equal to 256.
    #[track_caller]
    pub(super) fn cmp_scalar(&self, c: Scalar) -> Result<Tensor> {
        let dt = match (self.dtype(), c) {
            // A bool beside a bool tensor, an integer beside an integer one: as it is.
            (DType::Bool, Scalar::Int(_)) => DType::Bool,
            _ => self.scalar_dtype(c),
        };
        let c = c.to_f64();
        let range = match dt {
            DType::Bool => Some((0.0, 1.0)),
            DType::U8 => Some((0.0, 255.0)),
            DType::I32 => Some((i32::MIN as f64, i32::MAX as f64)),
            _ => None,
        };
        let i64_range = (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&c);
        let dt = match range {
            Some((lo, hi)) if !(lo..=hi).contains(&c) && i64_range => DType::I64,
            Some((lo, hi)) if !(lo..=hi).contains(&c) => DType::F64,
            None if dt == DType::I64 && !i64_range => DType::F64,
            _ => dt,
        };
        self.new_filled(Shape::default(), dt, c)
    }

    // ---- in place ----------------------------------------------------------------------------
}

macro_rules! binary_methods {
    ($($(#[$m:meta])* $name:ident => $op:ident),* $(,)?) => {
        impl Tensor {
            $(
                $(#[$m])*
                ///
                /// Broadcasts; promotes dtypes (see [`DType::promote`]).
                ///
                /// # Errors
                ///
                /// `ShapeMismatch`, `DeviceMismatch`, `UnsupportedDType` (bool arithmetic).
                #[track_caller]
                pub fn $name(&self, rhs: &Tensor) -> Result<Tensor> {
                    self.binary(rhs, BinaryOp::$op)
                }
            )*
        }
    };
}

binary_methods! {
    /// `a + b`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2.], [2])?;
    /// let b = Tensor::from_vec(vec![10i64], [1])?; // broadcast, promoted to f32
    /// assert_eq!(a.add(&b)?.to_vec::<f32>()?, [11., 12.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    add => Add,
    /// `a - b`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let m = Tensor::from_vec(vec![5f32, 6., 7., 8.], [2, 2])?;
    /// let row = Tensor::from_vec(vec![1f32, 2.], [2])?;
    /// assert_eq!(m.sub(&row)?.to_vec::<f32>()?, [4., 4., 6., 6.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    sub => Sub,
    /// `a * b`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![2i64, 3], [2])?;
    /// let y = a.mul(&Tensor::from_vec(vec![4i64, 5], [2])?)?;
    /// assert_eq!(y.to_vec::<i64>()?, [8, 15]); // integers stay integers
    /// assert!(a.mul(&Tensor::from_vec(vec![1i64, 2, 3], [3])?).is_err()); // [2] and [3]
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    mul => Mul,
    /// `⌊a / b⌋`, Python's `//` (PyTorch's `floor_divide`): integers stay integers (a division
    /// by zero fails at the next sync), floats round toward negative infinity.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![7i64, -7], [2])?;
    /// let b = Tensor::from_vec(vec![2i64], [1])?;
    /// assert_eq!(a.floor_divide(&b)?.to_vec::<i64>()?, [3, -4]);
    /// let x = Tensor::from_vec(vec![7.5f32, -7.5], [2])?;
    /// assert_eq!(x.floor_divide(&Tensor::from_vec(vec![2f32], [1])?)?.to_vec::<f32>()?, [3., -4.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    floor_divide => FloorDiv,
    /// `a - ⌊a / b⌋·b`, Python's `%` (PyTorch's `remainder`): the result has `b`'s sign.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![7i64, -7], [2])?;
    /// assert_eq!(a.remainder(&Tensor::from_vec(vec![3i64], [1])?)?.to_vec::<i64>()?, [1, 2]);
    /// assert_eq!(a.remainder(&Tensor::from_vec(vec![-3i64], [1])?)?.to_vec::<i64>()?, [-2, -1]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    remainder => Rem,
    /// `a / b` (true division: integers give a float)
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1i64, 3], [2])?;
    /// let y = a.div(&Tensor::from_vec(vec![2i64], [1])?)?;
    /// assert_eq!(y.to_vec::<f32>()?, [0.5, 1.5]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    div => Div,
    /// `a ^ b`
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![2f32, 3.], [2])?;
    /// let y = a.pow(&Tensor::from_vec(vec![3f32, 2.], [2])?)?.to_vec::<f32>()?;
    /// assert!((y[0] - 8.0).abs() < 1e-5 && (y[1] - 9.0).abs() < 1e-5);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pow => Pow,
    /// The elementwise maximum (NaN propagates).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 5., f32::NAN], [3])?;
    /// let y = a.maximum(&Tensor::from_vec(vec![3f32, 2., 0.], [3])?)?.to_vec::<f32>()?;
    /// assert_eq!(y[..2], [3., 5.]);
    /// assert!(y[2].is_nan());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    maximum => Maximum,
    /// The elementwise minimum (NaN propagates).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 5., f32::NAN], [3])?;
    /// let y = a.minimum(&Tensor::from_vec(vec![3f32, 2., 0.], [3])?)?.to_vec::<f32>()?;
    /// assert_eq!(y[..2], [1., 2.]);
    /// assert!(y[2].is_nan());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    minimum => Minimum,
}

macro_rules! cmp_methods {
    ($(
        $(#[$m:meta])* $name:ident,
        $(#[$sm:meta])* $sname:ident => $op:ident, $doc:literal
    );* $(;)?) => {
        impl Tensor {
            $(
                #[doc = concat!("`a ", $doc, " b` as `Bool`, with broadcasting and promotion.")]
                ///
                $(#[$m])*
                ///
                /// # Errors
                ///
                /// `ShapeMismatch`, `DeviceMismatch`.
                #[track_caller]
                pub fn $name(&self, rhs: &Tensor) -> Result<Tensor> {
                    self.compare(rhs, CmpOp::$op)
                }
                #[doc = concat!("`a ", $doc, " c` as `Bool` for a scalar `c`.")]
                ///
                $(#[$sm])*
                ///
                /// # Errors
                ///
                /// Engine errors.
                #[track_caller]
                pub fn $sname(&self, c: impl Into<Scalar>) -> Result<Tensor> {
                    self.compare_scalar(c.into(), CmpOp::$op)
                }
            )*
        }
    };
}

cmp_methods! {
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// let b = Tensor::from_vec(vec![1i64, 3, 2], [3])?; // promoted to f32
    /// assert_eq!(a.eq(&b)?.to_vec::<bool>()?, [true, false, false]);
    /// assert!(a.eq(&Tensor::from_vec(vec![1f32, 2.], [2])?).is_err()); // [3] and [2]
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    eq,
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// assert_eq!(a.eq_scalar(2.0)?.to_vec::<bool>()?, [false, true, false]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    eq_scalar => Eq, "==";
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// let b = Tensor::from_vec(vec![1i64, 3, 2], [3])?; // promoted to f32
    /// assert_eq!(a.ne(&b)?.to_vec::<bool>()?, [false, true, true]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    ne,
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// assert_eq!(a.ne_scalar(2.0)?.to_vec::<bool>()?, [true, false, true]);
    /// let nan = Tensor::from_vec(vec![f32::NAN], [1])?;
    /// assert_eq!(nan.ne_scalar(f64::NAN)?.to_vec::<bool>()?, [true]); // NaN differs from itself
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    ne_scalar => Ne, "!=";
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// let b = Tensor::from_vec(vec![1i64, 3, 2], [3])?; // promoted to f32
    /// assert_eq!(a.lt(&b)?.to_vec::<bool>()?, [false, true, false]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    lt,
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// assert_eq!(a.lt_scalar(2.0)?.to_vec::<bool>()?, [true, false, false]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    lt_scalar => Lt, "<";
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// let b = Tensor::from_vec(vec![1i64, 3, 2], [3])?; // promoted to f32
    /// assert_eq!(a.le(&b)?.to_vec::<bool>()?, [true, true, false]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    le,
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// assert_eq!(a.le_scalar(2.0)?.to_vec::<bool>()?, [true, true, false]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    le_scalar => Le, "<=";
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// let b = Tensor::from_vec(vec![1i64, 3, 2], [3])?; // promoted to f32
    /// assert_eq!(a.gt(&b)?.to_vec::<bool>()?, [false, false, true]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    gt,
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// assert_eq!(a.gt_scalar(2.0)?.to_vec::<bool>()?, [false, false, true]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    gt_scalar => Gt, ">";
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// let b = Tensor::from_vec(vec![1i64, 3, 2], [3])?; // promoted to f32
    /// assert_eq!(a.ge(&b)?.to_vec::<bool>()?, [true, false, true]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    ge,
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// assert_eq!(a.ge_scalar(2.0)?.to_vec::<bool>()?, [false, true, true]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    ge_scalar => Ge, ">=";
}

/// Logical ops: every operand is a truth value, true where it is not zero (NaN is true); the
/// result is `Bool`. Operands of any dtypes broadcast and promote as the comparisons do.
impl Tensor {
    /// `a && b` elementwise.
    ///
    /// # Errors
    ///
    /// `ShapeMismatch`, `DeviceMismatch`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![true, true, false], [3])?;
    /// let b = Tensor::from_vec(vec![2.0f32, 0.0, f32::NAN], [3])?;
    /// assert_eq!(a.logical_and(&b)?.to_vec::<bool>()?, [true, false, false]);
    /// assert_eq!(a.logical_or(&b)?.to_vec::<bool>()?, [true, true, true]);
    /// assert_eq!(a.logical_xor(&b)?.to_vec::<bool>()?, [false, true, true]);
    /// assert_eq!(b.logical_not()?.to_vec::<bool>()?, [false, true, false]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn logical_and(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, CmpOp::And)
    }
    /// `a || b` elementwise.
    ///
    /// # Errors
    ///
    /// As [`logical_and`](Self::logical_and).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![true, false, false], [3])?;
    /// let b = Tensor::from_vec(vec![0i64, 0, 5], [3])?;
    /// assert_eq!(a.logical_or(&b)?.to_vec::<bool>()?, [true, false, true]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn logical_or(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, CmpOp::Or)
    }
    /// `a xor b` elementwise.
    ///
    /// # Errors
    ///
    /// As [`logical_and`](Self::logical_and).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![true, true, false], [3])?;
    /// let b = Tensor::from_vec(vec![true, false, false], [3])?;
    /// assert_eq!(a.logical_xor(&b)?.to_vec::<bool>()?, [false, true, false]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn logical_xor(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, CmpOp::Xor)
    }
    /// `!a` elementwise: true where `a` is zero.
    ///
    /// # Errors
    ///
    /// Engine errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![0f32, 2., f32::NAN], [3])?;
    /// assert_eq!(x.logical_not()?.to_vec::<bool>()?, [true, false, false]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn logical_not(&self) -> Result<Tensor> {
        self.eq_scalar(0.0)
    }
}
