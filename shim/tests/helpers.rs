//! libibverbs' pure helpers, compared with the real library: Debian's
//! `libibverbs.so.1` is loaded beside the drop-in one (neither needs a
//! device for these) and both are called with the same inputs: every
//! `enum ibv_rate` and its neighbours, every multiple and data rate of the
//! table and values around them, the enum-name functions over and past
//! their ranges, and the kernel-ABI copies on patterned bytes (every
//! output byte compared, including those a copy must leave alone).
//! Skips, saying so, where rdma-core is not installed; CI installs it.

use core::ffi::{c_char, c_int, c_void, CStr};
use std::ffi::CString;

mod common;

/// A library opened with `dlopen`, its symbols looked up by version.
struct Lib(*mut c_void);

impl Lib {
    fn open(path: &std::path::Path) -> Self {
        let p = CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; RTLD_LOCAL keeps the two
        // libraries' symbols apart.
        let h = unsafe { libc::dlopen(p.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!h.is_null(), "dlopen {} failed", path.display());
        Self(h)
    }

    /// The address of `name@node`.
    fn sym(&self, name: &str, node: &str) -> *mut c_void {
        let (n, v) = (CString::new(name).unwrap(), CString::new(node).unwrap());
        // SAFETY: a live handle and two NUL-terminated strings.
        let p = unsafe { libc::dlvsym(self.0, n.as_ptr(), v.as_ptr()) };
        assert!(!p.is_null(), "{name}@{node} is not exported");
        p
    }
}

/// The real libibverbs and the drop-in one, or None (said) without rdma-core.
fn both() -> Option<(Lib, Lib)> {
    let real = std::path::Path::new("/usr/lib/x86_64-linux-gnu/libibverbs.so.1");
    if !real.exists() {
        eprintln!(
            "SKIPPED: rdma-core's libibverbs.so.1 is not installed (libibverbs1); CI installs it"
        );
        return None;
    }
    Some((Lib::open(real), Lib::open(&common::shim())))
}

type IntToInt = unsafe extern "C" fn(c_int) -> c_int;
type IntToStr = unsafe extern "C" fn(c_int) -> *const c_char;

/// Calls `name@node` as `int f(int)` in both libraries over `inputs`.
fn same_ints(
    real: &Lib,
    shim: &Lib,
    name: &str,
    node: &str,
    inputs: impl Iterator<Item = c_int>,
) -> usize {
    // SAFETY: the symbol is the C function `int f(int)` (verbs.h).
    let (r, s): (IntToInt, IntToInt) = unsafe {
        (
            core::mem::transmute::<*mut c_void, IntToInt>(real.sym(name, node)),
            core::mem::transmute::<*mut c_void, IntToInt>(shim.sym(name, node)),
        )
    };
    let mut n = 0;
    for x in inputs {
        // SAFETY: pure functions of an int.
        let (a, b) = unsafe { (r(x), s(x)) };
        assert_eq!(
            a, b,
            "{name}({x}): rdma-core gives {a}, the drop-in library {b}"
        );
        n += 1;
    }
    n
}

#[test]
fn rate_conversions_match_rdma_core() {
    // Goal: the four static-rate conversions agree with rdma-core 44 on
    // every input a program may pass. Method: call both libraries.
    let Some((real, shim)) = both() else { return };
    same_ints(&real, &shim, "ibv_rate_to_mult", "IBVERBS_1.0", -3..64);
    same_ints(&real, &shim, "ibv_rate_to_mbps", "IBVERBS_1.1", -3..64);
    same_ints(&real, &shim, "mult_to_ibv_rate", "IBVERBS_1.0", -3..1000);
    // Every data rate of the table and its neighbours, and round numbers.
    let mbps: Vec<c_int> = (0..64)
        // SAFETY: as above.
        .map(|r| unsafe {
            core::mem::transmute::<*mut c_void, IntToInt>(
                real.sym("ibv_rate_to_mbps", "IBVERBS_1.1"),
            )(r)
        })
        .filter(|&m| m > 0)
        .flat_map(|m| [m - 1, m, m + 1])
        .chain((0..=1_400_000).step_by(2_500))
        .collect();
    assert!(mbps.len() > 500);
    same_ints(
        &real,
        &shim,
        "mbps_to_ibv_rate",
        "IBVERBS_1.1",
        mbps.into_iter(),
    );
    // The shim's values are the table's, not all "unknown".
    // SAFETY: as above.
    let f = unsafe {
        core::mem::transmute::<*mut c_void, IntToInt>(shim.sym("ibv_rate_to_mbps", "IBVERBS_1.1"))
    };
    // SAFETY: a pure function.
    assert_eq!(unsafe { f(16) }, 103_125, "IBV_RATE_100_GBPS");
}

#[test]
fn enum_names_match_rdma_core() {
    // Goal: the strings programs print for node types, port states, async
    // events and completion statuses are rdma-core's, "unknown" outside.
    let Some((real, shim)) = both() else { return };
    for (name, range) in [
        ("ibv_node_type_str", -2..12),
        ("ibv_port_state_str", -2..10),
        ("ibv_event_type_str", -2..30),
        ("ibv_wc_status_str", -2..30),
    ] {
        // SAFETY: `const char *f(enum)` (verbs.h).
        let (r, s): (IntToStr, IntToStr) = unsafe {
            (
                core::mem::transmute::<*mut c_void, IntToStr>(real.sym(name, "IBVERBS_1.1")),
                core::mem::transmute::<*mut c_void, IntToStr>(shim.sym(name, "IBVERBS_1.1")),
            )
        };
        let mut known = 0;
        for x in range {
            // SAFETY: both return static NUL-terminated strings.
            let (a, b) = unsafe { (CStr::from_ptr(r(x)), CStr::from_ptr(s(x))) };
            assert_eq!(a, b, "{name}({x})");
            known += usize::from(a.to_bytes() != b"unknown");
        }
        assert!(known >= 6, "{name}: only {known} known values compared");
    }
}

type Copy2 = unsafe extern "C" fn(*mut c_void, *const c_void);

/// Runs the copy `name@node` of both libraries from the same patterned
/// source into destinations filled with the same other pattern; the
/// destinations must be equal byte for byte.
fn same_copy(real: &Lib, shim: &Lib, name: &str, node: &str, src_len: usize, dst_len: usize) {
    // u32 storage: the structs need 4-byte alignment.
    let mut src = vec![0u32; src_len.div_ceil(4)];
    let mut dst_real = vec![0x5a5a_5a5au32; dst_len.div_ceil(4)];
    let mut dst_shim = dst_real.clone();
    // SAFETY: the storage holds at least src_len bytes.
    let bytes = unsafe { core::slice::from_raw_parts_mut(src.as_mut_ptr().cast::<u8>(), src_len) };
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = (i * 37 + 11) as u8;
    }
    // SAFETY: `void f(dst *, const src *)` (marshall.h) over buffers of
    // the two structs' sizes.
    unsafe {
        let r = core::mem::transmute::<*mut c_void, Copy2>(real.sym(name, node));
        let s = core::mem::transmute::<*mut c_void, Copy2>(shim.sym(name, node));
        r(dst_real.as_mut_ptr().cast(), src.as_ptr().cast());
        s(dst_shim.as_mut_ptr().cast(), src.as_ptr().cast());
    }
    // SAFETY: the storage holds at least dst_len bytes.
    let (a, b) = unsafe {
        (
            core::slice::from_raw_parts(dst_real.as_ptr().cast::<u8>(), dst_len),
            core::slice::from_raw_parts(dst_shim.as_ptr().cast::<u8>(), dst_len),
        )
    };
    assert!(a.iter().any(|&x| x != 0x5a), "{name} copied nothing");
    let diff: Vec<usize> = (0..dst_len).filter(|&i| a[i] != b[i]).collect();
    assert!(
        diff.is_empty(),
        "{name}: bytes {diff:?} differ\nrdma-core {a:?}\nshim      {b:?}"
    );
}

#[test]
fn kernel_abi_copies_match_rdma_core_byte_for_byte() {
    // Goal: the ibv_copy_*_kern conversions put every field where
    // rdma-core puts it, convert widths as it does, and leave alone what
    // it leaves alone. Method: patterned input, patterned output, compare.
    let Some((real, shim)) = both() else { return };
    use verbsim_shim::sys as c;
    let (ah, qp, path) = (32, 144, 64); // the kernel structs' sizes
    same_copy(
        &real,
        &shim,
        "ibv_copy_ah_attr_from_kern",
        "IBVERBS_1.1",
        ah,
        size_of::<c::ibv_ah_attr>(),
    );
    same_copy(
        &real,
        &shim,
        "ibv_copy_qp_attr_from_kern",
        "IBVERBS_1.0",
        qp,
        size_of::<c::ibv_qp_attr>(),
    );
    let rec = size_of::<c::ibv_sa_path_rec>();
    same_copy(
        &real,
        &shim,
        "ibv_copy_path_rec_from_kern",
        "IBVERBS_1.0",
        path,
        rec,
    );
    same_copy(
        &real,
        &shim,
        "ibv_copy_path_rec_to_kern",
        "IBVERBS_1.0",
        rec,
        path,
    );
}
