//! The crates' layers: no import circle between the files of `vm/src`, `ops/src` and
//! `tensor/src`, nor between their top-level modules (a folder with all it holds counts as one),
//! so that each module can be read knowing only those below it (the map is in `vm/src/lib.rs`
//! and the book's architecture chapter). A reference is a `crate::`, `super::` or `self::` path
//! (in a `use` or in code) resolved to the longest module it names; a child naming its parent
//! (`super::Slot` in `plan/actors.rs`) is ordinary Rust and not counted, nor is test code (a
//! file named `tests.rs` or `*_tests.rs`, and an inline `#[cfg(test)] mod`, which ends its
//! file). A text reading, not the compiler's resolution: it errs towards seeing an edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path inside its crate: `["engine", "promotion"]` for `engine/promotion/mod.rs`.
type Module = Vec<String>;

/// The crate's modules (every `.rs` file under `src`, binaries aside) and their text.
fn modules(src: &Path) -> BTreeMap<Module, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source folder") {
            let p: PathBuf = entry.expect("an entry").path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = p.strip_prefix(src).expect("under src").with_extension("");
            let mut m: Module = rel
                .iter()
                .map(|c| c.to_string_lossy().into_owned())
                .collect();
            let test_file = m
                .last()
                .is_some_and(|c| c == "tests" || c.ends_with("_tests"));
            if m.first().is_some_and(|c| c == "bin") || test_file {
                continue;
            }
            if m.last()
                .is_some_and(|c| c == "mod" || c == "lib" || c == "main")
            {
                m.pop();
            }
            let text = std::fs::read_to_string(&p).expect("a source file");
            // The file's own code: an inline test module ends it.
            let own = match text.find("#[cfg(test)]\nmod ") {
                Some(k) => text[..k].to_string(),
                None => text,
            };
            out.insert(m, own);
        }
    }
    out
}

/// `text` without its comments (line and block) and string literals' contents.
fn code_only(text: &str) -> String {
    let (mut out, b) = (String::with_capacity(text.len()), text.as_bytes());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            i += 2;
            while i < b.len() && !b[i..].starts_with(b"*/") {
                i += 1;
            }
            i += 2;
        } else if b[i] == b'"' && (i == 0 || b[i - 1] != b'\'') {
            out.push('"');
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            out.push('"');
            i += 1;
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// The paths a `use` tree names, each as its segments: `a::{b, c::{d, e}}` gives `a::b`,
/// `a::c::d`, `a::c::e`.
fn use_paths(tree: &str) -> Vec<Vec<String>> {
    fn walk(t: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let t = t.trim();
        if let Some(open) = t.find('{') {
            let head: Vec<String> = t[..open]
                .split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            let inner = &t[open + 1..t.rfind('}').unwrap_or(t.len())];
            let mut p = prefix.to_vec();
            p.extend(head);
            let (mut depth, mut start) = (0, 0);
            for (k, ch) in inner.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        walk(&inner[start..k], &p, out);
                        start = k + 1;
                    }
                    _ => {}
                }
            }
            walk(&inner[start..], &p, out);
        } else {
            let item = t.split(" as ").next().unwrap_or("").trim();
            if item.is_empty() {
                return;
            }
            let mut p = prefix.to_vec();
            p.extend(item.split("::").map(|s| s.trim().to_string()));
            out.push(p);
        }
    }
    let mut out = Vec::new();
    walk(tree, &[], &mut out);
    out
}

/// Every `crate::` / `super::` / `self::` path of module `here`'s code, resolved to absolute
/// segments.
fn references(here: &Module, text: &str) -> Vec<Vec<String>> {
    let code = code_only(text);
    let mut paths = Vec::new();
    // `use` statements, groups included.
    for stmt in code.split(';') {
        let s = stmt.trim_start();
        let s = s.strip_prefix("pub ").unwrap_or(s);
        let s = s.strip_prefix("pub(crate) ").unwrap_or(s);
        let s = s.strip_prefix("pub(super) ").unwrap_or(s);
        if let Some(tree) = s.strip_prefix("use ") {
            paths.extend(use_paths(tree));
        }
    }
    // Qualified paths anywhere in the code.
    let b = code.as_bytes();
    for head in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(k) = code[from..].find(head) {
            let at = from + k;
            from = at + head.len();
            if at > 0
                && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_' || b[at - 1] == b':')
            {
                continue; // a path inside another, or a `use` group's member seen above
            }
            let end = code[at..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .map_or(code.len(), |e| at + e);
            paths.push(
                code[at..end]
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect(),
            );
        }
    }
    paths
        .into_iter()
        .filter_map(|p| {
            let mut base: Module = match p.first().map(String::as_str) {
                Some("crate") => Vec::new(),
                Some("self") => here.clone(),
                Some("super") => here[..here.len().saturating_sub(1)].to_vec(),
                _ => return None,
            };
            let mut rest = &p[1..];
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
            base.extend(rest.iter().cloned());
            Some(base)
        })
        .collect()
}

