//! libibverbs' pure helpers: the names of enum values
//! (`ibv_node_type_str`, `ibv_port_state_str`, `ibv_event_type_str`), the
//! static-rate conversions (`ibv_rate_to_mult`, `mult_to_ibv_rate`,
//! `ibv_rate_to_mbps`, `mbps_to_ibv_rate`), the fork helpers
//! (`ibv_dontfork_range`, `ibv_dofork_range`) and `ibv_get_sysfs_path`.
//! Values and strings are rdma-core 44's, which programs print and
//! compare; `tests/helpers.rs` checks them against the installed library.

use core::ffi::{c_char, c_int, c_void, CStr};
use std::ffi::CString;
use std::sync::OnceLock;

use crate::export::export;
use crate::provider::state::c;

export! { "IBVERBS_1.1" fn ibv_node_type_str(node_type: c_int) -> *const c_char {
    let s: &'static CStr = match node_type {
        c::IBV_NODE_CA => c"InfiniBand channel adapter",
        c::IBV_NODE_SWITCH => c"InfiniBand switch",
        c::IBV_NODE_ROUTER => c"InfiniBand router",
        c::IBV_NODE_RNIC => c"iWARP NIC",
        c::IBV_NODE_USNIC => c"usNIC",
        c::IBV_NODE_USNIC_UDP => c"usNIC UDP",
        c::IBV_NODE_UNSPECIFIED => c"unspecified",
        _ => c"unknown",
    };
    s.as_ptr()
}}

export! { "IBVERBS_1.1" fn ibv_port_state_str(port_state: u32) -> *const c_char {
    let s: &'static CStr = match port_state {
        c::IBV_PORT_NOP => c"no state change (NOP)",
        c::IBV_PORT_DOWN => c"down",
        c::IBV_PORT_INIT => c"init",
        c::IBV_PORT_ARMED => c"armed",
        c::IBV_PORT_ACTIVE => c"active",
        c::IBV_PORT_ACTIVE_DEFER => c"active defer",
        _ => c"unknown",
    };
    s.as_ptr()
}}

export! { "IBVERBS_1.1" fn ibv_event_type_str(event: u32) -> *const c_char {
    let s: &'static CStr = match event {
        c::IBV_EVENT_CQ_ERR => c"CQ error",
        c::IBV_EVENT_QP_FATAL => c"local work queue catastrophic error",
        c::IBV_EVENT_QP_REQ_ERR => c"invalid request local work queue error",
        c::IBV_EVENT_QP_ACCESS_ERR => c"local access violation work queue error",
        c::IBV_EVENT_COMM_EST => c"communication established",
        c::IBV_EVENT_SQ_DRAINED => c"send queue drained",
        c::IBV_EVENT_PATH_MIG => c"path migrated",
        c::IBV_EVENT_PATH_MIG_ERR => c"path migration request error",
        c::IBV_EVENT_DEVICE_FATAL => c"local catastrophic error",
        c::IBV_EVENT_PORT_ACTIVE => c"port active",
        c::IBV_EVENT_PORT_ERR => c"port error",
        c::IBV_EVENT_LID_CHANGE => c"LID change",
        c::IBV_EVENT_PKEY_CHANGE => c"P_Key change",
        c::IBV_EVENT_SM_CHANGE => c"SM change",
        c::IBV_EVENT_SRQ_ERR => c"SRQ catastrophic error",
        c::IBV_EVENT_SRQ_LIMIT_REACHED => c"SRQ limit reached",
        c::IBV_EVENT_QP_LAST_WQE_REACHED => c"last WQE reached",
        c::IBV_EVENT_CLIENT_REREGISTER => c"client reregistration",
        c::IBV_EVENT_GID_CHANGE => c"GID table change",
        c::IBV_EVENT_WQ_FATAL => c"WQ fatal",
        _ => c"unknown",
    };
    s.as_ptr()
}}

