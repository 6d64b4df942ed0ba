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

use std::collections::BTreeMap;

use verbs_api::{
    AsyncEventType, Error, ErrorKind, OpenFlags, ProcessId, QpAttr, QpAttrMask, QpCap, QpInitInfo,
    QpOpenAttr, QpType, Result, SrqAttr, SrqInitAttrEx, SrqInitAttrMask, SrqType, Verb, XrcdFile,
    XrcdInitAttr, XrcdInitAttrMask,
};

use super::{busy, invalid, unsupported, AsyncSubject, World};
use crate::handles::*;
use crate::SimVerbs;

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
                let next = self.xrc.next_srqn.entry(device).or_insert(0x40);
                let mut srqn = *next;
                while self.xrc.srq_nums.contains_key(&(device, srqn)) || srqn == 0 {
                    srqn = (srqn + 1) & 0xff_ffff;
                }
                *next = (srqn + 1) & 0xff_ffff;
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

    /// `ibv_get_srq_num`: the number senders put in `remote_srqn`.
    pub(crate) fn get_srq_num(&self, srq: SrqHandle) -> Result<u32> {
        let v = Verb::GetSrqNum;
        self.srq(srq, v)?;
        self.xrc
            .srqs
            .get(&srq.index)
            .map(|s| s.srqn)
            .ok_or_else(|| invalid(v, "not an XRC SRQ (only XRC SRQs have a number here)"))
    }

    /// `ibv_destroy_srq` of any SRQ: an XRC SRQ also releases its CQ, its
    /// XRCD handle and its number.
    pub(crate) fn destroy_any_srq(&mut self, srq: SrqHandle) -> Result<()> {
        let x = self
            .srqs
            .get(srq.index, srq.generation)
            .and_then(|_| self.xrc.srqs.get(&srq.index).copied());
        self.destroy_srq(srq)?;
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

    // ------------------------------------------------------------ TGT QPs

    /// Checks the XRCD of an XRC_TGT creation (called by `create_qp` once
    /// the type rules passed); returns the handle.
    pub(crate) fn tgt_xrcd(
        &self,
        ctx: ContextHandle,
        xrcd: Option<XrcdHandle>,
        verb: Verb,
    ) -> Result<XrcdHandle> {
        let Some(x) = xrcd else {
            return Err(invalid(verb, "an XRC_RECV QP needs an xrcd"));
        };
        self.ctx(ctx, verb)?;
        self.same_ctx(verb, "XRCD", self.xrcd_open(x, verb)?.ctx, ctx)?;
        Ok(x)
    }

    /// Records a just-created real XRC_TGT QP in the domain of `xrcd` and
    /// returns the creator's handle to it (K-VERBS `create_xrc_qp_user`).
    pub(crate) fn tgt_created(
        &mut self,
        real: QpHandle,
        ctx: ContextHandle,
        xrcd: XrcdHandle,
        qp_context: u64,
    ) -> QpHandle {
        let domain = self
            .xrc
            .opens
            .get(xrcd.index, xrcd.generation)
            .expect("checked")
            .domain;
        let qpn = self
            .qps
            .get(real.index, real.generation)
            .expect("live")
            .qp_num;
        self.xrc
            .domains
            .get_mut(domain.0, domain.1)
            .expect("live")
            .tgt_qps
            .insert(qpn, real);
        self.xrc.tgts.insert(
            real.index,
            RealTgt {
                domain,
                handles: Vec::new(),
            },
        );
        // The real QP belongs to the domain, not to the creator's context:
        // the context counts the handle instead.
        if let Some(c) = self.contexts.get_mut(ctx.index, ctx.generation) {
            c.children -= 1;
        }
        self.new_tgt_handle(real, ctx, xrcd, qp_context)
    }

    fn new_tgt_handle(
        &mut self,
        real: QpHandle,
        ctx: ContextHandle,
        xrcd: XrcdHandle,
        qp_context: u64,
    ) -> QpHandle {
        let (index, generation) = self.xrc.tgt_opens.insert(TgtOpen {
            real,
            ctx,
            xrcd,
            qp_context,
        });
        let h = QpHandle::from_parts((index | ALIAS_BIT, generation));
        self.xrc
            .tgts
            .get_mut(&real.index)
            .expect("live")
            .handles
            .push(h);
        if let Some(o) = self.xrc.opens.get_mut(xrcd.index, xrcd.generation) {
            o.refcnt += 1;
        }
        if let Some(c) = self.contexts.get_mut(ctx.index, ctx.generation) {
            c.children += 1;
        }
        h
    }

    fn tgt_open(&self, qp: QpHandle, verb: Verb) -> Result<&TgtOpen> {
        self.xrc
            .tgt_opens
            .get(qp.index & !ALIAS_BIT, qp.generation)
            .ok_or_else(|| invalid(verb, format!("invalid or destroyed QP handle {qp:?}")))
    }

    /// The QP a handle acts on: the real XRC_TGT QP for a TGT handle, the
    /// handle itself otherwise.
    pub(crate) fn resolve_qp(&self, qp: QpHandle, verb: Verb) -> Result<QpHandle> {
        if is_alias(qp) {
            Ok(self.tgt_open(qp, verb)?.real)
        } else {
            Ok(qp)
        }
    }

    /// `ibv_query_qp` through any handle: a TGT handle reports the real
    /// QP's attributes with its own `qp_context`.
    pub(crate) fn query_qp_handle(
        &self,
        qp: QpHandle,
        mask: QpAttrMask,
    ) -> Result<(QpAttr, QpInitInfo)> {
        let real = self.resolve_qp(qp, Verb::QueryQp)?;
        let (a, mut info) = self.query_qp(real, mask)?;
        if is_alias(qp) {
            info.qp_context = self.tgt_open(qp, Verb::QueryQp)?.qp_context;
            info.has_srq = false;
        }
        Ok((a, info))
    }

    /// `ibv_destroy_qp` through any handle: a TGT handle is closed and the
    /// real QP destroyed with its last handle (K-VERBS `__ib_destroy_shared_qp`).
    pub(crate) fn destroy_qp_handle(&mut self, qp: QpHandle) -> Result<()> {
        let v = Verb::DestroyQp;
        if !is_alias(qp) {
            // The real XRC_TGT QP belongs to its domain and dies with its
            // last handle or registration; a handle naming it directly
            // (found by number, say) must not destroy it behind them.
            if self.xrc.tgts.contains_key(&qp.index)
                && self.qps.get(qp.index, qp.generation).is_some()
            {
                return Err(invalid(
                    v,
                    "the XRC_TGT QP is owned by its XRC domain: destroy the handle that \
                     ibv_create_qp/ibv_open_qp gave, or ibv_unreg_xrc_rcv_qp a legacy registration",
                ));
            }
            return self.destroy_qp(qp);
        }
        let o = self.tgt_open(qp, v)?;
        let (real, ctx, xrcd) = (o.real, o.ctx, o.xrcd);
        // A legacy registration's handle is closed with unreg, never here.
        if self.xrc.legacy.values().any(|&h| h == qp) {
            return Err(invalid(
                v,
                "this handle is a legacy registration: use ibv_unreg_xrc_rcv_qp",
            ));
        }
        self.close_tgt_handle(qp, real, ctx, xrcd);
        Ok(())
    }

    fn close_tgt_handle(
        &mut self,
        qp: QpHandle,
        real: QpHandle,
        ctx: ContextHandle,
        xrcd: XrcdHandle,
    ) {
        self.xrc
            .tgt_opens
            .remove(qp.index & !ALIAS_BIT, qp.generation);
        if let Some(o) = self.xrc.opens.get_mut(xrcd.index, xrcd.generation) {
            o.refcnt -= 1;
        }
        if let Some(c) = self.contexts.get_mut(ctx.index, ctx.generation) {
            c.children -= 1;
        }
        let t = self.xrc.tgts.get_mut(&real.index).expect("live");
        t.handles.retain(|&h| h != qp);
        if !t.handles.is_empty() {
            return;
        }
        let domain = t.domain;
        self.xrc.tgts.remove(&real.index);
        let Some(q) = self.qps.get_mut(real.index, real.generation) else {
            return;
        };
        // Unbind what the last message bound (xrc_bind_message), so that
        // destroy_qp releases nothing the TGT QP never counted.
        q.srq = None;
        q.pd = None;
        let (qpn, rctx) = (q.qp_num, q.ctx);
        if let Some(d) = self.xrc.domains.get_mut(domain.0, domain.1) {
            d.tgt_qps.remove(&qpn);
        }
        // destroy_qp gives back a context child the real QP never held.
        if let Some(c) = self.contexts.get_mut(rctx.index, rctx.generation) {
            c.children += 1;
        }
        let _ = self.destroy_qp(real);
    }

    /// `ibv_open_qp`: a new handle to the XRC_TGT QP `attr.qp_num` of `xrcd`
    /// (xrc.md §1.4): `EINVAL` for another type, an unknown number, a QP of
    /// another domain.
    pub(crate) fn open_qp(
        &mut self,
        ctx: ContextHandle,
        xrcd: XrcdHandle,
        attr: &QpOpenAttr,
        verb: Verb,
    ) -> Result<QpHandle> {
        let real = self.find_tgt(ctx, xrcd, attr.qp_num, attr.qp_type, verb)?;
        Ok(self.new_tgt_handle(real, ctx, xrcd, attr.qp_context))
    }

    /// The real TGT QP `qpn` of the domain of `xrcd`, or why not.
    fn find_tgt(
        &self,
        ctx: ContextHandle,
        xrcd: XrcdHandle,
        qpn: u32,
        qp_type: QpType,
        verb: Verb,
    ) -> Result<QpHandle> {
        let device = self.ctx(ctx, verb)?.device;
        let o = self.xrcd_open(xrcd, verb)?;
        self.same_ctx(verb, "XRCD", o.ctx, ctx)?;
        let d = self.xrc.domains.get(o.domain.0, o.domain.1).expect("live");
        if qp_type != QpType::XrcRecv {
            return Err(invalid(
                verb,
                format!("only XRC_RECV QPs can be opened, not {qp_type}"),
            ));
        }
        if let Some(&real) = d.tgt_qps.get(&qpn) {
            return Ok(real);
        }
        Err(match self.qp_by_num(device, qpn) {
            None => invalid(verb, format!("no QP with number {qpn:#x} on the device")),
            Some(q) => match self.xrc.tgts.contains_key(&q.index) {
                true => invalid(
                    verb,
                    format!("XRC receive QP {qpn:#x} belongs to another XRC domain"),
                ),
                false => invalid(
                    verb,
                    format!(
                        "QP {qpn:#x} is a {} QP, not an XRC receive QP",
                        self.qps.get(q.index, q.generation).expect("live").qp_type
                    ),
                ),
            },
        })
    }

    /// Delivers an async event of a real XRC_TGT QP to every handle's
    /// context (the kernel's shared event handler). False if `qp` is not one.
    pub(crate) fn fan_out_tgt_event(&mut self, qp: QpHandle, event: AsyncEventType) -> bool {
        let Some(t) = self.xrc.tgts.get(&qp.index) else {
            return false;
        };
        let Some(q) = self.qps.get(qp.index, qp.generation) else {
            return false;
        };
        let (device, qpn) = (q.device, q.qp_num);
        for &h in &t.handles {
            let Some(o) = self.xrc.tgt_opens.get(h.index & !ALIAS_BIT, h.generation) else {
                continue;
            };
            // A legacy registration has no handle in the process: the event
            // names the QP by number (xrc.md §2.3, last row).
            let subject = if self.xrc.legacy.values().any(|&l| l == h) {
                AsyncSubject::QpNum(qpn)
            } else {
                AsyncSubject::Qp(h)
            };
            if let Some(c) = self.contexts.get_mut(o.ctx.index, o.ctx.generation) {
                c.async_events.push_back((event, subject));
            }
        }
        self.record(crate::trace::TraceEvent::AsyncEvent {
            device,
            event,
            element: qpn,
        });
        true
    }

    /// Data path: binds the XRC SRQ named by the sender's work request to
    /// the XRC_TGT QP `rq` for one packet (its SRQ and PD). `false` when
    /// the number names no XRC SRQ of the TGT QP's domain.
    pub(crate) fn xrc_bind_message(&mut self, rq: QpHandle, req: QpHandle, seq: u64) -> bool {
        let Some(s) = self.qps.get(req.index, req.generation) else {
            return false;
        };
        let srqn = s.sq.get(seq).0.remote_srqn;
        let Some(t) = self.xrc.tgts.get(&rq.index) else {
            return false;
        };
        let Some(r) = self.qps.get(rq.index, rq.generation) else {
            return false;
        };
        let Some(&srq) = self.xrc.srq_nums.get(&(r.device, srqn & 0xff_ffff)) else {
            return false;
        };
        let Some(x) = self.xrc.srqs.get(&srq.index) else {
            return false;
        };
        if x.domain != t.domain {
            return false;
        }
        let Some(pd) = self.srqs.get(srq.index, srq.generation).map(|s| s.pd) else {
            return false;
        };
        let r = self.qps.get_mut(rq.index, rq.generation).expect("live");
        r.srq = Some(srq);
        r.pd = Some(pd);
        true
    }

    /// Undoes [`World::xrc_bind_message`] after the packet.
    pub(crate) fn xrc_unbind_message(&mut self, rq: QpHandle) {
        if let Some(r) = self.qps.get_mut(rq.index, rq.generation) {
            r.srq = None;
            r.pd = None;
        }
    }

    // -------------------------------------------------------- legacy API

    fn legacy_key(&self, xrcd: XrcdHandle, qpn: u32, verb: Verb) -> Result<(ProcessId, u32, u32)> {
        let o = self.xrcd_open(xrcd, verb)?;
        let process = self.ctx(o.ctx, verb)?.process;
        Ok((process, self.xrcd_device(xrcd, verb)?, qpn & 0xff_ffff))
    }

    /// The calling process's registration handle for `qpn`, checked against
    /// the domain of `xrcd`.
    fn legacy_handle(&self, xrcd: XrcdHandle, qpn: u32, verb: Verb) -> Result<QpHandle> {
        let key = self.legacy_key(xrcd, qpn, verb)?;
        let Some(&h) = self.xrc.legacy.get(&key) else {
            // Say why: unknown number, not XRC, other domain, or simply
            // not registered.
            let ctx = self.xrcd_open(xrcd, verb)?.ctx;
            self.find_tgt(ctx, xrcd, qpn, QpType::XrcRecv, verb)?;
            return Err(invalid(
                verb,
                format!(
                    "process {} is not registered with XRC receive QP {qpn:#x}",
                    key.0 .0
                ),
            ));
        };
        let domain = self.xrcd_open(xrcd, verb)?.domain;
        let real = self.tgt_open(h, verb)?.real;
        if self.xrc.tgts.get(&real.index).map(|t| t.domain) != Some(domain) {
            return Err(invalid(
                verb,
                format!("XRC receive QP {qpn:#x} belongs to another XRC domain"),
            ));
        }
        Ok(h)
    }

    /// `ibv_create_xrc_rcv_qp`: a TGT QP in the domain, the calling process
    /// registered with it; returns its number.
    pub(crate) fn create_xrc_rcv_qp(&mut self, xrcd: XrcdHandle) -> Result<u32> {
        let v = Verb::CreateXrcRcvQp;
        let ctx = self.xrcd_open(xrcd, v)?.ctx;
        let mut attr = verbs_api::QpInitAttrEx::<SimVerbs> {
            qp_type: QpType::XrcRecv,
            comp_mask: verbs_api::QpInitAttrMask::XRCD,
            xrcd: Some(&xrcd),
            ..Default::default()
        };
        let h = self.create_qp(ctx, &mut attr, None, v)?;
        let real = self.resolve_qp(h, v)?;
        let qpn = self
            .qps
            .get(real.index, real.generation)
            .expect("live")
            .qp_num;
        let key = self.legacy_key(xrcd, qpn, v)?;
        self.xrc.legacy.insert(key, h);
        Ok(qpn)
    }

    /// `ibv_reg_xrc_rcv_qp`: registers the calling process (opens a handle).
    pub(crate) fn reg_xrc_rcv_qp(&mut self, xrcd: XrcdHandle, qpn: u32) -> Result<()> {
        let v = Verb::RegXrcRcvQp;
        let key = self.legacy_key(xrcd, qpn, v)?;
        let ctx = self.xrcd_open(xrcd, v)?.ctx;
        let real = self.find_tgt(ctx, xrcd, qpn, QpType::XrcRecv, v)?;
        if self.xrc.legacy.contains_key(&key) {
            return Err(Error::new(
                v,
                ErrorKind::AlreadyExists,
                format!(
                    "process {} is already registered with XRC receive QP {qpn:#x}",
                    key.0 .0
                ),
            ));
        }
        let h = self.new_tgt_handle(real, ctx, xrcd, 0);
        self.xrc.legacy.insert(key, h);
        Ok(())
    }

    /// `ibv_unreg_xrc_rcv_qp`: unregisters the calling process; the QP is
    /// destroyed when no process is registered (nor holds a handle).
    pub(crate) fn unreg_xrc_rcv_qp(&mut self, xrcd: XrcdHandle, qpn: u32) -> Result<()> {
        let v = Verb::UnregXrcRcvQp;
        let h = self.legacy_handle(xrcd, qpn, v)?;
        let key = self.legacy_key(xrcd, qpn, v)?;
        let o = self.tgt_open(h, v)?;
        let (real, ctx, hx) = (o.real, o.ctx, o.xrcd);
        self.xrc.legacy.remove(&key);
        self.close_tgt_handle(h, real, ctx, hx);
        Ok(())
    }

    /// `ibv_modify_xrc_rcv_qp`: `ibv_modify_qp` through the process's handle.
    pub(crate) fn modify_xrc_rcv_qp(
        &mut self,
        xrcd: XrcdHandle,
        qpn: u32,
        attr: &QpAttr,
        mask: QpAttrMask,
    ) -> Result<()> {
        let v = Verb::ModifyXrcRcvQp;
        let h = self.legacy_handle(xrcd, qpn, v)?;
        let real = self.resolve_qp(h, v)?;
        self.modify_qp(real, attr, mask)
            .map_err(|e| Error::new(v, e.kind(), e.message().to_owned()))
    }

    /// `ibv_query_xrc_rcv_qp`: `ibv_query_qp` through the process's handle.
    pub(crate) fn query_xrc_rcv_qp(
        &self,
        xrcd: XrcdHandle,
        qpn: u32,
        mask: QpAttrMask,
    ) -> Result<(QpAttr, QpInitInfo)> {
        let v = Verb::QueryXrcRcvQp;
        let h = self.legacy_handle(xrcd, qpn, v)?;
        self.query_qp_handle(h, mask)
            .map_err(|e| Error::new(v, e.kind(), e.message().to_owned()))
    }

    /// How many simulated processes are registered (legacy API) with the
    /// XRC receive QP `qpn` of `device`.
    pub fn xrc_rcv_registrations(&self, device: u32, qpn: u32) -> usize {
        self.xrc
            .legacy
            .keys()
            .filter(|&&(_, d, n)| d == device && n == qpn)
            .count()
    }

    /// How many handles (created, opened or registered) the real XRC_TGT
    /// QP `qpn` of `device` has; 0 when it does not exist.
    pub fn xrc_tgt_handles(&self, device: u32, qpn: u32) -> usize {
        self.qp_by_num(device, qpn)
            .and_then(|q| self.xrc.tgts.get(&q.index))
            .map_or(0, |t| t.handles.len())
    }
}

/// Capabilities written back by the creation of an XRC_TGT QP: it has
/// neither queue.
pub(crate) const TGT_CAP: QpCap = QpCap {
    max_send_wr: 0,
    max_recv_wr: 0,
    max_send_sge: 0,
    max_recv_sge: 0,
    max_inline_data: 0,
};

/// `attr` of the legacy `ibv_create_xrc_srq`, through `ibv_create_srq_ex`.
pub(crate) fn legacy_srq_attr<'a>(
    pd: &'a PdHandle,
    xrcd: &'a XrcdHandle,
    cq: &'a CqHandle,
    attr: SrqAttr,
) -> SrqInitAttrEx<'a, SimVerbs> {
    SrqInitAttrEx {
        attr,
        comp_mask: SrqInitAttrMask::TYPE
            | SrqInitAttrMask::PD
            | SrqInitAttrMask::XRCD
            | SrqInitAttrMask::CQ,
        srq_type: SrqType::Xrc,
        pd: Some(pd),
        xrcd: Some(xrcd),
        cq: Some(cq),
        ..SrqInitAttrEx::default()
    }
}
