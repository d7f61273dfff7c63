//! Named tensors to and from [safetensors](https://huggingface.co/docs/safetensors) files, the
//! format candle, PyTorch (`safetensors.torch`) and the Hugging Face hub share: a JSON header
//! of names, dtypes, shapes and offsets, then the raw little-endian bytes.
//!
//! [`save`] syncs each tensor (a sync point: an asynchronous error of any of them is returned
//! and nothing is written); [`load`] reads the whole file and returns fresh tensors on the
//! default engine. [`nn::save`](crate::nn::save) and [`nn::load`](crate::nn::load) build on
//! them for a module's parameters.
//!
//! ```
//! use eddy_tensor::{safetensors, Tensor, DType};
//! let path = std::env::temp_dir().join(format!("eddy-doc-{}.safetensors", std::process::id()));
//! let w = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([2, 3])?;
//! let ids = Tensor::from_vec(vec![3i64, 1], [2])?;
//! safetensors::save([("w", &w), ("ids", &ids)], &path)?;
//! let back = safetensors::load(&path)?;                  // sorted by name
//! assert_eq!((back[0].0.as_str(), back[1].0.as_str()), ("ids", "w"));
//! assert_eq!(back[0].1.to_vec::<i64>()?, vec![3, 1]);
//! assert_eq!(back[1].1.to_vec::<f32>()?, w.to_vec::<f32>()?);
//! assert_eq!(back[1].1.dims(), &[2, 3]);
//! # std::fs::remove_file(&path).ok();
//! # Ok::<(), eddy_tensor::Error>(())
//! ```

use crate::{Caller, DType, Error, Result, Tensor};
use half::{bf16, f16};
use safetensors::tensor::{Dtype as SDtype, TensorView};
use std::path::Path;

