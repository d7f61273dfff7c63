//! Global tensors on the CPU devices of one process: the boxing matrix (every pair of SBPs on
//! 1-d and 2-d grids, even and uneven shapes, with the collectives each costs), the signature
//! validator (each op on inputs of every SBP against the same op on one device), gradients,
//! placements and the errors.
//!
//! `.ci/run` also runs the matrix and the validator under `mpirun -np 2` and `-np 3` (feature
//! `mpi`, one test at a time), on grids whose ranks live in every process (two in each):
//! every process checks the same values as one process.

use eddy::tensor::global::{DeviceKind, Placement, ReduceKind, Sbp, count_collectives};
use eddy::tensor::{DType, Device, Error, Tensor, with_engine};
use eddy::vm::Vm;

type R<T = ()> = Result<T, Error>;

const SUM: Sbp = Sbp::Partial(ReduceKind::Sum);
const MAX: Sbp = Sbp::Partial(ReduceKind::Max);
/// The SBPs of one grid axis the tests go through.
const AXIS: [Sbp; 5] = [Sbp::Split(0), Sbp::Split(1), Sbp::Broadcast, SUM, MAX];

/// The random generator is the process's: the tests of this file take turns, so that the
/// seeded one sees its own draws.
static TURNS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The processes of the job (one without a launcher).
fn processes() -> usize {
    eddy::tensor::global::world().unwrap().size
}

/// The devices each process's engine has: 5 in one process, 2 in each of several.
fn per_process() -> u32 {
    if processes() > 1 { 2 } else { 5 }
}

fn engine() -> (Vm, std::sync::MutexGuard<'static, ()>) {
    let turn = TURNS.lock().unwrap_or_else(|e| e.into_inner());
    let vm = Vm::builder().cpu_devices(per_process()).build().unwrap();
    (vm, turn)
}

fn place(ranks: &[u32], grid: &[usize]) -> Placement {
    Placement::grid(DeviceKind::Cpu, ranks.to_vec(), grid).unwrap()
}

/// The grids the matrix and the validator run on: [2], [3] and [2, 2] in one process; over
/// `n` processes of 2 devices, [n] (one rank in each), [n, 2] (the first axis across the
/// processes) and [2, n] (the second).
fn grids() -> Vec<Placement> {
    let n = processes() as u32;
    if n == 1 {
        return vec![
            place(&[0, 1], &[2]),
            place(&[0, 1, 2], &[3]),
            place(&[0, 1, 2, 3], &[2, 2]),
        ];
    }
    let each: Vec<u32> = (0..n).map(|k| 2 * k).collect();
    let across: Vec<u32> = (0..2 * n).collect();
    let within: Vec<u32> = (0..n)
        .map(|k| 2 * k)
        .chain((0..n).map(|k| 2 * k + 1))
        .collect();
    let n = n as usize;
    vec![
        place(&each, &[n]),
        place(&across, &[n, 2]),
        place(&within, &[2, n]),
    ]
}

/// The local device of position `i` of `p` in the process that holds it, and whether that is
/// this process.
fn home(p: &Placement, i: usize) -> (Device, bool) {
    let (r, per) = (p.ranks()[i], per_process());
    let me = eddy::tensor::global::world().unwrap().rank as u32;
    if processes() == 1 {
        return (Device::Cpu(r), true);
    }
    (Device::Cpu(r % per), r / per == me)
}

/// Every nd-SBP of `AXIS` per axis for a grid of `axes` axes, without two partial kinds.
fn nd_sbps(axes: usize) -> Vec<Vec<Sbp>> {
    let mut all: Vec<Vec<Sbp>> = vec![vec![]];
    for _ in 0..axes {
        all = (all.iter())
            .flat_map(|p| AXIS.iter().map(move |s| [p.clone(), vec![*s]].concat()))
            .collect();
    }
    all.retain(|s| !(s.contains(&SUM) && s.contains(&MAX)));
    all
}

/// `x` laid out on `p` by `sbp`, a partial axis as *asymmetric random* parts (a sum of
/// random parts, or a maximum over parts below the value but one), so a rule that mistakes
/// one part for the value cannot pass by coincidence.
fn make(x: &Tensor, p: &Placement, sbp: &[Sbp]) -> R<Tensor> {
    let base: Vec<Sbp> = (sbp.iter())
        .map(|s| match s {
            Sbp::Partial(_) => Sbp::Broadcast,
            s => *s,
        })
        .collect();
    // Every position's part, made in every process alike (the same draws): each then gives
    // its own.
    let mut parts = (0..p.len())
        .map(|i| {
            let mut c = x.clone();
            let ranges = eddy::ops::global::component_ranges(x.dims(), p, &base, i);
            for (d, r) in ranges.iter().enumerate() {
                c = c.narrow(d as isize, r.start, r.len())?;
            }
            // Storage of its own, as a boxing's components have.
            c.to_device(home(p, i).0)?.to_dtype(c.dtype())
        })
        .collect::<R<Vec<_>>>()?;
    for (a, s) in sbp.iter().enumerate() {
        let Sbp::Partial(kind) = s else { continue };
        for start in 0..p.len() {
            let group = p.axis_group(start, a);
            if group[0] != start {
                continue;
            }
            let n = group.len();
            let keep = start % n; // which rank holds the value itself, for a maximum
            let mut rest = parts[group[0]].clone();
            for (k, &i) in group.iter().enumerate() {
                let c = &parts[i];
                let noise = c.rand_like()?.to_device(c.device())?;
                parts[i] = match kind {
                    ReduceKind::Sum if k + 1 < n => {
                        let r = noise.mul_scalar(4.0)?.add_scalar(-2.0)?;
                        rest = rest.sub(&r.to_device(rest.device())?)?;
                        r
                    }
                    ReduceKind::Sum => rest.to_device(c.device())?,
                    _ if k == keep => c.clone(),
                    ReduceKind::Max => c.sub(&noise.add_scalar(0.1)?)?,
                    ReduceKind::Min => c.add(&noise.add_scalar(0.1)?)?,
                };
            }
        }
    }
    let mine = (parts.into_iter().enumerate())
        .filter(|(i, _)| home(p, *i).1)
        .map(|(_, t)| t)
        .collect();
    Tensor::from_components(p, sbp, mine)
}

fn close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= 1e-4 + 1e-4 * w.abs() || (g.is_nan() && w.is_nan());
        assert!(ok, "{what}: element {i} is {g}, want {w}");
    }
}

/// The collectives one axis's conversion costs per group of ranks.
fn axis_cost(from: Sbp, to: Sbp) -> usize {
    use Sbp::{Broadcast as B, Partial as P, Split as S};
    match (from, to) {
        _ if from == to => 0,
        (B, _) | (S(_), P(_)) => 0,
        (S(_), B) | (P(_), B) | (P(_), S(_)) | (S(_), S(_)) | (P(_), P(_)) => 1,
    }
}

/// The collectives a boxing from `from` to `to` on `p` runs: the axes after the first that
/// differs to `B` (the last first), that axis converted, the later axes laid out from `B`
/// (free); one collective per group of ranks along an axis.
fn boxing_cost(p: &Placement, from: &[Sbp], to: &[Sbp]) -> usize {
    let Some(k) = (0..to.len()).find(|&a| from[a] != to[a]) else {
        return 0;
    };
    let groups = |a: usize| p.len() / p.grid_dims()[a];
    let later: usize = (k + 1..to.len())
        .map(|j| groups(j) * axis_cost(from[j], Sbp::Broadcast))
        .sum();
    later + groups(k) * axis_cost(from[k], to[k])
}

#[test]
fn every_pair_of_sbps_boxes_to_the_same_value_with_the_collectives_planned() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let mut pairs = 0;
        for p in grids() {
            for shape in [[4, 6], [5, 7]] {
                let x = Tensor::randn(shape, 0.0, 1.0, DType::F32)?;
                let want = x.to_vec::<f32>()?;
                for from in nd_sbps(p.grid_dims().len()) {
                    let g = make(&x, &p, &from)?;
                    for to in nd_sbps(p.grid_dims().len()) {
                        let (y, n) = count_collectives(|| g.to_global(&p, &to));
                        let y = y?;
                        let what = format!("{p} {shape:?}: {from:?} → {to:?}");
                        assert_eq!(y.sbp(), Some(to.as_slice()), "{what}");
                        assert_eq!(y.dims(), &shape, "{what}");
                        close(&y.to_vec::<f32>()?, &want, &what);
                        // (A process counts the groups it takes part in.)
                        if processes() == 1 {
                            assert_eq!(n.total(), boxing_cost(&p, &from, &to), "{what}: {n:?}");
                        }
                        pairs += 1;
                    }
                }
            }
        }
        let each: usize = (grids().iter())
            .map(|p| {
                if p.grid_dims().len() == 1 {
                    25
                } else {
                    23 * 23
                }
            })
            .sum();
        assert_eq!(pairs, 2 * each);
        Ok(())
    })
}

