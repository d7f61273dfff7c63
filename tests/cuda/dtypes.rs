//! The suite's cases in every dtype: integer arithmetic (wrapping), floor division and
//! remainder, i32 and u8 through every kernel family, casts between every pair of dtypes,
//! half and f64 softmax, half sorting, running products and their gradient, products of
//! integers and of operands cuBLAS cannot take, index ops by i32 indices and in more dtypes.

use eddy::tensor::{DType, Tensor};

type R<T> = eddy::tensor::Result<T>;

/// A name for a case made in a loop: leaked, a handful per process.
fn named(parts: &[&str]) -> &'static str {
    Box::leak(parts.join(" ").into_boxed_str())
}

/// Every dtype, with its name.
const ALL: [(&str, DType); 8] = [
    ("f32", DType::F32),
    ("f64", DType::F64),
    ("f16", DType::F16),
    ("bf16", DType::BF16),
    ("i64", DType::I64),
    ("i32", DType::I32),
    ("u8", DType::U8),
    ("bool", DType::Bool),
];

pub fn cases() -> R<Vec<(&'static str, Tensor)>> {
    let mut out = integers()?;
    out.extend(casts()?);
    out.extend(floats()?);
    Ok(out)
}

/// i64, i32 and u8 through the elementwise, reduction, sorting, scan, index and product
/// kernels, with values that wrap in the narrower dtypes.
fn integers() -> R<Vec<(&'static str, Tensor)>> {
    let base = Tensor::from_vec(
        (0..24)
            .map(|i| (i * 37 % 23) as i64 * 13 - 140)
            .collect::<Vec<_>>(),
        [4, 6],
    )?;
    let divisors = Tensor::from_vec(vec![3i64, -4, 5, -2, 7, 1], [6])?;
    let rows = Tensor::from_vec(vec![3i64, 0, 2, 0], [4])?;
    let cols = Tensor::from_vec(vec![5i64, 0, 1, 4], [4, 1])?;
    let mut out = Vec::new();
    for (name, dt) in [("i64", DType::I64), ("i32", DType::I32), ("u8", DType::U8)] {
        let a = base.to_dtype(dt)?;
        let b = divisors.to_dtype(dt)?;
        let (i32_rows, i32_cols) = (rows.to_dtype(DType::I32)?, cols.to_dtype(DType::I32)?);
        let (sv, si) = a.sort(1, false)?;
        let y = a.mul_scalar(1)?;
        y.add_(&b)?;
        y.mul_(&a)?;
        let cases = [
            ("add sub mul", a.add(&b)?.mul(&a)?.sub(&b)?),
            (
                "floor_divide remainder",
                a.floor_divide(&b)?.add(&a.remainder(&b)?)?,
            ),
            ("maximum minimum", a.maximum(&b)?.add(&a.minimum(&b)?)?),
            ("pow", a.pow(&Tensor::full([6], 3.0, dt)?)?),
            (
                "neg abs square sign",
                a.neg()?.abs()?.square()?.add(&a.sign()?)?,
            ),
            ("relu floor", a.relu()?.floor()?),
            (
                "scalars",
                a.add_scalar(3)?
                    .mul_scalar(2)?
                    .rsub_scalar(1)?
                    .clamp(Some(-50), Some(200))?,
            ),
            (
                "compare",
                a.lt(&b)?
                    .to_dtype(dt)?
                    .add(&a.eq(&a.flip(&[1])?)?.to_dtype(dt)?)?,
            ),
            ("where broadcast", a.gt(&b)?.where_(&a, &b.expand([4, 6])?)?),
            ("sum", a.sum(&[1], false)?),
            ("prod", a.prod(&[0], false)?),
            ("max min", a.max(0, false)?.add(&a.min(0, false)?)?),
            (
                "argmax argmin",
                a.argmax(1, false)?.add(&a.argmin(0, false)?.sum_all()?)?,
            ),
            ("sort values", sv),
            ("sort positions", si),
            ("cumsum", a.cumsum(1)?),
            ("cumprod", a.cumprod(0)?),
            ("index_select i32", a.index_select(0, &i32_rows)?),
            ("gather i32", a.gather(1, &i32_cols)?),
            ("index_add", a.index_add(0, &rows, &a)?),
            ("scatter_add", a.scatter_add(1, &cols, &a.narrow(1, 0, 1)?)?),
            ("matmul", a.matmul(&a.t()?)?),
            ("in place", y),
            ("full", Tensor::full([3], 7.0, dt)?),
        ];
        for (what, t) in cases {
            out.push((named(&[name, what]), t));
        }
    }
    Ok(out)
}