/// An `Io` error of `op` on `path`, named as called at `at` (taken outside the closures that
/// build these, which `#[track_caller]` does not reach).
fn io_error(at: Caller, op: &'static str, path: &Path, message: impl ToString) -> Error {
    Error::Io {
        at,
        op,
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

fn to_file_dtype(d: DType) -> SDtype {
    match d {
        DType::F32 => SDtype::F32,
        DType::F64 => SDtype::F64,
        DType::F16 => SDtype::F16,
        DType::BF16 => SDtype::BF16,
        DType::I64 => SDtype::I64,
        DType::I32 => SDtype::I32,
        DType::U8 => SDtype::U8,
        DType::Bool => SDtype::BOOL,
    }
}

fn from_file_dtype(d: SDtype) -> Option<DType> {
    Some(match d {
        SDtype::F32 => DType::F32,
        SDtype::F64 => DType::F64,
        SDtype::F16 => DType::F16,
        SDtype::BF16 => DType::BF16,
        SDtype::I64 => DType::I64,
        SDtype::I32 => DType::I32,
        SDtype::U8 => DType::U8,
        SDtype::BOOL => DType::Bool,
        _ => return None,
    })
}

/// A tensor's values as little-endian bytes, in row-major order (a sync point).
#[track_caller]
fn le_bytes(t: &Tensor) -> Result<Vec<u8>> {
    fn flat<T, const N: usize>(v: Vec<T>, f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
        v.into_iter().flat_map(f).collect()
    }
    Ok(match t.dtype() {
        DType::F32 => flat(t.to_vec::<f32>()?, f32::to_le_bytes),
        DType::F64 => flat(t.to_vec::<f64>()?, f64::to_le_bytes),
        DType::F16 => flat(t.to_vec::<f16>()?, f16::to_le_bytes),
        DType::BF16 => flat(t.to_vec::<bf16>()?, bf16::to_le_bytes),
        DType::I64 => flat(t.to_vec::<i64>()?, i64::to_le_bytes),
        DType::I32 => flat(t.to_vec::<i32>()?, i32::to_le_bytes),
        DType::U8 => t.to_vec::<u8>()?,
        DType::Bool => flat(t.to_vec::<bool>()?, |b| [b as u8]),
    })
}

/// A tensor of `dtype` and `shape` from little-endian bytes (their length already checked by
/// the format: element count × element size).
#[track_caller]
fn from_le_bytes(dtype: DType, shape: &[usize], b: &[u8]) -> Result<Tensor> {
    fn vals<T, const N: usize>(b: &[u8], f: impl Fn([u8; N]) -> T) -> Vec<T> {
        b.chunks_exact(N)
            .map(|c| f(c.try_into().expect("chunks of N bytes")))
            .collect()
    }
    let shape = shape.to_vec();
    match dtype {
        DType::F32 => Tensor::from_vec(vals(b, f32::from_le_bytes), shape),
        DType::F64 => Tensor::from_vec(vals(b, f64::from_le_bytes), shape),
        DType::F16 => Tensor::from_vec(vals(b, f16::from_le_bytes), shape),
        DType::BF16 => Tensor::from_vec(vals(b, bf16::from_le_bytes), shape),
        DType::I64 => Tensor::from_vec(vals(b, i64::from_le_bytes), shape),
        DType::I32 => Tensor::from_vec(vals(b, i32::from_le_bytes), shape),
        DType::U8 => Tensor::from_vec(b.to_vec(), shape),
        // Any nonzero byte is true, as a file written elsewhere may hold other bytes.
        DType::Bool => Tensor::from_vec(vals(b, |[x]: [u8; 1]| x != 0), shape),
    }
}

/// Writes `tensors` (name, tensor) to `path` as a safetensors file, replacing it. Views are
/// written as their values (row-major), whatever their strides.
///
/// # Errors
///
/// `InvalidArgument` for a repeated name; any asynchronous error of a tensor (nothing is
/// written then); `Io` if the file cannot be written.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{safetensors, Error, Tensor, DType};
/// let name = format!("eddy-st-save-{}.safetensors", std::process::id());
/// let path = std::env::temp_dir().join(name);
/// let m = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([2, 3])?;
/// safetensors::save([("mt", &m.t()?)], &path)?; // a view: saved as its values
/// let back = safetensors::load(&path)?;
/// assert_eq!(back[0].1.dims(), &[3, 2]);
/// assert_eq!(back[0].1.to_vec::<f32>()?, [0., 3., 1., 4., 2., 5.]);
/// let twice = safetensors::save([("m", &m), ("m", &m)], &path);
/// assert!(matches!(twice, Err(Error::InvalidArgument { .. })));
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
#[track_caller]
pub fn save<'a, S: AsRef<str>>(
    tensors: impl IntoIterator<Item = (S, &'a Tensor)>,
    path: impl AsRef<Path>,
) -> Result<()> {
    let at = Caller::here();
    let path = path.as_ref();
    let mut entries: Vec<(String, DType, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, t) in tensors {
        let name = name.as_ref().to_string();
        if entries.iter().any(|e| e.0 == name) {
            return Err(Error::invalid(
                "safetensors::save",
                format!("the name {name:?} is given twice"),
            ));
        }
        // The format's readers (and its writer) multiply the dims in order: an empty tensor
        // whose other dims overflow that product cannot be written.
        if t.dims()
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .is_none()
        {
            return Err(Error::invalid(
                "safetensors::save",
                format!("{name:?}: the product of the dims {:?} overflows", t.dims()),
            ));
        }
        entries.push((name, t.dtype(), t.dims().to_vec(), le_bytes(t)?));
    }
    let views = entries
        .iter()
        .map(|(n, d, s, b)| {
            let v = TensorView::new(to_file_dtype(*d), s.clone(), b)
                .map_err(|e| io_error(at, "safetensors::save", path, e))?;
            Ok((n.as_str(), v))
        })
        .collect::<Result<Vec<_>>>()?;
    safetensors::serialize_to_file(views, None, path)
        .map_err(|e| io_error(at, "safetensors::save", path, e))
}

/// Reads every tensor of the safetensors file at `path`, sorted by name (the format keeps no
/// order of its own), as fresh tensors on the default engine.
///
/// # Errors
///
/// `Io` if the file cannot be read or is not a well-formed safetensors file;
/// `InvalidArgument` for a dtype Eddy does not have (`I8`, `U16`, the 8-bit floats, …).
///
/// # Examples
///
/// ```
/// use eddy_tensor::{safetensors, Error, Tensor};
/// let name = format!("eddy-st-load-{}.safetensors", std::process::id());
/// let path = std::env::temp_dir().join(name);
/// assert!(matches!(safetensors::load(&path), Err(Error::Io { .. }))); // no file yet
/// let b = Tensor::from_vec(vec![true, false], [2])?;
/// safetensors::save([("b", &b), ("a", &b.logical_not()?)], &path)?;
/// let back = safetensors::load(&path)?;
/// assert_eq!((back[0].0.as_str(), back[1].0.as_str()), ("a", "b")); // sorted by name
/// assert_eq!(back[0].1.to_vec::<bool>()?, [false, true]);
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
#[track_caller]
pub fn load(path: impl AsRef<Path>) -> Result<Vec<(String, Tensor)>> {
    let at = Caller::here();
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| io_error(at, "safetensors::load", path, e))?;
    let file = safetensors::SafeTensors::deserialize(&bytes)
        .map_err(|e| io_error(at, "safetensors::load", path, e))?;
    let mut named: Vec<(String, TensorView<'_>)> = file.tensors();
    // `tensors()` follows a hash map; names are unique, so sorting by them fixes the order.
    named.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = Vec::with_capacity(named.len());
    for (name, v) in named {
        let Some(dtype) = from_file_dtype(v.dtype()) else {
            let message = format!(
                "tensor {name:?} has dtype {:?}, which Eddy does not have",
                v.dtype()
            );
            return Err(Error::invalid("safetensors::load", message));
        };
        out.push((name, from_le_bytes(dtype, v.shape(), v.data())?));
    }
    Ok(out)
}
