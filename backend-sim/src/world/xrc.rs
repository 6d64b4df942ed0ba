//! XRC: XRC domains (XRCDs), XRC SRQs, XRC_TGT QPs shared through
//! `ibv_open_qp` handles, and the legacy OFED receive-QP API built on them
//! (xrc.md §1, §2; docs/xrc.md).
//!
//! The model follows the kernel (xrc.md §2.4, "simulator recommendation"):
//!
//! * an [`XrcDomain`] lives on one device, optionally bound to a simulated
//!   inode; every `ibv_open_xrcd` makes a new [`XrcdOpen`] handle to it; the
//!   domain goes away with its last handle;
//! * a handle counts the XRC SRQs and XRC_TGT QP handles made through it
//!   (`refcnt`); closing it while that is non-zero is `EBUSY`;
//! * an XRC_TGT QP is a *real* QP owned by its domain, reached only through
//!   handles ([`TgtOpen`]): the creator's and every `ibv_open_qp`'s. A
//!   handle is a [`QpHandle`] whose index has [`ALIAS_BIT`] set; every verb
//!   on it acts on the real QP; `ibv_destroy_qp` closes the handle and the
//!   real QP is destroyed with the last one;
//! * the legacy API keeps, per simulated process, one handle per receive QP
//!   (a registration); `ibv_create_xrc_rcv_qp` creates the QP and the
//!   creator's handle, `ibv_reg_xrc_rcv_qp` opens one, `ibv_unreg_xrc_rcv_qp`
//!   closes it (xrc.md §2.3).
//!
//! Domains and XRC SRQs are here; XRC_TGT QP handles are in [`tgt`], the
//! legacy receive-QP API in [`legacy`].

use std::collections::BTreeMap;

use verbs_api::{
    Error, ErrorKind, OpenFlags, ProcessId, Result, SrqInitAttrEx, SrqInitAttrMask, SrqType, Verb,
    XrcdFile, XrcdInitAttr, XrcdInitAttrMask,
};

use super::{busy, invalid, unsupported, World};
use crate::handles::*;
use crate::SimVerbs;

mod legacy;
mod tgt;
pub(crate) use legacy::{legacy_srq_attr, TGT_CAP};

/// Set in the index of a [`QpHandle`] that is an XRC_TGT QP handle (an
/// alias of the real QP). Arena indices never reach it.
pub(crate) const ALIAS_BIT: u32 = 1 << 31;

/// What the XRC_TGT responder does with a request whose `remote_srqn`
/// names no XRC SRQ of the TGT QP's domain (xrc.md §1.5: the exact
/// behaviour is not confirmed from code).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum XrcUnknownSrqn {
    /// NAK "invalid request": the XRC_INI requester completes with
    /// `IBV_WC_REM_INV_REQ_ERR` and goes to ERR, the TGT QP goes to ERR
    /// with `IBV_EVENT_QP_REQ_ERR` (the simulator's default, xrc.md §1.5).
    #[default]
    InvalidRequest,
    /// The request is silently dropped (the requester retries and
    /// eventually completes with `IBV_WC_RETRY_EXC_ERR`).
    Drop,
}

/// An XRC domain.
#[derive(Debug)]
pub(crate) struct XrcDomain {
    device: u32,
    /// The simulated inode it is bound to (`None`: a private domain).
    inode: Option<u64>,
    /// Open handles.
    handles: u32,
    /// Real XRC_TGT QPs of the domain (`xrcd->tgt_qps`), by number.
    tgt_qps: BTreeMap<u32, QpHandle>,
}

/// One `ibv_open_xrcd` / `ibv_open_xrc_domain` handle.
#[derive(Debug)]
pub(crate) struct XrcdOpen {
    ctx: ContextHandle,
    domain: (u32, u32),
    /// XRC SRQs and XRC_TGT QP handles made through this handle
    /// (`uxrcd->refcnt`).
    refcnt: u32,
}

