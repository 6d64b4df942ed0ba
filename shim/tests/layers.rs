//! The shim's sources keep the shape of a provider: the C entry points on
//! top, the provider's logic below them, the transport at the bottom,
//! imports pointing only down or sideways, no import circle, and no
//! hand-written file longer than about 800 lines.
//!
//! Method: read every `.rs` file under `shim/src`, drop comments, collect
//! every `crate::…`, `$crate::…` and `super::…` path (with `{…}` groups),
//! resolve each to the module it names and build the graph of modules
//! (top-level modules, and the modules one level down inside the layer
//! directories `abi/` and `provider/`). Then: every module is in
//! [`LAYERS`] (the provider in three tiers: registry, verb families, top);
//! no edge runs from a lower layer to a higher one; the graph
//! has no cycle (a failure names one, with the line of each import); no
//! module glob-imports a layer's modules (`use super::*` from
//! `provider/x.rs`), which would let it name its siblings unseen; and no
//! file is over [`MAX_LINES`] unless it is generated.
//!
//! The modules inside `provider/rdmacm/` and `provider/rsocket/` count as
//! one node each (their rooms share private helpers through `super::`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers, top first. A module belongs to the first entry one of
/// whose names is the module or its first path segment. A module may
/// import from its own layer (without a cycle) or from any layer below.
const LAYERS: &[(&str, &[&str])] = &[
    // A C client that loads the built library with dlopen (benchmarks);
    // not part of the library's own layers.
    ("driver", &["driver"]),
    // The C ABI boundary: entry points with no logic of their own.
    ("abi", &["abi"]),
    // The provider's top: the context and its op table (it names every
    // family's ops), libmlx5's and librdmacm's entry points, rsockets.
    (
        "provider top",
        &[
            "provider::context",
            "provider::mlx5dv",
            "provider::rdmacm",
            "provider::rsocket",
        ],
    ),
    // The verb families: objects, queues and post-time checks, events.
    // A new provider module lands here unless placed elsewhere.
    ("provider families", &["provider"]),
    // The process's registry of the objects handed to C, and the plain
    // records and fds it keeps.
    (
        "provider registry",
        &["provider::state", "provider::records", "provider::fds"],
    ),
    // The transport: the in-process world or the shared fabric, the
    // configuration, the application's memory lent to either.
    ("transport", &["fabric", "config", "appmem"]),
    // Primitives every C-called function uses: the generated layouts, the
    // panic and errno guard, the symbol-export macros.
    ("primitives", &["sys", "guard", "export"]),
];

/// Directories whose child modules are nodes of their own.
const LAYER_DIRS: &[&str] = &["abi", "provider"];

/// The longest a hand-written source file may be.
const MAX_LINES: usize = 800;

/// Files allowed over [`MAX_LINES`].
const LONG_FILES: &[&str] = &[
    // Generated: bindgen's C layouts, gen-stubs.py's stubs, gen-rpc.py's
    // fabric protocol.
    "sys.rs",
    "abi/stubs.rs",
    "fabric/rpc.rs",
];

/// Files that must exist for [`LONG_FILES`] to mean what it says.
const GENERATED: &[&str] = &["sys.rs", "abi/stubs.rs", "fabric/rpc.rs"];

/// One source file: its path under `src/` and its text.
struct Source {
    path: String,
    text: String,
}

/// The module path of a file under `src/` (`provider/rsocket/io.rs` →
/// `provider::rsocket::io`; `lib.rs` → empty).
fn module_of(path: &str) -> Vec<String> {
    let mut parts: Vec<String> = path
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] {
        parts.clear();
    }
    parts
}

/// The graph node a module belongs to.
fn node_of(module: &[String]) -> String {
    let depth = if module.len() > 1 && LAYER_DIRS.contains(&module[0].as_str()) {
        2
    } else {
        1
    };
    module[..depth.min(module.len())].join("::")
}

/// `text` without `//` comments (doc comments included) and without the
/// contents of string literals.
fn strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_str = false;
    while let Some(ch) = chars.next() {
        if in_str {
            match ch {
                '\\' => {
                    chars.next();
                }
                '"' => {
                    in_str = false;
                    out.push('"');
                }
                '\n' => out.push('\n'),
                _ => {}
            }
            continue;
        }
        match ch {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '"' => {
                in_str = true;
                out.push('"');
            }
            // A char literal holding a quote would open a string.
            '\'' if chars.peek() == Some(&'"') => {
                out.push('\'');
                out.push(chars.next().unwrap_or('"'));
            }
            _ => out.push(ch),
        }
    }
    out
}

