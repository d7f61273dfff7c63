//! SBP signatures: for each kind of op, which input SBPs give which output SBP along one grid
//! axis, and the choice among them by the bytes the boxing would move.

use super::{NdSbp, ReduceKind, Sbp};
use crate::elementwise::BinaryOp;
use smallvec::{SmallVec, smallvec};

/// What partial inputs a one-input op passes through (`P → P`), by the algebra of the op.
///
/// # Examples
///
/// ```
/// use eddy_ops::global::{Partials, ReduceKind};
/// assert_eq!(Partials::Negate.of(ReduceKind::Max), Some(ReduceKind::Min));
/// assert_eq!(Partials::Monotone.of(ReduceKind::Sum), None); // exp of a sum of parts
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Partials {
    /// None: a partial input is boxed first (softmax, `exp` of a sum, `P + scalar`).
    None,
    /// Every kind, unchanged (views: a view of a reduction is the reduction of the views).
    All,
    /// Sums only (a linear op: a positive or negative scale).
    Sum,
    /// Maxima and minima only (a non-decreasing op: `relu`, `exp`, `+ scalar`, casts).
    Monotone,
    /// Sums and extrema (a positive scale).
    SumAndMonotone,
    /// Negation: sums stay sums, maxima become minima and minima maxima.
    Negate,
}

impl Partials {
    /// The output's partial kind for an input partial of `k`, if the op passes it.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::global::{Partials, ReduceKind};
    /// assert_eq!(Partials::Sum.of(ReduceKind::Sum), Some(ReduceKind::Sum));
    /// ```
    pub fn of(self, k: ReduceKind) -> Option<ReduceKind> {
        use ReduceKind::*;
        match (self, k) {
            (Partials::All, k) => Some(k),
            (Partials::Sum | Partials::SumAndMonotone, Sum) => Some(Sum),
            (Partials::Monotone | Partials::SumAndMonotone, Max | Min) => Some(k),
            (Partials::Negate, Sum) => Some(Sum),
            (Partials::Negate, Max) => Some(Min),
            (Partials::Negate, Min) => Some(Max),
            _ => None,
        }
    }
}

