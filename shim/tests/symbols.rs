//! Every function that Debian's ibverbs-utils, perftest and python3-pyverbs
//! import from the four libraries (`data/symbols.tsv`, read off their ELF
//! files with `objdump -T`) resolves in the drop-in library under the
//! symbol version node the importer asks for, as the dynamic linker looks
//! it up (issue #14: "every mlx5dv and rdmacm symbol the three Debian
//! packages import resolves").

use std::ffi::CString;

mod common;

/// The rows of `data/symbols.tsv`: (library, version node, function).
fn imports() -> Vec<(String, String, String)> {
    let text = include_str!("../data/symbols.tsv");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert!(f.len() >= 3, "malformed row in symbols.tsv: {l:?}");
            (f[0].to_string(), f[1].to_string(), f[2].to_string())
        })
        .collect()
}

#[test]
fn every_import_of_the_debian_consumers_resolves_with_its_version_node() {
    let rows = imports();
    // The file's own header says how many functions it lists; a table that
    // lost rows would make this test weaker without anyone noticing.
    assert!(
        rows.len() >= 188,
        "symbols.tsv lists {} functions",
        rows.len()
    );
    for lib in ["ibverbs", "mlx5", "rdmacm", "efa"] {
        assert!(rows.iter().any(|r| r.0 == lib), "no {lib} imports listed");
    }
    let path = CString::new(common::shim().into_os_string().into_encoded_bytes()).unwrap();
    // SAFETY: dlopen of the library this build made; RTLD_NOW resolves its
    // own dependencies at once, so a broken library fails here, not later.
    let lib = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!lib.is_null(), "dlopen of the drop-in library failed");
    let mut missing = Vec::new();
    for (library, node, func) in &rows {
        let name = CString::new(func.as_str()).unwrap();
        let version = CString::new(node.as_str()).unwrap();
        // SAFETY: a live dlopen handle and two NUL-terminated strings.
        let p = unsafe { libc::dlvsym(lib, name.as_ptr(), version.as_ptr()) };
        if p.is_null() {
            missing.push(format!("lib{library}: {func}@{node}"));
        }
    }
    assert!(
        missing.is_empty(),
        "not exported with the version node the consumers import: {missing:#?}"
    );
    // And a name that is not in any node must not resolve: the lookup above
    // is a real test of the version script, not of dlvsym's leniency.
    let bogus = CString::new("ibv_alloc_pd").unwrap();
    let node = CString::new("IBVERBS_9.99").unwrap();
    // SAFETY: as above.
    let p = unsafe { libc::dlvsym(lib, bogus.as_ptr(), node.as_ptr()) };
    assert!(
        p.is_null(),
        "dlvsym resolved a version node that does not exist"
    );
}
