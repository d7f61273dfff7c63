//! Adds an op from outside Eddy: `softplus(x) = ln(1 + e^x)` as a host kernel over slices, with
//! its gradient made of existing ops, then checks both against the built-in ops.
//! `cargo run --release --example custom_op`.

use eddy::{DType, Tensor};

/// `ln(1 + e^x)`, computed stably, as one engine instruction; differentiable.
fn softplus(x: &Tensor) -> eddy::Result<Tensor> {
    let y = Tensor::custom_map::<f32, _>("softplus", &[x], x.dims(), |ins, out| {
        for (o, &v) in out.iter_mut().zip(ins[0]) {
            *o = v.max(0.0) + (-v.abs()).exp().ln_1p();
            if !o.is_finite() {
                return Err(format!("softplus: non-finite result for input {v}"));
            }
        }
        Ok(())
    })?;
    // d/dx softplus(x) = sigmoid(x).
    Ok(y.with_backward("softplus", &[x], |grad, inputs, _out| {
        Ok(vec![Some(grad.mul(&inputs[0].sigmoid()?)?)])
    }))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let x = Tensor::randn([4, 5], 0.0, 3.0, DType::F32)?.requires_grad_(true)?;

    // Forward: the custom kernel against the same formula in built-in ops.
    let ours = softplus(&x)?;
    let reference = x.exp()?.add_scalar(1.0)?.log()?;
    let diff = ours.sub(&reference)?.abs()?.max_all()?.item::<f32>()?;
    println!(
        "softplus {:?}\nmax |ours - built-in| = {diff:e}",
        ours.dims()
    );
    assert!(diff < 1e-4);

    // Backward: the gradient flows through the custom op like any other.
    ours.sum_all()?.backward()?;
    let grad = x.grad().expect("x requires grad");
    let expected = x.detach().sigmoid()?;
    let gdiff = grad.sub(&expected)?.abs()?.max_all()?.item::<f32>()?;
    println!("max |grad - sigmoid(x)| = {gdiff:e}");
    assert!(gdiff < 1e-6);

    // Errors are typed: a wrong dtype is refused at the call, before anything is enqueued.
    let ints = Tensor::arange(0.0, 4.0, 1.0, DType::I64)?;
    let err = softplus(&ints).unwrap_err();
    println!("softplus(i64) -> {err}");
    Ok(())
}