/// Parses the path after `crate::` (or `super::`) at `s`: each full path
/// it names, with `{…}` groups expanded (`a::{b, c::d}` → `a::b`,
/// `a::c::d`).
fn paths_at(s: &[u8], mut i: usize, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let mut cur: Vec<String> = prefix.to_vec();
    loop {
        let start = i;
        while i < s.len() && (s[i].is_ascii_alphanumeric() || s[i] == b'_' || s[i] == b'*') {
            i += 1;
        }
        if i > start {
            cur.push(String::from_utf8_lossy(&s[start..i]).into_owned());
        }
        if s[i..].starts_with(b"::") {
            i += 2;
            if s.get(i) == Some(&b'{') {
                i += 1;
                loop {
                    while i < s.len() && s[i].is_ascii_whitespace() {
                        i += 1;
                    }
                    if i >= s.len() || s[i] == b'}' {
                        return i + 1;
                    }
                    i = paths_at(s, i, &cur, out);
                    while i < s.len() && (s[i].is_ascii_whitespace() || s[i] == b',') {
                        i += 1;
                    }
                    // `self` inside a group, `as` renames: skip to the next item.
                    while i < s.len() && s[i] != b',' && s[i] != b'}' {
                        i += 1;
                    }
                    if i < s.len() && s[i] == b',' {
                        i += 1;
                    }
                }
            }
            continue;
        }
        out.push(cur);
        return i;
    }
}

/// One import: the module that imports, the module it names, where.
#[derive(Clone, Debug)]
struct Edge {
    to: String,
    at: String,
}