/// Casts between every pair of dtypes, of values that round, wrap, saturate and are NaN or
/// infinite on the way.
fn casts() -> R<Vec<(&'static str, Tensor)>> {
    let vals = vec![
        -3.7f64,
        -1.0,
        -0.0,
        0.0,
        0.5,
        1.5,
        2.5,
        254.6,
        300.0,
        70000.0,
        3e9,
        -3e9,
        1e20,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1.0 + 2f64.powi(-30),
    ];
    let x = Tensor::from_vec(vals, [17])?;
    let mut out = Vec::new();
    for (sn, sd) in ALL {
        let s = x.to_dtype(sd)?;
        for (dn, dd) in ALL {
            out.push((named(&["cast", sn, "to", dn]), s.to_dtype(dd)?));
        }
    }
    Ok(out)
}

/// Float kernels in the dtypes beyond f32: softmax, sorting, running products with their
/// gradient, index ops, and products of operands with no unit stride.
fn floats() -> R<Vec<(&'static str, Tensor)>> {
    let x = Tensor::arange(-3.0, 3.0, 0.125, DType::F32)?.reshape([6, 8])?;
    let rows = Tensor::from_vec(vec![3i64, 0, 2, 0], [4])?;
    let cols = Tensor::from_vec(vec![5i64, 0, 1, 4, 7, 2], [6, 1])?;
    let mut out = Vec::new();
    for (name, dt) in [
        ("f64", DType::F64),
        ("f16", DType::F16),
        ("bf16", DType::BF16),
    ] {
        let h = x.to_dtype(dt)?;
        let (sv, si) = h.sort(1, true)?;
        let cases = [
            ("softmax", h.softmax(1)?),
            ("log_softmax", h.log_softmax(0)?),
            ("sort values", sv),
            ("sort positions", si),
            ("cumsum", h.cumsum(1)?),
            ("cumprod", h.mul_scalar(0.5)?.cumprod(1)?),
            (
                "floor_divide remainder",
                h.floor_divide(&h.t()?.reshape([6, 8])?.add_scalar(0.3)?)?
                    .add(&h.remainder(&h.flip(&[0])?.add_scalar(0.3)?)?)?,
            ),
            ("index_add", h.index_add(0, &rows, &h.narrow(0, 0, 4)?)?),
            ("scatter_add", h.scatter_add(1, &cols, &h.narrow(1, 0, 1)?)?),
            (
                "masked_fill tril",
                h.masked_fill(&h.gt_scalar(1.0)?, -2.0)?.tril(1)?,
            ),
        ];
        for (what, t) in cases {
            out.push((named(&[name, what]), t));
        }
    }
    // Every other column: a matrix with no unit stride, which cuBLAS cannot read.
    let strided = x.reshape([6, 4, 2])?.select(2, 0)?;
    out.push((
        "matmul of a strided operand",
        strided.matmul(&strided.t()?)?,
    ));
    out.push((
        "matmul strided f64",
        strided
            .to_dtype(DType::F64)?
            .t()?
            .matmul(&strided.to_dtype(DType::F64)?)?,
    ));
    // `linear` in f64 (bias and ReLU after the product), and with a weight of no unit stride.
    let w = Tensor::linspace(-1.0, 1.5, 80, DType::F32)?.reshape([5, 8, 2])?;
    let b = Tensor::from_vec(vec![0.5f32, -0.25, 1.0, 0.0, 2.0], [5])?;
    let wd = w.to_dtype(DType::F64)?.select(2, 1)?.contiguous()?;
    let xd = x.to_dtype(DType::F64)?;
    out.push((
        "linear f64",
        xd.linear(&wd, Some(&b.to_dtype(DType::F64)?))?,
    ));
    out.push((
        "linear_relu f64",
        xd.linear_relu(&wd, Some(&b.to_dtype(DType::F64)?))?,
    ));
    out.push((
        "linear strided weight",
        x.linear(&w.select(2, 0)?, Some(&b))?,
    ));
    out.push((
        "linear_relu strided weight",
        x.linear_relu(&w.select(2, 0)?, Some(&b))?,
    ));
    // Running products and their gradient (a zero in the row: the exact form).
    let p = x
        .narrow(0, 0, 2)?
        .mul_scalar(0.5)?
        .requires_grad_(true)
        .expect("a float leaf");
    let y = p.cumprod(1)?;
    y.sum_all()?.backward()?;
    out.push(("cumprod forward", y.detach()));
    out.push(("cumprod grad", p.grad().expect("a gradient")));
    let q = x
        .to_dtype(DType::F64)?
        .narrow(0, 1, 2)?
        .requires_grad_(true)
        .expect("a float leaf");
    let z = q.softmax(1)?.mul(&q)?.sum_all()?;
    z.backward()?;
    out.push(("softmax grad f64", q.grad().expect("a gradient")));
    Ok(out)
}
