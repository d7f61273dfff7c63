//! The path of a global op: one placement for every operand, the SBP signature chosen by the
//! cost model (once per op, attributes and input metas), the inputs boxed to it, the local op
//! on each rank's components.

use super::{Global, NdSbp, Placement, boxing, describe, global_of, mismatch};
use crate::{Error, Result, Shape, Tensor};
use eddy_ops::global::{Choice, Rule, choose, component_ranges, show_sbp};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::LazyLock;

/// What the choice depends on: the rule, each input's dims, element size and SBPs, the grid.
type Key = (Rule, Vec<(Vec<usize>, usize, NdSbp)>, Vec<usize>);

/// The choices made so far. A loop asks the same questions: each is answered once.
static CHOICES: LazyLock<Mutex<HashMap<Key, Option<Choice>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The most choices kept; past it the cache starts again (a program with that many op shapes
/// pays the choice again, a bounded cost).
const MAX_CHOICES: usize = 1 << 14;

/// The text of the inputs' layouts, as `[S(0), B]`.
fn show_inputs(inputs: &[&Tensor]) -> String {
    let parts: Vec<String> = (inputs.iter())
        .map(|t| match t.global() {
            Some(g) => show_sbp(&g.sbp),
            None => format!("local {}", t.device()),
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// The error of a kernel launch that failed with `e`: where an operand is global (whose
/// storage the engine refuses), `NoSbpRule` naming the kernel's op, the placement and the
/// inputs' SBPs, for an op without global rules; else `e` itself.
#[cold]
#[track_caller]
pub(crate) fn refused_kernel(e: eddy_vm::Error, ins: &[&Tensor], outs: &[&Tensor]) -> Error {
    match (ins.iter().chain(outs)).find(|t| t.is_global()) {
        Some(g) => Error::NoSbpRule {
            op: e.op().unwrap_or("kernel").to_string(),
            placement: describe(g),
            inputs: show_inputs(ins),
            at: crate::Caller::here(),
        },
        None => Error::Vm(e),
    }
}

/// The placement every input shares.
///
/// # Errors
///
/// `PlacementMismatch` naming the first input and the first that differs (or is local).
#[track_caller]
fn common(op: &'static str, inputs: &[&Tensor]) -> Result<&'static Placement> {
    let first = inputs
        .iter()
        .find(|t| t.is_global())
        .expect("a global input");
    let p = first.global().expect("global").placement;
    for t in inputs {
        // Placements are interned: equal ones are one reference.
        let same = t.global().is_some_and(|g| std::ptr::eq(g.placement, p));
        if !same {
            return Err(mismatch(op, first, t));
        }
    }
    Ok(p)
}

/// Runs `op` on global `inputs` giving a tensor of logical shape `out`: the signature of
/// `rule` that moves the fewest bytes, the inputs boxed to it, and `local` run on each rank's
/// components with that rank's output dims. No autograd record (the caller records the op
/// as for local tensors).
///
/// # Errors
///
/// `PlacementMismatch`; `NoSbpRule` when no signature fits; what `local` returns.
#[track_caller]
pub(crate) fn run(
    op: &'static str,
    rule: Rule,
    inputs: &[&Tensor],
    out: Shape,
    local: impl Fn(&[&Tensor], &[usize]) -> Result<Tensor>,
) -> Result<Tensor> {
    if crate::graph::is_tracing() {
        return Err(super::refuse_traced(op));
    }
    if let Some(first) = same_layout(&rule, inputs, &out) {
        let _g = crate::no_grad();
        let mut parts = super::Components::new();
        let mut ins: smallvec::SmallVec<[&Tensor; 3]> = smallvec::SmallVec::new();
        for (i, part) in first.parts.iter().enumerate() {
            ins.clear();
            ins.extend(inputs.iter().map(|t| &t.global().expect("global").parts[i]));
            parts.push(local(&ins, part.dims())?);
        }
        return Ok(global_of(
            out,
            first.placement,
            &first.held,
            &first.sbp,
            parts,
        ));
    }
    let mut v = run_many(op, rule, inputs, out, |x, d| Ok(vec![local(x, d)?]))?;
    Ok(v.swap_remove(0))
}

/// As [`run`], for an op with several results of the same logical shape and layout (the
/// values and positions of `sort`): `local` gives each rank's results, in order.
#[track_caller]
pub(crate) fn run_many(
    op: &'static str,
    rule: Rule,
    inputs: &[&Tensor],
    out: Shape,
    local: impl Fn(&[&Tensor], &[usize]) -> Result<Vec<Tensor>>,
) -> Result<Vec<Tensor>> {
    if crate::graph::is_tracing() {
        return Err(super::refuse_traced(op));
    }
    let placement = common(op, inputs)?;
    let globals: Vec<&Global> = inputs.iter().map(|t| t.global().expect("global")).collect();
    let key: Key = (
        rule,
        (inputs.iter().zip(&globals))
            .map(|(t, g)| (t.dims().to_vec(), t.dtype().size_in_bytes(), g.sbp.clone()))
            .collect(),
        placement.grid_dims().to_vec(),
    );
    let cached = CHOICES.lock().get(&key).cloned();
    let choice = match cached {
        Some(c) => c,
        None => {
            let dims: Vec<&[usize]> = key.1.iter().map(|(d, _, _)| d.as_slice()).collect();
            let elem: Vec<usize> = key.1.iter().map(|(_, e, _)| *e).collect();
            let sbps: Vec<&[crate::global::Sbp]> =
                key.1.iter().map(|(_, _, s)| s.as_slice()).collect();
            let c = choose(&key.0, &dims, &elem, &sbps, &key.2, out.dims());
            let mut cache = CHOICES.lock();
            if cache.len() >= MAX_CHOICES {
                cache.clear();
            }
            cache.insert(key, c.clone());
            c
        }
    };
    let Some(choice) = choice else {
        return Err(Error::NoSbpRule {
            op: op.to_string(),
            placement: placement.to_string(),
            inputs: show_inputs(inputs),
            at: crate::Caller::here(),
        });
    };
    let _g = crate::no_grad();
    // A loop, not a closure: each boxing's collectives name the caller's line.
    let mut boxed: Vec<Vec<Tensor>> = Vec::with_capacity(inputs.len());
    for (t, need) in inputs.iter().zip(&choice.inputs) {
        boxed.push(boxing::boxing(t, need)?);
    }
    let held = &globals[0].held;
    let count = held.count(placement.len());
    let mut parts: Vec<Vec<Tensor>> = Vec::new();
    for k in 0..count {
        let i = held.position(k);
        let dims: Vec<usize> = (component_ranges(out.dims(), placement, &choice.output, i))
            .iter()
            .map(|r| r.len())
            .collect();
        let ins: Vec<&Tensor> = boxed.iter().map(|b| &b[k]).collect();
        let ys = local(&ins, &dims)?;
        if let Some(y) = ys.iter().find(|y| y.dims() != dims.as_slice()) {
            return Err(Error::invalid(
                op,
                format!(
                    "the component of rank position {i} has dims {:?}, the signature says {dims:?}",
                    y.dims()
                ),
            ));
        }
        parts.resize_with(ys.len(), || Vec::with_capacity(count));
        for (p, y) in parts.iter_mut().zip(ys) {
            p.push(y);
        }
    }
    Ok((parts.into_iter())
        .map(|p| global_of(out.clone(), placement, held, &choice.output, p.into()))
        .collect())
}

/// The commonest global op without the choice: an elementwise op whose inputs all have the
/// output's shape, one placement and one SBP of splits and broadcasts takes that SBP, which
/// every elementwise rule has (`S(d), S(d) → S(d)`, `B, B → B`) and which needs no boxing:
/// the first input's global part then; `None` for anything else (the general path, which
/// also names a placement mismatch).
#[inline]
pub(crate) fn same_layout<'a>(
    rule: &Rule,
    inputs: &[&'a Tensor],
    out: &Shape,
) -> Option<&'a Global> {
    let elementwise = match rule {
        Rule::Binary(_) | Rule::Broadcast => true,
        Rule::Map { dims, partials: _ } => dims.iter().enumerate().all(|(i, d)| *d == Some(i)),
        _ => false,
    };
    let first = inputs[0].global()?;
    // Placements are interned: one placement is one address.
    let same = elementwise
        && inputs.iter().all(|t| {
            t.shape() == out
                && t.global().is_some_and(|g| {
                    std::ptr::eq(g.placement, first.placement) && g.sbp == first.sbp
                })
        })
        && first
            .sbp
            .iter()
            .all(|s| !matches!(s, crate::global::Sbp::Partial(_)));
    same.then_some(first)
}
