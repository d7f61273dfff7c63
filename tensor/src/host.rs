//! Host sync points: reading values back waits for the ops they depend on and surfaces any
//! asynchronous error of those ops (a failed kernel upstream poisons this tensor's storage).

use crate::{DType, Elem, Error, Result, Tensor};
use eddy_ops::kernel::gather_host;
use std::fmt;

/// From this many bytes on, a host read first checks that the host can allocate its result.
const PROBE_BYTES: usize = 1 << 30;

/// Reserves room for `n` more elements in `v`, or fails with `OutOfMemory` naming `op`
/// (the host's allocator refused, or the size overflows) instead of aborting.
/// A request of at least `CHECKED_BYTES` must also fit in the host memory free now: the
/// host's allocator grants more than the machine has, and the process would be killed when the
/// copy touches the pages (see `eddy_vm::alloc::host`).
#[track_caller]
fn host_reserve<T>(op: &str, v: &mut Vec<T>, n: usize) -> Result<()> {
    let bytes = n.saturating_mul(std::mem::size_of::<T>());
    let at = crate::Caller::here(); // outside the closure, which `#[track_caller]` misses
    let oom = || {
        Error::Vm(eddy_vm::Error::OutOfMemory {
            at,
            op: op.to_string(),
            requested: bytes,
            in_use: 0,
            cached: 0,
            capacity: eddy_vm::alloc::host_limit(),
        })
    };
    if bytes >= eddy_vm::alloc::CHECKED_BYTES
        && eddy_vm::alloc::host_available().is_some_and(|free| bytes > free)
    {
        return Err(oom());
    }
    v.try_reserve_exact(n).map_err(|_| oom())
}

/// An empty vector with room for `n` views of one tensor, or `OutOfMemory` naming `op` when
/// the host could not hold that many handles. Splitting a `[2^62, 0]` tensor into rows asks for
/// 2^62 views, none with an element: this fails at once rather than aborting or running for
/// years. Each view is a handle plus its own `Inner` (shape and strides inline), about
/// `VIEW_BYTES`; from [`PROBE_BYTES`] of them on, the host is asked for that much first.
#[track_caller]
pub(crate) fn views_reserve(op: &str, n: usize) -> Result<Vec<Tensor>> {
    const VIEW_BYTES: usize =
        std::mem::size_of::<Tensor>() + std::mem::size_of::<crate::tensor::Inner>() + 16;
    let bytes = n.saturating_mul(VIEW_BYTES);
    if bytes >= PROBE_BYTES {
        host_reserve(op, &mut Vec::<u8>::new(), bytes)?; // freed at once
    }
    let mut v = Vec::new();
    host_reserve(op, &mut v, n)?;
    Ok(v)
}

impl Tensor {
    /// Waits until every op writing this tensor's storage has run.
    ///
    /// # Errors
    ///
    /// The asynchronous error of an op this tensor depends on (`Vm(KernelFailed…)`,
    /// `Vm(OutOfMemory…)`), `Vm(Deadlock…)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1f32, 2.], [2])?;
    /// x.exp()?.sync()?; // waits for the op
    /// let bad = Tensor::custom_map::<f32, _>("fails", &[&x], [2], |_, _| Err("no".to_string()))?;
    /// assert!(bad.sync().is_err()); // the kernel's error surfaces here
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn sync(&self) -> Result<()> {
        if let Some(g) = self.global() {
            return g.parts.iter().try_for_each(Tensor::sync);
        }
        (self.engine().read_blob(self.blob(), |_| ())).map_err(crate::global::surfaced)?;
        Ok(())
    }

