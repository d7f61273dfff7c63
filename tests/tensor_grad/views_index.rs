//! Gradients of views, joins and indexing: view ops, `cat` and `stack`, `index_select`, `gather`,
//! `embedding`, `scatter_add` and `index_add`.

use crate::common::reference::R;
use crate::{Dom, grad_check, rnd, seeded};
use eddy::tensor::Tensor;

#[test]
fn view_grads() {
    let mut rng = seeded(1);
    let x = rnd(&mut rng, &[2, 3, 4], Dom::Any);
    let nl = |t: &Tensor| t.sin(); // a non-linearity after the view, so position errors show
    type V = (&'static str, Box<dyn Fn(&Tensor) -> R<Tensor>>);
    let cases: Vec<V> = vec![
        ("transpose", Box::new(|t| t.transpose(0, 2))),
        ("t", Box::new(|t| t.t())),
        ("permute", Box::new(|t| t.permute(&[2, 0, 1]))),
        ("narrow", Box::new(|t| t.narrow(2, 1, 2))),
        ("narrow_empty", Box::new(|t| t.narrow(1, 3, 0))),
        ("slice", Box::new(|t| t.slice(-1, 0..3)?.slice(0, 1..2))),
        ("select", Box::new(|t| t.select(1, 2))),
        (
            "broadcast_to",
            Box::new(|t| t.narrow(1, 0, 1)?.broadcast_to([3, 2, 5, 4])),
        ),
        ("expand", Box::new(|t| t.unsqueeze(1)?.expand([2, 3, 3, 4]))),
        ("reshape", Box::new(|t| t.reshape([6, 4]))),
        (
            "reshape_strided",
            Box::new(|t| t.transpose(0, 1)?.reshape([4, 6])),
        ),
        ("view", Box::new(|t| t.view([4, 3, 2]))),
        (
            "squeeze",
            Box::new(|t| t.narrow(0, 1, 1)?.squeeze(0)?.squeeze(1)),
        ),
        ("unsqueeze", Box::new(|t| t.unsqueeze(-1)?.unsqueeze(0))),
        (
            "flatten_all",
            Box::new(|t| t.transpose(1, 2)?.flatten_all()),
        ),
        (
            "contiguous",
            Box::new(|t| t.permute(&[1, 2, 0])?.contiguous()),
        ),
        (
            "chain",
            Box::new(|t| {
                t.transpose(0, 1)?
                    .narrow(0, 1, 2)?
                    .unsqueeze(1)?
                    .expand([2, 3, 2, 4])?
                    .reshape([12, 4])?
                    .t()
            }),
        ),
    ];
    for (name, f) in cases {
        grad_check(name, std::slice::from_ref(&x), |xs| nl(&f(&xs[0])?));
    }
}

#[test]
fn cat_and_stack_grads() {
    let mut rng = seeded(2);
    let a = rnd(&mut rng, &[2, 3], Dom::Any);
    let b = rnd(&mut rng, &[1, 3], Dom::Any);
    let c = rnd(&mut rng, &[0, 3], Dom::Any);
    grad_check("cat0", &[a.clone(), b.clone(), c.clone()], |xs| {
        Tensor::cat(&[&xs[0], &xs[2], &xs[1]], 0)?.sin()
    });
    let d = rnd(&mut rng, &[2, 2], Dom::Any);
    grad_check(
        "cat1 (a leaf twice, transposed)",
        &[a.clone(), d.clone()],
        |xs| Tensor::cat(&[&xs[0], &xs[1], &xs[1].t()?], -1)?.square(),
    );
    let e = rnd(&mut rng, &[2, 3], Dom::Any);
    for dim in [0, 1, 2, -1] {
        grad_check("stack", &[a.clone(), e.clone()], |xs| {
            Tensor::stack(&[&xs[0], &xs[1], &xs[0]], dim)?.cos()
        });
    }
}

#[test]
fn index_grads() {
    let mut rng = seeded(3);
    let x = rnd(&mut rng, &[4, 3], Dom::Any);
    // Repeated indices accumulate.
    let idx = Tensor::from_vec(vec![2i64, 0, 2, 3, 2], [5]).unwrap();
    grad_check("index_select0", std::slice::from_ref(&x), |xs| {
        xs[0].index_select(0, &idx)?.sin()
    });
    let idx32 = Tensor::from_vec(vec![1i32, 1, 0], [3]).unwrap();
    grad_check(
        "index_select1 (i32, of a transposed view)",
        std::slice::from_ref(&x),
        |xs| xs[0].t()?.index_select(1, &idx32)?.square(),
    );
    let ids = Tensor::from_vec(vec![3i64, 0, 3, 1, 1, 1], [2, 3]).unwrap();
    grad_check("embedding", std::slice::from_ref(&x), |xs| {
        xs[0].embedding(&ids)?.tanh()
    });
    let gi = Tensor::from_vec(vec![0i64, 2, 2, 1, 1, 1, 0, 0], [4, 2]).unwrap();
    grad_check("gather1", std::slice::from_ref(&x), |xs| {
        xs[0].gather(1, &gi)?.exp()
    });
    let gi0 = Tensor::from_vec(vec![3i64, 3, 0, 1, 0, 2], [2, 3]).unwrap();
    grad_check("gather0", std::slice::from_ref(&x), |xs| {
        xs[0].gather(0, &gi0)?.sin()
    });
    let y = rnd(&mut rng, &[2, 3, 4], Dom::Any);
    let g3 = Tensor::from_vec(
        (0..12).map(|i| (i * 7 % 3) as i64).collect::<Vec<_>>(),
        [2, 2, 3],
    )
    .unwrap();
    grad_check("gather of a permuted view", &[y], |xs| {
        xs[0]
            .permute(&[0, 2, 1])?
            .narrow(1, 1, 2)?
            .gather(2, &g3)?
            .square()
    });
}

#[test]
fn scatter_add_and_index_add_grads() {
    let mut rng = seeded(14);
    let x = rnd(&mut rng, &[3, 4], Dom::Any);
    // `src` larger than the index: only the covered part gets a gradient.
    let src = rnd(&mut rng, &[3, 5], Dom::Any);
    let idx = Tensor::from_vec(vec![0i64, 2, 2, 1, 2, 0], [2, 3]).unwrap();
    grad_check("scatter_add along dim 0", &[x.clone(), src.clone()], |xs| {
        xs[0].scatter_add(0, &idx, &xs[1])
    });
    grad_check("scatter_add along dim 1", &[x.clone(), src], |xs| {
        xs[0].scatter_add(1, &idx, &xs[1])
    });
    let rows = rnd(&mut rng, &[5, 4], Dom::Any);
    let ridx = Tensor::from_vec(vec![2i64, 0, 2, 2, 1], [5]).unwrap();
    grad_check("index_add along dim 0", &[x, rows], |xs| {
        xs[0].index_add(0, &ridx, &xs[1])
    });
}