/// An op as the SBP rules see it: enough of its attributes to say which layouts it can run
/// on without moving data. Hashable: the tensor layer caches the choice per rule and inputs.
///
/// # Examples
///
/// ```
/// use eddy_ops::global::{Partials, Rule, Sbp};
/// // `permute([1, 0])` of a 2-d tensor: dim 0 becomes dim 1.
/// let r = Rule::Map { dims: [Some(1), Some(0)].into_iter().collect(), partials: Partials::All };
/// let sigs = r.signatures(&[&[3, 4]], &[3, 4]);
/// assert!(sigs.iter().any(|s| s.inputs[0] == Sbp::Split(0) && s.output == Sbp::Split(1)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// One input; input dim `d` is output dim `dims[d]` where it stays whole (`None`: the dim
    /// is reduced over, reshaped or otherwise mixed, so it cannot stay split).
    Map {
        /// Input dim → output dim.
        dims: SmallVec<[Option<usize>; 4]>,
        /// The partial inputs it passes.
        partials: Partials,
    },
    /// An elementwise op of two broadcast operands.
    Binary(BinaryOp),
    /// An elementwise op of broadcast operands that passes no partial (comparisons, `where`).
    Broadcast,
    /// `matmul` (any ranks, batch dims broadcast).
    Matmul,
    /// A loss summed over rows: scores `[N, …]` and per-row targets `[N]` give the 0-dim
    /// sum, partial where the rows are split.
    RowLoss,
    /// `cat` of inputs of `rank` dims along `dim`: every other dim may stay split (the
    /// inputs agree on its size, so their components line up), and partials of one kind
    /// pass (a concatenation only places values).
    ///
    /// ```
    /// use eddy_ops::global::{Rule, Sbp};
    /// let s = Rule::Cat { rank: 2, dim: 0 }.signatures(&[&[2, 3], &[4, 3]], &[6, 3]);
    /// assert!(s.iter().any(|s| s.inputs.as_slice() == [Sbp::Split(1), Sbp::Split(1)]));
    /// assert!(s.iter().all(|s| s.inputs[0] != Sbp::Split(0)), "the joined dim stays whole");
    /// ```
    Cat {
        /// The inputs' rank.
        rank: usize,
        /// The dim they are joined along.
        dim: usize,
    },
    /// `index_select` of a tensor of `rank` dims along `dim` by a 1-d index: the values stay
    /// split along another dim (the index whole), or the index is split and the result with
    /// it along `dim` (the values whole); partial values pass under a whole index.
    ///
    /// ```
    /// use eddy_ops::global::{Rule, Sbp};
    /// let s = Rule::IndexSelect { rank: 2, dim: 0 }.signatures(&[&[5, 4], &[3]], &[3, 4]);
    /// assert!(s.iter().any(|s| s.inputs.as_slice() == [Sbp::Broadcast, Sbp::Split(0)]
    ///     && s.output == Sbp::Split(0)));
    /// assert!(s.iter().all(|s| s.inputs[0] != Sbp::Split(0)), "the selected dim stays whole");
    /// ```
    IndexSelect {
        /// The values' rank.
        rank: usize,
        /// The dim the index selects along.
        dim: usize,
    },
    /// `index_select`'s backward: slices of the first input added into zeros at the
    /// positions a 1-d index gives along `dim`. Split slices with a split index give a
    /// partial sum (each rank adds its own slices into a whole tensor).
    ///
    /// ```
    /// use eddy_ops::global::{Rule, Sbp};
    /// let s = Rule::IndexAdd { rank: 2, dim: 0 }.signatures(&[&[3, 4], &[3]], &[5, 4]);
    /// assert!(s.iter().any(|s| s.inputs.as_slice() == [Sbp::Split(0), Sbp::Split(0)]
    ///     && s.output == Sbp::PARTIAL_SUM));
    /// ```
    IndexAdd {
        /// The rank of the slices and of the result.
        rank: usize,
        /// The dim the index places along.
        dim: usize,
    },
    /// `gather` along `dim`: the result has the index's shape. Another dim may stay split
    /// where the values and the index have the same size along it; a split index with whole
    /// values splits the result along that dim; partial values pass under a whole index (a
    /// gather only picks values).
    ///
    /// ```
    /// use eddy_ops::global::{Rule, Sbp};
    /// let s = Rule::Gather { dim: 1 }.signatures(&[&[4, 5], &[4, 2]], &[4, 2]);
    /// assert!(s.iter().any(|s| s.inputs.as_slice() == [Sbp::Split(0), Sbp::Split(0)]));
    /// assert!(s.iter().any(|s| s.inputs.as_slice() == [Sbp::Broadcast, Sbp::Split(1)]
    ///     && s.output == Sbp::Split(1)));
    /// assert!(s.iter().all(|s| s.inputs[0] != Sbp::Split(1)), "the gathered dim stays whole");
    /// ```
    Gather {
        /// The dim the index picks along.
        dim: usize,
    },
    /// `scatter_add`'s scattering half (and `gather`'s backward): values added into zeros of
    /// the result's shape at the positions an index of the values' shape gives along `dim`.
    /// Another dim stays split where the values have the result's size along it; values and
    /// index split alike along any dim give a partial sum (each rank adds its own values into
    /// a whole tensor).
    ///
    /// ```
    /// use eddy_ops::global::{Rule, Sbp};
    /// let s = Rule::ScatterAdd { dim: 0 }.signatures(&[&[2, 3], &[2, 3]], &[5, 3]);
    /// assert!(s.iter().any(|s| s.inputs.as_slice() == [Sbp::Split(1), Sbp::Split(1)]
    ///     && s.output == Sbp::Split(1)));
    /// assert!(s.iter().any(|s| s.inputs.as_slice() == [Sbp::Split(0), Sbp::Split(0)]
    ///     && s.output == Sbp::PARTIAL_SUM));
    /// ```
    ScatterAdd {
        /// The dim the index places along.
        dim: usize,
    },
    /// An op of inputs of the output's shape that works along `dim` (a backward of a running
    /// product): every other dim may stay split, all inputs alike; no partial passes.
    ///
    /// ```
    /// use eddy_ops::global::{Rule, Sbp};
    /// let s = Rule::Along { dim: 1 }.signatures(&[&[4, 5], &[4, 5]], &[4, 5]);
    /// assert!(s.iter().any(|s| s.inputs.as_slice() == [Sbp::Split(0), Sbp::Split(0)]));
    /// assert!(s.iter().all(|s| s.output != Sbp::Split(1)));
    /// ```
    Along {
        /// The dim the op works along.
        dim: usize,
    },
    /// An op on each plane of images (`[batch, channels, h, w]` in and out, the planes' sizes
    /// may differ: pooling and its gradient): the batch and channel dims may stay split, every
    /// input alike; the planes stay whole; no partial passes (positions of maxima would not).
    ///
    /// ```
    /// use eddy_ops::global::{Rule, Sbp};
    /// let s = Rule::Planes.signatures(&[&[2, 3, 8, 8]], &[2, 3, 4, 4]);
    /// assert!(s.iter().any(|s| s.inputs.as_slice() == [Sbp::Split(1)] && s.output == Sbp::Split(1)));
    /// assert!(s.iter().all(|s| s.output != Sbp::Split(2)));
    /// ```
    Planes,
    /// A reduction (`sum`, `max`, `min`) over `dims` of a tensor of `rank` dims.
    Reduce {
        /// The reduction.
        kind: ReduceKind,
        /// The input rank.
        rank: usize,
        /// Which input dims are reduced.
        reduced: SmallVec<[bool; 4]>,
        /// Whether the reduced dims stay (with size 1).
        keepdim: bool,
    },
}

