//! The table against the tensor API, read from `tensor/src` when the test runs: every method
//! and attribute row names a public `Tensor` method or is one of [`REPL_ONLY`], and every public
//! `Tensor` method is a row or one of [`NOT_OFFERED`]. A new tensor method fails this test until
//! it gets a row or a place in `NOT_OFFERED`.

use super::{Kind, rows};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Rows that name no `Tensor` method: PyTorch's names for what Eddy calls otherwise.
const REPL_ONLY: &[(&str, &str)] = &[
    ("ndim", "PyTorch's name for `rank`"),
    ("reciprocal", "PyTorch's name for `recip`"),
    (
        "T",
        "PyTorch's attribute: `permute` with every dim reversed",
    ),
    ("mT", "PyTorch's attribute: `transpose(-2, -1)`"),
    ("to", "PyTorch's name for `to_dtype`"),
    ("type", "PyTorch's name for `to_dtype`"),
    ("float", "PyTorch's cast: `to_dtype(f32)`"),
    ("double", "PyTorch's cast: `to_dtype(f64)`"),
    ("long", "PyTorch's cast: `to_dtype(i64)`"),
    ("half", "PyTorch's cast: `to_dtype(f16)`"),
    ("tolist", "PyTorch's name for `to_vec`, nested by dim"),
];

/// Public `Tensor` methods the REPL does not offer.
const NOT_OFFERED: &[&str] = &[
    // Scalar forms: the operators and the methods by name (`add`, `eq`, …) take numbers.
    "add_scalar",
    "sub_scalar",
    "rsub_scalar",
    "mul_scalar",
    "div_scalar",
    "pow_scalar",
    "eq_scalar",
    "ne_scalar",
    "lt_scalar",
    "le_scalar",
    "gt_scalar",
    "ge_scalar",
    "add_scalar_",
    "mul_scalar_",
    // Whole-tensor forms: a reduction without dims reduces every dim.
    "sum_all",
    "mean_all",
    "any_all",
    "all_all",
    "max_all",
    "min_all",
    "flatten_all",
    // Reads that `item()`, `tolist()` and the attributes give.
    "to_scalar",
    "to_f64_vec",
    "to_vec2",
    "dims",
    "dim",
    "rank",
    // Plumbing of the engine, of autograd and of custom ops, not tensor math.
    "engine",
    "id",
    "layout",
    "version",
    "shares_storage",
    "is_contiguous",
    "is_leaf",
    "set_grad",
    "backward_with",
    "with_backward",
    "sum_to",
    "add_scaled_",
    "linear_relu",
    // Reached through the indexing syntax (`x[lo:hi:step]`), not by name.
    "step",
    // Reached through `backward(retain_graph=true)`.
    "backward_retaining_graph",
    // Not offered yet: each needs a row (and a line in the tests) to be.
    "linear",
    "conv1d",
    "conv_transpose2d",
    "unfold2d",
    "fold2d",
    "max_pool2d_with_indices",
    "batch_norm",
    "group_norm",
    "layer_norm",
    "chunk",
    "split",
    "split_sizes",
    "unbind",
    "slice",
    "to_device",
    "zeros_like",
    "ones_like",
    "full_like",
    "rand_like",
    "randn_like",
    // Global tensors take placements and SBPs, which the REPL has no literals for.
    "is_global",
    "local_components",
    "placement",
    "sbp",
    "to_global",
    "to_local",
];

#[test]
fn the_table_matches_the_tensor_api() {
    let api = tensor_methods();
    // The scan sees written-out methods and macro-made ones alike.
    for m in ["matmul", "exp", "add", "eq_scalar", "to_vec"] {
        assert!(
            api.contains(m),
            "the scan of tensor/src missed `{m}`: {api:?}"
        );
    }
    let offered: BTreeSet<&str> = rows()
        .filter(|b| !matches!(b.kind, Kind::Function(_)))
        .map(|b| b.name)
        .collect();
    let repl_only: BTreeSet<&str> = REPL_ONLY.iter().map(|(n, _)| *n).collect();
    let not_offered: BTreeSet<&str> = NOT_OFFERED.iter().copied().collect();

    let unknown: Vec<_> = offered
        .iter()
        .filter(|n| !api.contains(**n) && !repl_only.contains(*n))
        .collect();
    assert!(
        unknown.is_empty(),
        "rows naming no Tensor method (rename them, or list them in REPL_ONLY with a reason): \
         {unknown:?}"
    );
    let undecided: Vec<_> = api
        .iter()
        .filter(|m| !offered.contains(m.as_str()) && !not_offered.contains(m.as_str()))
        .collect();
    assert!(
        undecided.is_empty(),
        "Tensor methods the REPL neither offers nor lists in NOT_OFFERED: {undecided:?}"
    );
    // Neither list may go stale.
    let stale: Vec<_> = repl_only
        .iter()
        .filter(|n| !offered.contains(*n) || api.contains(**n))
        .chain(
            not_offered
                .iter()
                .filter(|n| offered.contains(*n) || !api.contains(**n)),
        )
        .collect();
    assert!(
        stale.is_empty(),
        "stale entries of REPL_ONLY or NOT_OFFERED: {stale:?}"
    );
}