#[test]
fn each_one_axis_boxing_runs_its_own_collective() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let p = place(&[0, 1, 2], &[3]);
        let x = make(&Tensor::randn([7, 5], 0.0, 1.0, DType::F32)?, &p, &[SUM])?;
        let s = x.to_global(&p, &[Sbp::Split(0)])?;
        let cases = [
            (&s, Sbp::Broadcast, (1, 0, 0, 0)),
            (&x, Sbp::Broadcast, (0, 1, 0, 0)),
            (&x, Sbp::Split(1), (0, 0, 1, 0)),
            (&s, Sbp::Split(1), (0, 0, 0, 1)),
        ];
        for (t, to, (ag, ar, rs, aa)) in cases {
            let (_, n) = count_collectives(|| t.to_global(&p, &[to]));
            let got = (n.all_gather, n.all_reduce, n.reduce_scatter, n.all_to_all);
            assert_eq!(got, (ag, ar, rs, aa), "{:?} → {to}", t.sbp());
        }
        Ok(())
    })
}

#[test]
fn boxing_moves_between_placements_and_device_sets() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let x = Tensor::randn([5, 3], 0.0, 1.0, DType::F32)?;
        let want = x.to_vec::<f32>()?;
        let a = place(&[0, 1], &[2]);
        for (to, sbp) in [
            (place(&[1, 2, 3], &[3]), Sbp::Split(0)), // overlapping
            (place(&[2, 3], &[2]), Sbp::Split(1)),    // disjoint
            (place(&[0], &[1]), Sbp::Broadcast),      // a subset
            (place(&[3, 1, 0, 2], &[2, 2]), Sbp::Split(0)),
        ] {
            let from = make(&x, &a, &[SUM])?;
            let sbps = vec![sbp; to.grid_dims().len()];
            let y = from.to_global(&to, &sbps)?;
            assert_eq!(y.placement(), Some(&to));
            for (i, c) in y.local_components().iter().enumerate() {
                assert_eq!(c.device(), to.device(i));
            }
            close(&y.to_vec::<f32>()?, &want, &format!("{to}"));
        }
        Ok(())
    })
}

/// An index of `values` (shaped `dims`) laid out as `sbp` on every axis of `x`'s placement
/// when `x` is global.
fn index_on(x: &Tensor, values: &[i64], dims: &[usize], sbp: Sbp) -> R<Tensor> {
    let i = Tensor::from_vec(values.to_vec(), dims)?;
    match x.placement() {
        Some(p) => i.to_global(p, &vec![sbp; p.grid_dims().len()]),
        None => Ok(i),
    }
}

/// [`index_on`] of a 1-d index, broadcast.
fn index_like(x: &Tensor, values: &[i64]) -> R<Tensor> {
    index_on(x, values, &[values.len()], Sbp::Broadcast)
}

/// An op of the validator: its name, its arity and what it computes.
type Op = (&'static str, usize, fn(&[&Tensor]) -> R<Tensor>);

fn ops() -> Vec<Op> {
    vec![
        ("relu", 1, |x| x[0].relu()),
        ("exp", 1, |x| x[0].exp()),
        ("neg", 1, |x| x[0].neg()),
        ("square", 1, |x| x[0].square()),
        ("add_scalar", 1, |x| x[0].add_scalar(1.5)),
        ("mul_scalar+", 1, |x| x[0].mul_scalar(3.0)),
        ("mul_scalar-", 1, |x| x[0].mul_scalar(-2.0)),
        ("sigmoid", 1, |x| x[0].sigmoid()),
        ("to_f64", 1, |x| {
            x[0].to_dtype(DType::F64)?.to_dtype(DType::F32)
        }),
        ("sum0", 1, |x| x[0].sum(&[0], false)),
        ("sum1", 1, |x| x[0].sum(&[1], true)),
        ("sum_all", 1, |x| x[0].sum_all()),
        ("mean0", 1, |x| x[0].mean(&[0], false)),
        ("mean_all", 1, |x| x[0].mean_all()),
        ("amax0", 1, |x| x[0].amax(&[0], false)),
        ("amin1", 1, |x| x[0].amin(&[1], false)),
        ("prod1", 1, |x| x[0].prod(&[1], false)),
        ("argmax0", 1, |x| {
            x[0].argmax(0, false)?.to_dtype(DType::F32)
        }),
        ("argmin1", 1, |x| x[0].argmin(1, true)?.to_dtype(DType::F32)),
        ("softmax1", 1, |x| x[0].softmax(1)),
        ("softmax0", 1, |x| x[0].softmax(0)),
        ("log_softmax1", 1, |x| x[0].log_softmax(1)),
        ("t", 1, |x| x[0].t()),
        ("reshape", 1, |x| x[0].reshape([x[0].numel()])),
        ("unsqueeze", 1, |x| x[0].unsqueeze(1)?.squeeze(1)),
        ("narrow", 1, |x| x[0].narrow(1, 1, 2)),
        ("step0", 1, |x| x[0].step(0, 2)),
        ("step1", 1, |x| x[0].step(1, 3)),
        ("expand", 1, |x| {
            x[0].unsqueeze(0)?
                .expand([2, x[0].dims()[0], x[0].dims()[1]])
        }),
        ("gt", 1, |x| x[0].gt_scalar(0.1)?.to_dtype(DType::F32)),
        ("add", 2, |x| x[0].add(x[1])),
        ("sub", 2, |x| x[0].sub(x[1])),
        ("mul", 2, |x| x[0].mul(x[1])),
        ("div", 2, |x| x[0].div(&x[1].exp()?)),
        ("maximum", 2, |x| x[0].maximum(x[1])),
        ("minimum", 2, |x| x[0].minimum(x[1])),
        ("where", 2, |x| x[0].gt(x[1])?.where_(x[0], x[1])),
        ("add_row", 2, |x| {
            x[0].add(&x[1].narrow(0, 0, 1)?.squeeze(0)?)
        }),
        ("cat0", 2, |x| Tensor::cat(&[x[0], x[1]], 0)),
        ("cat1", 2, |x| Tensor::cat(&[x[0], x[1]], 1)),
        ("stack", 2, |x| Tensor::stack(&[x[0], x[1]], 2)),
        ("split", 1, |x| Ok(x[0].split(3, 1)?[1].clone())),
        ("chunk", 1, |x| Ok(x[0].chunk(2, 0)?[0].clone())),
        ("index_select0", 1, |x| {
            x[0].index_select(0, &index_like(x[0], &[4, 0, 2, 2])?)
        }),
        ("index_select1", 1, |x| {
            x[0].index_select(1, &index_like(x[0], &[6, 1])?)
        }),
        ("matmul", 2, |x| x[0].matmul(&x[1].t()?)),
        ("linear", 2, |x| x[0].linear(x[1], None)),
        // The bias from the weight's column: laid out by the weight's rows, so the layouts of
        // data and tensor parallelism take the fused path per component.
        ("linear_bias", 2, |x| {
            x[0].linear(x[1], Some(&x[1].narrow(1, 2, 1)?.squeeze(1)?))
        }),
        ("linear_relu", 2, |x| {
            x[0].linear_relu(x[1], Some(&x[1].narrow(1, 4, 1)?.squeeze(1)?))
        }),
        ("cumsum1", 1, |x| x[0].cumsum(1)),
        ("tril", 1, |x| x[0].tril(1)),
        ("flip", 1, |x| x[0].flip(&[0, 1])),
        ("cumsum0", 1, |x| x[0].cumsum(0)),
        ("cumprod1", 1, |x| x[0].cumprod(1)),
        ("sort1", 1, |x| Ok(x[0].sort(1, false)?.0)),
        ("argsort0", 1, |x| {
            x[0].argsort(0, true)?.to_dtype(DType::F32)
        }),
        ("topk1", 1, |x| Ok(x[0].topk(3, 1, true)?.0)),
        ("kthvalue0", 1, |x| Ok(x[0].kthvalue(2, 0, false)?.0)),
        ("median1", 1, |x| Ok(x[0].median(1, true)?.0)),
        ("max1", 1, |x| x[0].max(1, false)),
        ("min0", 1, |x| x[0].min(0, true)),
        ("gather1", 1, |x| {
            let i = [6, 0, 3, 3, 1, 2, 5, 4, 0, 6];
            x[0].gather(1, &index_on(x[0], &i, &[5, 2], Sbp::Broadcast)?)
        }),
        ("gather1_split", 1, |x| {
            let i = [6, 0, 3, 3, 1, 2, 5, 4, 0, 6, 2, 2, 1, 0, 4];
            x[0].gather(1, &index_on(x[0], &i, &[5, 3], Sbp::Split(0))?)
        }),
        ("gather0_split", 1, |x| {
            let i: Vec<i64> = (0..21).map(|k| (k * 3 + 1) % 5).collect();
            x[0].gather(0, &index_on(x[0], &i, &[3, 7], Sbp::Split(1))?)
        }),
        ("scatter_add0", 2, |x| {
            let i: Vec<i64> = (0..21).map(|k| (k * 2 + 3) % 5).collect();
            x[0].scatter_add(0, &index_on(x[0], &i, &[3, 7], Sbp::Broadcast)?, x[1])
        }),
        ("scatter_add1_split", 2, |x| {
            let i: Vec<i64> = (0..35).map(|k| (k * 4 + 1) % 7).collect();
            x[0].scatter_add(1, &index_on(x[0], &i, &[5, 7], Sbp::Split(0))?, x[1])
        }),
        ("index_add1", 2, |x| {
            x[0].index_add(1, &index_like(x[0], &[6, 1, 1, 0, 2, 3, 4])?, x[1])
        }),
        ("nll_loss", 1, |x| {
            let t = index_on(x[0], &[0, 6, 3, 2, 1], &[5], Sbp::Split(0))?;
            x[0].log_softmax(1)?.nll_loss(&t)
        }),
    ]
}

#[test]
fn every_op_gives_the_one_device_value_on_inputs_of_every_sbp() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let mut runs = 0;
        for p in grids() {
            let axes = p.grid_dims().len();
            // Uneven on every grid: 5 and 7 rows over 2, 3 and 2×2 ranks.
            let xs = [
                Tensor::randn([5, 7], 0.0, 1.0, DType::F32)?,
                Tensor::randn([5, 7], 0.0, 1.0, DType::F32)?,
            ];
            let sbps = nd_sbps(axes);
            for (name, arity, f) in ops() {
                let want = f(&xs.iter().collect::<Vec<_>>()[..arity])?.to_vec::<f32>()?;
                // Every SBP for one input; for two, every pair on 1-d grids and pairs of equal
                // or broadcast SBPs on the 2-d grid.
                let combos: Vec<Vec<Vec<Sbp>>> = match arity {
                    1 => sbps.iter().map(|s| vec![s.clone()]).collect(),
                    _ => (sbps.iter())
                        .flat_map(|a| sbps.iter().map(move |b| vec![a.clone(), b.clone()]))
                        .filter(|v| {
                            axes == 1 || v[0] == v[1] || v[1].iter().all(|s| *s == Sbp::Broadcast)
                        })
                        .collect(),
                };
                for combo in combos {
                    let ins = (xs.iter().zip(&combo))
                        .map(|(x, s)| make(x, &p, s))
                        .collect::<R<Vec<_>>>()?;
                    let y = f(&ins.iter().collect::<Vec<_>>())?;
                    assert!(y.is_global(), "{name}");
                    close(
                        &y.to_vec::<f32>()?,
                        &want,
                        &format!("{name} on {p} of {combo:?} → {:?}", y.sbp()),
                    );
                    runs += 1;
                }
            }
        }
        assert!(runs > 1000, "{runs} runs");
        Ok(())
    })
}

