//! Scaled dot-product attention: its geometry and the checks of its operands, as PyTorch's
//! `F.scaled_dot_product_attention` makes them. The kernels are in [`crate::cpu::attention`],
//! dispatched by [`crate::nn::attention`].

use crate::{DType, Error, Result, Shape, broadcast_shapes};

const OP: &str = "scaled_dot_product_attention";

/// The geometry of one attention call over dense operands: `batch` independent problems,
/// queries `[l, e]`, keys `[s, e]`, values `[s, ev]`, output `[l, ev]`.
///
/// # Examples
///
/// ```
/// use eddy_ops::nn::Attention;
/// let a = Attention { batch: 64, l: 64, s: 64, e: 32, ev: 32, scale: 32f64.sqrt().recip(), causal: true };
/// assert_eq!(a.keys(3), 4); // row 3 of a causal attention sees keys 0..=3
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Attention {
    /// Independent problems (the product of the broadcast batch dims).
    pub batch: usize,
    /// Queries per problem.
    pub l: usize,
    /// Keys (and values) per problem.
    pub s: usize,
    /// Width of a query and a key.
    pub e: usize,
    /// Width of a value.
    pub ev: usize,
    /// What each score `q · k` is multiplied by.
    pub scale: f64,
    /// Whether query `i` sees only keys `0..=i` (PyTorch's top-left aligned causal mask).
    pub causal: bool,
}

impl Attention {
    /// How many keys (a prefix) query row `i` sees.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::nn::Attention;
    /// let a = Attention { batch: 1, l: 2, s: 5, e: 1, ev: 1, scale: 1.0, causal: false };
    /// assert_eq!(a.keys(0), 5);
    /// ```
    #[inline]
    pub fn keys(&self, i: usize) -> usize {
        if self.causal {
            (i + 1).min(self.s)
        } else {
            self.s
        }
    }
}

/// Where an explicit mask's elements are, as an additive float mask of the queries' dtype
/// viewed as `[batch, l, s]`: problem `b`'s row `i`, key `j` at `offsets[b] + i · rs + j · cs`
/// (a stride is 0 along a broadcast dim).
///
/// # Examples
///
/// ```
/// use eddy_ops::nn::MaskLayout;
/// let m = MaskLayout { offsets: vec![0, 0].into(), rs: 4, cs: 1 }; // one [l, 4] mask, shared
/// assert_eq!(m.at(1, 2, 3), 11);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct MaskLayout {
    /// Each problem's first element.
    pub offsets: std::sync::Arc<[usize]>,
    /// Stride between query rows.
    pub rs: usize,
    /// Stride between keys.
    pub cs: usize,
}

impl MaskLayout {
    /// The element of problem `b`, row `i`, key `j`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::nn::MaskLayout;
    /// assert_eq!(MaskLayout { offsets: vec![5].into(), rs: 0, cs: 1 }.at(0, 9, 2), 7);
    /// ```
    #[inline]
    pub fn at(&self, b: usize, i: usize, j: usize) -> usize {
        self.offsets[b] + i * self.rs + j * self.cs
    }
}

/// What [`infer_attention`] finds: the broadcast batch dims and the output's shape.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionShape {
    /// The queries', keys' and values' batch dims broadcast together.
    pub batch: Shape,
    /// `batch + [l, ev]`.
    pub out: Shape,
    /// The geometry (with the default scale `1 / √e` unless one was given).
    pub geom: Attention,
}