/// Each `enum ibv_rate` with its multiple of 2.5 Gb/s (`None` for the
/// rates that are not one: FDR, EDR and their widths) and its data rate
/// in Mb/s after line coding, as rdma-core 44 gives them.
const RATES: [(u32, Option<c_int>, c_int); 23] = [
    (c::IBV_RATE_2_5_GBPS, Some(1), 2_500),
    (c::IBV_RATE_5_GBPS, Some(2), 5_000),
    (c::IBV_RATE_10_GBPS, Some(4), 10_000),
    (c::IBV_RATE_20_GBPS, Some(8), 20_000),
    (c::IBV_RATE_30_GBPS, Some(12), 30_000),
    (c::IBV_RATE_40_GBPS, Some(16), 40_000),
    (c::IBV_RATE_60_GBPS, Some(24), 60_000),
    (c::IBV_RATE_80_GBPS, Some(32), 80_000),
    (c::IBV_RATE_120_GBPS, Some(48), 120_000),
    (c::IBV_RATE_14_GBPS, None, 14_062),
    (c::IBV_RATE_56_GBPS, None, 56_250),
    (c::IBV_RATE_112_GBPS, None, 112_500),
    (c::IBV_RATE_168_GBPS, None, 168_750),
    (c::IBV_RATE_25_GBPS, None, 25_781),
    (c::IBV_RATE_100_GBPS, None, 103_125),
    (c::IBV_RATE_200_GBPS, None, 206_250),
    (c::IBV_RATE_300_GBPS, None, 309_375),
    (c::IBV_RATE_28_GBPS, Some(11), 28_125),
    (c::IBV_RATE_50_GBPS, Some(20), 53_125),
    (c::IBV_RATE_400_GBPS, Some(160), 425_000),
    (c::IBV_RATE_600_GBPS, Some(240), 637_500),
    (c::IBV_RATE_800_GBPS, Some(320), 850_000),
    (c::IBV_RATE_1200_GBPS, Some(480), 1_275_000),
];

export! { "IBVERBS_1.0" fn ibv_rate_to_mult(rate: u32) -> c_int {
    RATES.iter().find(|r| r.0 == rate).and_then(|r| r.1).unwrap_or(-1)
}}

export! { "IBVERBS_1.0" fn mult_to_ibv_rate(mult: c_int) -> u32 {
    RATES.iter().find(|r| r.1 == Some(mult)).map_or(c::IBV_RATE_MAX, |r| r.0)
}}

export! { "IBVERBS_1.1" fn ibv_rate_to_mbps(rate: u32) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.2)
}}

export! { "IBVERBS_1.1" fn mbps_to_ibv_rate(mbps: c_int) -> u32 {
    RATES.iter().find(|r| r.2 == mbps).map_or(c::IBV_RATE_MAX, |r| r.0)
}}

// ------------------------------------------------------------------ fork
//
// The simulator never pins memory: an MR describes the program's pages,
// which it reads and writes in place (or, on the shared fabric, through
// the process's own address space), so a fork cannot take registered
// pages away from it and `ibv_is_fork_initialized` says
// IBV_FORK_UNNEEDED. rdma-core's range calls are then what they are with
// fork support off (no `ibv_fork_init` in effect): they succeed and
// change nothing; in particular the pages stay inherited by a child.

export! { "IBVERBS_1.1" fn ibv_dontfork_range(base: *mut c_void, size: usize) -> c_int {
    let _ = (base, size);
    0
}}

export! { "IBVERBS_1.1" fn ibv_dofork_range(base: *mut c_void, size: usize) -> c_int {
    let _ = (base, size);
    0
}}

/// rdma-core's cap on `SYSFS_PATH` (`IBV_SYSFS_PATH_MAX`).
const SYSFS_PATH_MAX: usize = 256;

/// The sysfs root libibverbs reads: `$SYSFS_PATH` (when the process is not
/// set-uid), without trailing slashes and cut to 255 bytes, or `/sys`;
/// decided at the first call and kept, as rdma-core does.
fn sysfs_path() -> &'static CStr {
    static PATH: OnceLock<CString> = OnceLock::new();
    PATH.get_or_init(|| {
        // SAFETY: getuid and geteuid cannot fail.
        let same = unsafe { libc::getuid() == libc::geteuid() };
        let env = if same {
            std::env::var_os("SYSFS_PATH")
        } else {
            None
        };
        let mut bytes = match env {
            Some(v) => std::os::unix::ffi::OsStringExt::into_vec(v),
            None => return c"/sys".to_owned(),
        };
        bytes.truncate(SYSFS_PATH_MAX - 1);
        while bytes.last() == Some(&b'/') {
            bytes.pop();
        }
        // An environment variable holds no NUL byte.
        CString::new(bytes).unwrap_or_else(|_| c"/sys".to_owned())
    })
}

export! { "IBVERBS_1.0" fn ibv_get_sysfs_path() -> *const c_char {
    sysfs_path().as_ptr()
}}