#[test]
fn a_loop_pays_for_the_choice_once_and_boxes_nothing_it_need_not() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let p = place(&[0, 1], &[2]);
        let x = Tensor::randn([8, 4], 0.0, 1.0, DType::F32)?.to_global(&p, &[Sbp::Split(0)])?;
        let w = Tensor::randn([4, 4], 0.0, 1.0, DType::F32)?.to_global(&p, &[Sbp::Broadcast])?;
        let (h, n) = count_collectives(|| -> R<Tensor> { x.matmul(&w)?.relu()?.add(&x) });
        assert_eq!((n.total(), h?.sbp()), (0, Some(&[Sbp::Split(0)][..])));
        // `P(sum) + scalar` adds the scalar once, not on every rank.
        let part = make(&Tensor::ones([4], DType::F32)?, &p, &[SUM])?;
        let y = part.add_scalar(1.0)?;
        assert_eq!(y.to_vec::<f32>()?, [2.0; 4]);
        assert_ne!(y.sbp(), Some(&[SUM][..]));
        // A max over the split dim is a partial maximum, not a sum.
        let m = x.amax(&[0], false)?;
        assert_eq!(m.sbp(), Some(&[MAX][..]));
        Ok(())
    })
}

/// A function of the inputs whose gradients a test compares.
type Loss = fn(&[Tensor]) -> R<Tensor>;

/// `f` and its gradient at `x` on one device and laid out as `sbps` on `p`: equal, and the
/// global gradient laid out as its input.
fn grads_agree(p: &Placement, xs: &[Tensor], sbps: &[&[Sbp]], f: fn(&[Tensor]) -> R<Tensor>) -> R {
    let local: Vec<Tensor> = (xs.iter())
        .map(|x| x.detach().requires_grad_(true))
        .collect::<R<_>>()?;
    let want = f(&local)?;
    want.backward()?;
    let global: Vec<Tensor> = (xs.iter().zip(sbps))
        .map(|(x, s)| x.to_global(p, s)?.requires_grad_(true))
        .collect::<R<_>>()?;
    let loss = f(&global)?;
    assert!(loss.is_global());
    close(&loss.to_vec::<f32>()?, &want.to_vec::<f32>()?, "the value");
    loss.backward()?;
    for (k, (l, g)) in local.iter().zip(&global).enumerate() {
        let (lg, gg) = (
            l.grad().expect("a local gradient"),
            g.grad().expect("a global gradient"),
        );
        assert_eq!(
            gg.sbp(),
            g.sbp(),
            "input {k}: the gradient is laid out as its input"
        );
        close(
            &gg.to_vec::<f32>()?,
            &lg.to_vec::<f32>()?,
            &format!("gradient {k}"),
        );
    }
    Ok(())
}

#[test]
fn data_parallel_gradients_are_all_reduced_by_the_rules() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let p = place(&[0, 1, 2], &[3]);
        let x = Tensor::randn([7, 4], 0.0, 1.0, DType::F32)?;
        let w = Tensor::randn([4, 3], 0.0, 1.0, DType::F32)?;
        let f: fn(&[Tensor]) -> R<Tensor> = |v| v[0].matmul(&v[1])?.relu()?.mean_all();
        grads_agree(
            &p,
            &[x.clone(), w.clone()],
            &[&[Sbp::Split(0)], &[Sbp::Broadcast]],
            f,
        )?;
        // The weight's gradient arrives as a partial sum: one all-reduce makes it `B`.
        let xg = x.to_global(&p, &[Sbp::Split(0)])?;
        let wg = w.to_global(&p, &[Sbp::Broadcast])?.requires_grad_(true)?;
        let loss = f(&[xg, wg.clone()])?;
        let (r, n) = count_collectives(|| loss.backward());
        r?;
        assert_eq!(n.all_reduce, 1, "{n:?}");
        assert_eq!(wg.grad().unwrap().sbp(), Some(&[Sbp::Broadcast][..]));
        Ok(())
    })
}

#[test]
fn gradients_of_joins_and_slices_match_one_device() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let p = place(&[0, 1, 2], &[3]);
        let a = Tensor::randn([5, 4], 0.0, 1.0, DType::F32)?;
        let b = Tensor::randn([2, 4], 0.0, 1.0, DType::F32)?;
        let cat: fn(&[Tensor]) -> R<Tensor> = |v| Tensor::cat(&[&v[0], &v[1]], 0)?.exp()?.sum_all();
        let narrow: fn(&[Tensor]) -> R<Tensor> = |v| {
            v[0].narrow(1, 1, 2)?
                .square()?
                .mul(&v[1].narrow(1, 0, 2)?.sum(&[0], true)?)?
                .sum_all()
        };
        let step: fn(&[Tensor]) -> R<Tensor> = |v| {
            v[0].step(0, 2)?
                .step(1, 2)?
                .exp()?
                .mul(&v[1].step(1, 3)?)?
                .sum_all()
        };
        let chunk: fn(&[Tensor]) -> R<Tensor> = |v| {
            let c = v[0].chunk(2, 0)?;
            c[0].narrow(0, 0, 2)?.sub(&c[1])?.square()?.sum_all()
        };
        for (sa, sb) in [
            (Sbp::Split(1), Sbp::Split(1)),
            (Sbp::Broadcast, Sbp::Split(0)),
            (Sbp::Split(0), Sbp::Broadcast),
        ] {
            grads_agree(&p, &[a.clone(), b.clone()], &[&[sa], &[sb]], cat)?;
            grads_agree(&p, &[a.clone(), b.clone()], &[&[sa], &[sb]], narrow)?;
            grads_agree(&p, std::slice::from_ref(&a), &[&[sa]], chunk)?;
            let b3 = Tensor::randn([3, 4], 0.0, 1.0, DType::F32)?;
            grads_agree(&p, &[a.clone(), b3], &[&[sa], &[sb]], step)?;
        }
        Ok(())
    })
}

