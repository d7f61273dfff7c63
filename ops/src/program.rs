//! What merged elementwise kernels are made of: what one elementwise kernel computes
//! ([`Elementwise`], where its operands are: [`Pos`]), and the program a merged kernel runs.
//! Plain data, below both the fusion pass ([`crate::fuse`]) and the devices' kernels that
//! describe themselves with it and run its programs.

use crate::kinds::{BinaryOp, UnaryOp};
use crate::{DType, Lay};

/// Where an elementwise kernel reads an operand's elements: the [`Lay`]s a merged kernel
/// handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pos {
    /// Contiguous, from this element on.
    Dense(usize),
    /// One element, at this offset, for every element of the output.
    Splat(usize),
}

impl Pos {
    /// `lay` as a position; `None` for a strided one.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::{fuse::Pos, Lay, Layout};
    /// assert_eq!(Pos::of(&Lay::Dense(3)), Some(Pos::Dense(3)));
    /// assert_eq!(Pos::of(&Lay::of(Layout::contiguous([2, 3]).transpose(0, 1))), None);
    /// ```
    pub fn of(lay: &Lay) -> Option<Pos> {
        match *lay {
            Lay::Dense(o) => Some(Pos::Dense(o)),
            Lay::Splat(o) => Some(Pos::Splat(o)),
            Lay::Strided(_) => None,
        }
    }
}

/// What an elementwise kernel computes: its [`Kernel::describe`](eddy_vm::instruction::Kernel::describe).
///
/// # Examples
///
/// ```
/// use eddy_ops::elementwise::{unary, UnaryOp};
/// use eddy_ops::fuse::{Elementwise, Pos};
/// use eddy_ops::{DType, Device, Lay};
/// use eddy_vm::instruction::Kernel;
/// let k = unary(Device::CPU, UnaryOp::Relu, DType::F32, Lay::Dense(0)).unwrap();
/// let what = k.describe().and_then(|d| d.downcast::<Elementwise>().ok());
/// assert_eq!(what.as_deref(), Some(&Elementwise::Unary { op: UnaryOp::Relu, dtype: DType::F32, a: Pos::Dense(0) }));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum Elementwise {
    /// `out = op(a)`.
    Unary {
        /// The op.
        op: UnaryOp,
        /// The dtype of the input and the output.
        dtype: DType,
        /// Where the input's elements are.
        a: Pos,
    },
    /// `out = a op b`.
    Binary {
        /// The op.
        op: BinaryOp,
        /// The dtype of the inputs and the output.
        dtype: DType,
        /// Where input 0's elements are.
        a: Pos,
        /// Where input 1's elements are.
        b: Pos,
    },
}

impl Elementwise {
    pub(crate) fn dtype(&self) -> DType {
        match self {
            Elementwise::Unary { dtype, .. } | Elementwise::Binary { dtype, .. } => *dtype,
        }
    }

    pub(super) fn positions(&self) -> Vec<Pos> {
        match *self {
            Elementwise::Unary { a, .. } => vec![a],
            Elementwise::Binary { a, b, .. } => vec![a, b],
        }
    }

    /// Whether `description` (a kernel's [`describe`](eddy_vm::instruction::Kernel::describe))
    /// is this.
    pub(crate) fn is(&self, description: &dyn std::any::Any) -> bool {
        description.downcast_ref::<Elementwise>() == Some(self)
    }

    pub(super) fn name(&self) -> &'static str {
        match self {
            Elementwise::Unary { op, .. } => op.name(),
            Elementwise::Binary { op, .. } => op.name(),
        }
    }
}

/// Where a merged op takes an operand from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Src {
    /// The merged step's input `k`, at `Pos`.
    Input(usize, Pos),
    /// A block of scratch memory holding a value computed earlier in the step.
    Reg(usize),
}

/// One instruction of a merged kernel's program, run on each block of elements.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Code {
    /// `reg[d] = op(a)`.
    Unary { op: UnaryOp, a: Src, d: usize },
    /// `reg[d] = a op b`.
    Binary {
        op: BinaryOp,
        a: Src,
        b: Src,
        d: usize,
    },
    /// Output `out` = `reg[r]`.
    Store { r: usize, out: usize },
}

/// A merged kernel's program: what [`crate::cpu::fused`] runs.
#[derive(Clone, Debug)]
pub(crate) struct Program {
    pub(crate) name: String,
    pub(crate) dtype: DType,
    /// The elements of every value.
    pub(crate) n: usize,
    pub(crate) regs: usize,
    pub(crate) code: Vec<Code>,
}