/// One signature along one grid axis: the SBP each input must have, and the output's.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Signature {
    /// The SBP each input needs.
    pub inputs: SmallVec<[Sbp; 2]>,
    /// The output's SBP.
    pub output: Sbp,
}

fn sig(inputs: &[Sbp], output: Sbp) -> Signature {
    Signature {
        inputs: inputs.into(),
        output,
    }
}

/// The SBP an operand of `x` dims needs for a result of `out` dims split along dim `d`, with
/// broadcasting aligned from the right: `S` of its own dim where it has the result's size
/// along it, else `B` (it is broadcast along that dim).
///
/// # Examples
///
/// ```
/// use eddy_ops::global::{aligned, Sbp};
/// assert_eq!(aligned(&[3], &[4, 3], 1), Sbp::Split(0));
/// assert_eq!(aligned(&[3], &[4, 3], 0), Sbp::Broadcast); // a row broadcast down the dim
/// ```
pub fn aligned(x: &[usize], out: &[usize], d: usize) -> Sbp {
    let shift = out.len() - x.len();
    match d.checked_sub(shift) {
        Some(dx) if x[dx] == out[d] => Sbp::Split(dx),
        _ => Sbp::Broadcast,
    }
}

impl Rule {
    /// The op's signatures along one grid axis, for inputs of `inputs` dims giving `out` dims,
    /// best first: `B → B`, then splits, then partials.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::global::{Rule, Sbp};
    /// let s = Rule::Matmul.signatures(&[&[4, 3], &[3, 5]], &[4, 5]);
    /// let p = s.iter().find(|s| s.inputs.as_slice() == [Sbp::Split(1), Sbp::Split(0)]).unwrap();
    /// assert_eq!(p.output, Sbp::PARTIAL_SUM);
    /// ```
    pub fn signatures(&self, inputs: &[&[usize]], out: &[usize]) -> Vec<Signature> {
        use Sbp::{Broadcast as B, Partial as P, Split as S};
        let n = inputs.len();
        let mut v = vec![sig(&vec![B; n], B)];
        match self {
            Rule::Map { dims, partials } => {
                for (d, o) in dims.iter().enumerate() {
                    if let Some(o) = *o {
                        v.push(sig(&[S(d)], S(o)));
                    }
                }
                for k in [ReduceKind::Sum, ReduceKind::Max, ReduceKind::Min] {
                    if let Some(ok) = partials.of(k) {
                        v.push(sig(&[P(k)], P(ok)));
                    }
                }
            }
            Rule::Binary(op) => {
                let (a, b) = (inputs[0], inputs[1]);
                for d in 0..out.len() {
                    v.push(sig(&[aligned(a, out, d), aligned(b, out, d)], S(d)));
                }
                let (sum, max, min) = (ReduceKind::Sum, ReduceKind::Max, ReduceKind::Min);
                match op {
                    BinaryOp::Add | BinaryOp::Sub => {
                        v.push(sig(&[P(sum), P(sum)], P(sum)));
                        // An extremum moved by a whole value: `max(a) + c = max(a + c)`,
                        // `c - max(a) = min(c - a)`. A sum cannot: `c` would count once per
                        // rank.
                        for (k, flipped) in [(max, min), (min, max)] {
                            v.push(sig(&[P(k), B], P(k)));
                            let o = if *op == BinaryOp::Add { k } else { flipped };
                            v.push(sig(&[B, P(k)], P(o)));
                        }
                    }
                    BinaryOp::Mul => {
                        v.push(sig(&[P(sum), B], P(sum)));
                        v.push(sig(&[B, P(sum)], P(sum)));
                    }
                    BinaryOp::Div => v.push(sig(&[P(sum), B], P(sum))),
                    // Linear in the gradient `b`.
                    BinaryOp::GeluBackward => v.push(sig(&[B, P(sum)], P(sum))),
                    BinaryOp::Maximum | BinaryOp::Minimum => {
                        let k = if *op == BinaryOp::Maximum { max } else { min };
                        v.push(sig(&[P(k), P(k)], P(k)));
                        v.push(sig(&[P(k), B], P(k)));
                        v.push(sig(&[B, P(k)], P(k)));
                    }
                    _ => {}
                }
            }
            Rule::RowLoss => v.push(sig(&[S(0), S(0)], P(ReduceKind::Sum))),
            Rule::IndexSelect { rank, dim } | Rule::IndexAdd { rank, dim } => {
                for d in (0..*rank).filter(|d| d != dim) {
                    v.push(sig(&[S(d), B], S(d)));
                }
                if matches!(self, Rule::IndexSelect { .. }) {
                    v.push(sig(&[B, S(0)], S(*dim)));
                    for k in [ReduceKind::Sum, ReduceKind::Max, ReduceKind::Min] {
                        v.push(sig(&[P(k), B], P(k)));
                    }
                } else {
                    let sum = P(ReduceKind::Sum);
                    v.push(sig(&[S(*dim), S(0)], sum));
                    v.push(sig(&[sum, B], sum));
                }
            }
            Rule::Planes => {
                for d in 0..2.min(out.len()) {
                    v.push(sig(&vec![S(d); n], S(d)));
                }
            }
            Rule::Along { dim } => {
                for d in (0..out.len()).filter(|d| d != dim) {
                    v.push(sig(&vec![S(d); n], S(d)));
                }
            }
            Rule::Gather { dim } => {
                let (x, idx) = (inputs[0], inputs[1]);
                for d in (0..out.len()).filter(|&d| d != *dim && x[d] == idx[d]) {
                    v.push(sig(&[S(d), S(d)], S(d)));
                }
                for d in 0..out.len() {
                    v.push(sig(&[B, S(d)], S(d)));
                }
                for k in [ReduceKind::Sum, ReduceKind::Max, ReduceKind::Min] {
                    v.push(sig(&[P(k), B], P(k)));
                }
            }
            Rule::ScatterAdd { dim } => {
                let src = inputs[0];
                for d in (0..out.len()).filter(|&d| d != *dim && src[d] == out[d]) {
                    v.push(sig(&[S(d), S(d)], S(d)));
                }
                let sum = P(ReduceKind::Sum);
                for d in 0..out.len() {
                    v.push(sig(&[S(d), S(d)], sum));
                }
                v.push(sig(&[sum, B], sum));
            }
            Rule::Cat { rank, dim } => {
                for d in (0..*rank).filter(|d| d != dim) {
                    v.push(sig(&vec![S(d); n], S(d)));
                }
                for k in [ReduceKind::Sum, ReduceKind::Max, ReduceKind::Min] {
                    v.push(sig(&vec![P(k); n], P(k)));
                }
            }
            Rule::Broadcast => {
                for d in 0..out.len() {
                    let need: SmallVec<[Sbp; 2]> =
                        inputs.iter().map(|x| aligned(x, out, d)).collect();
                    v.push(sig(&need, S(d)));
                }
            }
            Rule::Matmul => {
                let (a, b) = (inputs[0], inputs[1]);
                let (ra, rb, ro) = (a.len(), b.len(), out.len());
                let b_k = rb.saturating_sub(2);
                // The batch dims (broadcast from the right, as the output's leading dims).
                let batch = ro - usize::from(ra >= 2) - usize::from(rb >= 2);
                for (d, &size) in out.iter().enumerate().take(batch) {
                    let side = |x: &[usize]| {
                        let xb = x.len().saturating_sub(2);
                        match (d + xb).checked_sub(batch) {
                            Some(dx) if x.len() > 2 && x[dx] == size => S(dx),
                            _ => B,
                        }
                    };
                    v.push(sig(&[side(a), side(b)], S(d)));
                }
                if ra >= 2 {
                    let o_m = ro - 1 - usize::from(rb >= 2);
                    v.push(sig(&[S(ra - 2), B], S(o_m)));
                }
                if rb >= 2 {
                    v.push(sig(&[B, S(rb - 1)], S(ro - 1)));
                }
                let sum = P(ReduceKind::Sum);
                v.push(sig(&[S(ra - 1), S(b_k)], sum));
                v.push(sig(&[sum, B], sum));
                v.push(sig(&[B, sum], sum));
            }
            Rule::Reduce {
                kind,
                rank,
                reduced,
                keepdim,
            } => {
                for d in 0..*rank {
                    if reduced[d] {
                        v.push(sig(&[S(d)], P(*kind)));
                    } else {
                        let o = if *keepdim {
                            d
                        } else {
                            d - reduced[..d].iter().filter(|&&r| r).count()
                        };
                        v.push(sig(&[S(d)], S(o)));
                    }
                }
                v.push(sig(&[P(*kind)], P(*kind)));
            }
        }
        v
    }
}

