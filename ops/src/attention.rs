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

/// Where one operand's rows are, problem by problem: problem `b` is head `b % heads` of
/// batch element `b / heads`, and its row `i` starts at `offset + (b / heads)·sn + (b %
/// heads)·sh + i·rs`, its elements consecutive. Dense `[batch, rows, w]` operands are
/// [`Rows::dense`]; the heads of a packed `[n, l, 3·e]` projection are rows `3·e` apart.
///
/// # Examples
///
/// ```
/// use eddy_ops::nn::Rows;
/// let d = Rows::dense(10, 4, 8); // [batch, 4, 8] at 10
/// assert_eq!(d.at(2, 1), 10 + 2 * 32 + 8);
/// // Head 1 of batch element 1 of a [2, 4, 2·8] tensor split in 2 heads of width 8.
/// let h = Rows { offset: 0, heads: 2, sn: 4 * 16, sh: 8, rs: 16 };
/// assert_eq!(h.at(3, 2), 64 + 8 + 32);
/// assert!(h.disjoint(4, 4, 8) && !Rows { sh: 4, ..h }.disjoint(4, 4, 8));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rows {
    /// Where problem 0's row 0 starts.
    pub offset: usize,
    /// Problems per batch element (1 for a dense operand).
    pub heads: usize,
    /// Stride between batch elements.
    pub sn: usize,
    /// Stride between heads.
    pub sh: usize,
    /// Stride between rows.
    pub rs: usize,
}

impl Rows {
    /// `[batch, rows, w]` dense at `offset`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(eddy_ops::nn::Rows::dense(0, 3, 5).rs, 5);
    /// ```
    pub fn dense(offset: usize, rows: usize, w: usize) -> Rows {
        Rows {
            offset,
            heads: 1,
            sn: rows * w,
            sh: 0,
            rs: w,
        }
    }

    /// Where row `i` of problem `b` starts.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(eddy_ops::nn::Rows::dense(1, 3, 5).at(1, 2), 1 + 15 + 10);
    /// ```
    #[inline]
    pub fn at(&self, b: usize, i: usize) -> usize {
        let heads = self.heads.max(1);
        self.offset + (b / heads) * self.sn + (b % heads) * self.sh + i * self.rs
    }

    /// Whether `batch` problems of `rows` rows of `w` elements are dense `[batch, rows, w]`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(eddy_ops::nn::Rows::dense(7, 3, 5).is_dense(2, 3, 5));
    /// ```
    pub fn is_dense(&self, batch: usize, rows: usize, w: usize) -> bool {
        let (p, heads) = (rows * w, self.heads.max(1));
        let rows_ok = rows <= 1 || self.rs == w;
        let heads_ok = heads == 1 || batch <= 1 || self.sh == p;
        let batch_ok = batch <= heads || self.sn == heads * p;
        rows_ok && heads_ok && batch_ok
    }

    /// One past the last element that `batch` problems of `rows` rows of `w` reach (0 when
    /// there are none).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(eddy_ops::nn::Rows::dense(1, 3, 5).end(2, 3, 5), 31);
    /// ```
    pub fn end(&self, batch: usize, rows: usize, w: usize) -> usize {
        if batch * rows * w == 0 {
            return 0;
        }
        let heads = self.heads.max(1).min(batch);
        let n = batch.div_ceil(heads);
        self.offset + (n - 1) * self.sn + (heads - 1) * self.sh + (rows - 1) * self.rs + w
    }

    /// Whether no two elements of `batch` problems of `rows` rows of `w` share a place (a
    /// sufficient test: ordered by stride, each axis steps past everything the smaller ones
    /// reach), so that problems can be written at once.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::nn::Rows;
    /// assert!(Rows::dense(0, 3, 5).disjoint(4, 3, 5));
    /// assert!(!Rows { rs: 4, ..Rows::dense(0, 3, 5) }.disjoint(4, 3, 5));
    /// ```
    pub fn disjoint(&self, batch: usize, rows: usize, w: usize) -> bool {
        let heads = self.heads.max(1).min(batch.max(1));
        batch.is_multiple_of(heads) && disjoint_axes(&mut self.axes(batch, rows, w))
    }

    /// The (count, stride) of each axis `batch` problems of `rows` rows of `w` span: batch
    /// elements, heads, rows, elements.
    pub(crate) fn axes(&self, batch: usize, rows: usize, w: usize) -> [(usize, usize); 4] {
        let heads = self.heads.max(1).min(batch.max(1));
        [
            (batch / heads, self.sn),
            (heads, self.sh),
            (rows, self.rs),
            (w, 1),
        ]
    }
}

/// Whether the places `Σ i_k · stride_k` (`i_k < count_k`) of `axes` (count, stride) are all
/// distinct: a sufficient test, that ordered by stride each axis steps past everything the
/// smaller ones reach.
pub(crate) fn disjoint_axes(axes: &mut [(usize, usize)]) -> bool {
    axes.sort_by_key(|&(_, s)| s);
    let mut reach = 1usize; // one past the largest place of the axes so far
    for &(n, s) in axes.iter() {
        if n <= 1 {
            continue;
        }
        if s < reach {
            return false;
        }
        reach = s.saturating_mul(n - 1).saturating_add(reach);
    }
    true
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

#[cfg(test)]
mod tests {
    use super::Rows;

    /// Every layout of a few small problems against the places it names: a layout called
    /// disjoint has no place twice, `end` is past every place, and `is_dense` holds exactly
    /// when the places are those of `[batch, rows, w]`.
    #[test]
    fn row_layouts_agree_with_their_places() {
        let mut disjoint = 0;
        for (batch, heads, rows, w) in (1..=4usize).flat_map(|b| {
            (1..=2usize).flat_map(move |h| {
                (1..=3usize).flat_map(move |r| (1..=3usize).map(move |w| (b, h, r, w)))
            })
        }) {
            for (sn, sh, rs) in
                (0..9).flat_map(|a| (0..9).flat_map(move |b| (0..9).map(move |c| (a, b, c))))
            {
                let lay = Rows {
                    offset: 2,
                    heads,
                    sn,
                    sh,
                    rs,
                };
                let mut places: Vec<usize> = (0..batch)
                    .flat_map(|b| (0..rows).flat_map(move |i| (0..w).map(move |c| (b, i, c))))
                    .map(|(b, i, c)| lay.at(b, i) + c)
                    .collect();
                let dense = places.iter().enumerate().all(|(k, &p)| p == 2 + k);
                assert_eq!(
                    lay.is_dense(batch, rows, w),
                    dense,
                    "{lay:?} {batch} {rows} {w}"
                );
                assert!(
                    places.iter().all(|&p| p < lay.end(batch, rows, w)),
                    "{lay:?}"
                );
                if lay.disjoint(batch, rows, w) {
                    disjoint += 1;
                    places.sort_unstable();
                    let n = places.len();
                    places.dedup();
                    assert_eq!(places.len(), n, "{lay:?} {batch} {rows} {w} overlaps");
                }
            }
        }
        assert!(disjoint > 1000); // the test saw many layouts it could write
    }
}
