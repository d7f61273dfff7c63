//! Errors name the line of the user's call that made the failing op: argument errors at the
//! call, and kernel errors that surface later, at a read several lines (or threads) away.

use crate::common::reference::R;
use crate::common::watchdog;
use eddy::tensor::nn::{Linear, Module, Sequential};
use eddy::tensor::{DType, Error, Tensor, with_engine};
use eddy::vm::Vm;
use std::panic::Location;

use DType::F32;

/// An index tensor computed by an op, so its values are known only on the engine and the
/// kernel, not the call, finds an index out of range.
fn unknown(v: Vec<i64>, dims: &[usize]) -> Tensor {
    let t = Tensor::from_vec(v, dims).unwrap();
    t.add(&t.zeros_like().unwrap()).unwrap()
}

/// Checks that `e` names `line` of this file, in its value and its message.
#[track_caller]
fn names_line(e: &Error, line: u32) {
    let at = e
        .caller()
        .unwrap_or_else(|| panic!("`{e}` names no caller"));
    assert_eq!((at.file(), at.line()), (file!(), line), "{e}");
    let shown = format!("(called at {}:{line}:", file!());
    assert!(e.to_string().contains(&shown), "`{e}` should show {shown}");
}

#[test]
fn a_kernel_error_read_later_names_the_line_of_the_failing_call() {
    watchdog(60, || {
        // The threaded engine runs small ops at once on this thread and large ones on a
        // worker; the synchronous engine runs everything at the call. Each names the call.
        for (sync_mode, rows) in [(false, 3), (false, 40_000), (true, 3)] {
            let vm = Vm::builder().sync_mode(sync_mode).build().unwrap();
            with_engine(&vm, || -> R<()> {
                let src = Tensor::arange(0.0, 2.0 * rows as f64, 1.0, F32)?.reshape([rows, 2])?;
                let bad = rows as i64 + 4;

                let idx = unknown(vec![0, bad], &[2]);
                let (out, line) = (src.index_select(0, &idx)?, line!());
                let later = out.mul_scalar(2.0)?.sum_all()?;
                for t in [&out, &later] {
                    let e = t.to_vec::<f32>().unwrap_err();
                    assert_eq!(e.op(), Some("index_select"));
                    names_line(&e, line);
                }
                // The engine's own report of the root error names it too.
                let e = Error::from(vm.sync().unwrap_err());
                names_line(&e, line);
                vm.clear_errors();

                let idx = unknown(vec![1, bad, 0, 1], &[2, 2]);
                let (out, line) = (src.gather(0, &idx)?, line!());
                let e = out.relu()?.to_vec::<f32>().unwrap_err();
                assert_eq!(e.op(), Some("gather"));
                names_line(&e, line);
                vm.clear_errors();

                let ids = unknown(vec![bad], &[1]);
                let (out, line) = (src.embedding(&ids)?, line!());
                names_line(&out.to_vec::<f32>().unwrap_err(), line);
                vm.clear_errors();

                // A class target out of range, checked by the loss's own kernel.
                let classes = unknown(vec![1, 2], &[2]);
                let logits = src.narrow(0, 0, 2)?;
                let (loss, line) = (logits.cross_entropy(&classes)?, line!());
                let e = loss.item::<f32>().unwrap_err();
                assert_eq!(e.op(), Some("cross_entropy"));
                names_line(&e, line);
                vm.clear_errors();
                Ok(())
            })
            .unwrap();
        }
    });
}

#[test]
fn argument_errors_name_the_line_of_the_call() {
    let a = Tensor::ones([2, 3], F32).unwrap();
    let b = Tensor::ones([4, 5], F32).unwrap();
    let (i9, c0) = (
        Tensor::from_vec(vec![9i64], [1]).unwrap(),
        Tensor::from_vec(vec![0i64], [1]).unwrap(),
    );
    // Methods, operators, free functions, and the ops they call inside.
    let cases: Vec<(R<Tensor>, u32)> = vec![
        (a.matmul(&b), line!()),
        (a.add(&b), line!()),
        (&a + &b, line!()),
        (&a * 2.0 - &b, line!()),
        (a.sum(&[5], false), line!()),
        (a.reshape([7]), line!()),
        (a.index_select(0, &i9), line!()),
        (Tensor::cat(&[&a, &b], 0), line!()),
        (Tensor::stack(&[], 0), line!()),
        (a.permute(&[0, 0]), line!()),
        (a.cross_entropy(&c0), line!()),
        (a.to_dtype(DType::I64).and_then(|i| i.gelu()), line!()),
        (a.softmax(3), line!()),
        (a.topk(4, -1, true).map(|(v, _)| v), line!()),
    ];
    for (r, line) in cases {
        let e = r.expect_err("each case fails");
        names_line(&e, line);
    }
    // A module called through `dyn Module` and a container of them.
    let lin = Linear::new(3, 2, true, F32).unwrap();
    let (e, line) = (lin.forward(&b).unwrap_err(), line!());
    names_line(&e, line);
    let net = Sequential::new().add(Linear::new(3, 2, true, F32).unwrap());
    let (e, line) = (net.forward(&b).unwrap_err(), line!());
    names_line(&e, line);
    // A refused read names the read.
    let (e, line) = (a.to_scalar().unwrap_err(), line!());
    names_line(&e, line);
}

#[test]
fn the_place_is_not_part_of_equality() {
    let a = Tensor::ones([2], F32).unwrap();
    let e1 = a.reshape([3]).unwrap_err();
    let e2 = a.reshape([3]).unwrap_err();
    assert_ne!(e1.caller(), e2.caller());
    assert_eq!(e1, e2, "the same error, from two lines");
    let plain = e1.clone().without_caller();
    assert!(plain.caller().is_none() && !plain.to_string().contains("called at"));
    // A place once known is kept: the line nearest the failure.
    let here = Location::caller();
    assert_eq!(
        e1.clone().at(eddy::tensor::Caller::at(here)).caller(),
        e1.caller()
    );
}
