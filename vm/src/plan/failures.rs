//! How a failed step's error reaches what depends on it, within one run of a plan: shared by
//! runs in order ([`super::run`]) and by actors ([`super::actors`]).

use super::Slot;
use crate::Counted;
use crate::blob::Blob;
use crate::error::Error;

/// The error each of a step's `outputs` inherits from a failed input (`depends`: which inputs
/// each output is computed from, `None`: all), given the `failed` slots: in `out`, empty
/// when nothing failed. Shared by runs in order and by actors.
pub(super) fn inherited(
    failed: &[(Slot, Error)],
    inputs: &[Slot],
    outputs: usize,
    depends: Option<&[Vec<usize>]>,
    out: &mut Vec<Option<Error>>,
) {
    out.clear();
    if failed.is_empty() {
        return;
    }
    let from = |s: &Slot| failed.iter().find(|f| f.0 == *s).map(|f| f.1.clone());
    out.extend((0..outputs).map(|k| match depends {
        Some(d) => d[k].iter().find_map(|&i| from(&inputs[i])),
        None => inputs.iter().find_map(from),
    }));
}

/// Whether every output inherits an error: the step is skipped.
pub(super) fn all_inherited(inherited: &[Option<Error>]) -> bool {
    !inherited.is_empty() && inherited.iter().all(Option::is_some)
}

/// Records what a step left in its `outputs`: each carries the error it inherited, else the
/// step's own `error`, else none (a fresh write replaces an earlier failure).
pub(super) fn record(
    failed: &mut Vec<(Slot, Error)>,
    outputs: &[Slot],
    inherited: &[Option<Error>],
    error: Option<&Error>,
) {
    if failed.is_empty() && error.is_none() {
        return;
    }
    for (k, &o) in outputs.iter().enumerate() {
        failed.retain(|f| f.0 != o);
        if let Some(e) = inherited.get(k).and_then(Option::as_ref).or(error) {
            failed.push((o, e.clone()));
        }
    }
}

/// Each written blob carries its slot's error, or none.
pub(super) fn settle<'a>(
    written: impl Iterator<Item = (&'a Counted<Blob>, Option<Slot>)>,
    failed: &[(Slot, Error)],
) {
    for (b, slot) in written {
        match failed.iter().find(|f| Some(f.0) == slot) {
            Some((_, e)) => b.set_poison(e),
            None => b.clear_poison(),
        }
    }
}