/// Checks the operands of scaled dot-product attention as PyTorch does and finds the
/// geometry: queries `[..., l, e]`, keys `[..., s, e]`, values `[..., s, ev]` of one float
/// dtype, batch dims broadcast; `mask` (dims and dtype) bool or the queries' dtype,
/// broadcastable to `[..., l, s]` and not given with `causal`.
///
/// # Errors
///
/// `InvalidArgument` for an operand of fewer than 2 dims, a mask given with `causal`, or a
/// dropout probability outside `[0, 1]`; `DTypeMismatch` for operands of different dtypes
/// or a mask of a third dtype; `UnsupportedDType` for integer operands; `ShapeMismatch` for
/// widths, key counts or batch dims that do not fit, or a mask that does not broadcast.
///
/// # Examples
///
/// ```
/// use eddy_ops::nn::infer_attention;
/// use eddy_ops::DType;
/// let f = DType::F32;
/// let s = infer_attention([&[2, 1, 3, 4][..], &[2, 5, 4], &[2, 5, 6]], f, None, false, 0.0, None)?;
/// assert_eq!(s.out.0.as_slice(), &[2, 2, 3, 6]);
/// assert_eq!((s.geom.batch, s.geom.l, s.geom.s, s.geom.e, s.geom.ev), (4, 3, 5, 4, 6));
/// assert!(infer_attention([&[3, 4][..], &[5, 3], &[5, 6]], f, None, false, 0.0, None).is_err());
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[track_caller]
pub fn infer_attention(
    [q, k, v]: [&[usize]; 3],
    dtype: DType,
    mask: Option<(&[usize], DType)>,
    causal: bool,
    dropout_p: f64,
    scale: Option<f64>,
) -> Result<AttentionShape> {
    if q.len() < 2 || k.len() < 2 || v.len() < 2 {
        return Err(Error::invalid(
            OP,
            format!(
                "query, key and value need at least 2 dims, got {} {} and {}",
                q.len(),
                k.len(),
                v.len()
            ),
        ));
    }
    if !dtype.is_float() {
        return Err(Error::UnsupportedDType {
            op: OP,
            dtype,
            at: crate::Caller::here(),
        });
    }
    if !(0.0..=1.0).contains(&dropout_p) {
        return Err(Error::invalid(
            OP,
            format!("dropout probability has to be in [0, 1], got {dropout_p}"),
        ));
    }
    let mismatch = |lhs: &[usize], rhs: &[usize]| Error::ShapeMismatch {
        op: OP,
        lhs: lhs.to_vec(),
        rhs: rhs.to_vec(),
        at: crate::Caller::here(),
    };
    let (l, e) = (q[q.len() - 2], q[q.len() - 1]);
    let (s, ek) = (k[k.len() - 2], k[k.len() - 1]);
    let (sv, ev) = (v[v.len() - 2], v[v.len() - 1]);
    if ek != e {
        return Err(mismatch(q, k)); // the query's and the key's widths differ
    }
    if sv != s {
        return Err(mismatch(k, v)); // as many values as keys
    }
    let qb = Shape::from(&q[..q.len() - 2]);
    let kb = Shape::from(&k[..k.len() - 2]);
    let vb = Shape::from(&v[..v.len() - 2]);
    let batch = broadcast_shapes(OP, &qb, &kb).and_then(|b| broadcast_shapes(OP, &b, &vb))?;
    if let Some((m, mdt)) = mask {
        if causal {
            return Err(Error::invalid(
                OP,
                "an explicit mask cannot be given with is_causal",
            ));
        }
        if mdt != DType::Bool && mdt != dtype {
            return Err(Error::DTypeMismatch {
                op: OP,
                lhs: dtype,
                rhs: mdt,
                at: crate::Caller::here(),
            });
        }
        let mut full = batch.0.to_vec();
        full.extend([l, s]);
        let fits = broadcast_shapes(OP, &Shape::from(m), &Shape::from(&full[..]));
        if fits.map_or(true, |f| f.0.as_slice() != full.as_slice()) {
            return Err(mismatch(m, &full));
        }
    }
    let mut out = batch.clone();
    out.0.extend([l, ev]);
    let geom = Attention {
        batch: batch.0.iter().product(),
        l,
        s,
        e,
        ev,
        scale: scale.unwrap_or(1.0 / (e as f64).sqrt()),
        causal,
    };
    Ok(AttentionShape { batch, out, geom })
}
