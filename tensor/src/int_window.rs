//! Convolution and max pooling of integer tensors, as PyTorch's CPU computes them: exactly
//! (integer products and sums, wrapping as integer matmul does), through a slow path. Each
//! tap of the window is a strided view of the padded input; a convolution adds the product
//! of each tap with its slice of the weight, a max pooling keeps each window's first
//! largest element and its position. Integer tensors carry no gradient.

use crate::{DType, Error, Result, Tensor};
use eddy_ops::conv::Window2d;

/// The smallest value of the integer `dtype`, as the fill of a max pooling's padding.
fn lowest(dtype: DType) -> f64 {
    match dtype {
        DType::I64 => i64::MIN as f64,
        DType::I32 => i32::MIN as f64,
        _ => 0.0,
    }
}

impl Tensor {
    /// `UnsupportedDType` for `bool`, which neither op takes.
    #[track_caller]
    pub(crate) fn int_window_dtype(&self, op: &'static str) -> Result<()> {
        if self.dtype() == DType::Bool {
            return Err(Error::UnsupportedDType {
                op,
                dtype: DType::Bool,
                at: crate::Caller::here(),
            });
        }
        Ok(())
    }

    /// 4-d `self` padded by `w`'s padding with `fill`, and past the bottom and right far
    /// enough for every window (a `ceil_mode` window may run past the padding).
    #[track_caller]
    fn padded_for(&self, w: &Window2d, fill: f64) -> Result<Tensor> {
        let extent = |a: usize| {
            let need =
                (w.out_hw[a].max(1) - 1) * w.stride[a] + (w.kernel[a] - 1) * w.dilation[a] + 1;
            need.max(w.in_hw[a] + 2 * w.padding[a])
        };
        let (h, wd) = (extent(0), extent(1));
        if (h, wd) == (w.in_hw[0], w.in_hw[1]) {
            return Ok(self.clone());
        }
        let p = Tensor::full([w.batch, w.channels, h, wd], fill, self.dtype())?
            .to_device(self.device())?;
        p.narrow(2, w.padding[0], w.in_hw[0])?
            .narrow(3, w.padding[1], w.in_hw[1])?
            .copy_(self)?;
        Ok(p)
    }

    /// Tap `(ky, kx)` of every window over padded `self`: `[batch, channels, oh, ow]`.
    #[track_caller]
    fn tap(&self, w: &Window2d, ky: usize, kx: usize) -> Result<Tensor> {
        let [oh, ow] = w.out_hw;
        let span = |a: usize, n: usize| (n - 1) * w.stride[a] + 1;
        self.narrow(2, ky * w.dilation[0], span(0, oh))?
            .step(2, w.stride[0])?
            .narrow(3, kx * w.dilation[1], span(1, ow))?
            .step(3, w.stride[1])
    }

    /// The convolution of integer 4-d `self` by `weight` (and `bias`) over `w`, in `groups`.
    #[track_caller]
    pub(crate) fn int_conv(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        w: Window2d,
        groups: usize,
    ) -> Result<Tensor> {
        let [oh, ow] = w.out_hw;
        let (n, cout, len) = (w.batch, weight.dims()[0], oh * ow);
        let (cin_g, cout_g) = (w.channels / groups, cout / groups);
        let xp = self.padded_for(&w, 0.0)?;
        let mut outs = Vec::with_capacity(groups);
        for g in 0..groups {
            let xg = xp.narrow(1, g * cin_g, cin_g)?;
            let wg = weight.narrow(0, g * cout_g, cout_g)?;
            let mut acc: Option<Tensor> = None;
            for ky in 0..w.kernel[0] {
                for kx in 0..w.kernel[1] {
                    let cols = xg.tap(&w, ky, kx)?.reshape([n, cin_g, len])?;
                    let wt = wg
                        .narrow(2, ky, 1)?
                        .narrow(3, kx, 1)?
                        .reshape([cout_g, cin_g])?;
                    let term = wt.matmul(&cols)?;
                    acc = Some(match acc {
                        Some(a) => a.add(&term)?,
                        None => term,
                    });
                }
            }
            outs.push(acc.expect("a window has a tap"));
        }
        let y = Tensor::cat(&outs.iter().collect::<Vec<_>>(), 1)?.reshape([n, cout, oh, ow])?;
        match bias {
            Some(b) => y.add(&b.reshape([1, cout, 1, 1])?),
            None => Ok(y),
        }
    }

    /// Max pooling of integer 4-d `self` over `w`: each window's first largest element (in
    /// the order of its taps, padding never chosen) and its position in its plane, `row · w +
    /// col`.
    #[track_caller]
    pub(crate) fn int_max_pool(&self, w: Window2d) -> Result<(Tensor, Tensor)> {
        let [oh, ow] = w.out_hw;
        let xp = self.padded_for(&w, lowest(self.dtype()))?;
        // Where each tap of each window reads in the unpadded plane, or -1 in the padding.
        let at = |a: usize, o: usize, k: usize| -> i64 {
            let i = (o * w.stride[a] + k * w.dilation[a]) as i64 - w.padding[a] as i64;
            if (0..w.in_hw[a] as i64).contains(&i) {
                i
            } else {
                -1
            }
        };
        let position = |ky: usize, kx: usize| -> Vec<i64> {
            (0..oh * ow)
                .map(|q| {
                    let (r, c) = (at(0, q / ow, ky), at(1, q % ow, kx));
                    if r < 0 || c < 0 {
                        -1
                    } else {
                        r * w.in_hw[1] as i64 + c
                    }
                })
                .collect()
        };
        // A window starts at its first tap past the padding (as PyTorch's kernel, whose
        // position stands even for a window that a dilation steps over the whole input).
        let start = |a: usize, o: usize| -> i64 {
            let (d, p, s) = (w.dilation[a], w.padding[a], o * w.stride[a]);
            let lo = p.saturating_sub(s).div_ceil(d).min(w.kernel[a]);
            (s + lo * d).saturating_sub(p) as i64
        };
        let first: Vec<i64> = (0..oh * ow)
            .map(|q| start(0, q / ow) * w.in_hw[1] as i64 + start(1, q % ow))
            .collect();
        let dev = self.device();
        let mut best: Option<Tensor> = None;
        let mut idx = Tensor::from_vec(first, [oh, ow])?
            .to_device(dev)?
            .expand([w.batch, w.channels, oh, ow])?;
        for ky in 0..w.kernel[0] {
            for kx in 0..w.kernel[1] {
                let v = xp.tap(&w, ky, kx)?;
                let Some(b) = &best else {
                    best = Some(v.contiguous()?);
                    continue;
                };
                let wins = v.gt(b)?;
                let p = Tensor::from_vec(position(ky, kx), [oh, ow])?.to_device(dev)?;
                idx = wins.where_(&p.expand([w.batch, w.channels, oh, ow])?, &idx)?;
                best = Some(wins.where_(&v, b)?);
            }
        }
        let best = best.expect("a window has a tap");
        Ok((best, idx.contiguous()?))
    }
}