#[test]
fn gradients_of_ops_along_a_dim_match_one_device() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let p = place(&[0, 1, 2], &[3]);
        let a = Tensor::randn([5, 4], 0.0, 1.0, DType::F32)?;
        let b = Tensor::randn([5, 4], 0.0, 1.0, DType::F32)?;
        let fs: [Loss; 6] = [
            |v| v[0].cumsum(1)?.mul(&v[1])?.sum_all(),
            |v| v[0].cumprod(1)?.mul(&v[1])?.sum_all(),
            |v| v[0].sort(1, true)?.0.mul(&v[1])?.sum_all(),
            |v| v[0].max(1, false)?.mul(&v[1].sum(&[1], false)?)?.sum_all(),
            |v| {
                let i = index_on(
                    &v[0],
                    &[3, 0, 2, 2, 1, 0, 3, 1, 0, 2],
                    &[5, 2],
                    Sbp::Broadcast,
                )?;
                v[0].gather(1, &i)?.mul(&v[1].narrow(1, 0, 2)?)?.sum_all()
            },
            |v| {
                let i = index_on(&v[0], &[1, 0, 4, 4, 2, 2, 3, 0], &[2, 4], Sbp::Broadcast)?;
                v[0].scatter_add(0, &i, &v[1].narrow(0, 1, 2)?)?
                    .exp()?
                    .sum_all()
            },
        ];
        for (k, f) in fs.into_iter().enumerate() {
            for (sa, sb) in [
                (Sbp::Split(0), Sbp::Split(0)),
                (Sbp::Broadcast, Sbp::Split(1)),
                (Sbp::Split(1), Sbp::Broadcast),
            ] {
                eprintln!("op {k} on {sa:?}, {sb:?}");
                grads_agree(&p, &[a.clone(), b.clone()], &[&[sa], &[sb]], f)?;
            }
        }
        Ok(())
    })
}

#[test]
fn index_select_by_a_split_index_and_its_gradient_match_one_device() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let p = place(&[0, 1, 2], &[3]);
        let x = Tensor::randn([5, 4], 0.0, 1.0, DType::F32)?;
        const AT: [i64; 7] = [4, 0, 2, 2, 1, 4, 3];
        let by_split: fn(&[Tensor]) -> R<Tensor> = |v| {
            let idx = index_on(&v[0], &AT, &[AT.len()], Sbp::Split(0))?;
            v[0].index_select(0, &idx)?.exp()?.sum_all()
        };
        let by_whole: fn(&[Tensor]) -> R<Tensor> = |v| {
            v[0].index_select(0, &index_like(&v[0], &AT)?)?
                .exp()?
                .sum_all()
        };
        // Whole values under a split index: the rows come out split, with no boxing.
        let xb = x.to_global(&p, &[Sbp::Broadcast])?;
        let y = xb.index_select(0, &index_on(&xb, &AT, &[AT.len()], Sbp::Split(0))?)?;
        assert_eq!(y.sbp(), Some(&[Sbp::Split(0)][..]));
        grads_agree(&p, std::slice::from_ref(&x), &[&[Sbp::Broadcast]], by_split)?;
        grads_agree(&p, std::slice::from_ref(&x), &[&[Sbp::Split(1)]], by_whole)?;
        grads_agree(&p, std::slice::from_ref(&x), &[&[Sbp::Broadcast]], by_whole)
    })
}

#[test]
fn an_embedding_of_split_ids_is_the_one_device_lookup() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let p = place(&[0, 1], &[2]);
        let w = Tensor::randn([6, 4], 0.0, 1.0, DType::F32)?;
        let f: fn(&[Tensor]) -> R<Tensor> = |v| {
            let ids = index_on(&v[0], &[5, 0, 2, 2, 1, 3, 0, 4, 5], &[3, 3], Sbp::Split(0))?;
            let e = v[0].embedding(&ids)?;
            assert_eq!(e.dims(), &[3, 3, 4]);
            e.square()?.sum_all()
        };
        grads_agree(&p, &[w], &[&[Sbp::Broadcast]], f)
    })
}

#[test]
fn tensor_parallel_gradients_match_one_device() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let p = place(&[0, 1], &[2]);
        let x = Tensor::randn([6, 4], 0.0, 1.0, DType::F32)?;
        let w1 = Tensor::randn([4, 5], 0.0, 1.0, DType::F32)?;
        let w2 = Tensor::randn([5, 3], 0.0, 1.0, DType::F32)?;
        let f: fn(&[Tensor]) -> R<Tensor> = |v| {
            v[0].matmul(&v[1])?
                .relu()?
                .matmul(&v[2])?
                .softmax(1)?
                .square()?
                .sum_all()
        };
        let b: &[Sbp] = &[Sbp::Broadcast];
        grads_agree(
            &p,
            &[x, w1, w2],
            &[b, &[Sbp::Split(1)], &[Sbp::Split(0)]],
            f,
        )
    })
}

#[test]
fn binary_ops_of_one_layout_convert_dtypes_as_on_one_device() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let p = place(&[0, 1, 2], &[3]);
        let ints = |k: i64| {
            Tensor::from_vec(
                (0..28).map(|i| (i * k) % 9 - 4).collect::<Vec<i64>>(),
                [7, 4],
            )
        };
        let (a, b) = (ints(5)?, ints(7)?.abs()?.add_scalar(1.0)?);
        let f = Tensor::randn([7, 4], 0.0, 1.0, DType::F32)?;
        let bits = a.gt_scalar(0.0)?;
        // Same layout on both sides: each rank's kernel straight where the dtypes need no
        // conversion (`i64 * i64`), the local op's conversions where they do.
        type Case = fn(&Tensor, &Tensor, &Tensor, &Tensor) -> R<Tensor>;
        let cases: [(&str, Case); 5] = [
            ("i64 * i64", |a, b, _, _| a.mul(b)),
            ("i64 / i64", |a, b, _, _| a.div(b)),
            ("f32 + i64", |a, _, f, _| f.add(a)),
            ("i64 - f32", |a, _, f, _| a.sub(f)),
            ("bool + bool", |a, _, _, t| t.add(&a.lt_scalar(2.0)?)),
        ];
        for sbp in [Sbp::Split(0), Sbp::Split(1), Sbp::Broadcast] {
            let g = |t: &Tensor| t.to_global(&p, &[sbp]);
            let (ga, gb, gf, gt) = (g(&a)?, g(&b)?, g(&f)?, g(&bits)?);
            for (name, op) in cases {
                let want = op(&a, &b, &f, &bits)?;
                let got = op(&ga, &gb, &gf, &gt)?;
                assert_eq!(got.dtype(), want.dtype(), "{name} on {sbp:?}");
                assert_eq!(got.sbp(), Some(&[sbp][..]), "{name}");
                let v = |t: &Tensor| t.to_dtype(DType::F64)?.to_vec::<f64>();
                let whole = got.to_global(&p, &[Sbp::Broadcast])?.to_local()?;
                assert_eq!(v(&whole)?, v(&want)?, "{name} on {sbp:?}");
            }
        }
        Ok(())
    })
}

