//! The shim's sources keep the shape of a provider: the C entry points on
//! top, the provider's logic below them, the transport at the bottom,
//! imports pointing only down or sideways, no import circle, and no
//! hand-written file longer than about 800 lines.
//!
//! Method: read every `.rs` file under `shim/src`, drop comments, collect
//! every `crate::…`, `$crate::…`, `super::…` and `self::…` path (with
//! `{…}` groups), and in a file with modules of its own every path that
//! starts with one of their names (`event::f` in `rdmacm/mod.rs`); resolve
//! each to the file it names and build the graph of files: every file is
//! a node, named by its module path (`provider::rsocket::cm`), and a child
//! importing its parent (`super::helper` from `rdmacm/ep.rs` into
//! `rdmacm/mod.rs`) is an edge like any other. Only a test's own files
//! (a module declared under `#[cfg(test)]`, as `fabric/server/tests.rs`)
//! may import the module they test. Then: every module is in [`LAYERS`]
//! (the provider in three tiers: registry, verb families, top); no edge
//! runs from a lower layer to a higher one; the graph has no cycle (a
//! failure names one, with the file and line of each import); no module
//! glob-imports a module that has modules inside it (`use super::*` from
//! `provider/x.rs` or `provider/rdmacm/ep.rs`), which would let it name
//! its siblings unseen; and no file is over [`MAX_LINES`] unless it is
//! generated.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers, top first. A module belongs to the entry naming the
/// longest leading part of its path (`provider::rsocket::io` is in
/// `provider::rsocket`'s layer, `provider::qp` in `provider`'s). A module may
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

/// The longest a hand-written source file may be.
const MAX_LINES: usize = 800;

/// Files allowed over [`MAX_LINES`].
const LONG_FILES: &[&str] = &[
    // Generated: bindgen's C layouts, gen-stubs.py's stubs, gen-rpc.py's
    // fabric protocol (the message and trait, the trait's implementations,
    // the fabric's dispatch).
    "sys.rs",
    "abi/stubs.rs",
    "fabric/rpc.rs",
    "fabric/transport.rs",
    "fabric/dispatch.rs",
];

/// Files that must exist for [`LONG_FILES`] to mean what it says.
const GENERATED: &[&str] = &[
    "sys.rs",
    "abi/stubs.rs",
    "fabric/rpc.rs",
    "fabric/transport.rs",
    "fabric/dispatch.rs",
];

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