/// The bytes each rank moves to box a tensor of `bytes` logical bytes from `from` to `to`
/// along a grid axis of `p` ranks: all-gather and reduce-scatter `T(p−1)/p`, all-reduce twice
/// that, all-to-all `2T(p−1)/p²`, and nothing for the local conversions (`B → S`, `B → P`,
/// `S → P`). Between two partial kinds, through `B`.
///
/// # Examples
///
/// ```
/// use eddy_ops::global::{boxing_bytes, Sbp};
/// assert_eq!(boxing_bytes(Sbp::Split(0), Sbp::Broadcast, 1024, 4), 768);
/// assert_eq!(boxing_bytes(Sbp::PARTIAL_SUM, Sbp::Broadcast, 1024, 4), 1536);
/// assert_eq!(boxing_bytes(Sbp::Broadcast, Sbp::Split(1), 1024, 4), 0);
/// ```
pub fn boxing_bytes(from: Sbp, to: Sbp, bytes: usize, p: usize) -> usize {
    use Sbp::{Broadcast as B, Partial as P, Split as S};
    let p = p.max(1);
    let gather = bytes / p * (p - 1);
    match (from, to) {
        _ if from == to => 0,
        (B, _) | (S(_), P(_)) => 0,
        (S(_), B) | (P(_), S(_)) => gather,
        (P(_), B) => 2 * gather,
        (S(_), S(_)) => 2 * gather / p,
        (P(_), P(_)) => 2 * gather,
    }
}