#[test]
fn fused_linear_layers_match_one_device_in_value_and_gradient() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let p = place(&[0, 1, 2], &[3]);
        // Uneven everywhere: 7 rows, 5 hidden features and 4 outputs over three ranks.
        let x = Tensor::randn([7, 6], 0.0, 1.0, DType::F32)?;
        let w1 = Tensor::randn([5, 6], 0.0, 1.0, DType::F32)?;
        let b1 = Tensor::randn([5], 0.0, 1.0, DType::F32)?;
        let w2 = Tensor::randn([4, 5], 0.0, 1.0, DType::F32)?;
        let b2 = Tensor::randn([4], 0.0, 1.0, DType::F32)?;
        let f: fn(&[Tensor]) -> R<Tensor> = |v| {
            v[0].linear_relu(&v[1], Some(&v[2]))?
                .linear(&v[3], Some(&v[4]))?
                .softmax(1)?
                .square()?
                .sum_all()
        };
        let xs = [x, w1, b1, w2, b2];
        let (b, s0, s1): (&[Sbp], &[Sbp], &[Sbp]) =
            (&[Sbp::Broadcast], &[Sbp::Split(0)], &[Sbp::Split(1)]);
        // Data parallel: rows split, parameters broadcast, both layers fused.
        grads_agree(&p, &xs, &[s0, b, b, b, b], f)?;
        // Tensor parallel: the first layer split by output feature (fused), the second by
        // input feature (a partial product, then the bias: not fused).
        grads_agree(&p, &xs, &[b, s0, s0, s1, b], f)?;
        // Everything broadcast.
        grads_agree(&p, &xs, &[b, b, b, b, b], f)?;
        // A layout the fused form does not take: the steps one by one.
        grads_agree(&p, &xs, &[s1, s1, b, b, s0], f)?;
        // The fused layers run no collective where the layouts need none.
        let g: Vec<Tensor> = (xs.iter().zip([s0, b, b, b, b]))
            .map(|(x, s)| x.to_global(&p, s))
            .collect::<R<_>>()?;
        vm.sync()?;
        let before = vm.stats().inserted;
        let (y, n) = count_collectives(|| {
            g[0].linear_relu(&g[1], Some(&g[2]))?
                .linear(&g[3], Some(&g[4]))
        });
        let y = y?;
        y.sync()?;
        assert_eq!(n.total(), 0, "{n:?}");
        assert_eq!(y.sbp(), Some(s0));
        // One kernel per layer and rank, and the hidden layer's release per rank (the steps
        // one by one take fifteen kernels).
        let inserted = vm.stats().inserted - before;
        assert!(
            inserted <= 9,
            "{inserted} instructions for two fused layers"
        );
        Ok(())
    })
}

/// The forward boxing → gradient boxing table of the book: the gradient of `to_global`
/// arrives laid out as its output and goes back laid out as its input.
#[test]
fn the_gradient_of_a_boxing_is_boxed_back() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let p = place(&[0, 1], &[2]);
        let x = Tensor::randn([4, 6], 0.0, 1.0, DType::F32)?;
        let g = Tensor::randn([4, 6], 0.0, 1.0, DType::F32)?;
        for from in AXIS {
            for to in AXIS {
                let leaf = make(&x, &p, &[from])?.requires_grad_(true)?;
                let y = leaf.to_global(&p, &[to])?;
                let gy = make(&g, &p, &[to])?;
                let (r, n) = count_collectives(|| y.backward_with(&gy));
                r?;
                let gx = leaf.grad().unwrap();
                assert_eq!(gx.sbp(), Some(&[from][..]));
                close(
                    &gx.to_vec::<f32>()?,
                    &g.to_vec::<f32>()?,
                    &format!("{from} → {to}"),
                );
                assert_eq!(n.total(), axis_cost(to, from), "{from} → {to}: {n:?}");
            }
        }
        Ok(())
    })
}

#[test]
fn random_values_on_any_layout_are_the_one_device_values() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let p = place(&[0, 1, 2, 3], &[2, 2]);
        for sbp in nd_sbps(2) {
            eddy::tensor::manual_seed(7);
            let want = Tensor::rand([5, 3], DType::F32)?.to_vec::<f32>()?;
            let like = Tensor::zeros([5, 3], DType::F32)?.to_global(&p, &sbp)?;
            eddy::tensor::manual_seed(7);
            let r = like.rand_like()?;
            assert!(r.is_global());
            assert_eq!(r.to_vec::<f32>()?, want, "{sbp:?}");
        }
        Ok(())
    })
}

#[test]
fn wrong_uses_are_typed_errors_from_the_call() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let p = place(&[0, 1], &[2]);
        let q = place(&[1, 2], &[2]);
        let x = Tensor::ones([4, 2], DType::F32)?;
        let g = x.to_global(&p, &[Sbp::Split(0)])?;
        let line = line!() + 1;
        let e = g.add(&x).unwrap_err();
        assert!(
            matches!(e, Error::PlacementMismatch { op: "add", .. }),
            "{e}"
        );
        assert_eq!(e.caller().unwrap().line(), line);
        let e = g
            .matmul(&x.t()?.to_global(&q, &[Sbp::Broadcast])?)
            .unwrap_err();
        assert!(
            matches!(e, Error::PlacementMismatch { op: "matmul", .. }),
            "{e}"
        );
        assert!(
            e.to_string().contains("cpu:[0, 1], S(0)") && e.to_string().contains("cpu:[1, 2], B"),
            "{e}"
        );
        // An op without a global form for its input names itself, the placement and the
        // inputs' SBPs: each rank's part of a maximum scaled by `-2` is not the maximum's.
        let e = g.to_global(&p, &[MAX])?.mul_scalar_(-2.0).unwrap_err();
        let Error::NoSbpRule {
            op,
            placement,
            inputs,
            ..
        } = &e
        else {
            panic!("{e}")
        };
        assert_eq!(
            (op.as_str(), placement.as_str(), inputs.as_str()),
            ("mul", "cpu:[0, 1], P(max)", "[P(max)]")
        );
        // SBPs the tensor or the grid cannot hold.
        assert!(matches!(
            x.to_global(&p, &[Sbp::Split(2)]),
            Err(Error::InvalidArgument { .. })
        ));
        assert!(matches!(
            x.to_global(&p, &[Sbp::Broadcast; 2]),
            Err(Error::InvalidArgument { .. })
        ));
        let grid = place(&[0, 1, 2, 3], &[2, 2]);
        assert!(matches!(
            x.to_global(&grid, &[SUM, MAX]),
            Err(Error::InvalidArgument { .. })
        ));
        // A rank whose device the engine lacks.
        let far = place(&[0, 9], &[2]);
        assert!(matches!(
            x.to_global(&far, &[Sbp::Broadcast]),
            Err(Error::DeviceUnavailable { .. })
        ));
        // Parts that no balanced split gives.
        let parts = vec![x.clone(), x.narrow(0, 0, 1)?.to_device(Device::Cpu(1))?];
        assert!(matches!(
            Tensor::from_components(&p, &[Sbp::Split(0)], parts),
            Err(Error::InvalidArgument { .. })
        ));
        Ok(())
    })
}

#[test]
fn display_and_debug_name_the_placement_and_sbp() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let p = place(&[0, 1, 2, 3], &[2, 2]);
        let x = Tensor::arange(0.0, 4.0, 1.0, DType::F32)?
            .to_global(&p, &[Sbp::Split(0), Sbp::Broadcast])?;
        let values = format!("{}", x.to_global(&p, &[Sbp::Broadcast; 2])?);
        assert_eq!(
            format!("{x:?}"),
            format!("Tensor[dims [4], f32, cpu:[[0, 1], [2, 3]], (S(0), B)] {values}")
        );
        assert!(values.starts_with("tensor([0.0000, 1.0000"), "{values}");
        assert_eq!(x.to_local()?.to_vec::<f32>()?, [0., 1.]);
        Ok(())
    })
}

#[test]
fn batched_products_split_along_the_batch() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let p = place(&[0, 1, 2], &[3]);
        let a = Tensor::randn([4, 3, 5], 0.0, 1.0, DType::F32)?;
        let b = Tensor::randn([4, 5, 2], 0.0, 1.0, DType::F32)?;
        let w = Tensor::randn([5, 2], 0.0, 1.0, DType::F32)?;
        let s0: &[Sbp] = &[Sbp::Split(0)];
        let ga = a.to_global(&p, s0)?;
        let (y, n) = count_collectives(|| ga.matmul(&b.to_global(&p, s0)?));
        let y = y?;
        assert_eq!((y.sbp(), n.total()), (Some(s0), 0));
        close(
            &y.to_vec::<f32>()?,
            &a.matmul(&b)?.to_vec::<f32>()?,
            "batched",
        );
        let (y, n) = count_collectives(|| ga.matmul(&w.to_global(&p, &[Sbp::Broadcast])?));
        let y = y?;
        assert_eq!((y.sbp(), n.total()), (Some(s0), 0));
        close(
            &y.to_vec::<f32>()?,
            &a.matmul(&w)?.to_vec::<f32>()?,
            "broadcast batch",
        );
        for sa in AXIS.iter().chain(&[Sbp::Split(2)]) {
            for sb in [Sbp::Split(0), Sbp::Split(1), Sbp::Broadcast, SUM] {
                let y = make(&a, &p, &[*sa])?.matmul(&make(&b, &p, &[sb])?)?;
                close(
                    &y.to_vec::<f32>()?,
                    &a.matmul(&b)?.to_vec::<f32>()?,
                    &format!("{sa} · {sb}"),
                );
            }
        }
        Ok(())
    })
}

