//! [`save`](super::save) and [`load`](super::load): a module's named parameters and buffers to and from a safetensors file.

use super::module::Module;
use crate::{Error, Result, Tensor};
use std::collections::HashMap;
use std::path::Path;

/// Writes `module`'s [named parameters](Module::named_parameters) and
/// [buffers](Module::named_buffers) to a safetensors file at
/// `path` (PyTorch's `save_file(model.state_dict(), path)`), which [`load`](super::load), candle and
/// `safetensors.torch` read back.
///
/// # Errors
///
/// As [`safetensors::save`](crate::safetensors::save).
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn::{self, Func, Linear, Module, Sequential}, Tensor, DType};
/// let path = std::env::temp_dir().join(format!("eddy-nn-doc-{}.safetensors", std::process::id()));
/// let mlp = || -> eddy_tensor::Result<Sequential> {
///     Ok(Sequential::new()
///         .add(Linear::new(4, 8, true, DType::F32)?)
///         .add(Func::new(Tensor::relu))
///         .add(Linear::new(8, 2, true, DType::F32)?))
/// };
/// let (a, b) = (mlp()?, mlp()?);                     // two different random inits
/// let names: Vec<String> = a.named_parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["0.weight", "0.bias", "2.weight", "2.bias"]);
/// nn::save(&a, &path)?;
/// nn::load(&b, &path)?;                              // b now computes what a computes
/// let x = Tensor::randn([3, 4], 0.0, 1.0, DType::F32)?;
/// assert_eq!(a.forward(&x)?.to_vec::<f32>()?, b.forward(&x)?.to_vec::<f32>()?);
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
#[track_caller]
pub fn save(module: &dyn Module, path: impl AsRef<Path>) -> Result<()> {
    let named = state(module);
    crate::safetensors::save(named.iter().map(|(n, t)| (n.as_str(), t)), path)
}

/// Loads a file written by [`save`](super::save) (or any safetensors file with the same names) into
/// `module`'s parameters and buffers, in place, so that an optimizer holding them trains on from the
/// loaded values (PyTorch's `load_state_dict`, strict). Everything is checked before any
/// parameter changes: on an error the module is as it was.
///
/// # Errors
///
/// `InvalidArgument` naming the missing and unexpected names if the file's names are not
/// exactly the module's; `ShapeMismatch` (`lhs` the parameter's, `rhs` the file's) or
/// `DTypeMismatch` for a tensor that does not fit; the errors of
/// [`safetensors::load`](crate::safetensors::load).
///
/// # Examples
///
/// ```
/// use eddy_tensor::{nn::{self, Linear, Module}, Error, Tensor, DType};
/// let name = format!("eddy-nn-load-{}.safetensors", std::process::id());
/// let path = std::env::temp_dir().join(name);
/// let a = Linear::new(3, 2, true, DType::F32)?;
/// nn::save(&a, &path)?;
/// let b = Linear::new(3, 2, true, DType::F32)?;
/// nn::load(&b, &path)?;
/// assert_eq!(b.weight.to_vec::<f32>()?, a.weight.to_vec::<f32>()?);
/// let no_bias = Linear::new(3, 2, false, DType::F32)?; // the file has an unexpected "bias"
/// assert!(matches!(nn::load(&no_bias, &path), Err(Error::InvalidArgument { .. })));
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
#[track_caller]
pub fn load(module: &dyn Module, path: impl AsRef<Path>) -> Result<()> {
    let named = state(module);
    let file: HashMap<String, Tensor> = crate::safetensors::load(path)?.into_iter().collect();
    let missing: Vec<&str> = (named.iter().map(|(n, _)| n.as_str()))
        .filter(|n| !file.contains_key(*n))
        .collect();
    let mut unexpected: Vec<&str> = (file.keys().map(String::as_str))
        .filter(|k| !named.iter().any(|(n, _)| n == k))
        .collect();
    unexpected.sort_unstable();
    if !missing.is_empty() || !unexpected.is_empty() {
        return Err(Error::invalid(
            "nn::load",
            format!(
                "the file's names differ from the module's: missing {missing:?}, unexpected {unexpected:?}"
            ),
        ));
    }
    for (n, p) in &named {
        let src = &file[n];
        if src.dims() != p.dims() {
            return Err(Error::ShapeMismatch {
                at: crate::Caller::here(),
                op: "nn::load",
                lhs: p.dims().to_vec(),
                rhs: src.dims().to_vec(),
            });
        }
        if src.dtype() != p.dtype() {
            return Err(Error::DTypeMismatch {
                at: crate::Caller::here(),
                op: "nn::load",
                lhs: p.dtype(),
                rhs: src.dtype(),
            });
        }
    }
    let _g = crate::no_grad();
    for (n, p) in &named {
        p.copy_(&file[n])?;
    }
    Ok(())
}

/// `module`'s `state_dict`: its named parameters, then its named buffers.
fn state(module: &dyn Module) -> Vec<(String, Tensor)> {
    let mut all = module.named_parameters();
    all.extend(module.named_buffers());
    all
}