impl XrcState {
    /// The next free SRQ number of `device` (from 0x40, never 0, skipping
    /// numbers in use by XRC or basic SRQs).
    fn alloc_srqn(&mut self, device: u32) -> u32 {
        let next = self.next_srqn.entry(device).or_insert(0x40);
        let mut srqn = *next;
        while self.srq_nums.contains_key(&(device, srqn))
            || self.basic_nums.contains_key(&(device, srqn))
            || srqn == 0
        {
            srqn = (srqn + 1) & 0xff_ffff;
        }
        *next = (srqn + 1) & 0xff_ffff;
        srqn
    }
}

/// What an XRC SRQ adds to a basic one.
#[derive(Clone, Copy, Debug)]
pub(crate) struct XrcSrq {
    xrcd: XrcdHandle,
    domain: (u32, u32),
    cq: CqHandle,
    srqn: u32,
}

/// A real XRC_TGT QP.
#[derive(Debug)]
struct RealTgt {
    domain: (u32, u32),
    /// Open handles, oldest first (async events go to each).
    handles: Vec<QpHandle>,
}

/// One handle to a real XRC_TGT QP.
#[derive(Debug)]
pub(crate) struct TgtOpen {
    real: QpHandle,
    ctx: ContextHandle,
    xrcd: XrcdHandle,
    qp_context: u64,
}

/// Every XRC object of the world.
#[derive(Debug, Default)]
pub(crate) struct XrcState {
    domains: crate::arena::Arena<XrcDomain>,
    opens: crate::arena::Arena<XrcdOpen>,
    /// `(device, inode)` → domain.
    inodes: BTreeMap<(u32, u64), (u32, u32)>,
    /// SRQ arena index → its XRC part.
    srqs: BTreeMap<u32, XrcSrq>,
    /// `(device, srq number)` → SRQ.
    srq_nums: BTreeMap<(u32, u32), SrqHandle>,
    /// Next SRQ number per device.
    next_srqn: BTreeMap<u32, u32>,
    /// Basic SRQs given a number (`ibv_get_srq_num` on mlx5, which numbers
    /// every SRQ): `(device, number)` → SRQ arena index, and back.
    basic_nums: BTreeMap<(u32, u32), u32>,
    basic_srqns: BTreeMap<u32, (u32, u32)>,
    /// Real QP arena index → its XRC part.
    tgts: BTreeMap<u32, RealTgt>,
    tgt_opens: crate::arena::Arena<TgtOpen>,
    /// Legacy registrations: `(process, device, qpn)` → the process's handle.
    legacy: BTreeMap<(ProcessId, u32, u32), QpHandle>,
}

impl XrcState {
    /// The CQ of an XRC SRQ (where completions of messages landing in it go).
    pub(crate) fn srq_cq(&self, srq: SrqHandle) -> Option<CqHandle> {
        self.srqs.get(&srq.index).map(|s| s.cq)
    }
}

fn is_alias(qp: QpHandle) -> bool {
    qp.index & ALIAS_BIT != 0
}

impl World {
    // ---------------------------------------------------------- domains

    fn xrcd_open(&self, x: XrcdHandle, verb: Verb) -> Result<&XrcdOpen> {
        self.xrc
            .opens
            .get(x.index, x.generation)
            .ok_or_else(|| invalid(verb, format!("invalid or closed XRCD handle {x:?}")))
    }

    fn xrcd_device(&self, x: XrcdHandle, verb: Verb) -> Result<u32> {
        let o = self.xrcd_open(x, verb)?;
        Ok(self
            .xrc
            .domains
            .get(o.domain.0, o.domain.1)
            .expect("an open handle's domain lives")
            .device)
    }