/// The signature chosen for an op on one placement: the nd-SBP each input is boxed to and
/// the output's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// The nd-SBP each input needs.
    pub inputs: Vec<NdSbp>,
    /// The output's nd-SBP.
    pub output: NdSbp,
    /// The bytes the boxing moves per rank (the cost model's figure).
    pub bytes: usize,
}

/// Chooses `rule`'s signature for inputs of `dims`, element size `elem` bytes and nd-SBPs
/// `sbps` on a grid of `grid`, giving `out` dims: per axis the candidates of
/// [`Rule::signatures`], combined axis by axis, the one whose boxing moves the fewest bytes
/// ([`boxing_bytes`]; ties go to the earlier). `None` when no combination is valid (an output
/// partial of two kinds).
///
/// # Examples
///
/// ```
/// use eddy_ops::global::{choose, Rule, Sbp};
/// // x: [8, 3] split by rows, w: [3, 5] broadcast: the product stays split, nothing moves.
/// let c = choose(&Rule::Matmul, &[&[8, 3], &[3, 5]], &[4, 4], &[&[Sbp::Split(0)], &[Sbp::Broadcast]], &[2], &[8, 5]).unwrap();
/// assert_eq!((c.output.as_slice(), c.bytes), (&[Sbp::Split(0)][..], 0));
/// ```
pub fn choose(
    rule: &Rule,
    dims: &[&[usize]],
    elem: &[usize],
    sbps: &[&[Sbp]],
    grid: &[usize],
    out: &[usize],
) -> Option<Choice> {
    let per_axis = rule.signatures(dims, out);
    let bytes: Vec<usize> = (dims.iter().zip(elem))
        .map(|(d, e)| crate::numel_of(d).saturating_mul(*e))
        .collect();
    let mut best: Option<Choice> = None;
    let mut pick: SmallVec<[usize; 2]> = smallvec![0; grid.len()];
    loop {
        let output: NdSbp = pick.iter().map(|&i| per_axis[i].output).collect();
        let kinds: SmallVec<[ReduceKind; 2]> = (output.iter())
            .filter_map(|s| match s {
                Sbp::Partial(k) => Some(*k),
                _ => None,
            })
            .collect();
        if kinds.windows(2).all(|w| w[0] == w[1]) {
            let mut cost = 0usize;
            let inputs: Vec<NdSbp> = (0..dims.len())
                .map(|j| {
                    let need: NdSbp = pick.iter().map(|&i| per_axis[i].inputs[j]).collect();
                    for (a, s) in need.iter().enumerate() {
                        cost = cost.saturating_add(boxing_bytes(sbps[j][a], *s, bytes[j], grid[a]));
                    }
                    need
                })
                .collect();
            if best.as_ref().is_none_or(|b| cost < b.bytes) {
                best = Some(Choice {
                    inputs,
                    output,
                    bytes: cost,
                });
            }
        }
        // The next combination, the last axis fastest.
        let mut a = grid.len();
        loop {
            if a == 0 {
                return best;
            }
            a -= 1;
            pick[a] += 1;
            if pick[a] < per_axis.len() {
                break;
            }
            pick[a] = 0;
        }
    }
}