/// Steps of `opt` on a two-layer network over a fixed batch, from the same initial values:
/// the parameters afterwards.
fn train(
    layers: [eddy::tensor::nn::Linear; 2],
    x: &Tensor,
    y: &Tensor,
    adam: bool,
) -> R<Vec<Vec<f32>>> {
    use eddy::tensor::nn::{Module, Relu, Sequential};
    use eddy::tensor::optim::{Adam, Optimizer, Sgd};
    let [a, b] = layers;
    let net = Sequential::new().add(a).add(Relu).add(b);
    let mut opt: Box<dyn Optimizer> = if adam {
        Box::new(Adam::new(net.parameters(), 0.01)?)
    } else {
        let mut s = Sgd::new(net.parameters(), 0.1)?;
        s.momentum = 0.9;
        Box::new(s)
    };
    for _ in 0..5 {
        opt.zero_grad();
        net.forward(x)?.mse_loss(y)?.backward()?;
        opt.step()?;
    }
    net.parameters().iter().map(|p| p.to_vec::<f32>()).collect()
}

#[test]
fn data_and_tensor_parallel_training_follow_one_device() -> R {
    use eddy::tensor::nn::Linear;
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let p = place(&[0, 1, 2], &[3]);
        let x = Tensor::randn([10, 6], 0.0, 1.0, DType::F32)?;
        let y = Tensor::randn([10, 3], 0.0, 1.0, DType::F32)?;
        let (l1, l2) = (
            Linear::new(6, 8, true, DType::F32)?,
            Linear::new(8, 3, true, DType::F32)?,
        );
        let b: &[Sbp] = &[Sbp::Broadcast];
        let (s0, s1): (&[Sbp], &[Sbp]) = (&[Sbp::Split(0)], &[Sbp::Split(1)]);
        for adam in [false, true] {
            let want = train(
                [l1.to_global(&p, b, b)?, l2.to_global(&p, b, b)?],
                &x.to_global(&p, b)?,
                &y.to_global(&p, b)?,
                adam,
            )?;
            // Copies: the steps write the parameters in place.
            let copy = |t: &Tensor| t.detach().to_dtype(DType::F32)?.requires_grad_(true);
            let local = |l: &Linear| -> R<Linear> {
                let bias = l.bias.as_ref().map(copy).transpose()?;
                Ok(Linear {
                    weight: copy(&l.weight)?,
                    bias,
                })
            };
            let one = train([local(&l1)?, local(&l2)?], &x, &y, adam)?;
            // Data parallel: the batch split, the parameters broadcast.
            let data = train(
                [l1.to_global(&p, b, b)?, l2.to_global(&p, b, b)?],
                &x.to_global(&p, s0)?,
                &y.to_global(&p, s0)?,
                adam,
            )?;
            // Tensor parallel: the first layer split by outputs, the second by inputs.
            let tensor = train(
                [l1.to_global(&p, s0, s0)?, l2.to_global(&p, s1, b)?],
                &x.to_global(&p, b)?,
                &y.to_global(&p, b)?,
                adam,
            )?;
            for (k, w) in one.iter().enumerate() {
                close(
                    &want[k],
                    w,
                    &format!("broadcast, parameter {k}, adam {adam}"),
                );
                close(
                    &data[k],
                    w,
                    &format!("data parallel, parameter {k}, adam {adam}"),
                );
                close(
                    &tensor[k],
                    w,
                    &format!("tensor parallel, parameter {k}, adam {adam}"),
                );
            }
        }
        Ok(())
    })
}

#[test]
fn a_global_module_saves_and_loads_its_logical_values() -> R {
    use eddy::tensor::nn::{self, Linear};
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let p = place(&[0, 1], &[2]);
        let path =
            std::env::temp_dir().join(format!("eddy-global-{}.safetensors", std::process::id()));
        let a = Linear::new(5, 4, true, DType::F32)?;
        let g = a.to_global(&p, &[Sbp::Split(1)], &[Sbp::Broadcast])?;
        nn::save(&g, &path)?;
        let b = Linear::new(5, 4, true, DType::F32)?;
        nn::load(&b, &path)?;
        assert_eq!(b.weight.to_vec::<f32>()?, a.weight.to_vec::<f32>()?);
        let h = Linear::new(5, 4, true, DType::F32)?.to_global(
            &p,
            &[Sbp::Split(0)],
            &[Sbp::Split(0)],
        )?;
        nn::load(&h, &path)?;
        assert_eq!(h.weight.sbp(), Some(&[Sbp::Split(0)][..]));
        assert_eq!(h.weight.to_vec::<f32>()?, a.weight.to_vec::<f32>()?);
        assert_eq!(
            h.bias.unwrap().to_vec::<f32>()?,
            a.bias.unwrap().to_vec::<f32>()?
        );
        std::fs::remove_file(&path).ok();
        Ok(())
    })
}

#[test]
fn cross_entropy_of_split_rows_is_the_one_device_loss() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let x = Tensor::randn([7, 5], 0.0, 1.0, DType::F32)?;
        let t = Tensor::from_vec(vec![1i64, 4, -100, 0, 2, 2, 3], [7])?;
        let local = x.detach().requires_grad_(true)?;
        let want = local.cross_entropy(&t)?;
        want.backward()?;
        let want_grad = local.grad().unwrap().to_vec::<f32>()?;
        for (p, sbp) in [
            (place(&[0, 1, 2], &[3]), vec![Sbp::Split(0)]),
            (place(&[0, 1], &[2]), vec![Sbp::Broadcast]),
            (
                place(&[0, 1, 2, 3], &[2, 2]),
                vec![Sbp::Split(0), Sbp::Split(0)],
            ),
            (place(&[0, 1, 2, 3], &[2, 2]), vec![Sbp::Split(1), SUM]),
        ] {
            let g = make(&x, &p, &sbp)?.requires_grad_(true)?;
            let loss = g.cross_entropy(&t)?;
            close(
                &loss.to_vec::<f32>()?,
                &want.to_vec::<f32>()?,
                &format!("{sbp:?}"),
            );
            loss.backward()?;
            let gg = g.grad().unwrap();
            assert_eq!(gg.sbp(), Some(sbp.as_slice()));
            close(
                &gg.to_vec::<f32>()?,
                &want_grad,
                &format!("gradient, {sbp:?}"),
            );
        }
        // A class out of range fails at the sync, as on one device.
        let p = place(&[0, 1], &[2]);
        let bad =
            Tensor::from_vec(vec![1i64, 9, 0, 0, 0, 0, 0], [7])?.to_global(&p, &[Sbp::Split(0)])?;
        let e = x
            .to_global(&p, &[Sbp::Split(0)])?
            .cross_entropy(&bad)?
            .to_vec::<f32>();
        assert!(e.is_err(), "{e:?}");
        Ok(())
    })
}

#[test]
fn every_op_family_names_both_placements() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let (p, q) = (place(&[0, 1], &[2]), place(&[2, 3], &[2]));
        let x = Tensor::randn([4, 4], 0.0, 1.0, DType::F32)?;
        let (a, b) = (
            x.to_global(&p, &[Sbp::Split(0)])?,
            x.to_global(&q, &[Sbp::Broadcast])?,
        );
        let t = Tensor::from_vec(vec![0i64, 1, 2, 3], [4])?.to_global(&q, &[Sbp::Broadcast])?;
        let cases: Vec<(&str, R<Tensor>)> = vec![
            ("mul", a.mul(&b)),
            ("gt", a.gt(&b)),
            ("where", a.gt(&a)?.where_(&a, &b)),
            ("matmul", a.matmul(&b)),
            ("add", a.add_(&b)),
            ("cross_entropy", a.cross_entropy(&t)),
        ];
        for (op, r) in cases {
            let e = r.unwrap_err();
            let s = e.to_string();
            assert!(matches!(e, Error::PlacementMismatch { .. }), "{op}: {s}");
            assert!(
                s.contains("cpu:[0, 1]") && s.contains("cpu:[2, 3]"),
                "{op}: {s}"
            );
        }
        Ok(())
    })
}

#[test]
fn splits_with_empty_slices_compute_right() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        // A dim of one row over four ranks: three of them hold nothing.
        let p = place(&[0, 1, 2, 3], &[4]);
        let x = Tensor::randn([1, 3], 0.0, 1.0, DType::F32)?;
        let w = Tensor::randn([3, 2], 0.0, 1.0, DType::F32)?;
        let g = x.to_global(&p, &[Sbp::Split(0)])?;
        assert_eq!(g.local_components()[3].dims(), &[0, 3]);
        let y = g.matmul(&w.to_global(&p, &[Sbp::Broadcast])?)?.relu()?;
        close(
            &y.to_vec::<f32>()?,
            &x.matmul(&w)?.relu()?.to_vec::<f32>()?,
            "matmul",
        );
        close(
            &g.sum(&[0], false)?.to_vec::<f32>()?,
            &x.sum(&[0], false)?.to_vec::<f32>()?,
            "sum",
        );
        close(
            &g.mean_all()?.to_vec::<f32>()?,
            &x.mean_all()?.to_vec::<f32>()?,
            "mean",
        );
        Ok(())
    })
}