    /// `ibv_open_xrcd` (and `ibv_open_xrc_domain` with `verb`): xrc.md §1.1.
    pub(crate) fn open_xrcd(
        &mut self,
        ctx: ContextHandle,
        attr: &XrcdInitAttr,
        verb: Verb,
    ) -> Result<XrcdHandle> {
        let device = self.ctx(ctx, verb)?.device;
        let p = &self.device(device).profile;
        if !p.xrc {
            return Err(unsupported(
                verb,
                format!("the {} device does not support XRC", p.name),
            ));
        }
        if attr.comp_mask.bits() >= XrcdInitAttrMask::RESERVED.bits() {
            return Err(unsupported(
                verb,
                format!("unknown comp_mask bits {:#x}", attr.comp_mask.bits()),
            ));
        }
        if !attr
            .comp_mask
            .contains(XrcdInitAttrMask::FD | XrcdInitAttrMask::OFLAGS)
        {
            return Err(invalid(
                verb,
                "comp_mask needs both IBV_XRCD_INIT_ATTR_FD and IBV_XRCD_INIT_ATTR_OFLAGS",
            ));
        }
        // The legacy OFED call: with fd -1 the only valid oflag is O_CREAT.
        if verb == Verb::OpenXrcDomain
            && attr.fd == XrcdFile::None
            && attr.oflags != OpenFlags::CREAT
        {
            return Err(invalid(
                verb,
                format!(
                    "fd -1 (no file) allows only oflag O_CREAT, not {}",
                    attr.oflags
                ),
            ));
        }
        let existing = match attr.fd {
            XrcdFile::None => None,
            XrcdFile::BadDescriptor => {
                return Err(Error::new(
                    verb,
                    ErrorKind::BadFileDescriptor,
                    "fd is not an open file descriptor",
                ));
            }
            XrcdFile::Inode(i) => match self.xrc.inodes.get(&(device, i)) {
                Some(&d) if attr.oflags.contains(OpenFlags::EXCL) => {
                    let _ = d;
                    return Err(invalid(
                        verb,
                        format!("O_EXCL: an XRCD already exists for inode {i}"),
                    ));
                }
                Some(&d) => Some(d),
                None if !attr.oflags.contains(OpenFlags::CREAT) => {
                    return Err(Error::new(
                        verb,
                        ErrorKind::WouldBlock,
                        format!("no XRCD exists for inode {i} and O_CREAT is not set"),
                    ));
                }
                None => None,
            },
        };
        let domain = match existing {
            Some(d) => d,
            None => {
                let inode = match attr.fd {
                    XrcdFile::Inode(i) => Some(i),
                    _ => None,
                };
                let d = self.xrc.domains.insert(XrcDomain {
                    device,
                    inode,
                    handles: 0,
                    tgt_qps: BTreeMap::new(),
                });
                if let Some(i) = inode {
                    self.xrc.inodes.insert((device, i), d);
                }
                d
            }
        };
        self.xrc
            .domains
            .get_mut(domain.0, domain.1)
            .expect("live")
            .handles += 1;
        self.ctx_mut(ctx, verb)?.children += 1;
        Ok(XrcdHandle::from_parts(self.xrc.opens.insert(XrcdOpen {
            ctx,
            domain,
            refcnt: 0,
        })))
    }

    /// `ibv_close_xrcd` (and `ibv_close_xrc_domain`): `EBUSY` while XRC SRQs
    /// or XRC_TGT QP handles made through this handle exist (xrc.md §1.1);
    /// the domain goes with its last handle.
    pub(crate) fn close_xrcd(&mut self, x: XrcdHandle, verb: Verb) -> Result<()> {
        let o = self.xrcd_open(x, verb)?;
        if o.refcnt > 0 {
            let what = if verb == Verb::CloseXrcDomain {
                "this process is still registered with (or holds) receive QPs or XRC SRQs of the domain"
            } else {
                "XRC SRQs or XRC_TGT QPs made through this XRCD handle still exist"
            };
            return Err(busy(verb, format!("{what} ({} objects)", o.refcnt)));
        }
        let (ctx, domain) = (o.ctx, o.domain);
        self.xrc.opens.remove(x.index, x.generation);
        let d = self.xrc.domains.get_mut(domain.0, domain.1).expect("live");
        d.handles -= 1;
        if d.handles == 0 {
            debug_assert!(d.tgt_qps.is_empty());
            let key = d.inode.map(|i| (d.device, i));
            self.xrc.domains.remove(domain.0, domain.1);
            if let Some(k) = key {
                self.xrc.inodes.remove(&k);
            }
        }
        if let Ok(c) = self.ctx_mut(ctx, verb) {
            c.children -= 1;
        }
        Ok(())
    }