/// The byte ranges of the inline modules (`mod name { … }`) of `text`.
fn inline_mods(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut search = 0;
    while let Some(off) = text[search..].find("mod ") {
        let at = search + off;
        search = at + 4;
        if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_') {
            continue;
        }
        let mut i = at + 4;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if b.get(i) != Some(&b'{') {
            continue;
        }
        let mut depth = 0usize;
        for (j, &c) in b.iter().enumerate().skip(i) {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        out.push((i, j));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// The module graph of `sources`: node → (node it imports → first site),
/// and the glob imports of a layer's (or the crate's) modules, which
/// would hide what a module uses.
fn graph(sources: &[Source]) -> (BTreeMap<String, BTreeMap<String, Edge>>, Vec<String>) {
    let mut globs = Vec::new();
    let mut known: BTreeSet<Vec<String>> = BTreeSet::new();
    for s in sources {
        let m = module_of(&s.path);
        for i in 1..=m.len() {
            known.insert(m[..i].to_vec());
        }
    }
    let mut g: BTreeMap<String, BTreeMap<String, Edge>> = BTreeMap::new();
    for s in sources {
        let module = module_of(&s.path);
        if module.is_empty() {
            continue;
        }
        let from = node_of(&module);
        g.entry(from.clone()).or_default();
        let text = strip(&s.text);
        let bytes = text.as_bytes();
        let inline = inline_mods(&text);
        for kw in ["crate::", "super::"] {
            let mut search = 0;
            while let Some(off) = text[search..].find(kw) {
                let at = search + off;
                search = at + kw.len();
                let before = at.checked_sub(1).map(|b| bytes[b]);
                if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_') {
                    continue;
                }
                // `super::` in an inline module (`mod tests`) names the
                // file's own module, or a module inside the file.
                let depth = inline.iter().filter(|(a, b)| *a < at && at < *b).count();
                let base = match (kw, depth) {
                    ("crate::", _) => Vec::new(),
                    (_, 0) => module[..module.len() - 1].to_vec(),
                    (_, 1) => module.clone(),
                    _ => continue,
                };
                let mut paths = Vec::new();
                paths_at(bytes, at + kw.len(), &base, &mut paths);
                let line = text[..at].matches('\n').count() + 1;
                for p in paths {
                    let glob_of_layer = p.last().is_some_and(|l| l == "*")
                        && (p.len() == 1 || (p.len() == 2 && LAYER_DIRS.contains(&p[0].as_str())));
                    if glob_of_layer {
                        globs.push(format!(
                            "{}:{line} imports every module of `{}` with a glob",
                            s.path,
                            if p.len() == 1 { "crate" } else { p[0].as_str() }
                        ));
                        continue;
                    }
                    let Some(target) = (1..=p.len())
                        .rev()
                        .map(|n| p[..n].to_vec())
                        .find(|m| known.contains(m))
                    else {
                        continue;
                    };
                    // A module naming itself or an ancestor is not an edge.
                    if module.starts_with(&target) {
                        continue;
                    }
                    let to = node_of(&target);
                    if to == from {
                        continue;
                    }
                    g.entry(from.clone())
                        .or_default()
                        .entry(to.clone())
                        .or_insert(Edge {
                            to,
                            at: format!("{}:{line}", s.path),
                        });
                }
            }
        }
    }
    (g, globs)
}

/// A cycle of `g` as its nodes and the import sites, if there is one.
fn find_cycle(g: &BTreeMap<String, BTreeMap<String, Edge>>) -> Option<Vec<(String, Edge)>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    fn visit(
        g: &BTreeMap<String, BTreeMap<String, Edge>>,
        n: &str,
        marks: &mut BTreeMap<String, Mark>,
        stack: &mut Vec<(String, Edge)>,
    ) -> Option<Vec<(String, Edge)>> {
        marks.insert(n.to_owned(), Mark::Open);
        for e in g.get(n).into_iter().flat_map(|m| m.values()) {
            stack.push((n.to_owned(), e.clone()));
            match marks.get(&e.to).copied().unwrap_or(Mark::New) {
                Mark::Open => {
                    let start = stack.iter().position(|(f, _)| *f == e.to).unwrap_or(0);
                    return Some(stack[start..].to_vec());
                }
                Mark::New => {
                    if let Some(c) = visit(g, &e.to, marks, stack) {
                        return Some(c);
                    }
                }
                Mark::Done => {}
            }
            stack.pop();
        }
        marks.insert(n.to_owned(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for n in g.keys() {
        if marks.get(n).copied().unwrap_or(Mark::New) == Mark::New {
            if let Some(c) = visit(g, n, &mut marks, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// Every node that can reach itself.
fn on_cycles(g: &BTreeMap<String, BTreeMap<String, Edge>>) -> Vec<String> {
    g.keys()
        .filter(|n| {
            let mut seen = BTreeSet::new();
            let mut todo: Vec<&String> = g[*n].keys().collect();
            while let Some(m) = todo.pop() {
                if m == *n {
                    return true;
                }
                if seen.insert(m) {
                    todo.extend(g.get(m).into_iter().flat_map(|e| e.keys()));
                }
            }
            false
        })
        .cloned()
        .collect()
}

/// The layer index of a node (0 = top), if the table places it: the
/// entry naming the node itself, else the one naming its first segment.
fn layer_of(node: &str) -> Option<usize> {
    let first = node.split("::").next().unwrap_or(node);
    let named = |name: &str| LAYERS.iter().position(|(_, names)| names.contains(&name));
    named(node).or_else(|| named(first))
}

/// Every problem with `sources`' shape, one line each.
fn problems(sources: &[Source]) -> Vec<String> {
    let (g, mut out) = graph(sources);
    for (from, edges) in &g {
        let Some(lf) = layer_of(from) else {
            out.push(format!("module `{from}` is in no layer of LAYERS"));
            continue;
        };
        for e in edges.values() {
            match layer_of(&e.to) {
                Some(lt) if lt < lf => out.push(format!(
                    "`{from}` ({}) imports `{}` ({}), a higher layer, at {}",
                    LAYERS[lf].0, e.to, LAYERS[lt].0, e.at
                )),
                _ => {}
            }
        }
    }
    if let Some(cycle) = find_cycle(&g) {
        let path: Vec<String> = cycle
            .iter()
            .map(|(f, e)| format!("{f} -> {} ({})", e.to, e.at))
            .collect();
        out.push(format!("import cycle: {}", path.join(", ")));
        out.push(format!("modules on a cycle: {}", on_cycles(&g).join(" ")));
    }
    out
}

/// Reads every `.rs` file under `dir`, paths relative to `root`.
fn read_tree(root: &Path, dir: &Path, out: &mut Vec<Source>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read shim/src")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            read_tree(root, &p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let rel = p.strip_prefix(root).expect("under src").to_string_lossy();
            out.push(Source {
                path: rel.replace('\\', "/"),
                text: std::fs::read_to_string(&p).expect("read a source file"),
            });
        }
    }
}

fn shim_sources() -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    read_tree(&root, &root, &mut all);
    all
}

#[test]
fn modules_import_only_downward_without_cycles() {
    // Goal: shim/src is acyclic and layered. Method: build the module
    // graph of the real sources and list every violation.
    let sources: Vec<Source> = shim_sources()
        .into_iter()
        .filter(|s| !s.path.starts_with("bin/"))
        .collect();
    assert!(sources.len() > 20, "found only {} files", sources.len());
    let p = problems(&sources);
    assert!(p.is_empty(), "shim/src's layers:\n  {}", p.join("\n  "));
}

#[test]
fn no_hand_written_file_is_over_the_limit() {
    // Goal: every hand-written file stays short enough to read. Method:
    // count lines of every file under shim/src, generated ones aside.
    let sources = shim_sources();
    for g in GENERATED {
        assert!(
            sources.iter().any(|s| s.path == *g),
            "generated file {g} not found"
        );
    }
    let long: Vec<String> = sources
        .iter()
        .filter(|s| !LONG_FILES.contains(&s.path.as_str()))
        .filter(|s| s.text.lines().count() > MAX_LINES)
        .map(|s| format!("{} ({} lines)", s.path, s.text.lines().count()))
        .collect();
    assert!(
        long.is_empty(),
        "over {MAX_LINES} lines: {}",
        long.join(", ")
    );
}

/// A synthetic tree for the checker's own tests.
fn tree(files: &[(&str, &str)]) -> Vec<Source> {
    files
        .iter()
        .map(|(p, t)| Source {
            path: (*p).to_owned(),
            text: (*t).to_owned(),
        })
        .collect()
}

#[test]
fn checker_names_a_cycle_and_an_upward_import() {
    // Goal: the checker finds what it is for. Method: small trees with a
    // cycle through a `{…}` group and `super::`, and a provider module
    // importing an abi one; a comment naming a module is no import.
    let layered = tree(&[
        ("provider/mod.rs", "mod a; mod b;"),
        ("provider/a.rs", "use crate::provider::{b::f, state};\n"),
        (
            "provider/b.rs",
            "// crate::provider::a is only named here\nfn f() {}",
        ),
        (
            "provider/state.rs",
            "use crate::sys as c; use crate::guard::catch;",
        ),
        ("abi/mod.rs", "mod x;"),
        ("abi/x.rs", "fn g() { crate::provider::a::h() }"),
        ("sys.rs", ""),
        ("guard.rs", ""),
    ]);
    assert_eq!(problems(&layered), Vec::<String>::new());

    let cycle = tree(&[
        ("provider/mod.rs", "mod a; mod b;"),
        ("provider/a.rs", "use crate::provider::{b::f, state};\n"),
        ("provider/b.rs", "fn f() { super::a::g() }"),
        ("provider/state.rs", ""),
    ]);
    let p = problems(&cycle);
    assert_eq!(p.len(), 2, "{p:?}");
    assert_eq!(p[1], "modules on a cycle: provider::a provider::b");
    assert!(
        p[0].starts_with("import cycle: provider::a -> provider::b (provider/a.rs:1)")
            && p[0].contains("provider::b -> provider::a (provider/b.rs:1)"),
        "{p:?}"
    );

    let upward = tree(&[
        ("provider/a.rs", "fn f() { crate::abi::x::g() }"),
        ("abi/x.rs", ""),
        ("fabric/mod.rs", "use crate::provider::a;"),
    ]);
    let p = problems(&upward);
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(p
        .iter()
        .any(|l| l.contains("`fabric` (transport) imports `provider::a`")));
    assert!(p
        .iter()
        .any(|l| l.contains("`provider::a` (provider families) imports `abi::x`")));

    let registry_up = tree(&[
        ("provider/state.rs", "use crate::provider::qp::QpAlloc;"),
        ("provider/qp.rs", "fn f() { crate::provider::context::g() }"),
        ("provider/context.rs", "use crate::provider::state::Shim;"),
    ]);
    let p = problems(&registry_up);
    assert!(
        p.iter().any(|l| l.contains(
            "`provider::state` (provider registry) imports `provider::qp` (provider families)"
        )) && p.iter().any(|l| l.contains(
            "`provider::qp` (provider families) imports `provider::context` (provider top)"
        )),
        "{p:?}"
    );

    let tests_inside = tree(&[
        (
            "provider/a.rs",
            "fn f() {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
        ),
        ("provider/b.rs", "use super::*;\nfn g() { a::f() }\n"),
    ]);
    assert_eq!(
        problems(&tests_inside),
        vec!["provider/b.rs:1 imports every module of `provider` with a glob"]
    );

    let unknown = tree(&[("newlayer.rs", "use crate::sys;"), ("sys.rs", "")]);
    assert_eq!(
        problems(&unknown),
        vec!["module `newlayer` is in no layer of LAYERS"]
    );
}