    /// The elements in row-major order. A `Bool` tensor reads as `bool` (or as its storage
    /// type, [`Bool8`](crate::Bool8)).
    ///
    /// # Errors
    ///
    /// `DTypeMismatch` if `T` is not the tensor's dtype; as [`sync`](Self::sync).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::arange(0.0, 4.0, 1.0, DType::F32)?.reshape([2, 2])?.t()?;
    /// assert_eq!(t.to_vec::<f32>()?, vec![0., 2., 1., 3.]);
    /// assert!(t.to_vec::<i64>().is_err());
    /// assert_eq!(t.gt_scalar(1.5)?.to_vec::<bool>()?, vec![false, true, false, true]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn to_vec<T: Elem>(&self) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype() {
            return Err(Error::DTypeMismatch {
                at: crate::Caller::here(),
                op: "to_vec",
                lhs: self.dtype(),
                rhs: T::DTYPE,
            });
        }
        // A broadcast view may show far more elements than its storage holds: fail with an
        // error, not an abort, when the host cannot hold them.
        let n = self.numel();
        if n.saturating_mul(std::mem::size_of::<T>()) >= PROBE_BYTES {
            host_reserve::<T>("to_vec", &mut Vec::new(), n)?;
        }
        if self.is_global() {
            // The logical value: boxed to `B`, read from the first rank.
            let _g = crate::no_grad();
            return self.to_full_local()?.to_vec();
        }
        if !self.device().is_cpu() {
            // Device memory is read through a copy to the host, ordered like any other op.
            return self.to_device(crate::Device::CPU)?.to_vec();
        }
        let layout = self.layout().clone();
        (self
            .engine()
            .read_blob(self.blob(), move |b| gather_host::<T>(b, &layout)))
        .map_err(crate::global::surfaced)
    }

    /// The rows of a matrix.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if the tensor is not 2-D; as [`to_vec`](Self::to_vec).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let t = Tensor::arange(0.0, 6.0, 1.0, DType::I64)?.reshape([2, 3])?;
    /// assert_eq!(t.to_vec2::<i64>()?, [[0, 1, 2], [3, 4, 5]]);
    /// assert!(t.flatten_all()?.to_vec2::<i64>().is_err()); // not 2-D
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn to_vec2<T: Elem>(&self) -> Result<Vec<Vec<T>>> {
        if self.rank() != 2 {
            return Err(Error::invalid(
                "to_vec2",
                format!("needs a 2-D tensor, got {:?}", self.dims()),
            ));
        }
        let cols = self.dims()[1];
        let v = self.to_vec::<T>()?;
        Ok(if cols == 0 {
            let rows = self.dims()[0];
            let mut out = Vec::new();
            host_reserve::<Vec<T>>("to_vec2", &mut out, rows)?;
            out.resize(rows, Vec::new());
            out
        } else {
            v.chunks(cols).map(<[T]>::to_vec).collect()
        })
    }

    /// The value of a one-element tensor.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if the tensor has other than one element; as [`to_vec`](Self::to_vec).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1f32, 2., 3.], [3])?;
    /// assert_eq!(t.sum_all()?.item::<f32>()?, 6.);
    /// assert!(t.item::<f32>().is_err()); // three elements
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn item<T: Elem>(&self) -> Result<T> {
        if self.numel() != 1 {
            return Err(Error::invalid(
                "item",
                format!("needs one element, got shape {:?}", self.dims()),
            ));
        }
        Ok(self.to_vec::<T>()?[0])
    }

    /// The value of a one-element tensor of any dtype, as `f64`.
    ///
    /// # Errors
    ///
    /// As [`item`](Self::item).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// assert_eq!(Tensor::from_vec(vec![7i64], [1])?.to_scalar()?, 7.0);
    /// assert_eq!(Tensor::scalar(true)?.to_scalar()?, 1.0);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn to_scalar(&self) -> Result<f64> {
        match self.to_f64_vec()?.first() {
            Some(&x) if self.numel() == 1 => Ok(x),
            _ => Err(Error::invalid(
                "to_scalar",
                format!("needs one element, got shape {:?}", self.dims()),
            )),
        }
    }

    /// The elements converted to `f64` (any dtype).
    ///
    /// # Errors
    ///
    /// As [`sync`](Self::sync).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![-1i32, 4], [2])?;
    /// assert_eq!(t.to_f64_vec()?, [-1., 4.]);
    /// assert_eq!(t.gt_scalar(0.0)?.to_f64_vec()?, [0., 1.]); // bools as 0 and 1
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        eddy_ops::dispatch!(self.dtype(), T => Ok(self.to_vec::<T>()?.into_iter().map(Elem::to_f64).collect()))
    }

    /// The entries `Display` shows, formatted: all of them, or with `summarize` the first and
    /// last 3 of every dim longer than 6. Integers are formatted from their own values (an
    /// `i64` above 2^53 has no exact `f64`).
    #[track_caller]
    fn display_strings(&self, summarize: bool) -> Result<Vec<String>> {
        let _g = crate::no_grad();
        let mut t = self.clone();
        if summarize {
            for (d, &n) in self.dims().iter().enumerate().filter(|(_, n)| **n > 6) {
                let d = d as isize;
                t = Tensor::cat(&[&t.narrow(d, 0, 3)?, &t.narrow(d, n - 3, 3)?], d)?;
            }
        }
        let dt = self.dtype();
        Ok(if dt == DType::Bool {
            t.to_vec::<bool>()?
                .into_iter()
                .map(|v| if v { "True" } else { "False" }.to_string())
                .collect()
        } else if dt.is_int() {
            t.to_dtype(DType::I64)?
                .to_vec::<i64>()?
                .into_iter()
                .map(|v| v.to_string())
                .collect()
        } else {
            t.to_f64_vec()?
                .into_iter()
                .map(|v| {
                    let a = v.abs();
                    if v.is_finite() && a != 0.0 && !(1e-4..1e8).contains(&a) {
                        format!("{v:.4e}")
                    } else {
                        format!("{v:.4}")
                    }
                })
                .collect()
        })
    }
}

