//! Every relative link in README.md and docs/ resolves to a file inside the
//! repository, and no document sends a user to material outside it (issue
//! #20 item 6: the docs cited development notes users do not have).
#![allow(missing_docs)]

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            markdown_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
}

/// The targets of `[text](target)` links in `text`.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(end) = rest.find(')') {
            out.push(rest[..end].to_owned());
            rest = &rest[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_resolves_inside_the_repository() {
    let root = repo();
    let mut files = vec![root.join("README.md")];
    markdown_files(&root.join("docs"), &mut files);
    assert!(files.len() > 10, "{files:?}");
    let mut broken = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        if text.contains("../shared") || text.contains("shared material") {
            broken.push(format!(
                "{}: cites material outside the repository",
                f.display()
            ));
        }
        for target in links(&text) {
            if target.starts_with("http")
                || target.starts_with('#')
                || target.starts_with("mailto:")
            {
                continue;
            }
            let path = target.split('#').next().unwrap();
            let resolved = f.parent().unwrap().join(path);
            match resolved.canonicalize() {
                Ok(p) if p.starts_with(&root) => {}
                Ok(p) => broken.push(format!(
                    "{}: {target} leaves the repository ({})",
                    f.display(),
                    p.display()
                )),
                Err(_) => broken.push(format!("{}: {target} does not exist", f.display())),
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_link_scanner_finds_links() {
    assert_eq!(links("see [a](x.md) and [b](y.md#z)."), ["x.md", "y.md#z"]);
}

// Goal: no user-facing text points at the placeholder repository URL (the
// install lines and the CI snippet of the user guide did: they could not
// work). Method: README.md, docs/ and every Cargo.toml of the workspace.
#[test]
fn no_placeholder_repository_url() {
    let root = repo();
    let mut files = vec![root.join("README.md"), root.join("Cargo.toml")];
    markdown_files(&root.join("docs"), &mut files);
    for member in std::fs::read_dir(&root).unwrap() {
        let manifest = member.unwrap().path().join("Cargo.toml");
        if manifest.is_file() {
            files.push(manifest);
        }
    }
    let bad: Vec<_> = files
        .iter()
        .filter(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .contains("example.invalid")
        })
        .collect();
    assert!(bad.is_empty(), "placeholder URL in {bad:?}");
}
