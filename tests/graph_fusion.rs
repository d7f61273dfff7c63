//! Elementwise fusion in compiled graphs: runs of `f32` and `f64` elementwise ops become one
//! step, which computes the values of eager execution bit for bit (the 16-bit floats stay
//! unmerged, with the same bits), on blocks of small and large tensors, and still fails only
//! the outputs that depend on a failed input.

#[path = "common/mod.rs"]
mod common;

use common::watchdog;
use eddy::tensor::graph::Graph;
use eddy::tensor::{DType, Tensor, with_engine};
use eddy::vm::Vm;

/// Every value's bits, through `f64` (exact for every float dtype).
fn bits(t: &Tensor) -> Vec<u64> {
    (t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap())
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

/// A chain of elementwise ops with a broadcast scalar, every kind of operand position, and
/// ops whose arithmetic differs between dtypes (division, `exp`, `tanh`, a power).
fn chain(x: &Tensor, s: &Tensor) -> eddy::tensor::Result<Tensor> {
    let a = x.mul_scalar(0.75)?.add(s)?; // a dense and a splat operand
    let b = a.relu()?.sub(x)?.exp()?;
    let c = b.div(&a.add_scalar(3.0)?)?.tanh()?;
    let d = s.sub(&c)?.maximum(&x.neg()?)?; // the splat first
    d.pow(&a.abs()?)?.mul(&b)?.sqrt()?.add(&c)
}

/// Inputs of `n` elements and a one-element scalar, of `dtype`.
fn inputs(n: usize, dtype: DType) -> (Tensor, Tensor) {
    let x = Tensor::linspace(-3.0, 2.5, n, DType::F64)
        .unwrap()
        .to_dtype(dtype)
        .unwrap();
    let s = Tensor::full([1], 0.3, dtype).unwrap();
    (x, s)
}

#[test]
fn an_elementwise_chain_becomes_one_step_with_the_eager_bits() {
    watchdog(120, || {
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            // 1,000 elements: two blocks and a short one.
            let (x, s) = inputs(1000, dtype);
            let eager = chain(&x, &s).unwrap();
            let g = Graph::new(|xs: &[Tensor]| Ok(vec![chain(&xs[0], &xs[1])?]));
            let c = g.compile(&[&x, &s]).unwrap();
            if matches!(dtype, DType::F32 | DType::F64) {
                assert_eq!(c.len(), 1, "{dtype}: one step\n{c}");
                let name = &c.step_names()[0];
                assert!(name.starts_with("fused[mul_scalar, add, relu"), "{c}");
                assert_eq!(c.arena_bytes(), 0, "no intermediate is written\n{c}");
            } else {
                assert!(
                    c.len() > 10,
                    "{dtype}: the 16-bit floats are not merged\n{c}"
                );
            }
            for _ in 0..2 {
                let out = g.run(&[&x, &s]).unwrap();
                assert_eq!(bits(&out[0]), bits(&eager), "{dtype}");
            }
        }
    });
}

#[test]
fn a_large_chain_is_split_over_the_threads_with_the_same_bits() {
    watchdog(120, || {
        // Above the size where kernels use every thread, and not a multiple of a block.
        let (x, s) = inputs(100_003, DType::F32);
        let eager = chain(&x, &s).unwrap();
        let g = Graph::new(|xs: &[Tensor]| Ok(vec![chain(&xs[0], &xs[1])?]));
        assert_eq!(g.compile(&[&x, &s]).unwrap().len(), 1);
        let out = g.run(&[&x, &s]).unwrap();
        assert_eq!(bits(&out[0]), bits(&eager));
    });
}

#[test]
fn values_read_outside_the_run_are_written_and_others_are_not() {
    watchdog(60, || {
        let (x, s) = inputs(64, DType::F32);
        // `a` is a result, `b` is read by the sum after the run: both are written; the
        // values between them are not.
        let prog = |x: &Tensor, s: &Tensor| -> eddy::tensor::Result<Vec<Tensor>> {
            let a = x.add(s)?.exp()?;
            let b = a.mul_scalar(2.0)?.neg()?;
            let total = b.sum_all()?;
            let c = b.relu()?.add(&total)?;
            Ok(vec![a, c])
        };
        let eager = prog(&x, &s).unwrap();
        let g = Graph::new(|xs: &[Tensor]| prog(&xs[0], &xs[1]));
        let c = g.compile(&[&x, &s]).unwrap();
        let names = c.step_names().join("\n");
        assert_eq!(c.len(), 3, "fused, the sum, and the op after it\n{c}");
        assert!(
            names.starts_with("fused[add, exp, mul_scalar, neg]"),
            "{names}"
        );
        let out = g.run(&[&x, &s]).unwrap();
        assert_eq!(bits(&out[0]), bits(&eager[0]));
        assert_eq!(bits(&out[1]), bits(&eager[1]));
    });
}