#[test]
fn help_lists_every_row_once() {
    let help = super::help();
    let items: Vec<&str> = help.lines().flat_map(|l| l.split("  ")).collect();
    for b in rows() {
        let n = items.iter().filter(|i| i.trim() == b.help).count();
        assert_eq!(n, 1, "{}", b.help);
    }
    assert!(help.lines().all(|l| l.len() <= 96), "{help}");
}

/// The public methods of `Tensor`, from the tensor crate's sources.
fn tensor_methods() -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tensor/src"),
        &mut files,
    );
    // Without comment lines: doc examples call methods too.
    let code: Vec<String> = files
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            let lines = text.lines().filter(|l| !l.trim_start().starts_with("//"));
            lines.collect::<Vec<_>>().join("\n")
        })
        .collect();
    let mut names = BTreeSet::new();
    for c in &code {
        written_methods(c, &mut names);
    }
    let macros: Vec<String> = code.iter().flat_map(|c| method_macros(c)).collect();
    for c in &code {
        for m in &macros {
            macro_methods(c, m, &mut names);
        }
    }
    names
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `pub fn NAME(&self …` (or `self`, `&mut self`) under an `impl Tensor {` line.
fn written_methods(code: &str, out: &mut BTreeSet<String>) {
    let lines: Vec<&str> = code.lines().map(str::trim_start).collect();
    let mut in_tensor = false;
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with("impl ") || line.starts_with("impl<") {
            in_tensor = *line == "impl Tensor {";
        }
        let Some(rest) = ["pub fn ", "pub const fn ", "pub unsafe fn "]
            .iter()
            .find_map(|p| line.strip_prefix(p))
        else {
            continue;
        };
        let name: String = rest.chars().take_while(|&c| is_ident(c)).collect();
        if !in_tensor || name.is_empty() {
            continue;
        }
        // Past the generics (a `>` of `->` closes none), the parameters: on this line, or on
        // the next where a long signature is broken.
        let mut depth = 0;
        let mut prev = ' ';
        let open = rest[name.len()..].char_indices().find_map(|(j, c)| {
            match c {
                '<' => depth += 1,
                '>' if prev != '-' => depth -= 1,
                '(' if depth == 0 => return Some(name.len() + j),
                _ => {}
            }
            prev = c;
            None
        });
        let Some(open) = open else { continue };
        let mut params = rest[open + 1..].trim();
        if params.is_empty() {
            params = lines.get(i + 1).copied().unwrap_or("");
        }
        let receiver = params.trim_start_matches('&').trim_start_matches("mut ");
        if receiver
            .strip_prefix("self")
            .is_some_and(|r| !r.starts_with(is_ident))
        {
            out.insert(name);
        }
    }
}

/// The macros of `code` that write `pub fn $name(&self …)` methods in an `impl Tensor`.
fn method_macros(code: &str) -> Vec<String> {
    code.split("macro_rules! ")
        .skip(1)
        .filter_map(|def| {
            let name: String = def.chars().take_while(|&c| is_ident(c)).collect();
            let body = def.split("\n}").next().unwrap_or("");
            (body.contains("impl Tensor") && body.contains("pub fn $")).then_some(name)
        })
        .collect()
}

/// The method names in the invocations of `mac` in `code`: each lower-case name followed by
/// `=>` or `,` (`neg => Neg,`; `eq, eq_scalar => Eq, "==";`).
fn macro_methods(code: &str, mac: &str, out: &mut BTreeSet<String>) {
    let call = format!("{mac}!");
    for (at, _) in code.match_indices(&call) {
        if code[..at].ends_with(|c: char| is_ident(c) || c == '$') {
            continue;
        }
        let rest = &code[at + call.len()..];
        let Some(start) = rest.find(['{', '(', '[']) else {
            continue;
        };
        let (open, close) = match &rest[start..start + 1] {
            "{" => ('{', '}'),
            "(" => ('(', ')'),
            _ => ('[', ']'),
        };
        let mut depth = 0;
        let end = rest[start..].char_indices().find_map(|(j, c)| {
            if c == open {
                depth += 1;
            } else if c == close {
                depth -= 1;
                if depth == 0 {
                    return Some(start + j);
                }
            }
            None
        });
        let body = &rest[start + 1..end.unwrap_or(rest.len())];
        for line in body.lines().filter(|l| !l.trim_start().starts_with('#')) {
            let mut rest = line;
            while let Some(s) = rest.find(|c: char| c.is_ascii_lowercase() || c == '_') {
                let word: String = rest[s..].chars().take_while(|&c| is_ident(c)).collect();
                let after = rest[s + word.len()..].trim_start();
                let starts_word = s == 0 || !rest[..s].ends_with(is_ident);
                if starts_word && (after.starts_with("=>") || after.starts_with(',')) {
                    out.insert(word.clone());
                }
                rest = &rest[s + word.len()..];
            }
        }
    }
}