/// The module-to-module edges of a crate: each reference to the longest module it names,
/// leaving out self-references, references to the crate root and a child's to its ancestors.
fn edges(mods: &BTreeMap<Module, String>) -> BTreeSet<(Module, Module)> {
    let mut out = BTreeSet::new();
    for (here, text) in mods {
        for r in references(here, text) {
            let Some(target) = (1..=r.len())
                .rev()
                .map(|n| r[..n].to_vec())
                .find(|m| mods.contains_key(m))
            else {
                continue;
            };
            let ancestor = target.len() < here.len() && here.starts_with(&target);
            if target != *here && !target.is_empty() && !ancestor {
                out.insert((here.clone(), target));
            }
        }
    }
    out
}

/// The strongly connected sets of two or more nodes (Tarjan's algorithm), each sorted.
fn circles<N: Ord + Clone>(edges: &BTreeSet<(N, N)>) -> Vec<Vec<N>> {
    let nodes: BTreeSet<N> = edges
        .iter()
        .flat_map(|(a, b)| [a.clone(), b.clone()])
        .collect();
    let nodes: Vec<N> = nodes.into_iter().collect();
    let at = |n: &N| nodes.binary_search(n).expect("a node");
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (a, b) in edges {
        next[at(a)].push(at(b));
    }
    struct T {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        count: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(v: usize, next: &[Vec<usize>], t: &mut T) {
        t.index[v] = Some(t.count);
        t.low[v] = t.count;
        t.count += 1;
        t.stack.push(v);
        t.on[v] = true;
        for &w in &next[v] {
            match t.index[w] {
                None => {
                    visit(w, next, t);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(iw) if t.on[w] => t.low[v] = t.low[v].min(iw),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.index[v] {
            let mut set = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on[w] = false;
                set.push(w);
                if w == v {
                    break;
                }
            }
            if set.len() > 1 {
                t.out.push(set);
            }
        }
    }
    let n = nodes.len();
    let mut t = T {
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        count: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            visit(v, &next, &mut t);
        }
    }
    let mut out: Vec<Vec<N>> = t
        .out
        .into_iter()
        .map(|s| {
            let mut s: Vec<N> = s.into_iter().map(|k| nodes[k].clone()).collect();
            s.sort();
            s
        })
        .collect();
    out.sort();
    out
}

/// The circles of the crate at `src`, each a line naming its files (or, between top-level
/// modules, its folders and files).
fn crate_circles(src: &Path) -> Vec<String> {
    let mods = modules(src);
    let name = |m: &Module| -> String {
        let dir = mods.keys().any(|k| k.len() > m.len() && k.starts_with(m));
        if dir {
            format!("{}/", m.join("/"))
        } else {
            format!("{}.rs", m.join("/"))
        }
    };
    let e = edges(&mods);
    let mut out: Vec<String> = circles(&e)
        .into_iter()
        .map(|c| {
            format!(
                "between files: {}",
                c.iter().map(name).collect::<Vec<_>>().join(", ")
            )
        })
        .collect();
    let is_dir = |m: &Module| mods.keys().any(|k| k.len() > m.len() && k.starts_with(m));
    // Top-level modules: a folder and everything in it is one.
    let top: BTreeSet<(Module, Module)> = e
        .iter()
        .map(|(a, b)| (a[..1].to_vec(), b[..1].to_vec()))
        .filter(|(a, b)| a != b)
        .collect();
    // A circle of plain files is reported above already.
    out.extend(
        circles(&top)
            .into_iter()
            .filter(|c| c.iter().any(is_dir))
            .map(|c| {
                format!(
                    "between top-level modules: {}",
                    c.iter().map(name).collect::<Vec<_>>().join(", ")
                )
            }),
    );
    out
}

#[test]
fn the_engine_op_and_tensor_crates_have_no_import_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for krate in ["vm/src", "ops/src", "tensor/src"] {
        for c in crate_circles(&root.join(krate)) {
            found.push(format!("{krate}: {c}"));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

/// The check catches a circle between two files, one through a `use` group, and one between
/// folders whose files import each other only across them; it names the files and folders.
#[test]
fn a_circle_is_caught_and_named() {
    let dir = std::env::temp_dir().join(format!("eddy-import-layers-{}", std::process::id()));
    let write = |path: &str, text: &str| {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write(
        "lib.rs",
        "mod a; mod b; mod c; mod d; mod e; mod up; mod down;",
    );
    write("a.rs", "use crate::b::B;\npub struct A;");
    write(
        "b.rs",
        "use crate::{c::C, up::U};\npub struct B;\n// crate::a::A in a comment is no edge",
    );
    write("c.rs", "pub struct C(crate::a::A);");
    // Test code may name what it likes.
    write(
        "d.rs",
        "pub struct D;\n#[cfg(test)]\nmod tests { use crate::e::E; }",
    );
    write("e.rs", "pub struct E(crate::d::D);");
    write("up/mod.rs", "mod x; pub struct U;");
    write("up/x.rs", "use super::U; fn f(_: crate::down::D) {}");
    write("down/mod.rs", "mod y; pub struct D;");
    write("down/y.rs", "fn g(_: crate::up::x::X) {}");
    let found = crate_circles(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        found,
        [
            "between files: a.rs, b.rs, c.rs",
            "between top-level modules: down/, up/",
        ],
    );
}
