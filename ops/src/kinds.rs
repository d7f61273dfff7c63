//! What a kernel computes, as plain values: the elementwise, comparison and reduction ops,
//! and the dims of an index op. The op layer (`elementwise`, `reduce`, `index`) re-exports
//! them; every device's kernels read them from here.

use crate::DType;

/// A unary elementwise op. Parameterised ops carry their scalar.
///
/// # Examples
///
/// ```
/// use eddy_ops::elementwise::UnaryOp;
/// let op = UnaryOp::LeakyRelu(0.1);
/// assert_eq!(op.name(), "leaky_relu");
/// assert!(!op.keeps_int());
/// assert_ne!(UnaryOp::Clamp(0.0, 1.0), UnaryOp::Clamp(0.0, 2.0));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryOp {
    /// `-x`
    Neg,
    /// `|x|`
    Abs,
    /// `e^x`
    Exp,
    /// `ln x`
    Log,
    /// `√x`
    Sqrt,
    /// `1 / √x`
    Rsqrt,
    /// `sin x` (radians)
    Sin,
    /// `cos x` (radians)
    Cos,
    /// `tanh x`
    Tanh,
    /// `1 / (1 + e^-x)`
    Sigmoid,
    /// `max(x, 0)` (NaN stays NaN).
    Relu,
    /// The exact (erf) GELU, as PyTorch's default.
    Gelu,
    /// `x * sigmoid(x)`
    Silu,
    /// `1 / x`
    Recip,
    /// `x * x`
    Square,
    /// `-1`, `0` or `1` (NaN stays NaN).
    Sign,
    /// The derivative of GELU.
    GeluGrad,
    /// The derivative of SiLU.
    SiluGrad,
    /// `x + c`
    AddScalar(f64),
    /// `x * c`
    MulScalar(f64),
    /// `x / c`
    DivScalar(f64),
    /// `c - x`
    RSubScalar(f64),
    /// `c / x`
    RDivScalar(f64),
    /// `x ^ c`
    PowScalar(f64),
    /// `c ^ x`
    RPowScalar(f64),
    /// `min(max(x, lo), hi)`
    Clamp(f64, f64),
    /// The largest integer `≤ x`.
    Floor,
    /// The smallest integer `≥ x`.
    Ceil,
    /// The nearest integer, halves to even (as PyTorch and IEEE `roundeven`).
    Round,
    /// `x` without its fraction (toward zero).
    Trunc,
    /// `ln(1 + x)`, exact near 0.
    Log1p,
    /// `e^x - 1`, exact near 0.
    Expm1,
    /// `log₂ x`
    Log2,
    /// `log₁₀ x`
    Log10,
    /// `tan x` (radians)
    Tan,
    /// `atan x`
    Atan,
    /// The error function.
    Erf,
    /// `x` if `x > 0`, else `slope · x`.
    LeakyRelu(f64),
    /// `x` if `x > 0`, else `alpha · (e^x − 1)`.
    Elu(f64),
    /// `ln(1 + e^(βx)) / β`, and `x` where `βx > threshold` (PyTorch's form).
    Softplus(f64, f64),
}