/// PyTorch-like printing: `tensor([[1.0000, 2.0000], …], dtype=f32)`; dims longer than 6
/// show their first and last 3 entries around `...` once the tensor has over 1000 elements.
/// A tensor whose ops failed prints the error instead of values. An empty tensor prints as
/// PyTorch prints it, `tensor([], size=(3, 0), dtype=f32)` (no size for one dim), without
/// walking its other dims, which may be huge (`[2^62, 0]` is a valid empty tensor).
impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.numel() == 0 {
            if let Err(e) = self.sync() {
                return write!(f, "tensor(<error: {e}>)");
            }
            write!(f, "tensor([]")?;
            if self.rank() != 1 {
                let dims: Vec<String> = self.dims().iter().map(|d| d.to_string()).collect();
                write!(f, ", size=({})", dims.join(", "))?;
            }
            write!(f, ", dtype={}", self.dtype())?;
            if self.device() != crate::Device::CPU {
                write!(f, ", device={}", self.device())?;
            }
            return write!(f, ")");
        }
        let summarize = self.numel() > 1000;
        // With `summarize`, only what is shown is read and formatted: each dim longer than 6
        // cut to its first and last 3 entries, so a huge tensor (a broadcast view of 2^62
        // elements, say) is neither copied to the host nor formatted whole.
        let strs = match self.display_strings(summarize) {
            Ok(v) => v,
            Err(e) => return write!(f, "tensor(<error: {e}>)"),
        };
        let mut out = String::from("tensor(");
        /// `dims`: the tensor's; `strs`: the entries shown, row-major over `dims` with each
        /// dim over 6 cut to 6 when `summarize`.
        fn rec(
            out: &mut String,
            dims: &[usize],
            strs: &[String],
            base: usize,
            width: &mut usize,
            summarize: bool,
            indent: usize,
        ) {
            if dims.is_empty() {
                out.push_str(&strs[base]);
                *width = (*width).max(strs[base].len());
                return;
            }
            let n = dims[0];
            let shown = |d: usize| if summarize && d > 6 { 6 } else { d };
            let inner: usize = dims[1..].iter().map(|&d| shown(d)).product();
            out.push('[');
            let idx: Vec<Option<usize>> = if summarize && n > 6 {
                (0..3)
                    .map(Some)
                    .chain([None])
                    .chain((3..6).map(Some))
                    .collect()
            } else {
                (0..n).map(Some).collect()
            };
            for (k, i) in idx.iter().enumerate() {
                if k > 0 {
                    out.push(',');
                    if dims.len() > 1 {
                        out.push_str(&"\n".repeat(dims.len() - 1));
                        out.push_str(&" ".repeat(indent + 1));
                    } else {
                        out.push(' ');
                    }
                }
                match i {
                    None => out.push_str("..."),
                    Some(i) if dims.len() == 1 => {
                        let w = *width;
                        out.push_str(&format!("{:>w$}", strs[base + i]));
                        *width = w.max(strs[base + i].len());
                    }
                    Some(i) => rec(
                        out,
                        &dims[1..],
                        strs,
                        base + i * inner,
                        width,
                        summarize,
                        indent + 1,
                    ),
                }
            }
            out.push(']');
        }
        // The first pass measures the widest entry shown; the second pads every entry to it.
        let mut width = 0;
        rec(
            &mut String::new(),
            self.dims(),
            &strs,
            0,
            &mut width,
            summarize,
            7,
        );
        rec(&mut out, self.dims(), &strs, 0, &mut width, summarize, 7);
        write!(f, "{out}, dtype={}", self.dtype())?;
        if self.device() != crate::Device::CPU {
            write!(f, ", device={}", self.device())?;
        }
        write!(f, ")")
    }
}