#[test]
fn a_merged_step_fails_only_the_outputs_computed_from_a_failed_input() {
    watchdog(60, || {
        let vm = Vm::builder().build().unwrap();
        with_engine(&vm, || {
            let table = Tensor::arange(0.0, 8.0, 1.0, DType::F32).unwrap();
            // Two independent chains of one element count: one step, two outputs.
            let g = Graph::new(|xs: &[Tensor]| {
                Ok(vec![xs[0].exp()?.neg()?, xs[1].relu()?.mul_scalar(2.0)?])
            });
            let good = Tensor::from_vec(vec![-1f32, 2.0], [2]).unwrap();
            assert_eq!(g.compile(&[&good, &good]).unwrap().len(), 1);
            // A computed index: found out of range by the kernel, not by the call.
            let idx = Tensor::from_vec(vec![1i64, 9], [2]).unwrap();
            let idx = idx.add(&idx.zeros_like().unwrap()).unwrap();
            let bad = table.index_select(0, &idx).unwrap();
            let out = g.run(&[&bad, &good]).unwrap();
            assert_eq!(out[1].to_vec::<f32>().unwrap(), [0.0, 4.0]);
            let e = out[0].to_vec::<f32>().unwrap_err();
            assert!(e.to_string().contains("index 9"), "{e}");
            vm.clear_errors();
            // The graph and the engine go on.
            let out = g.run(&[&good, &good]).unwrap();
            assert_eq!(out[1].to_vec::<f32>().unwrap(), [0.0, 4.0]);
            assert_eq!(out[0].to_vec::<f32>().unwrap()[1], -(2f32.exp()));
        });
    });
}

#[test]
fn ops_that_cannot_merge_split_the_runs() {
    watchdog(60, || {
        let x = Tensor::linspace(-1.0, 1.0, 12, DType::F32)
            .unwrap()
            .reshape([3, 4])
            .unwrap();
        // A transposed operand, a reduction and a change of element count end runs.
        let prog = |x: &Tensor| -> eddy::tensor::Result<Vec<Tensor>> {
            let a = x.exp()?.neg()?;
            let b = a.t()?.relu()?; // strided
            let m = b.sum(&[0], false)?.mul_scalar(2.0)?.neg()?;
            Ok(vec![b, m])
        };
        let eager = prog(&x).unwrap();
        let g = Graph::new(|xs: &[Tensor]| prog(&xs[0]));
        let c = g.compile(&[&x]).unwrap();
        let names: Vec<&str> = c
            .step_names()
            .iter()
            .map(|s| s.split(' ').next().unwrap_or(""))
            .collect();
        assert_eq!(
            names,
            ["fused[exp,", "relu", "sum", "fused[mul_scalar,"],
            "{c}"
        );
        let out = g.run(&[&x]).unwrap();
        assert_eq!(bits(&out[0]), bits(&eager[0]));
        assert_eq!(bits(&out[1]), bits(&eager[1]));
    });
}

/// A merged step that reads an intermediate for the last time writes its own result over it:
/// the plan keeps one place for the two (the memory plan's check accepts exactly that pair),
/// and the values are eager execution's, bit for bit.
#[test]
fn a_merged_step_writes_over_the_intermediate_it_consumes() {
    watchdog(120, || {
        let w = Tensor::linspace(-1.0, 1.0, 64 * 64, DType::F32)
            .unwrap()
            .reshape([64, 64])
            .unwrap();
        let f = |x: &Tensor| -> eddy::tensor::Result<Tensor> {
            let a = x.matmul(&w)?;
            // Reads `a` twice, the last time before the one store of the merged step.
            let b = a.mul_scalar(0.5)?.tanh()?.add(&a)?;
            b.matmul(&w)
        };
        let x = Tensor::linspace(-2.0, 2.0, 32 * 64, DType::F32)
            .unwrap()
            .reshape([32, 64])
            .unwrap();
        let eager = f(&x).unwrap();
        let g = Graph::new(|xs: &[Tensor]| Ok(vec![f(&xs[0])?]));
        let c = g.compile(&[&x]).unwrap();
        let m = c.memory();
        m.check().unwrap();
        assert_eq!(m.shares.len(), 1, "`b` over `a`\n{c}");
        assert_eq!(c.arena_bytes(), 32 * 64 * 4, "one place for both\n{c}");
        for _ in 0..2 {
            assert_eq!(bits(&g.run(&[&x]).unwrap()[0]), bits(&eager));
        }
    });
}