#[test]
fn threads_on_overlapping_placements_get_their_own_values() -> R {
    let (vm, _turn) = engine();
    let places = [
        place(&[0, 1], &[2]),
        place(&[1, 2], &[2]),
        place(&[2, 3, 0], &[3]),
        place(&[0, 1, 2, 3], &[2, 2]),
    ];
    std::thread::scope(|s| {
        let handles: Vec<_> = (places.iter().enumerate())
            .map(|(k, p)| {
                let vm = &vm;
                s.spawn(move || {
                    with_engine(vm, || -> R {
                        let axes = p.grid_dims().len();
                        let x = Tensor::full([6, 5], k as f64 + 1.0, DType::F32)?;
                        let mut y = x.to_global(p, &vec![Sbp::Split(0); axes])?;
                        for _ in 0..50 {
                            let b = y.to_global(p, &vec![Sbp::Broadcast; axes])?;
                            y = b
                                .add_scalar(1.0)?
                                .to_global(p, &vec![Sbp::Split(1); axes])?;
                            y = y.sum(&[0], true)?.div_scalar(6.0)?.expand([6, 5])?;
                        }
                        let want = vec![k as f32 + 51.0; 30];
                        assert_eq!(y.to_vec::<f32>()?, want, "thread {k} on {p}");
                        Ok(())
                    })
                })
            })
            .collect();
        for h in handles {
            h.join().expect("a thread")?;
        }
        Ok(())
    })
}

#[test]
fn a_compiled_graph_refuses_global_tensors() -> R {
    use eddy::tensor::graph::Graph;
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let p = place(&[0, 1], &[2]);
        let x = Tensor::ones([4], DType::F32)?;
        let g = x.to_global(&p, &[Sbp::Split(0)])?;
        let double = Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].add(&xs[0])?]));
        let e = double.run(&[&g]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
        // A global tensor reached from inside the closure, not as an input.
        let inside = Graph::new(move |xs: &[Tensor]| {
            Ok(vec![g.add(&g)?.to_local()?.add(&xs[0].narrow(0, 0, 2)?)?])
        });
        let e = inside.run(&[&x]).unwrap_err();
        assert!(e.to_string().contains("compiled graph"), "{e}");
        Ok(())
    })
}

#[test]
fn global_handles_share_storage_as_their_components_do() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let p = place(&[0, 1], &[2]);
        let a = Tensor::ones([4, 2], DType::F32)?.to_global(&p, &[Sbp::Split(0)])?;
        let b = Tensor::ones([4, 2], DType::F32)?.to_global(&p, &[Sbp::Split(0)])?;
        assert!(a.t()?.shares_storage(&a), "a view");
        assert!(!b.shares_storage(&a), "another tensor");
        assert!(!a.add(&b)?.shares_storage(&a), "a result");
        assert!(
            !a.to_local()?.shares_storage(&a),
            "a local tensor and a global one"
        );
        // Many handles come and go: none releases anything of another's.
        for _ in 0..1000 {
            let v = a.unsqueeze(0)?.squeeze(0)?;
            drop(v.mul_scalar(2.0)?);
        }
        assert_eq!(a.to_vec::<f32>()?, [1.; 8]);
        Ok(())
    })
}

#[test]
fn global_handles_hold_the_engines_empty_storage_without_counting() -> R {
    // A global handle's storage is an uncounted copy of the engine's unusable blob: making,
    // viewing, cloning and dropping global tensors must leave its count where it was (a
    // count taken or dropped one time too many frees the engine's own blob).
    let (vm, _turn) = engine();
    let count = || eddy::vm::Counted::count(vm.unusable_blob_ref());
    let before = count();
    with_engine(&vm, || {
        let p = place(&[0, 1], &[2]);
        let a = Tensor::ones([4, 2], DType::F32)?.to_global(&p, &[Sbp::Split(0)])?;
        for _ in 0..100 {
            let v = a.t()?.t()?.clone();
            let w = v
                .add(&a)?
                .mul_scalar(2.0)?
                .to_global(&p, &[Sbp::Broadcast])?;
            drop(w.sum_all()?);
        }
        assert_eq!(a.add(&a)?.to_vec::<f32>()?, [2.; 8]);
        Ok::<(), Error>(())
    })?;
    assert_eq!(count(), before, "the unusable blob's count");
    Ok(())
}

#[test]
fn a_leaked_engine_runs_global_ops_as_a_counted_one() -> R {
    let _turn = TURNS.lock().unwrap_or_else(|e| e.into_inner());
    let vm: &'static Vm = Vm::builder().cpu_devices(2).build()?.leak();
    assert!(vm.lives_forever());
    with_engine(vm, || {
        let p = place(&[0, 1], &[2]);
        let x = Tensor::arange(0.0, 9.0, 1.0, DType::F32)?.to_global(&p, &[Sbp::Split(0)])?;
        let mut y = Tensor::zeros([9], DType::F32)?.to_global(&p, &[Sbp::Split(0)])?;
        for _ in 0..3 {
            y = y.add(&x)?;
        }
        let want: Vec<f32> = (0..9).map(|i| 3.0 * i as f32).collect();
        assert_eq!(y.to_vec::<f32>()?, want);
        // Tensors outlive the scope: the engine lives on.
        Ok::<_, Error>(y)
    })
    .and_then(|y| {
        assert_eq!(y.sum_all()?.item::<f32>()?, 108.0);
        Ok(())
    })
}

#[test]
fn collectives_run_on_each_ranks_collective_stream_in_program_order() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let p = place(&[0, 1, 2], &[3]);
        let lane = |n: u32| vm.stream_of(Device::Cpu(n), eddy::vm::stream::StreamKind::Collective);
        let lanes: Vec<u32> = (0..3)
            .map(|n| lane(n).expect("a collective stream per CPU device").0)
            .collect();
        assert!(lanes[0] != lanes[1] && lanes[1] != lanes[2]);
        let x = Tensor::randn([7, 5], 0.0, 1.0, DType::F32)?;
        let sum = x.to_global(&p, &[SUM])?;
        vm.sync()?;
        vm.set_trace(true);
        let b = sum.to_global(&p, &[Sbp::Broadcast])?;
        let s = b
            .to_global(&p, &[Sbp::Split(1)])?
            .to_global(&p, &[Sbp::Split(0)])?;
        let g = s.to_global(&p, &[Sbp::Broadcast])?;
        vm.sync()?;
        vm.set_trace(false);
        let ran: Vec<(String, u32)> = (vm.trace_events().into_iter())
            .filter(|e| e.name.starts_with("all_"))
            .map(|e| (e.name, e.stream))
            .collect();
        // `P → B` an all-reduce, `S(1) → S(0)` an all-to-all, `S(0) → B` an all-gather: one
        // instruction per rank each, on that rank's collective stream, run in program order
        // (the transport dependence orders them across the streams).
        let want: Vec<(String, u32)> = ["all_reduce", "all_to_all", "all_gather"]
            .iter()
            .flat_map(|n| lanes.iter().map(|&l| (n.to_string(), l)))
            .collect();
        assert_eq!(ran, want);
        close(&g.to_vec::<f32>()?, &x.to_vec::<f32>()?, "the value");
        Ok(())
    })
}

#[test]
fn in_place_writes_are_counted_per_global_tensor() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let p = place(&[0, 1], &[2]);
        let s0 = [Sbp::Split(0)];
        let w = Tensor::randn([4, 3], 0.0, 1.0, DType::F32)?.to_global(&p, &s0)?;
        let w = w.requires_grad_(true)?;
        let other = Tensor::ones([4, 3], DType::F32)?.to_global(&p, &s0)?;
        let v0 = w.version();
        // `exp` saves its output; writing another global tensor leaves it valid.
        let y = w.exp()?;
        other.add_scalar_(1.0)?;
        assert_eq!(w.version(), v0, "another tensor's write");
        y.sum_all()?.backward()?;
        // Writing what the backward reads is caught, as for a local tensor.
        let y = w.exp()?;
        y.detach().mul_scalar_(2.0)?;
        assert!(matches!(
            y.sum_all()?.backward(),
            Err(Error::Autograd { .. })
        ));
        Ok(())
    })
}

/// An in-place update a test applies to a local tensor and to global layouts of it.
type Update<'a> = Box<dyn Fn(&Tensor) -> R<Tensor> + 'a>;