    /// How many XRC domains exist (for tests and diagnostics).
    pub fn xrc_domain_count(&self) -> usize {
        self.xrc.domains.len()
    }

    /// Entries of the XRC side tables that belong to live objects: the
    /// XRC SRQs' records and numbers, every SRQ's number, the XRC_TGT
    /// records and handles, legacy registrations and domain inodes.
    pub(crate) fn xrc_entries(&self) -> usize {
        let x = &self.xrc;
        x.srqs.len()
            + x.srq_nums.len()
            + x.basic_nums.len()
            + x.basic_srqns.len()
            + x.tgts.len()
            + x.tgt_opens.len()
            + x.legacy.len()
            + x.inodes.len()
    }

    /// How many XRC domain handles are open (each `ibv_open_xrcd` /
    /// `ibv_open_xrc_domain` until its close).
    pub fn xrc_handle_count(&self) -> usize {
        self.xrc.opens.len()
    }

    // ------------------------------------------------------------- SRQs

    /// `ibv_create_srq_ex`: basic SRQs as `ibv_create_srq`; XRC SRQs need
    /// `TYPE|PD|XRCD|CQ` (xrc.md §1.2).
    pub(crate) fn create_srq_ex(
        &mut self,
        ctx: ContextHandle,
        attr: &mut SrqInitAttrEx<'_, SimVerbs>,
    ) -> Result<SrqHandle> {
        let v = Verb::CreateSrqEx;
        let device = self.ctx(ctx, v)?.device;
        let mask = attr.comp_mask;
        if mask.unknown_bits() != 0 {
            return Err(invalid(
                v,
                format!("unknown comp_mask bits {:#x}", mask.unknown_bits()),
            ));
        }
        let srq_type = if mask.contains(SrqInitAttrMask::TYPE) {
            attr.srq_type
        } else {
            SrqType::Basic
        };
        let pd = match (mask.contains(SrqInitAttrMask::PD), attr.pd) {
            (true, Some(pd)) => *pd,
            _ => return Err(invalid(v, "an SRQ needs a PD (IBV_SRQ_INIT_ATTR_PD)")),
        };
        // libibverbs' inline ibv_create_srq_ex hands a basic SRQ whose
        // comp_mask names only PD (and TYPE) to ibv_create_srq(pd), which
        // uses the PD's context: `ctx` is not consulted, so any PD goes.
        // Every other request reaches the context's op, and the kernel
        // resolves the PD in that context's file.
        let via_pd = srq_type == SrqType::Basic
            && (mask - (SrqInitAttrMask::PD | SrqInitAttrMask::TYPE)).is_empty();
        let pd_ctx = self.pd(pd, v)?.ctx;
        if !via_pd {
            self.same_ctx(v, "PD", pd_ctx, ctx)?;
        }
        let rewrap = |e: Error| Error::new(v, e.kind(), e.message().to_owned());
        match srq_type {
            SrqType::Basic => {
                let s = self.create_srq(pd, &mut attr.attr).map_err(rewrap)?;
                Ok(s)
            }
            SrqType::Xrc => {
                let p = &self.device(device).profile;
                if !p.xrc {
                    return Err(unsupported(
                        v,
                        format!("the {} device does not support XRC SRQs", p.name),
                    ));
                }
                let (xrcd, cq) =
                    match (
                        mask.contains(SrqInitAttrMask::XRCD),
                        attr.xrcd,
                        mask.contains(SrqInitAttrMask::CQ),
                        attr.cq,
                    ) {
                        (true, Some(x), true, Some(c)) => (*x, *c),
                        _ => return Err(invalid(
                            v,
                            "an XRC SRQ needs IBV_SRQ_INIT_ATTR_XRCD and _CQ with an xrcd and a cq",
                        )),
                    };
                self.same_ctx(v, "XRCD", self.xrcd_open(xrcd, v)?.ctx, ctx)?;
                self.same_ctx(v, "CQ", self.cq(cq, v)?.ctx, ctx)?;
                let domain = self.xrcd_open(xrcd, v)?.domain;
                let srq = self.create_srq(pd, &mut attr.attr).map_err(rewrap)?;
                let srqn = self.xrc.alloc_srqn(device);
                self.xrc.srq_nums.insert((device, srqn), srq);
                self.xrc.srqs.insert(
                    srq.index,
                    XrcSrq {
                        xrcd,
                        domain,
                        cq,
                        srqn,
                    },
                );
                self.cq_mut(cq, v)?.users += 1;
                self.xrc
                    .opens
                    .get_mut(xrcd.index, xrcd.generation)
                    .expect("checked")
                    .refcnt += 1;
                Ok(srq)
            }
            SrqType::Tm => Err(unsupported(v, "tag-matching SRQs are not modelled")),
            SrqType::Unknown(t) => Err(invalid(v, format!("unknown srq_type {t}"))),
        }
    }

