//! Compiled graphs under hostile closures: whatever a closure does that its trace cannot
//! replay (a nested graph, a tensor kept from a refused trace, an op on another device or
//! another thread, state it replaces, a view of its input it keeps) gives eager's values or a
//! typed error, never a wrong value, a wrong device or a panic.

#[path = "common/mod.rs"]
mod common;

use common::watchdog;
use eddy::tensor::graph::Graph;
use eddy::tensor::{Device, Error, Tensor, with_engine};
use eddy::vm::Vm;
use std::cell::RefCell;
use std::rc::Rc;

fn t(v: &[f32]) -> Tensor {
    Tensor::from_vec(v.to_vec(), [v.len()]).unwrap()
}

/// Whether `e` is a refusal of the graph whose message contains `words`.
#[track_caller]
fn refused(e: &Error, words: &str) {
    assert!(
        matches!(e, Error::InvalidArgument { op: "graph", .. }),
        "not a graph refusal: {e}"
    );
    assert!(e.to_string().contains(words), "`{e}` should say `{words}`");
}

/// A graph run inside another graph's closure is traced through: the outer plan computes its
/// ops, whether the inner graph was compiled for that signature already or not.
#[test]
fn a_graph_run_inside_another_graphs_closure_is_traced_through() {
    watchdog(60, || {
        let vm = Vm::builder().build().unwrap();
        with_engine(&vm, || {
            let inner =
                Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].mul_scalar(2.0)?.add_scalar(1.0)?]));
            let outer = Graph::new(|xs: &[Tensor]| Ok(vec![inner.run(&[&xs[0]])?[0].neg()?]));
            let x = t(&[1.0, -2.0, 0.5]);
            let want = [-3.0, 3.0, -2.0];
            // Not compiled yet: traced through.
            assert_eq!(outer.run(&[&x]).unwrap()[0].to_vec::<f32>().unwrap(), want);
            // Compiled for this signature: traced through all the same.
            let y = t(&[4.0, 0.0, 1.0]);
            assert_eq!(
                inner.run(&[&y]).unwrap()[0].to_vec::<f32>().unwrap(),
                [9.0, 1.0, 3.0]
            );
            let outer2 = Graph::new(|xs: &[Tensor]| Ok(vec![inner.run(&[&xs[0]])?[0].neg()?]));
            for (input, want) in [(&x, want), (&y, [-9.0, -1.0, -3.0])] {
                let got = outer2.run(&[input]).unwrap()[0].to_vec::<f32>().unwrap();
                assert_eq!(got, want);
            }
            let plan = outer2.compile(&[&x]).unwrap().to_string();
            assert!(
                plan.contains("neg"),
                "the inner ops are the outer plan's: {plan}"
            );
            assert_eq!(inner.compiled_signatures(), 1, "the trace compiled nothing");
            vm.sync().unwrap();
        });
    });
}

/// A tensor made inside a closure and kept outside it, when the trace is refused, fails with
/// a typed error at its read and in every op on it; the engine goes on.
#[test]
fn a_tensor_kept_from_a_refused_trace_fails_with_a_typed_error() {
    watchdog(60, || {
        let vm = Vm::builder().build().unwrap();
        with_engine(&vm, || {
            let kept: RefCell<Option<Tensor>> = RefCell::new(None);
            let g = Graph::new(|xs: &[Tensor]| {
                let h = xs[0].exp()?;
                *kept.borrow_mut() = Some(h.clone());
                let s = h.sum_all()?.item::<f32>()?; // refused: a host read
                Ok(vec![h.mul_scalar(s as f64)?])
            });
            let e = g.run(&[&t(&[1.0, 2.0])]).unwrap_err();
            assert!(e.to_string().contains("inside a capture"), "{e}");
            let h = kept.borrow_mut().take().unwrap();
            let e = h.to_vec::<f32>().unwrap_err();
            assert_eq!(e.op(), Some("graph"), "{e}");
            assert!(e.to_string().contains("refused"), "{e}");
            let e = h.add_scalar(1.0).unwrap().to_vec::<f32>().unwrap_err();
            assert!(e.to_string().contains("refused"), "{e}");
            vm.clear_errors();
            assert_eq!(
                t(&[1.0]).add_scalar(1.0).unwrap().to_vec::<f32>().unwrap(),
                [2.0]
            );
            vm.sync().unwrap();
        });
    });
}