/// Parses the path after `crate::`, `super::` or `self::` (or a child
/// module's name) at `s`: each full path it names, with `{…}` groups
/// expanded (`a::{b, c::d}` → `a::b`, `a::c::d`), a `super` segment
/// naming the parent and a `self` segment naming the module it is in.
fn paths_at(s: &[u8], mut i: usize, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let mut cur: Vec<String> = prefix.to_vec();
    loop {
        let start = i;
        while i < s.len() && (s[i].is_ascii_alphanumeric() || s[i] == b'_' || s[i] == b'*') {
            i += 1;
        }
        if i > start {
            match &s[start..i] {
                b"super" => {
                    cur.pop();
                }
                b"self" => {}
                seg => cur.push(String::from_utf8_lossy(seg).into_owned()),
            }
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
                    // `as` renames: skip to the next item.
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

/// One import: the module it names and where.
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

/// The modules `sources` declare under `#[cfg(test)]` (`mod tests;`
/// in `fabric/server.rs` → `fabric::server::tests`), files of their own.
fn test_modules(sources: &[Source]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for s in sources {
        let text = strip(&s.text);
        let mut search = 0;
        while let Some(off) = text[search..].find("#[cfg(test)]") {
            search += off + "#[cfg(test)]".len();
            let rest = text[search..].trim_start();
            let rest = rest
                .strip_prefix("pub(crate)")
                .or_else(|| rest.strip_prefix("pub"))
                .unwrap_or(rest)
                .trim_start();
            let Some(rest) = rest.strip_prefix("mod ") else {
                continue;
            };
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let after = rest.trim_start()[name.len()..].trim_start();
            if !name.is_empty() && after.starts_with(';') {
                let mut m = module_of(&s.path);
                m.push(name);
                out.push(m);
            }
        }
    }
    out
}

/// Every place in `text` a path starts that may name another module of
/// the crate, with the module the path is relative to: `crate::…`,
/// `super::…` and `self::…`, and, at a file's top level, a child module's
/// own name (`event::f()` or `use event::*;` in `rdmacm/mod.rs`).
///
/// Each site is (where it is, the module it is relative to, where its
/// path's first segment after that starts).
fn path_sites(
    text: &str,
    module: &[String],
    children: &[String],
) -> Vec<(usize, Vec<String>, usize)> {
    let bytes = text.as_bytes();
    let inline = inline_mods(text);
    let depth = |at: usize| inline.iter().filter(|(a, b)| *a < at && at < *b).count();
    let mut out = Vec::new();
    let words = ["crate", "super", "self"]
        .into_iter()
        .map(str::to_owned)
        .chain(children.iter().cloned());
    for word in words {
        let kw = format!("{word}::");
        let mut search = 0;
        while let Some(off) = text[search..].find(&kw) {
            let at = search + off;
            search = at + kw.len();
            let before = at.checked_sub(1).map(|b| bytes[b]);
            if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':') {
                continue;
            }
            // Inside an inline module (`mod tests`) `super::` names the
            // file's own module; a child's bare name names nothing of ours.
            let site = match (word.as_str(), depth(at)) {
                ("crate", _) => (Vec::new(), at + kw.len()),
                ("super", 0) => (module[..module.len() - 1].to_vec(), at + kw.len()),
                ("super", 1) | ("self", 0) => (module.to_vec(), at + kw.len()),
                ("super" | "self", _) => continue,
                (_, 0) => (module.to_vec(), at),
                _ => continue,
            };
            out.push((at, site.0, site.1));
        }
    }
    out
}

/// The import graph of `sources` (every file is a node named by its
/// module path: node → (node it imports → first site)) and the glob
/// imports of a module that has modules inside it, which would let the
/// importer name them unseen.
fn graph(sources: &[Source]) -> (BTreeMap<String, BTreeMap<String, Edge>>, Vec<String>) {
    let mut globs = Vec::new();
    let mut known: BTreeSet<Vec<String>> = BTreeSet::new();
    for s in sources {
        let m = module_of(&s.path);
        for i in 1..=m.len() {
            known.insert(m[..i].to_vec());
        }
    }
    let has_children = |m: &[String]| known.iter().any(|k| k.len() > m.len() && k.starts_with(m));
    let tests = test_modules(sources);
    let mut g: BTreeMap<String, BTreeMap<String, Edge>> = BTreeMap::new();
    for s in sources {
        let module = module_of(&s.path);
        if module.is_empty() {
            continue;
        }
        let from = module.join("::");
        g.entry(from.clone()).or_default();
        // A test's own files may use the module they test.
        let is_test = tests.iter().any(|t| module.starts_with(t));
        let children: Vec<String> = known
            .iter()
            .filter(|k| k.len() == module.len() + 1 && k.starts_with(&module))
            .map(|k| k[module.len()].clone())
            .collect();
        let text = strip(&s.text);
        let bytes = text.as_bytes();
        let inline = inline_mods(&text);
        for (at, base, start) in path_sites(&text, &module, &children) {
            let mut paths = Vec::new();
            paths_at(bytes, start, &base, &mut paths);
            let line = text[..at].matches('\n').count() + 1;
            let in_inline = inline.iter().any(|(a, b)| *a < at && at < *b);
            for p in paths {
                if p.last().is_some_and(|l| l == "*") {
                    let of = &p[..p.len() - 1];
                    if !is_test && !in_inline && has_children(of) {
                        globs.push(format!(
                            "{}:{line} imports every module of `{}` with a glob",
                            s.path,
                            if of.is_empty() {
                                "crate".to_owned()
                            } else {
                                of.join("::")
                            }
                        ));
                        continue;
                    }
                }
                let Some(target) = (1..=p.len())
                    .rev()
                    .map(|n| p[..n].to_vec())
                    .find(|m| known.contains(m))
                else {
                    continue;
                };
                if target == module || (is_test && module.starts_with(&target)) {
                    continue;
                }
                let to = target.join("::");
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
/// entry naming the longest leading part of its path.
fn layer_of(node: &str) -> Option<usize> {
    let parts: Vec<&str> = node.split("::").collect();
    (1..=parts.len()).rev().find_map(|n| {
        let name = parts[..n].join("::");
        LAYERS
            .iter()
            .position(|(_, names)| names.contains(&name.as_str()))
    })
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

#[test]
fn checker_sees_inside_directories() {
    // Goal: a cycle between two files of one directory, or between a
    // directory's mod.rs and a file inside it, fails with each import's
    // file and line; a test's own file may use what it tests. Method:
    // small trees for each case.
    let siblings = tree(&[
        ("provider/mod.rs", "mod rsocket;"),
        ("provider/rsocket/mod.rs", "mod cm;\nmod table;"),
        (
            "provider/rsocket/cm.rs",
            "use super::table::{Table, with_table};\n",
        ),
        (
            "provider/rsocket/table.rs",
            "use std::io;\n\nfn revents() { super::cm::revents() }\n",
        ),
    ]);
    let p = problems(&siblings);
    assert_eq!(p.len(), 2, "{p:?}");
    assert_eq!(
        p[0],
        "import cycle: provider::rsocket::cm -> provider::rsocket::table \
         (provider/rsocket/cm.rs:1), provider::rsocket::table -> \
         provider::rsocket::cm (provider/rsocket/table.rs:3)"
    );

    // `mod.rs` naming its room by its bare name, the room importing
    // `mod.rs`'s helper.
    let parent = tree(&[
        (
            "provider/rdmacm/mod.rs",
            "mod event;\npub(super) fn ret() {}\nfn f() { event::c_event() }\n",
        ),
        ("provider/rdmacm/event.rs", "use super::ret;\n"),
    ]);
    let p = problems(&parent);
    assert!(
        p.first().is_some_and(|l| l
            .contains("provider::rdmacm -> provider::rdmacm::event (provider/rdmacm/mod.rs:3)")
            && l.contains(
                "provider::rdmacm::event -> provider::rdmacm (provider/rdmacm/event.rs:1)"
            )),
        "{p:?}"
    );

    // The same room importing every name of `mod.rs` with a glob.
    let glob = tree(&[
        ("provider/rdmacm/mod.rs", "mod event;\nmod qp;\n"),
        ("provider/rdmacm/event.rs", "use super::*;\n"),
        ("provider/rdmacm/qp.rs", ""),
    ]);
    assert_eq!(
        problems(&glob),
        vec!["provider/rdmacm/event.rs:1 imports every module of `provider::rdmacm` with a glob"]
    );

    // `super::super::` climbs two levels; a path through `self::` names
    // the file's own module's children.
    let climb = tree(&[
        ("provider/state.rs", "use crate::provider::rsocket::cm;\n"),
        ("provider/rsocket/mod.rs", "use self::cm::X;\n"),
        ("provider/rsocket/cm.rs", "use super::super::state::Shim;\n"),
    ]);
    let p = problems(&climb);
    assert!(
        p.iter().any(|l| l.contains(
            "`provider::state` (provider registry) imports `provider::rsocket::cm` (provider top)"
        )) && p
            .iter()
            .any(|l| l.starts_with("import cycle: provider::rsocket::cm -> provider::state")),
        "{p:?}"
    );

    // A test's own file uses the module it tests, glob and all; the
    // module declares it under `#[cfg(test)]`.
    let tests = tree(&[
        (
            "fabric/server.rs",
            "use super::rpc::Call;\n#[cfg(test)]\nmod tests;\n",
        ),
        (
            "fabric/server/tests.rs",
            "use super::*;\nfn t() { super::serve() }\n",
        ),
        ("fabric/rpc.rs", ""),
    ]);
    assert_eq!(problems(&tests), Vec::<String>::new());

    // The same file, not declared as a test, is a cycle.
    let not_tests = tree(&[
        ("fabric/server.rs", "mod tests;\nfn f() { tests::g() }\n"),
        ("fabric/server/tests.rs", "fn g() { super::serve() }\n"),
    ]);
    let p = problems(&not_tests);
    assert!(
        p.iter().any(|l| l.starts_with(
            "import cycle: fabric::server -> fabric::server::tests (fabric/server.rs:2)"
        )),
        "{p:?}"
    );
}