    /// `ibv_get_srq_num`: the number senders put in `remote_srqn`. mlx5
    /// numbers every SRQ (`mlx5_get_srq_num` returns the hardware SRQN
    /// whatever the type; DC users read it too): a basic SRQ on an mlx5
    /// device gets its number from the same space on first asking. rxe has
    /// no such verb: `EOPNOTSUPP`.
    pub(crate) fn get_srq_num(&mut self, srq: SrqHandle) -> Result<u32> {
        let v = Verb::GetSrqNum;
        let device = self.srq(srq, v)?.device;
        if let Some(s) = self.xrc.srqs.get(&srq.index) {
            return Ok(s.srqn);
        }
        if let Some(&(_, n)) = self.xrc.basic_srqns.get(&srq.index) {
            return Ok(n);
        }
        if self.device(device).profile.mlx5.is_none() {
            return Err(unsupported(
                v,
                "the device's driver has no get_srq_num (only XRC SRQs have a number on rxe)",
            ));
        }
        let n = self.xrc.alloc_srqn(device);
        self.xrc.basic_nums.insert((device, n), srq.index);
        self.xrc.basic_srqns.insert(srq.index, (device, n));
        Ok(n)
    }

    /// `ibv_destroy_srq` of any SRQ: an XRC SRQ also releases its CQ, its
    /// XRCD handle and its number.
    pub(crate) fn destroy_any_srq(&mut self, srq: SrqHandle) -> Result<()> {
        let x = self
            .srqs
            .get(srq.index, srq.generation)
            .and_then(|_| self.xrc.srqs.get(&srq.index).copied());
        self.destroy_srq(srq)?;
        if let Some(key) = self.xrc.basic_srqns.remove(&srq.index) {
            self.xrc.basic_nums.remove(&key);
        }
        if let Some(x) = x {
            self.xrc.srqs.remove(&srq.index);
            let device = self.cq(x.cq, Verb::DestroySrq).map_or(0, |c| c.device);
            self.xrc.srq_nums.remove(&(device, x.srqn));
            if let Ok(c) = self.cq_mut(x.cq, Verb::DestroySrq) {
                c.users -= 1;
            }
            if let Some(o) = self.xrc.opens.get_mut(x.xrcd.index, x.xrcd.generation) {
                o.refcnt -= 1;
            }
        }
        Ok(())
    }
}
