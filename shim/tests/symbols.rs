//! The drop-in library exports every public symbol of rdma-core's four
//! libraries at the version node a program binds it at:
//!
//! * every function Debian's ibverbs-utils, perftest and python3-pyverbs
//!   import (the first block of `data/symbols.tsv`, read off their ELF
//!   files with `objdump -T`) resolves under the node the importer asks
//!   for, as the dynamic linker looks it up;
//! * every symbol the installed libibverbs, libmlx5, librdmacm and libefa
//!   define at a public node (`nm -D --with-symbol-versions`), default and
//!   compat versions alike, is exported with the same name, node and kind
//!   of binding, so a program linked with BIND_NOW against any of them
//!   starts, and a newer rdma-core shows what it added.

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

/// One exported symbol as `nm -D --with-symbol-versions` prints it.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct Sym {
    name: String,
    node: String,
    /// `name@@node` (what a program linked today binds) rather than
    /// `name@node` (a compat version only older programs ask for).
    default: bool,
}

impl std::fmt::Display for Sym {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.default { "@@" } else { "@" };
        write!(f, "{}{at}{}", self.name, self.node)
    }
}

/// The versioned symbols `lib` defines (functions and data; not the
/// version nodes themselves), read with binutils' `nm`.
fn defined_symbols(lib: &std::path::Path) -> Vec<Sym> {
    let out = std::process::Command::new("nm")
        .args(["-D", "--defined-only", "--with-symbol-versions"])
        .arg(lib)
        .output()
        .expect("run nm (binutils) to read the dynamic symbol tables");
    assert!(out.status.success(), "nm {}: {:?}", lib.display(), out);
    let text = String::from_utf8(out.stdout).expect("nm prints text");
    let mut syms = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        // `address type name`; type A is a version node's own definition.
        let [_, kind, sym] = f[..] else { continue };
        if kind == "A" {
            continue;
        }
        let (name, node, default) = if let Some((n, v)) = sym.split_once("@@") {
            (n, v, true)
        } else if let Some((n, v)) = sym.split_once('@') {
            (n, v, false)
        } else {
            continue; // unversioned: the shim's own vsim_* names
        };
        syms.push(Sym {
            name: name.to_owned(),
            node: node.to_owned(),
            default,
        });
    }
    syms.sort();
    syms
}

/// Where the distribution keeps rdma-core's libraries: the directory of
/// `libibverbs.so.1`, or `VERBSIM_RDMA_CORE_LIBDIR`.
fn installed_rdma_core() -> Option<std::path::PathBuf> {
    let dirs = match std::env::var_os("VERBSIM_RDMA_CORE_LIBDIR") {
        Some(d) => vec![std::path::PathBuf::from(d)],
        None => ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"]
            .iter()
            .map(std::path::PathBuf::from)
            .collect(),
    };
    dirs.into_iter()
        .find(|d| d.join("libibverbs.so.1").exists() && !is_the_shim(&d.join("libibverbs.so.1")))
}

/// Whether `path` is a drop-in library rather than rdma-core's (a
/// directory laid out by `verbsim exec`).
fn is_the_shim(path: &std::path::Path) -> bool {
    std::fs::canonicalize(path)
        .map(|p| p.to_string_lossy().contains("verbsim_shim"))
        .unwrap_or(false)
}

/// rdma-core's interface to its provider plugins (`IBVERBS_PRIVATE_34`):
/// only the plugins, which the drop-in library never loads, bind it.
fn is_private(node: &str) -> bool {
    node.contains("PRIVATE")
}

