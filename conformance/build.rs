//! Generates one `#[test]` per corpus script (`scripts/**/*.verbs`) so that
//! `cargo test` and nextest list and run each script by name.
//!
//! The output is `$OUT_DIR/corpus_tests.rs`: a `mod corpus` with one nested
//! module per directory and one test function per file, each calling
//! `crate::run_corpus_script` (defined in `tests/scripts.rs`). Scripts whose
//! `#! backends:` header leaves out the simulator are generated `#[ignore]`d
//! with the reason, so they show up as ignored rather than silently passing.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A directory of the corpus: its scripts and its sub-directories.
#[derive(Default)]
struct Dir {
    files: Vec<(String, PathBuf)>,
    dirs: BTreeMap<String, Self>,
}

fn main() {
    let manifest =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let scripts = manifest.join("scripts");
    println!("cargo:rerun-if-changed={}", scripts.display());
    println!("cargo:rerun-if-changed=build.rs");
    let mut root = Dir::default();
    if scripts.is_dir() {
        scan(&scripts, &mut root);
    }
    let mut out = String::from(
        "/// The corpus: one test per script, one module per directory.\nmod corpus {\n",
    );
    emit(&root, &scripts, 1, &mut out);
    out.push_str("}\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("corpus_tests.rs");
    std::fs::write(&dest, out).expect("write corpus_tests.rs");
}

fn scan(dir: &Path, into: &mut Dir) {
    println!("cargo:rerun-if-changed={}", dir.display());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if p.is_dir() {
            scan(&p, into.dirs.entry(name).or_default());
        } else if let Some(stem) = name.strip_suffix(".verbs") {
            into.files.push((stem.to_owned(), p));
        }
    }
}

/// A Rust identifier for a file or directory name, unique within `taken`.
fn ident(name: &str, taken: &mut Vec<String>) -> String {
    let mut id: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if id.is_empty() || id.starts_with(|c: char| c.is_ascii_digit()) {
        id.insert(0, '_');
    }
    const KEYWORDS: &[&str] = &[
        "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum",
        "extern", "false", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod",
        "move", "mut", "pub", "ref", "return", "self", "static", "struct", "super", "trait",
        "true", "type", "unsafe", "use", "where", "while", "abstract", "become", "box", "do",
        "final", "macro", "override", "priv", "try", "typeof", "unsized", "virtual", "yield",
    ];
    if KEYWORDS.contains(&id.as_str()) {
        id.push('_');
    }
    let base = id.clone();
    let mut n = 2;
    while taken.contains(&id) {
        id = format!("{base}_{n}");
        n += 1;
    }
    taken.push(id.clone());
    id
}

/// The backends a script's `#! backends:` header names (empty: all).
fn backends(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(h) = line.strip_prefix("#!") {
            if let Some(v) = h.trim().strip_prefix("backends:") {
                out.extend(v.split_whitespace().map(str::to_owned));
            }
        } else if !line.is_empty() && !line.starts_with('#') {
            break;
        }
    }
    out
}

fn emit(dir: &Dir, base: &Path, depth: usize, out: &mut String) {
    let pad = "    ".repeat(depth);
    let mut taken = Vec::new();
    for (name, sub) in &dir.dirs {
        let id = ident(name, &mut taken);
        let _ = writeln!(out, "{pad}mod {id} {{");
        emit(sub, base, depth + 1, out);
        let _ = writeln!(out, "{pad}}}");
    }
    for (stem, path) in &dir.files {
        let id = ident(stem, &mut taken);
        let rel = path
            .strip_prefix(base)
            .unwrap_or(path)
            .to_string_lossy()
            .replace('\\', "/");
        let b = backends(path);
        if !b.is_empty() && !b.iter().any(|x| x == "sim") {
            let _ = writeln!(
                out,
                "{pad}#[ignore = \"only for backends: {}\"]",
                b.join(" ")
            );
        }
        let _ = writeln!(out, "{pad}#[test]");
        let _ = writeln!(out, "{pad}fn {id}() {{");
        let _ = writeln!(out, "{pad}    crate::run_corpus_script({rel:?});");
        let _ = writeln!(out, "{pad}}}");
    }
}