impl UnaryOp {
    /// The op's name.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::elementwise::UnaryOp;
    /// assert_eq!(UnaryOp::Recip.name(), "reciprocal");
    /// assert_eq!(UnaryOp::AddScalar(2.0).name(), "add_scalar");
    /// ```
    pub fn name(self) -> &'static str {
        use UnaryOp::*;
        match self {
            Neg => "neg",
            Abs => "abs",
            Exp => "exp",
            Log => "log",
            Sqrt => "sqrt",
            Rsqrt => "rsqrt",
            Sin => "sin",
            Cos => "cos",
            Tanh => "tanh",
            Sigmoid => "sigmoid",
            Relu => "relu",
            Gelu => "gelu",
            Silu => "silu",
            Recip => "reciprocal",
            Square => "square",
            Sign => "sign",
            GeluGrad => "gelu_backward",
            SiluGrad => "silu_backward",
            AddScalar(_) => "add_scalar",
            MulScalar(_) => "mul_scalar",
            DivScalar(_) => "div_scalar",
            RSubScalar(_) => "rsub_scalar",
            RDivScalar(_) => "rdiv_scalar",
            PowScalar(_) => "pow_scalar",
            RPowScalar(_) => "rpow_scalar",
            Clamp(..) => "clamp",
            Floor => "floor",
            Ceil => "ceil",
            Round => "round",
            Trunc => "trunc",
            Log1p => "log1p",
            Expm1 => "expm1",
            Log2 => "log2",
            Log10 => "log10",
            Tan => "tan",
            Atan => "atan",
            Erf => "erf",
            LeakyRelu(_) => "leaky_relu",
            Elu(_) => "elu",
            Softplus(..) => "softplus",
        }
    }

    /// Whether the op is defined on integer tensors with an integer result.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::elementwise::UnaryOp;
    /// assert!(UnaryOp::Abs.keeps_int());
    /// assert!(UnaryOp::Clamp(0.0, 9.0).keeps_int());
    /// assert!(!UnaryOp::Exp.keeps_int()); // an integer input is promoted to float first
    /// ```
    pub fn keeps_int(self) -> bool {
        use UnaryOp::*;
        matches!(
            self,
            Neg | Abs
                | Relu
                | Square
                | Sign
                | AddScalar(_)
                | MulScalar(_)
                | RSubScalar(_)
                | Clamp(..)
                | Floor
                | Ceil
                | Round
                | Trunc
        )
    }
}

/// A binary elementwise op on two operands of one dtype.
///
/// # Examples
///
/// ```
/// use eddy_ops::elementwise::BinaryOp;
/// let op = BinaryOp::ReluBackward;
/// assert_eq!(op.name(), "relu_backward");
/// assert_ne!(op, BinaryOp::Maximum);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b` (floats only: integer operands are promoted to float).
    Div,
    /// `a ^ b` (for integers, a negative `b` gives `0`).
    Pow,
    /// The larger of `a` and `b` (a NaN wins).
    Maximum,
    /// The smaller of `a` and `b` (a NaN wins).
    Minimum,
    /// `a > 0 ? b : 0` (ReLU's backward: `a` the input, `b` the gradient).
    ReluBackward,
    /// `⌊a / b⌋`, Python's `//` (PyTorch's `floor_divide`); integers stay integers, and an
    /// integer division by zero fails the kernel.
    FloorDiv,
    /// `a - ⌊a / b⌋·b`, Python's `%` (PyTorch's `remainder`): the sign of `b`.
    Rem,
    /// `b · GELU'(a)` (GELU's backward: `a` the input, `b` the gradient); floats only.
    GeluBackward,
}

impl BinaryOp {
    /// The op's name.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::elementwise::BinaryOp;
    /// assert_eq!(BinaryOp::Maximum.name(), "maximum");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Pow => "pow",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
            BinaryOp::ReluBackward => "relu_backward",
            BinaryOp::FloorDiv => "floor_divide",
            BinaryOp::Rem => "remainder",
            BinaryOp::GeluBackward => "gelu_backward",
        }
    }

    /// Whether the op of operands of dtypes `a` and `b` computes in their dtype with no
    /// conversion: one dtype, not `bool`, and a float for `div` (which promotes integers).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::{DType, elementwise::BinaryOp};
    /// assert!(BinaryOp::Add.keeps_dtype(DType::I64, DType::I64));
    /// assert!(!BinaryOp::Div.keeps_dtype(DType::I64, DType::I64));
    /// assert!(!BinaryOp::Add.keeps_dtype(DType::F32, DType::I64));
    /// assert!(!BinaryOp::Add.keeps_dtype(DType::Bool, DType::Bool));
    /// ```
    #[inline(always)]
    pub fn keeps_dtype(self, a: DType, b: DType) -> bool {
        a == b && a != DType::Bool && (self != BinaryOp::Div || a.is_float())
    }
}