#[test]
fn every_public_symbol_of_the_installed_rdma_core_is_exported_at_its_node() {
    // Goal: no program stops in the dynamic loader for want of a symbol
    // rdma-core exports, and a newer rdma-core shows at once what it added.
    // Method: read the installed libibverbs, libmlx5, librdmacm and libefa
    // with nm; every symbol at a public node, default (`@@`) or compat
    // (`@`), must be exported by the drop-in library with the same name,
    // node and kind of binding, must resolve through dlvsym as the loader
    // resolves it, and must be a row of data/symbols.tsv.
    let Some(dir) = installed_rdma_core() else {
        eprintln!(
            "SKIPPED: rdma-core's libraries (libibverbs.so.1, libmlx5.so.1, librdmacm.so.1, \
             libefa.so.1) are not installed, so there is nothing to compare the drop-in \
             library's exports with (apt-get install libibverbs1 librdmacm1 ibverbs-providers, \
             or set VERBSIM_RDMA_CORE_LIBDIR); CI installs them"
        );
        return;
    };
    let shim = common::shim();
    let exported = defined_symbols(&shim);
    let table: Vec<(String, String, String, bool)> = include_str!("../data/symbols.tsv")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[0].into(), f[1].into(), f[2].into(), f[4] != "compat")
        })
        .collect();
    let path = CString::new(shim.into_os_string().into_encoded_bytes()).unwrap();
    // SAFETY: dlopen of the library this build made (see above).
    let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!handle.is_null(), "dlopen of the drop-in library failed");

    let mut missing = Vec::new();
    let mut unbound = Vec::new();
    let mut unlisted = Vec::new();
    let mut summary = Vec::new();
    for lib in ["ibverbs", "mlx5", "rdmacm", "efa"] {
        let file = dir.join(format!("lib{lib}.so.1"));
        assert!(
            file.exists(),
            "{} is missing beside {}: install rdma-core completely (ibverbs-providers)",
            file.display(),
            dir.join("libibverbs.so.1").display()
        );
        let public: Vec<Sym> = defined_symbols(&file)
            .into_iter()
            .filter(|s| !is_private(&s.node))
            .collect();
        assert!(
            !public.is_empty(),
            "{} defines no public symbols",
            file.display()
        );
        for s in &public {
            if exported.binary_search(s).is_err() {
                missing.push(format!("lib{lib}: {s}"));
            }
            let name = CString::new(s.name.as_str()).unwrap();
            let node = CString::new(s.node.as_str()).unwrap();
            // SAFETY: a live dlopen handle and two NUL-terminated strings.
            if unsafe { libc::dlvsym(handle, name.as_ptr(), node.as_ptr()) }.is_null() {
                unbound.push(format!("lib{lib}: {s}"));
            }
            let row = (lib.to_owned(), s.node.clone(), s.name.clone(), s.default);
            if !table.contains(&row) {
                unlisted.push(format!("lib{lib}: {s}"));
            }
        }
        let compat = public.iter().filter(|s| !s.default).count();
        summary.push(format!(
            "lib{lib}: {} public at their default node, {compat} compat",
            public.len() - compat
        ));
    }
    eprintln!("compared with {}: {}", dir.display(), summary.join("; "));
    assert!(
        missing.is_empty(),
        "{} public symbols of the installed rdma-core are not exported by the drop-in \
         library (add them to shim/data/symbols.tsv with their return kind and run \
         shim/gen-stubs.py, or implement them): {missing:#?}",
        missing.len()
    );
    assert!(
        unbound.is_empty(),
        "exported but dlvsym does not bind them: {unbound:#?}"
    );
    assert!(
        unlisted.is_empty(),
        "exported but not documented in shim/data/symbols.tsv: {unlisted:#?}"
    );
}

#[test]
fn every_stub_fails_cleanly_with_eopnotsupp() {
    // Goal: a function the simulator does not model fails the way its
    // family reports an unsupported feature, never crashes: a positive
    // errno (int verbs), -1 (librdmacm, rsockets, ssize_t, off_t), NULL
    // (pointers), 0 (u16, u64), with errno EOPNOTSUPP in each case.
    // Method: call every row of data/symbols.tsv whose `how` is stub or
    // compat through dlvsym (the stubs take no arguments, so calling them
    // with none is their C contract) and check the value by its kind.
    let path = CString::new(common::shim().into_os_string().into_encoded_bytes()).unwrap();
    // SAFETY: dlopen of the library this build made.
    let lib = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!lib.is_null(), "dlopen of the drop-in library failed");
    let mut called = 0;
    for line in include_str!("../data/symbols.tsv").lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        let (node, func, kind, how) = (f[1], f[2], f[3], f[4]);
        if how != "stub" && how != "compat" {
            continue;
        }
        let (n, v) = (CString::new(func).unwrap(), CString::new(node).unwrap());
        // SAFETY: a live handle and two NUL-terminated strings.
        let p = unsafe { libc::dlvsym(lib, n.as_ptr(), v.as_ptr()) };
        assert!(!p.is_null(), "{func}@{node} is not exported");
        // SAFETY: errno is this thread's.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: a generated stub takes no arguments and returns the
        // C type of its kind (gen-stubs.py).
        let ok = unsafe {
            match kind {
                "int" => {
                    core::mem::transmute::<*mut libc::c_void, extern "C" fn() -> i32>(p)()
                        == libc::EOPNOTSUPP
                }
                "neg" => {
                    core::mem::transmute::<*mut libc::c_void, extern "C" fn() -> i32>(p)() == -1
                }
                "ssize" | "off" => {
                    core::mem::transmute::<*mut libc::c_void, extern "C" fn() -> i64>(p)() == -1
                }
                "ptr" => core::mem::transmute::<
                    *mut libc::c_void,
                    extern "C" fn() -> *mut libc::c_void,
                >(p)()
                .is_null(),
                "u16" => {
                    core::mem::transmute::<*mut libc::c_void, extern "C" fn() -> u16>(p)() == 0
                }
                "u64" => {
                    core::mem::transmute::<*mut libc::c_void, extern "C" fn() -> u64>(p)() == 0
                }
                "void" => {
                    core::mem::transmute::<*mut libc::c_void, extern "C" fn()>(p)();
                    true
                }
                other => panic!("{func}: unknown return kind {other}"),
            }
        };
        assert!(
            ok,
            "{func}@{node} ({kind}) did not return its failure value"
        );
        // SAFETY: as above.
        let e = unsafe { *libc::__errno_location() };
        assert_eq!(e, libc::EOPNOTSUPP, "{func}@{node}: errno {e}");
        called += 1;
    }
    assert!(called >= 100, "only {called} stubs called");
}
