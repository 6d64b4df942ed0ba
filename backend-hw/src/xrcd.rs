//! XRC domains: the files that stand for XRCD numbers, opening one, and the
//! legacy XRC receive-QP registry lookups.

// Handles wrap `Arc`s although their inners are `!Send`; see `hw.rs`.
#![allow(clippy::arc_with_non_send_sync)]

use core::ffi::c_int;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rdma_sys as sys;
use verbs_api::*;

use crate::backend::HwVerbs;
use crate::convert::*;
use crate::errors::c_error;
use crate::ffi::verbs as fv;
use crate::handles::*;

static NEXT_XRCD_ID: AtomicU64 = AtomicU64::new(1);

impl HwVerbs {
    pub(crate) fn legacy_key(xrcd: &HwXrcd, qp_num: u32) -> (String, u32) {
        (xrcd.0.obj.ctx.name.clone(), qp_num)
    }

    pub(crate) fn legacy_qp(&self, xrcd: &HwXrcd, qp_num: u32, verb: Verb) -> Result<HwQp> {
        self.check_owner(&xrcd.0.obj.ctx, verb, "XRC domain")?;
        self.legacy_xrc
            .borrow()
            .get(&Self::legacy_key(xrcd, qp_num))
            .cloned()
            .ok_or_else(|| {
                Error::invalid(
                    verb,
                    format!("no legacy XRC receive QP {qp_num:#x} in this domain"),
                )
            })
    }
}

/// The file that stands for XRCD number `n`: `$VERBSIM_XRCD_DIR/<n>`, or
/// `<temp dir>/verbsim-xrcd/<n>`, created if missing.
pub(crate) fn xrcd_file(n: u64) -> std::io::Result<std::fs::File> {
    let dir = std::env::var_os("VERBSIM_XRCD_DIR").map_or_else(
        || std::env::temp_dir().join("verbsim-xrcd"),
        std::path::PathBuf::from,
    );
    xrcd_file_in(&dir, n)
}

/// [`xrcd_file`] in `dir`.
pub(crate) fn xrcd_file_in(dir: &std::path::Path, n: u64) -> std::io::Result<std::fs::File> {
    std::fs::create_dir_all(dir)?;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join(n.to_string()))
}

pub(crate) fn open_xrcd_impl(
    hw: &HwVerbs,
    ctx: &HwContext,
    verb: Verb,
    mask: XrcdInitAttrMask,
    fd: XrcdFile,
    oflags: OpenFlags,
) -> Result<HwXrcd> {
    let (c, inner) = hw.ctx(ctx, verb)?;
    let mut a: sys::ibv_xrcd_init_attr = zeroed();
    a.comp_mask = mask.bits();
    // A file named by number is a real file, one per number, so that every
    // handle naming the same number names the same inode (the kernel keys
    // shared XRC domains by inode). It stays open for the call only: the
    // domain holds its own reference.
    let file = match fd {
        XrcdFile::Inode(n) => Some(xrcd_file(n).map_err(|e| {
            Error::from_errno(
                verb,
                e.raw_os_error().unwrap_or(errno::EIO),
                format!("the file for XRCD number {n} cannot be opened: {e}"),
            )
        })?),
        _ => None,
    };
    a.fd = match fd {
        XrcdFile::None => -1,
        // An fd no process can have open: the kernel answers EBADF.
        XrcdFile::BadDescriptor => c_int::MAX,
        XrcdFile::Inode(_) => file.as_ref().map_or(-1, std::os::fd::AsRawFd::as_raw_fd),
    };
    a.oflags = oflags.bits() as c_int;
    // SAFETY: live context; `a` is valid; its fd is -1, one that the kernel
    // validates, or `file`'s, open until after the call.
    let x =
        unsafe { fv::ibv_open_xrcd(c, &mut a) }.map_err(|e| c_error(verb, e, "ibv_open_xrcd"))?;
    drop(file);
    Ok(HwXrcd(Arc::new(XrcdInner {
        obj: Owned::new(x, inner),
        id: NEXT_XRCD_ID.fetch_add(1, Ordering::Relaxed),
    })))
}