/// A comparison; the result is `Bool`.
///
/// # Examples
///
/// ```
/// use eddy_ops::elementwise::CmpOp;
/// assert_eq!(CmpOp::Le.name(), "le");
/// assert_eq!(CmpOp::Xor.name(), "logical_xor");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    /// `a == b`
    Eq,
    /// `a != b`
    Ne,
    /// `a < b`
    Lt,
    /// `a <= b`
    Le,
    /// `a > b`
    Gt,
    /// `a >= b`
    Ge,
    /// `a && b`, each operand true where it is not zero (NaN is true, as in PyTorch)
    And,
    /// `a || b`, as [`And`](Self::And)
    Or,
    /// `a != b` as truth values, as [`And`](Self::And)
    Xor,
}

impl CmpOp {
    /// The op's name.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::elementwise::CmpOp;
    /// assert_eq!(CmpOp::And.name(), "logical_and");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            CmpOp::Eq => "eq",
            CmpOp::Ne => "ne",
            CmpOp::Lt => "lt",
            CmpOp::Le => "le",
            CmpOp::Gt => "gt",
            CmpOp::Ge => "ge",
            CmpOp::And => "logical_and",
            CmpOp::Or => "logical_or",
            CmpOp::Xor => "logical_xor",
        }
    }
}

/// A reduction.
///
/// # Examples
///
/// ```
/// use eddy_ops::reduce::ReduceOp;
/// use eddy_ops::DType;
/// let op = ReduceOp::ArgMax;
/// assert_eq!(op.name(), "argmax");
/// assert_eq!(op.out_dtype(DType::F16), Some(DType::I64));
/// assert!(op.needs_elements());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// The sum (`I64` for integer and `Bool` inputs).
    Sum,
    /// The arithmetic mean (float inputs only).
    Mean,
    /// The product (`I64` for integer and `Bool` inputs).
    Prod,
    /// The largest element (a NaN wins).
    Max,
    /// The smallest element (a NaN wins).
    Min,
    /// The position of the largest element in the reduced row, as `I64` (the first on ties; a
    /// NaN wins).
    ArgMax,
    /// The position of the smallest element in the reduced row, as `I64` (the first on ties; a
    /// NaN wins).
    ArgMin,
}

impl ReduceOp {
    /// The op's name.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::reduce::ReduceOp;
    /// assert_eq!(ReduceOp::Prod.name(), "prod");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Mean => "mean",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::ArgMax => "argmax",
            ReduceOp::ArgMin => "argmin",
        }
    }

    /// The output dtype for an input of `dtype`, or `None` if the op does not take it.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::{reduce::ReduceOp, DType};
    /// assert_eq!(ReduceOp::Sum.out_dtype(DType::Bool), Some(DType::I64));
    /// assert_eq!(ReduceOp::Max.out_dtype(DType::BF16), Some(DType::BF16));
    /// assert_eq!(ReduceOp::Mean.out_dtype(DType::I32), None);
    /// ```
    pub fn out_dtype(self, dtype: DType) -> Option<DType> {
        match self {
            ReduceOp::Sum | ReduceOp::Prod if !dtype.is_float() => Some(DType::I64),
            ReduceOp::Mean if !dtype.is_float() => None,
            ReduceOp::ArgMax | ReduceOp::ArgMin => Some(DType::I64),
            _ => Some(dtype),
        }
    }

    /// Whether the reduction has no identity (an empty reduced dim is an error).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::reduce::ReduceOp;
    /// assert!(ReduceOp::Min.needs_elements());
    /// assert!(!ReduceOp::Sum.needs_elements()); // the sum of nothing is 0
    /// ```
    pub fn needs_elements(self) -> bool {
        matches!(
            self,
            ReduceOp::Max | ReduceOp::Min | ReduceOp::ArgMax | ReduceOp::ArgMin
        )
    }
}