/// The partial inputs the elementwise op `op` passes through: sums through linear scales,
/// extrema through non-decreasing ops (`relu`, `exp`, `+ c`, …), none through the others
/// (`P(sum) + c` would add `c` on every rank; `exp` of a sum is not a sum of `exp`s).
///
/// # Examples
///
/// ```
/// use eddy_ops::{elementwise::UnaryOp, global::{unary_partials, Partials}};
/// assert_eq!(unary_partials(UnaryOp::AddScalar(1.0)), Partials::Monotone);
/// assert_eq!(unary_partials(UnaryOp::MulScalar(-2.0)), Partials::Sum);
/// assert_eq!(unary_partials(UnaryOp::Square), Partials::None);
/// ```
pub fn unary_partials(op: crate::elementwise::UnaryOp) -> Partials {
    use crate::elementwise::UnaryOp::*;
    match op {
        Neg => Partials::Negate,
        MulScalar(c) if c > 0.0 => Partials::SumAndMonotone,
        DivScalar(c) if c > 0.0 => Partials::SumAndMonotone,
        MulScalar(_) | DivScalar(_) => Partials::Sum,
        LeakyRelu(a) | Elu(a) if a >= 0.0 => Partials::Monotone,
        Softplus(b, _) if b > 0.0 => Partials::Monotone,
        AddScalar(_) | Exp | Log | Sqrt | Tanh | Sigmoid | Relu | Floor | Ceil | Round | Trunc
        | Log1p | Expm1 | Log2 | Log10 | Atan | Erf | Clamp(..) | Sign => Partials::Monotone,
        _ => Partials::None,
    }
}
