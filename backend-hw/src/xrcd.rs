//! XRC domains: the files that stand for XRCD numbers, opening one, and the
//! legacy XRC receive-QP registry lookups.

// Handles wrap `Arc`s although their inners are `!Send`; see `hw.rs`.
#![allow(clippy::arc_with_non_send_sync)]

use core::ffi::c_int;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rdma_sys as sys;
use verbs_api::errno::EINVAL;
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

impl HwVerbs {
    /// The body of `Verbs::open_xrc_domain`.
    pub(crate) fn open_xrc_domain_impl(
        &mut self,
        ctx: &HwContext,
        fd: XrcdFile,
        oflags: OpenFlags,
    ) -> Result<HwXrcd> {
        // The OFED contract: with fd -1 the only valid oflag is O_CREAT
        // (ibv_open_xrcd itself ignores the flags then).
        if fd == XrcdFile::None && oflags != OpenFlags::CREAT {
            return Err(Error::from_errno(
                Verb::OpenXrcDomain,
                EINVAL,
                format!("fd -1 (no file) allows only oflag O_CREAT, not {oflags}"),
            ));
        }
        let mask = XrcdInitAttrMask::FD | XrcdInitAttrMask::OFLAGS;
        open_xrcd_impl(self, ctx, Verb::OpenXrcDomain, mask, fd, oflags)
    }

    /// The body of `Verbs::close_xrc_domain`.
    pub(crate) fn close_xrc_domain_impl(&mut self, xrcd: &HwXrcd) -> Result<()> {
        self.check_owner(&xrcd.0.obj.ctx, Verb::CloseXrcDomain, "XRC domain")?;
        if self
            .legacy_xrc
            .borrow()
            .process_uses_xrcd(xrcd.0.id, xrcd.0.obj.ctx.process)
        {
            return Err(Error::new(
                Verb::CloseXrcDomain,
                ErrorKind::Busy,
                "this process is still registered with a receive QP of the domain",
            ));
        }
        xrcd.0
            .obj
            .destroy()
            .map_err(|e| Error::from_errno(Verb::CloseXrcDomain, e.errno(), e.message()))
    }

    /// The body of `Verbs::create_xrc_srq`.
    pub(crate) fn create_xrc_srq_impl(
        &mut self,
        pd: &HwPd,
        xrcd: &HwXrcd,
        xrc_cq: &HwCq,
        attr: &mut SrqAttr,
    ) -> Result<HwSrq> {
        let ctx = HwContext(Arc::clone(&pd.0.obj.ctx));
        let mut ex = SrqInitAttrEx {
            attr: *attr,
            comp_mask: SrqInitAttrMask::TYPE
                | SrqInitAttrMask::PD
                | SrqInitAttrMask::XRCD
                | SrqInitAttrMask::CQ,
            srq_type: SrqType::Xrc,
            pd: Some(pd),
            xrcd: Some(xrcd),
            cq: Some(xrc_cq),
            ..SrqInitAttrEx::default()
        };
        let srq = self
            .create_srq_ex(&ctx, &mut ex)
            .map_err(|e| Error::from_errno(Verb::CreateXrcSrq, e.errno(), e.message()))?;
        *attr = ex.attr;
        Ok(srq)
    }

    /// The body of `Verbs::create_xrc_rcv_qp`.
    pub(crate) fn create_xrc_rcv_qp_impl(&mut self, xrcd: &HwXrcd) -> Result<u32> {
        let verb = Verb::CreateXrcRcvQp;
        self.check_owner(&xrcd.0.obj.ctx, verb, "XRC domain")?;
        let ctx = HwContext(Arc::clone(&xrcd.0.obj.ctx));
        let mut attr = QpInitAttrEx {
            qp_type: QpType::XrcRecv,
            comp_mask: QpInitAttrMask::XRCD,
            xrcd: Some(xrcd),
            ..QpInitAttrEx::default()
        };
        let qp = self
            .create_qp_ex(&ctx, &mut attr)
            .map_err(|e| Error::from_errno(verb, e.errno(), e.message()))?;
        let n = qp.0.qp_num;
        let key = Self::legacy_key(xrcd, n);
        // A fresh QP number cannot be registered already; if it were, the
        // new QP is dropped (destroyed) and nothing is left behind.
        self.legacy_xrc
            .borrow_mut()
            .insert(key, xrcd.0.id, xrcd.0.obj.ctx.process, qp)
            .map_err(|e| Error::from_errno(verb, e, "receive QP number already registered"))?;
        Ok(n)
    }

    /// The body of `Verbs::reg_xrc_rcv_qp`.
    pub(crate) fn reg_xrc_rcv_qp_impl(&mut self, xrcd: &HwXrcd, qp_num: u32) -> Result<()> {
        let verb = Verb::RegXrcRcvQp;
        self.check_owner(&xrcd.0.obj.ctx, verb, "XRC domain")?;
        let key = Self::legacy_key(xrcd, qp_num);
        let process = xrcd.0.obj.ctx.process;
        if self.legacy_xrc.borrow().contains(&key) {
            return self
                .legacy_xrc
                .borrow_mut()
                .register(&key, process)
                .map_err(|e| {
                    Error::from_errno(verb, e, "already registered with this receive QP")
                });
        }
        // Created by another OS process: open it by number in the domain.
        let ctx = HwContext(Arc::clone(&xrcd.0.obj.ctx));
        let attr = QpOpenAttr {
            qp_num,
            qp_type: QpType::XrcRecv,
            qp_context: 0,
        };
        let qp = self
            .open_qp(&ctx, xrcd, &attr)
            .map_err(|e| Error::from_errno(verb, e.errno(), e.message()))?;
        self.legacy_xrc
            .borrow_mut()
            .insert(key, xrcd.0.id, process, qp)
            .map_err(|e| Error::from_errno(verb, e, "already registered"))
    }

    /// The body of `Verbs::unreg_xrc_rcv_qp`.
    pub(crate) fn unreg_xrc_rcv_qp_impl(&mut self, xrcd: &HwXrcd, qp_num: u32) -> Result<()> {
        let verb = Verb::UnregXrcRcvQp;
        self.check_owner(&xrcd.0.obj.ctx, verb, "XRC domain")?;
        let key = Self::legacy_key(xrcd, qp_num);
        let last = self
            .legacy_xrc
            .borrow_mut()
            .unregister(&key, xrcd.0.obj.ctx.process)
            .map_err(|e| {
                Error::from_errno(
                    verb,
                    e,
                    "this process is not registered with that receive QP",
                )
            })?;
        if let Some(qp) = last {
            // The last registration is gone: the QP goes too.
            qp.0.obj
                .destroy()
                .map_err(|e| Error::from_errno(verb, e.errno(), e.message()))?;
        }
        Ok(())
    }
}