/// Where an index op's operands sit: the dtypes of the values and indices and their offsets,
/// and the `[outer, size, inner]` view of the source around the indexed dim, with `nidx`
/// indices.
///
/// # Examples
///
/// ```
/// use eddy_ops::{index::IndexDims, DType};
/// let d = IndexDims { dtype: DType::F32, idx_dtype: DType::I64, offset: 0, idx_offset: 0,
///                     outer: 1, size: 10, inner: 4, nidx: 3 };
/// assert_eq!(d.size, 10);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct IndexDims {
    /// The values' dtype.
    pub dtype: DType,
    /// The indices' dtype.
    pub idx_dtype: DType,
    /// The values' offset in their storage.
    pub offset: usize,
    /// The indices' offset in their storage.
    pub idx_offset: usize,
    /// The product of the dims before the indexed one.
    pub outer: usize,
    /// The indexed dim's size.
    pub size: usize,
    /// The product of the dims after it.
    pub inner: usize,
    /// How many indices.
    pub nidx: usize,
}

impl IndexDims {
    /// Indexing a tensor of `dims` along dim `d` with `nidx` indices: the values of `dtype`
    /// from element `offset`, the indices of `idx_dtype` from `idx_offset`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::{index::IndexDims, DType};
    /// let d = IndexDims::along(&[2, 10, 4], 1, 3, (DType::F32, 0), (DType::I64, 5));
    /// assert_eq!((d.outer, d.size, d.inner, d.nidx, d.idx_offset), (2, 10, 4, 3, 5));
    /// ```
    pub fn along(
        dims: &[usize],
        d: usize,
        nidx: usize,
        (dtype, offset): (DType, usize),
        (idx_dtype, idx_offset): (DType, usize),
    ) -> IndexDims {
        IndexDims {
            dtype,
            idx_dtype,
            offset,
            idx_offset,
            outer: crate::numel_of(&dims[..d]),
            size: dims[d],
            inner: crate::numel_of(&dims[d + 1..]),
            nidx,
        }
    }
}

/// The class target the negative log-likelihood leaves out: PyTorch's default
/// `ignore_index`.
pub const IGNORE_INDEX: i64 = -100;

/// The operands of the negative log-likelihood kernels: `rows` class targets of `idx_dtype`
/// (`i64` or `u8`, contiguous from `idx_offset`) into `cols` classes, beside a float operand
/// of `dtype` from element `offset` (the `[rows, cols]` log-probabilities for the loss, the
/// loss's gradient for its backward).
///
/// # Examples
///
/// ```
/// use eddy_ops::{nn::ClassDims, DType};
/// let d = ClassDims { dtype: DType::F32, idx_dtype: DType::I64, offset: 0, idx_offset: 0,
///                     rows: 128, cols: 10 };
/// assert_eq!(d.rows * d.cols, 1280);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ClassDims {
    /// The float operand's dtype, and the result's.
    pub dtype: DType,
    /// The targets' dtype.
    pub idx_dtype: DType,
    /// The float operand's offset in its storage.
    pub offset: usize,
    /// The targets' offset in their storage.
    pub idx_offset: usize,
    /// How many targets (rows of log-probabilities).
    pub rows: usize,
    /// How many classes.
    pub cols: usize,
}

/// One Adam or AdamW step's hyperparameters, as `f64` (each rounded to the parameter's dtype
/// where an element meets it, as the composed ops do).
///
/// # Examples
///
/// ```
/// use eddy_ops::optim::AdamStep;
/// let s = AdamStep { lr: 1e-3, betas: (0.9, 0.999), eps: 1e-8, weight_decay: 0.01, decoupled: true };
/// assert!(s.decoupled);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamStep {
    /// The learning rate.
    pub lr: f64,
    /// The decay rates of the first and second moments.
    pub betas: (f64, f64),
    /// The term added to the denominator.
    pub eps: f64,
    /// The weight decay.
    pub weight_decay: f64,
    /// Whether the decay is decoupled (AdamW: the parameter shrinks) or L2 (added to the
    /// gradient).
    pub decoupled: bool,
}