#[test]
fn in_place_ops_on_partial_tensors_update_the_logical_value() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        for p in grids() {
            let axes = p.grid_dims().len();
            let x = Tensor::randn([5, 3], 0.0, 1.0, DType::F32)?;
            let y = Tensor::randn([5, 3], 0.0, 1.0, DType::F32)?;
            for kind in [SUM, Sbp::Partial(ReduceKind::Max)] {
                let sbp = vec![kind; axes];
                let want = |f: &dyn Fn(&Tensor) -> R<Tensor>| -> R<Vec<f32>> {
                    let t = x.detach().contiguous()?;
                    f(&t)?;
                    t.to_vec::<f32>()
                };
                let got = |f: &dyn Fn(&Tensor) -> R<Tensor>| -> R<Vec<f32>> {
                    let t = make(&x, &p, &sbp)?;
                    f(&t)?;
                    assert_eq!(t.sbp(), Some(&sbp[..]), "laid out as before");
                    t.to_vec::<f32>()
                };
                let mut cases: Vec<(&str, Update<'_>)> = vec![
                    ("copy_", Box::new(|t| t.copy_(&y))),
                    ("fill_", Box::new(|t| t.fill_(2.5))),
                ];
                if kind == SUM {
                    cases.push(("add_", Box::new(|t| t.add_(&y))));
                    cases.push((
                        "sub_ of a global",
                        Box::new(|t| {
                            let yg = match (t.placement(), t.sbp()) {
                                (Some(p), Some(s)) => make(&y, p, s)?,
                                _ => y.clone(),
                            };
                            t.sub_(&yg)
                        }),
                    ));
                    cases.push(("add_scalar_", Box::new(|t| t.add_scalar_(1.5))));
                    cases.push(("mul_scalar_", Box::new(|t| t.mul_scalar_(-3.0))));
                    cases.push(("mul_", Box::new(|t| t.mul_(&y))));
                    cases.push(("add_scaled_", Box::new(|t| t.add_scaled_(&y, 0.5))));
                } else {
                    // An extremum moved by a whole value: each rank moves its part.
                    cases.push(("add_scalar_", Box::new(|t| t.add_scalar_(1.5))));
                    cases.push(("sub_ of a local", Box::new(|t| t.sub_(&y))));
                }
                for (name, f) in &cases {
                    close(
                        &got(f.as_ref())?,
                        &want(f.as_ref())?,
                        &format!("{name} on {p} {sbp:?}"),
                    );
                }
                if kind != SUM {
                    // An update with no form for the kind is refused, not applied once per rank.
                    let t = make(&x, &p, &sbp)?;
                    let refused = t.mul_scalar_(-2.0);
                    assert!(
                        matches!(refused, Err(Error::NoSbpRule { .. })),
                        "{refused:?}"
                    );
                    close(&t.to_vec::<f32>()?, &x.to_vec::<f32>()?, "left as it was");
                }
            }
        }
        Ok(())
    })
}

#[test]
fn wide_rows_box_by_row_copies_to_the_same_values() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        for p in grids() {
            let axes = p.grid_dims().len();
            // Rows long enough for the row-copy path, uneven over every grid, and a batch dim.
            let x = Tensor::randn([3, 9, 37], 0.0, 1.0, DType::F32)?;
            let want = x.to_vec::<f32>()?;
            for (from, to) in [
                (Sbp::Split(1), Sbp::Split(2)),
                (Sbp::Split(2), Sbp::Broadcast),
                (Sbp::Split(2), Sbp::Split(0)),
                (Sbp::Split(0), Sbp::Split(1)),
            ] {
                let g = x.to_global(&p, &vec![from; axes])?;
                let y = g.to_global(&p, &vec![to; axes])?;
                close(
                    &y.to_vec::<f32>()?,
                    &want,
                    &format!("{from:?} → {to:?} on {p}"),
                );
                // And through a transposed view of the parts.
                let t = g
                    .transpose(1, 2)?
                    .to_global(&p, &vec![Sbp::Broadcast; axes])?;
                close(&t.transpose(1, 2)?.to_vec::<f32>()?, &want, "transposed");
            }
        }
        Ok(())
    })
}

#[test]
fn convolutions_of_split_batches_match_one_device() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        let p = place(&[0, 1, 2], &[3]);
        let x = Tensor::randn([5, 3, 6, 6], 0.0, 1.0, DType::F32)?;
        let w = Tensor::randn([4, 3, 3, 3], 0.0, 1.0, DType::F32)?;
        let b = Tensor::randn([4], 0.0, 1.0, DType::F32)?;
        let conv: Loss = |v| {
            v[0].conv2d(&v[1], Some(&v[2]), 2, 1, 1, 1)?
                .relu()?
                .square()?
                .mean_all()
        };
        // Two groups of one plane each: a weight of [2, 1, 3, 3] over the first two planes.
        let grouped: Loss = |v| {
            let w = v[1].narrow(1, 0, 1)?.narrow(0, 0, 2)?;
            let y = v[0]
                .narrow(1, 0, 2)?
                .conv2d(&w, Some(&v[2].narrow(0, 0, 2)?), 1, 0, 1, 2)?;
            y.exp()?.mean_all()
        };
        let b0 = [Sbp::Broadcast];
        for xs in [[Sbp::Split(0)], [Sbp::Broadcast], [SUM]] {
            grads_agree(
                &p,
                &[x.clone(), w.clone(), b.clone()],
                &[&xs, &b0, &b0],
                conv,
            )?;
            grads_agree(
                &p,
                &[x.clone(), w.clone(), b.clone()],
                &[&xs, &b0, &b0],
                grouped,
            )?;
        }
        let pools: Loss = |v| {
            let a = v[0].avg_pool2d(3, 2, 1, false, false, None)?;
            let b = v[0].adaptive_avg_pool2d((2, 3))?;
            let m = v[0].max_pool2d(3, 2, 1, 1, true)?;
            let m = m.mul(&m.narrow(0, 0, 1)?)?; // the maxima's gradients differ by position
            (a.square()?.sum_all()?.add(&b.exp()?.sum_all()?)?)
                .add(&m.sum_all()?)?
                .add(&v[1].sum_all()?)
        };
        let norms: Loss = |v| {
            let g = v[0].group_norm(3, Some(&v[1].narrow(0, 0, 3)?), None, 1e-5)?;
            let bn = v[0].batch_norm(None, None, None, None, true, 0.1, 1e-5)?;
            let wt = v[1].reshape([3, 1, 2, 2])?;
            let ct = v[0].conv_transpose2d(&wt, None, 2, 1, 0, 1, 1)?;
            g.mul(&bn)?.sum_all()?.add(&ct.square()?.mean_all()?)
        };
        for xs in [[Sbp::Split(0)], [Sbp::Split(1)], [SUM]] {
            grads_agree(&p, &[x.clone(), b.clone()], &[&xs, &b0], pools)?;
        }
        let w12 = Tensor::randn([12], 0.0, 1.0, DType::F32)?;
        for xs in [[Sbp::Split(0)], [Sbp::Split(1)], [Sbp::Split(3)]] {
            grads_agree(&p, &[x.clone(), w12.clone()], &[&xs, &b0], norms)?;
        }
        // The data-parallel layout needs no boxing in the forward.
        let (xg, wg) = (x.to_global(&p, &[Sbp::Split(0)])?, w.to_global(&p, &b0)?);
        let (y, n) = count_collectives(|| xg.conv2d(&wg, None, 1, 1, 1, 1));
        assert_eq!((n.total(), y?.sbp()), (0, Some(&[Sbp::Split(0)][..])));
        Ok(())
    })
}

#[test]
fn extrema_over_more_ranks_than_rows_see_only_the_rows() -> R {
    let (vm, _turn) = engine();
    with_engine(&vm, || {
        // 3 rows over 5 ranks: two components hold none.
        let p = place(&[0, 1, 2, 3, 4], &[5]);
        let x = Tensor::from_vec(vec![-3f32, 1.0, -2.0, -5.0, 4.0, -1.0], [3, 2])?;
        let s = x.to_global(&p, &[Sbp::Split(0)])?;
        assert_eq!(s.local_components()[4].dims(), [0, 2]);
        assert_eq!(s.amax(&[0], false)?.to_vec::<f32>()?, [4.0, 1.0]);
        assert_eq!(s.amin(&[0], false)?.to_vec::<f32>()?, [-3.0, -5.0]);
        assert_eq!(s.max_all()?.to_vec::<f32>()?, [4.0]);
        let i = x.to_dtype(DType::I64)?.to_global(&p, &[Sbp::Split(0)])?;
        assert_eq!(i.amin(&[0], true)?.to_vec::<i64>()?, [-3, -5]);
        Ok(())
    })
}