/// A closure whose ops run on another device than its inputs' is refused; a tensor on
/// another device that the closure returns keeps its device.
#[test]
fn a_closure_that_moves_to_another_device_is_refused() {
    watchdog(60, || {
        let vm = Vm::builder().cpu_devices(2).build().unwrap();
        with_engine(&vm, || {
            let x = t(&[0.0, 1.0]);
            let g = Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].to_device(Device::Cpu(1))?.exp()?]));
            let e = g.run(&[&x]).unwrap_err();
            refused(&e, "cpu:1");
            refused(&e, "cpu:0");
            // Eager, for the record: the values live on cpu:1.
            assert_eq!(
                x.to_device(Device::Cpu(1)).unwrap().exp().unwrap().device(),
                Device::Cpu(1)
            );

            let far = t(&[5.0]).to_device(Device::Cpu(1)).unwrap();
            let g = Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].neg()?, far.clone()]));
            let out = g.run(&[&x]).unwrap();
            assert_eq!(out[0].device(), Device::Cpu(0));
            assert_eq!(out[1].device(), Device::Cpu(1));
            assert_eq!(out[1].to_vec::<f32>().unwrap(), [5.0]);
            assert_eq!(
                out[1].add(&far).unwrap().to_vec::<f32>().unwrap(),
                [10.0],
                "usable with a tensor of its device"
            );
            vm.sync().unwrap();
        });
    });
}

/// Ops another thread makes during the trace are not captured: a closure that uses their
/// results is refused, where a replay would read values nothing writes.
#[test]
fn a_closure_that_computes_on_another_thread_is_refused() {
    watchdog(60, || {
        let vm = Vm::builder().build().unwrap();
        with_engine(&vm, || {
            let g = Graph::new(|xs: &[Tensor]| {
                let x = xs[0].clone();
                let e = std::thread::scope(|s| {
                    let vm = x.engine().clone();
                    s.spawn(move || with_engine(&vm, || x.exp()))
                        .join()
                        .unwrap()
                })?;
                Ok(vec![e.add_scalar(1.0)?])
            });
            let e = g.run(&[&t(&[0.0])]).unwrap_err();
            refused(&e, "not made by the closure's ops");
            assert_eq!(g.compiled_signatures(), 0);
            vm.sync().unwrap();
        });
    });
}

/// State the closure replaces (a recurrent state in an `Rc`) would be read as it was at the
/// trace by every replay: refused.
#[test]
fn a_closure_that_replaces_state_it_reads_is_refused() {
    watchdog(60, || {
        let vm = Vm::builder().build().unwrap();
        with_engine(&vm, || {
            let state = Rc::new(RefCell::new(t(&[1.0, 1.0])));
            let s = state.clone();
            let g = Graph::new(move |xs: &[Tensor]| {
                let h = s.borrow().mul(&xs[0])?;
                *s.borrow_mut() = h.clone();
                Ok(vec![h])
            });
            let e = g.run(&[&t(&[2.0, 3.0])]).unwrap_err();
            refused(&e, "replaces");
            // The state now holds the refused trace's tensor: a typed error at its read.
            let e = state.borrow().to_vec::<f32>().unwrap_err();
            assert!(e.to_string().contains("refused"), "{e}");
            vm.clear_errors();
            vm.sync().unwrap();
        });
    });
}

/// A view of an input kept beyond the run would view the first run's input at every replay:
/// refused.
#[test]
fn a_closure_that_keeps_a_view_of_its_input_is_refused() {
    watchdog(60, || {
        let vm = Vm::builder().build().unwrap();
        with_engine(&vm, || {
            let kept: RefCell<Option<Tensor>> = RefCell::new(None);
            let g = Graph::new(|xs: &[Tensor]| {
                *kept.borrow_mut() = Some(xs[0].narrow(0, 0, 1)?);
                Ok(vec![xs[0].exp()?])
            });
            let e = g.run(&[&t(&[0.0, 1.0])]).unwrap_err();
            refused(&e, "input 0");
            // Returning the view instead is fine.
            let g = Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].narrow(0, 1, 1)?]));
            assert_eq!(
                g.run(&[&t(&[0.0, 1.0])]).unwrap()[0]
                    .to_vec::<f32>()
                    .unwrap(),
                [1.0]
            );
            assert_eq!(
                g.run(&[&t(&[3.0, 4.0])]).unwrap()[0]
                    .to_vec::<f32>()
                    .unwrap(),
                [4.0]
            );
            vm.sync().unwrap();
        });
    });
}
