//! [`HwVerbs`]: the [`Verbs`] trait over libibverbs.

// Handles wrap `Arc`s (style rule R11) although their inners hold `Cell`s
// and raw pointers and so are `!Send`/`!Sync`: the backend is driven from one
// thread through `&mut self`. Making them `Send` needs a justified
// `unsafe impl` per inner and a lock around the pointer cell; not done yet.
#![allow(clippy::arc_with_non_send_sync)]

use core::cell::Cell;
use core::ffi::c_int;
use core::ptr::NonNull;
use std::sync::Arc;

use rdma_sys as sys;
use verbs_api::errno::EINVAL;
use verbs_api::*;

use crate::cm::{HwCmChannel, HwCmId};
use crate::errors::c_error;
use crate::ffi::verbs as fv;
use crate::ffi::verbs::last_errno;

// The layers below the trait impl; glob imports so every verb sees them.
use crate::backend::*;
use crate::convert::*;
use crate::handles::*;
use crate::post::post_recv_chain;
use crate::xrcd::open_xrcd_impl;

impl Verbs for HwVerbs {
    type Context = HwContext;
    type Pd = HwPd;
    type Cq = HwCq;
    type CompChannel = HwCompChannel;
    type Mr = HwMr;
    type Srq = HwSrq;
    type Qp = HwQp;
    type Ah = HwAh;
    type Xrcd = HwXrcd;
    type Mw = HwMw;
    type Dm = HwDm;
    type CmChannel = HwCmChannel;
    type CmId = HwCmId;

    fn backend(&self) -> BackendKind {
        BackendKind::Hw
    }

    fn capabilities(&mut self) -> Capabilities {
        self.capabilities_impl()
    }

    fn get_device_list(&mut self) -> Result<Vec<DeviceInfo>> {
        with_device_list(|d| {
            let order = self.order(d)?;
            Ok(order.into_iter().map(|i| device_info(d[i])).collect())
        })?
    }

    fn open_device(&mut self, index: usize, process: ProcessId) -> Result<HwContext> {
        self.open_device_impl(index, process)
    }

    fn close_device(&mut self, ctx: &HwContext) -> Result<()> {
        ctx.0.get(Verb::CloseDevice, self.id)?;
        let live = ctx.0.live.get();
        if live > 0 {
            return Err(Error::new(
                Verb::CloseDevice,
                ErrorKind::Busy,
                format!("{live} object(s) created on this context are still alive"),
            ));
        }
        ctx.0.close()
    }

    fn query_device(&mut self, ctx: &HwContext) -> Result<DeviceAttr> {
        let (c, _) = self.ctx(ctx, Verb::QueryDevice)?;
        let mut a: sys::ibv_device_attr = zeroed();
        // SAFETY: live context; `a` is a valid out-parameter.
        let rc = unsafe { sys::ibv_query_device(c, &mut a) };
        if rc != 0 {
            return Err(c_error(Verb::QueryDevice, rc, "ibv_query_device"));
        }
        Ok(device_attr_from_c(&a))
    }

    fn query_device_ex(&mut self, ctx: &HwContext) -> Result<DeviceAttrEx> {
        self.ext_query_device_ex(ctx)
    }

    fn query_gid_ex(
        &mut self,
        ctx: &HwContext,
        port_num: u32,
        gid_index: u32,
        flags: u32,
    ) -> Result<GidEntry> {
        self.ext_query_gid_ex(ctx, port_num, gid_index, flags)
    }

    fn query_gid_table(
        &mut self,
        ctx: &HwContext,
        max_entries: usize,
        flags: u32,
    ) -> Result<Vec<GidEntry>> {
        self.ext_query_gid_table(ctx, max_entries, flags)
    }

    fn resize_cq(&mut self, cq: &HwCq, cqe: u32) -> Result<()> {
        self.ext_resize_cq(cq, cqe)
    }

    fn create_cq_ex(&mut self, ctx: &HwContext, attr: &CqInitAttrEx<'_, Self>) -> Result<HwCq> {
        self.ext_create_cq_ex(ctx, attr)
    }

    fn poll_cq_ex(&mut self, cq: &HwCq, wc: &mut [WcEx]) -> Result<usize> {
        self.ext_poll_cq_ex(cq, wc)
    }

    fn rereg_mr(&mut self, mr: &HwMr, args: &ReregMr<'_, Self>) -> Result<()> {
        self.ext_rereg_mr(mr, args)
    }

    fn advise_mr(
        &mut self,
        pd: &HwPd,
        advice: AdviseMrAdvice,
        flags: u32,
        sg_list: &[Sge],
    ) -> Result<()> {
        self.ext_advise_mr(pd, advice, flags, sg_list)
    }

    fn alloc_mw(&mut self, pd: &HwPd, mw_type: MwType) -> Result<HwMw> {
        self.ext_alloc_mw(pd, mw_type)
    }

    fn dealloc_mw(&mut self, mw: &HwMw) -> Result<()> {
        self.ext_dealloc_mw(mw)
    }

    fn mw_info(&mut self, mw: &HwMw) -> Result<MwInfo> {
        self.ext_mw_info(mw)
    }

    fn bind_mw(&mut self, qp: &HwQp, mw: &HwMw, bind: &MwBind<'_, Self>) -> Result<()> {
        self.ext_bind_mw(qp, mw, bind)
    }

    fn alloc_dm(&mut self, ctx: &HwContext, attr: &AllocDmAttr) -> Result<HwDm> {
        self.alloc_dm_impl(ctx, attr)
    }

    fn free_dm(&mut self, dm: &HwDm) -> Result<()> {
        self.free_dm_impl(dm)
    }

    fn memcpy_to_dm(&mut self, dm: &HwDm, offset: u64, host: &[u8]) -> Result<()> {
        self.memcpy_to_dm_impl(dm, offset, host)
    }

    fn memcpy_from_dm(&mut self, dm: &HwDm, offset: u64, host: &mut [u8]) -> Result<()> {
        self.memcpy_from_dm_impl(dm, offset, host)
    }

    fn reg_dm_mr(
        &mut self,
        pd: &HwPd,
        dm: &HwDm,
        offset: u64,
        length: usize,
        access: AccessFlags,
    ) -> Result<HwMr> {
        self.reg_dm_mr_impl(pd, dm, offset, length, access)
    }

    fn query_qp_data_in_order(
        &mut self,
        qp: &HwQp,
        op: WrOpcode,
        flags: DataInOrderFlags,
    ) -> Result<DataInOrderCaps> {
        self.ext_query_qp_data_in_order(qp, op, flags)
    }

    fn query_ece(&mut self, qp: &HwQp) -> Result<Ece> {
        self.ext_query_ece(qp)
    }

    fn set_ece(&mut self, qp: &HwQp, ece: &mut Ece) -> Result<()> {
        self.ext_set_ece(qp, ece)
    }

    #[allow(unsafe_code)]
    unsafe fn post_wr(&mut self, qp: &HwQp, batch: &[WrEx<'_, Self>]) -> Result<()> {
        // SAFETY: our caller's `post_send` contract, passed on unchanged.
        unsafe { self.ext_post_wr(qp, batch) }
    }

    fn query_port(&mut self, ctx: &HwContext, port_num: u8) -> Result<PortAttr> {
        self.query_port_impl(ctx, port_num)
    }

    fn query_gid(&mut self, ctx: &HwContext, port_num: u8, index: u32) -> Result<Gid> {
        let (c, _) = self.ctx(ctx, Verb::QueryGid)?;
        let idx = c_int::try_from(index)
            .map_err(|_| Error::invalid(Verb::QueryGid, "GID index too large"))?;
        let mut g = sys::ibv_gid { raw: [0; 16] };
        // SAFETY: live context; `g` is writable.
        if unsafe { sys::ibv_query_gid(c, port_num, idx, &mut g) } != 0 {
            return Err(c_error(Verb::QueryGid, last_errno(), "ibv_query_gid"));
        }
        Ok(to_gid(&g))
    }

    fn query_pkey(&mut self, ctx: &HwContext, port_num: u8, index: u16) -> Result<u16> {
        let (c, _) = self.ctx(ctx, Verb::QueryPkey)?;
        let mut pkey = 0u16;
        // SAFETY: live context; `pkey` is writable.
        if unsafe { sys::ibv_query_pkey(c, port_num, c_int::from(index), &mut pkey) } != 0 {
            return Err(c_error(Verb::QueryPkey, last_errno(), "ibv_query_pkey"));
        }
        Ok(u16::from_be(pkey))
    }

    fn alloc_pd(&mut self, ctx: &HwContext) -> Result<HwPd> {
        let (c, inner) = self.ctx(ctx, Verb::AllocPd)?;
        // SAFETY: live context.
        let p = unsafe { sys::ibv_alloc_pd(c) };
        let p =
            NonNull::new(p).ok_or_else(|| c_error(Verb::AllocPd, last_errno(), "ibv_alloc_pd"))?;
        Ok(HwPd(Arc::new(PdInner {
            obj: Owned::new(p, inner),
        })))
    }

    fn dealloc_pd(&mut self, pd: &HwPd) -> Result<()> {
        self.check_owner(&pd.0.obj.ctx, Verb::DeallocPd, "PD")?;
        pd.0.obj.destroy()
    }

    fn create_comp_channel(&mut self, ctx: &HwContext) -> Result<HwCompChannel> {
        let (c, inner) = self.ctx(ctx, Verb::CreateCompChannel)?;
        // SAFETY: live context.
        let p = unsafe { sys::ibv_create_comp_channel(c) };
        let p = NonNull::new(p).ok_or_else(|| {
            c_error(
                Verb::CreateCompChannel,
                last_errno(),
                "ibv_create_comp_channel",
            )
        })?;
        let ch = HwCompChannel(Arc::new(ChanInner {
            obj: Owned::new(p, inner),
            nonblock: Cell::new(false),
        }));
        // `ibv_get_cq_event` is non-blocking in this API: make the fd so now.
        ensure_chan_nonblocking(&ch, Verb::CreateCompChannel)?;
        Ok(ch)
    }

    fn destroy_comp_channel(&mut self, channel: &HwCompChannel) -> Result<()> {
        self.check_owner(
            &channel.0.obj.ctx,
            Verb::DestroyCompChannel,
            "completion channel",
        )?;
        channel.0.obj.destroy()
    }

    fn create_cq(&mut self, ctx: &HwContext, init: &CqInit<'_, Self>) -> Result<HwCq> {
        self.create_cq_impl(ctx, init)
    }

    fn cq_info(&mut self, cq: &HwCq) -> Result<CqInfo> {
        self.check_owner(&cq.0.obj.ctx, Verb::CreateCq, "CQ")?;
        let p = cq.0.obj.get(Verb::CreateCq)?;
        // SAFETY: `p` is a live CQ.
        let cqe = unsafe { (*p).cqe };
        Ok(CqInfo {
            cqe: u(cqe),
            cq_context: cq.0.cq_context,
        })
    }

    fn destroy_cq(&mut self, cq: &HwCq) -> Result<()> {
        self.check_owner(&cq.0.obj.ctx, Verb::DestroyCq, "CQ")?;
        cq.0.obj.destroy()
    }

    fn req_notify_cq(&mut self, cq: &HwCq, solicited_only: bool) -> Result<()> {
        self.check_owner(&cq.0.obj.ctx, Verb::ReqNotifyCq, "CQ")?;
        let p = cq.0.obj.get(Verb::ReqNotifyCq)?;
        // SAFETY: live CQ of a live context (the inner keeps both alive).
        match unsafe { fv::ibv_req_notify_cq(p, c_int::from(solicited_only)) } {
            0 => Ok(()),
            rc => Err(c_error(Verb::ReqNotifyCq, rc, "ibv_req_notify_cq")),
        }
    }

    fn ack_cq_events(&mut self, cq: &HwCq, nevents: u32) -> Result<()> {
        crate::events::ack_cq_events(self, cq, nevents)
    }

    fn get_cq_event(&mut self, channel: &HwCompChannel) -> Result<Option<HwCq>> {
        crate::events::get_cq_event(self, channel)
    }

    fn get_async_event(&mut self, ctx: &HwContext) -> Result<Option<AsyncEvent<Self>>> {
        crate::events::get_async_event(self, ctx)
    }

    fn ack_async_event(&mut self, event: &AsyncEvent<Self>) -> Result<()> {
        crate::events::ack_async_event(self, event)
    }

    fn poll_cq(&mut self, cq: &HwCq, wc: &mut [Wc]) -> Result<usize> {
        self.poll_cq_impl(cq, wc)
    }

    fn reg_mr(&mut self, pd: &HwPd, length: usize, access: AccessFlags) -> Result<HwMr> {
        self.reg_mr_impl(pd, length, access)
    }

    fn mr_info(&mut self, mr: &HwMr) -> Result<MrInfo> {
        self.check_owner(&mr.0.obj.ctx, Verb::MrBytes, "MR")?;
        let p = mr.0.obj.get(Verb::MrBytes)?;
        // SAFETY: `p` is a live MR.
        let m = unsafe { &*p };
        Ok(MrInfo {
            addr: m.addr as u64,
            length: m.length as u64,
            lkey: m.lkey,
            rkey: m.rkey,
            access: mr.0.access.get(),
        })
    }

    fn mr_bytes<'a>(&'a self, mr: &'a HwMr) -> Result<&'a [u8]> {
        self.check_owner(&mr.0.obj.ctx, Verb::MrBytes, "MR")?;
        crate::dm::dm_mr_has_no_bytes(mr)?;
        let b = &mr.0.buf;
        // SAFETY: `b` is a live allocation of `len` initialised (zeroed)
        // bytes that lives as long as `mr`; mutable access only goes through
        // `mr_bytes_mut`, which needs `&mut self` of this same instance
        // (checked above), so no `&mut` alias exists for `'a`. Bytes the NIC
        // writes concurrently are the `post_*` unsafe contract's business.
        Ok(unsafe { core::slice::from_raw_parts(b.ptr.as_ptr(), b.len) })
    }

    fn mr_bytes_mut<'a>(&'a mut self, mr: &'a HwMr) -> Result<&'a mut [u8]> {
        self.check_owner(&mr.0.obj.ctx, Verb::MrBytes, "MR")?;
        crate::dm::dm_mr_has_no_bytes(mr)?;
        let b = &mr.0.buf;
        // SAFETY: as in `mr_bytes`; `&'a mut self` excludes every other
        // slice of any MR of this instance for `'a`.
        Ok(unsafe { core::slice::from_raw_parts_mut(b.ptr.as_ptr(), b.len) })
    }

    fn dereg_mr(&mut self, mr: &HwMr) -> Result<()> {
        self.check_owner(&mr.0.obj.ctx, Verb::DeregMr, "MR")?;
        mr.0.obj.destroy()
    }

    fn create_srq(&mut self, pd: &HwPd, attr: &mut SrqAttr) -> Result<HwSrq> {
        self.create_srq_impl(pd, attr)
    }

    fn create_srq_ex(
        &mut self,
        ctx: &HwContext,
        attr: &mut SrqInitAttrEx<'_, Self>,
    ) -> Result<HwSrq> {
        self.create_srq_ex_impl(ctx, attr)
    }

    fn modify_srq(&mut self, srq: &HwSrq, attr: &SrqAttr, mask: SrqAttrMask) -> Result<()> {
        self.check_owner(&srq.0.obj.ctx, Verb::ModifySrq, "SRQ")?;
        let p = srq.0.obj.get(Verb::ModifySrq)?;
        let mut a = sys::ibv_srq_attr {
            max_wr: attr.max_wr,
            max_sge: attr.max_sge,
            srq_limit: attr.srq_limit,
        };
        // SAFETY: live SRQ; `a` is a valid attribute block.
        match unsafe { sys::ibv_modify_srq(p, &mut a, mask.bits() as c_int) } {
            0 => Ok(()),
            rc => Err(c_error(Verb::ModifySrq, rc, "ibv_modify_srq")),
        }
    }

    fn query_srq(&mut self, srq: &HwSrq) -> Result<SrqAttr> {
        self.check_owner(&srq.0.obj.ctx, Verb::QuerySrq, "SRQ")?;
        let p = srq.0.obj.get(Verb::QuerySrq)?;
        let mut a: sys::ibv_srq_attr = zeroed();
        // SAFETY: live SRQ; `a` is writable.
        match unsafe { sys::ibv_query_srq(p, &mut a) } {
            0 => Ok(SrqAttr {
                max_wr: a.max_wr,
                max_sge: a.max_sge,
                srq_limit: a.srq_limit,
            }),
            rc => Err(c_error(Verb::QuerySrq, rc, "ibv_query_srq")),
        }
    }

    fn destroy_srq(&mut self, srq: &HwSrq) -> Result<()> {
        self.check_owner(&srq.0.obj.ctx, Verb::DestroySrq, "SRQ")?;
        srq.0.obj.destroy()
    }

    fn get_srq_num(&mut self, srq: &HwSrq) -> Result<u32> {
        self.check_owner(&srq.0.obj.ctx, Verb::GetSrqNum, "SRQ")?;
        let p = srq.0.obj.get(Verb::GetSrqNum)?;
        // SAFETY: live SRQ of a live context.
        unsafe { fv::ibv_get_srq_num(p) }
            .map_err(|e| c_error(Verb::GetSrqNum, e, "ibv_get_srq_num"))
    }

    fn create_qp(&mut self, pd: &HwPd, attr: &mut QpInitAttrEx<'_, Self>) -> Result<HwQp> {
        self.create_qp_impl(pd, attr)
    }

    fn create_qp_ex(&mut self, ctx: &HwContext, attr: &mut QpInitAttrEx<'_, Self>) -> Result<HwQp> {
        let verb = Verb::CreateQpEx;
        let (c, inner) = self.ctx(ctx, verb)?;
        let inner = Arc::clone(inner);
        let mut ex = self.qp_init_to_c(verb, attr)?;
        // SAFETY: live context; every object named is live, of this
        // context (checked), and `ex` is valid for reads and writes.
        let q = unsafe { fv::ibv_create_qp_ex(c, &mut ex) }
            .map_err(|e| c_error(verb, e, "ibv_create_qp_ex"))?;
        attr.cap = cap_from_c(&ex.cap);
        Ok(self.make_qp(verb, q, &inner, attr, None))
    }

    fn qp_num(&mut self, qp: &HwQp) -> Result<u32> {
        self.qp_ptr(qp, Verb::QueryQp)?;
        Ok(qp.0.qp_num)
    }

    fn modify_qp(&mut self, qp: &HwQp, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        let p = self.qp_ptr(qp, Verb::ModifyQp)?;
        let mut a = qp_attr_to_c(attr);
        // The bits go to the provider as C's int: unknown high bits are its
        // (and the kernel's) to refuse, not ours.
        let m = mask.bits() as c_int;
        // SAFETY: live QP; `a` is a valid attribute block.
        match unsafe { sys::ibv_modify_qp(p, &mut a, m) } {
            0 => Ok(()),
            EINVAL => Err(self.diagnose_einval(qp, p, attr, mask)),
            rc => Err(c_error(Verb::ModifyQp, rc, "ibv_modify_qp")),
        }
    }

    fn query_qp(&mut self, qp: &HwQp, mask: QpAttrMask) -> Result<(QpAttr, QpInitInfo)> {
        self.query_qp_impl(qp, mask)
    }

    fn destroy_qp(&mut self, qp: &HwQp) -> Result<()> {
        self.qp_ptr(qp, Verb::DestroyQp)?;
        qp.0.obj.destroy()
    }

    fn open_qp(&mut self, ctx: &HwContext, xrcd: &HwXrcd, attr: &QpOpenAttr) -> Result<HwQp> {
        self.open_qp_impl(ctx, xrcd, attr)
    }

    fn attach_mcast(&mut self, qp: &HwQp, gid: &Gid, lid: u16) -> Result<()> {
        let p = self.qp_ptr(qp, Verb::AttachMcast)?;
        let g = from_gid(gid);
        // SAFETY: live QP; `g` is a valid GID.
        match unsafe { sys::ibv_attach_mcast(p, &g, lid) } {
            0 => Ok(()),
            rc => Err(c_error(Verb::AttachMcast, rc, "ibv_attach_mcast")),
        }
    }

    fn detach_mcast(&mut self, qp: &HwQp, gid: &Gid, lid: u16) -> Result<()> {
        let p = self.qp_ptr(qp, Verb::DetachMcast)?;
        let g = from_gid(gid);
        // SAFETY: live QP; `g` is a valid GID.
        match unsafe { sys::ibv_detach_mcast(p, &g, lid) } {
            0 => Ok(()),
            rc => Err(c_error(Verb::DetachMcast, rc, "ibv_detach_mcast")),
        }
    }

    fn create_ah(&mut self, pd: &HwPd, attr: &AhAttr) -> Result<HwAh> {
        self.check_owner(&pd.0.obj.ctx, Verb::CreateAh, "PD")?;
        let p = pd.0.obj.get(Verb::CreateAh)?;
        let mut a = ah_to_c(attr);
        // SAFETY: live PD; `a` is a valid attribute block.
        let ah = unsafe { sys::ibv_create_ah(p, &mut a) };
        let ah = NonNull::new(ah)
            .ok_or_else(|| c_error(Verb::CreateAh, last_errno(), "ibv_create_ah"))?;
        Ok(HwAh(Arc::new(AhInner {
            obj: Owned::new(ah, &pd.0.obj.ctx),
            _pd: pd.clone(),
        })))
    }

    fn destroy_ah(&mut self, ah: &HwAh) -> Result<()> {
        self.check_owner(&ah.0.obj.ctx, Verb::DestroyAh, "AH")?;
        ah.0.obj.destroy()
    }

    #[allow(unsafe_code)]
    unsafe fn post_send(&mut self, qp: &HwQp, wrs: &[SendWr<'_, Self>]) -> Result<()> {
        // SAFETY: the caller upholds `post_send`'s contract, which `post_send_impl` shares.
        unsafe { self.post_send_impl(qp, wrs) }
    }

    #[allow(unsafe_code)]
    unsafe fn post_recv(&mut self, qp: &HwQp, wrs: &[RecvWr<'_>]) -> Result<()> {
        let p = self.qp_ptr(qp, Verb::PostRecv)?;
        post_recv_chain(Verb::PostRecv, wrs, |head, bad| {
            // SAFETY: live QP; `head` is a valid NULL-terminated chain built
            // by `post_recv_chain`; `bad` is writable; the buffers are the
            // caller's `# Safety` contract.
            unsafe { fv::ibv_post_recv(p, head, bad) }
        })
    }

    #[allow(unsafe_code)]
    unsafe fn post_srq_recv(&mut self, srq: &HwSrq, wrs: &[RecvWr<'_>]) -> Result<()> {
        self.check_owner(&srq.0.obj.ctx, Verb::PostSrqRecv, "SRQ")?;
        let p = srq.0.obj.get(Verb::PostSrqRecv)?;
        post_recv_chain(Verb::PostSrqRecv, wrs, |head, bad| {
            // SAFETY: live SRQ; valid chain; writable `bad`; the buffers are
            // the caller's `# Safety` contract.
            unsafe { fv::ibv_post_srq_recv(p, head, bad) }
        })
    }

    fn open_xrcd(&mut self, ctx: &HwContext, attr: &XrcdInitAttr) -> Result<HwXrcd> {
        open_xrcd_impl(
            self,
            ctx,
            Verb::OpenXrcd,
            attr.comp_mask,
            attr.fd,
            attr.oflags,
        )
    }

    fn close_xrcd(&mut self, xrcd: &HwXrcd) -> Result<()> {
        self.check_owner(&xrcd.0.obj.ctx, Verb::CloseXrcd, "XRCD")?;
        xrcd.0.obj.destroy()
    }

    fn open_xrc_domain(
        &mut self,
        ctx: &HwContext,
        fd: XrcdFile,
        oflags: OpenFlags,
    ) -> Result<HwXrcd> {
        self.open_xrc_domain_impl(ctx, fd, oflags)
    }

    fn close_xrc_domain(&mut self, xrcd: &HwXrcd) -> Result<()> {
        self.close_xrc_domain_impl(xrcd)
    }

    fn create_xrc_srq(
        &mut self,
        pd: &HwPd,
        xrcd: &HwXrcd,
        xrc_cq: &HwCq,
        attr: &mut SrqAttr,
    ) -> Result<HwSrq> {
        self.create_xrc_srq_impl(pd, xrcd, xrc_cq, attr)
    }

    fn create_xrc_rcv_qp(&mut self, xrcd: &HwXrcd) -> Result<u32> {
        self.create_xrc_rcv_qp_impl(xrcd)
    }

    fn modify_xrc_rcv_qp(
        &mut self,
        xrcd: &HwXrcd,
        qp_num: u32,
        attr: &QpAttr,
        mask: QpAttrMask,
    ) -> Result<()> {
        let qp = self.legacy_qp(xrcd, qp_num, Verb::ModifyXrcRcvQp)?;
        self.modify_qp(&qp, attr, mask)
    }

    fn query_xrc_rcv_qp(
        &mut self,
        xrcd: &HwXrcd,
        qp_num: u32,
        mask: QpAttrMask,
    ) -> Result<(QpAttr, QpInitInfo)> {
        let qp = self.legacy_qp(xrcd, qp_num, Verb::QueryXrcRcvQp)?;
        self.query_qp(&qp, mask)
    }

    fn reg_xrc_rcv_qp(&mut self, xrcd: &HwXrcd, qp_num: u32) -> Result<()> {
        self.reg_xrc_rcv_qp_impl(xrcd, qp_num)
    }

    fn unreg_xrc_rcv_qp(&mut self, xrcd: &HwXrcd, qp_num: u32) -> Result<()> {
        self.unreg_xrc_rcv_qp_impl(xrcd, qp_num)
    }

    fn rdma_create_event_channel(&mut self) -> Result<HwCmChannel> {
        self.cm_create_event_channel()
    }

    fn rdma_destroy_event_channel(&mut self, channel: &HwCmChannel) -> Result<()> {
        self.cm_destroy_event_channel(channel)
    }

    fn rdma_create_id(
        &mut self,
        channel: &HwCmChannel,
        context: u64,
        ps: PortSpace,
    ) -> Result<HwCmId> {
        self.cm_create_id(channel, context, ps)
    }

    fn rdma_destroy_id(&mut self, id: &HwCmId) -> Result<()> {
        self.cm_destroy_id(id)
    }

    fn rdma_id_info(&mut self, id: &HwCmId) -> Result<CmIdInfo<Self>> {
        self.cm_id_info(id)
    }

    fn rdma_bind_addr(&mut self, id: &HwCmId, addr: std::net::SocketAddr) -> Result<()> {
        self.cm_bind_addr(id, addr)
    }

    fn rdma_resolve_addr(
        &mut self,
        id: &HwCmId,
        src: Option<std::net::SocketAddr>,
        dst: std::net::SocketAddr,
        timeout_ms: u32,
    ) -> Result<()> {
        self.cm_resolve_addr(id, src, dst, timeout_ms)
    }

    fn rdma_resolve_route(&mut self, id: &HwCmId, timeout_ms: u32) -> Result<()> {
        self.cm_resolve_route(id, timeout_ms)
    }

    fn rdma_listen(&mut self, id: &HwCmId, backlog: i32) -> Result<()> {
        self.cm_listen(id, backlog)
    }

    fn rdma_connect(&mut self, id: &HwCmId, param: &ConnParam) -> Result<()> {
        self.cm_connect(id, param, false)
    }

    fn rdma_accept(&mut self, id: &HwCmId, param: &ConnParam) -> Result<()> {
        self.cm_connect(id, param, true)
    }

    fn rdma_reject(&mut self, id: &HwCmId, private_data: &[u8]) -> Result<()> {
        self.cm_reject(id, private_data)
    }

    fn rdma_disconnect(&mut self, id: &HwCmId) -> Result<()> {
        self.cm_disconnect(id)
    }

    fn rdma_establish(&mut self, id: &HwCmId) -> Result<()> {
        self.cm_establish(id)
    }

    fn rdma_join_multicast(
        &mut self,
        id: &HwCmId,
        addr: std::net::SocketAddr,
        context: u64,
    ) -> Result<()> {
        self.cm_join_multicast(id, addr, None, context)
    }

    fn rdma_join_multicast_ex(
        &mut self,
        id: &HwCmId,
        attr: &JoinMcAttr,
        context: u64,
    ) -> Result<()> {
        self.cm_join_multicast(id, attr.addr, Some(attr.join_flags), context)
    }

    fn rdma_leave_multicast(&mut self, id: &HwCmId, addr: std::net::SocketAddr) -> Result<()> {
        self.cm_leave_multicast(id, addr)
    }

    fn rdma_get_cm_event(&mut self, channel: &HwCmChannel) -> Result<Option<CmEvent<Self>>> {
        self.cm_get_event(channel)
    }

    fn rdma_ack_cm_event(&mut self, event: CmEvent<Self>) -> Result<()> {
        self.cm_ack_event(event)
    }

    fn rdma_create_qp(
        &mut self,
        id: &HwCmId,
        pd: Option<&HwPd>,
        attr: &mut QpInitAttrEx<'_, Self>,
    ) -> Result<HwQp> {
        self.cm_create_qp(id, Some(pd), attr)
    }

    fn rdma_create_qp_ex(
        &mut self,
        id: &HwCmId,
        attr: &mut QpInitAttrEx<'_, Self>,
    ) -> Result<HwQp> {
        self.cm_create_qp(id, None, attr)
    }

    fn rdma_destroy_qp(&mut self, id: &HwCmId) -> Result<()> {
        self.cm_destroy_qp(id)
    }

    fn rdma_init_qp_attr(&mut self, id: &HwCmId, state: QpState) -> Result<(QpAttr, QpAttrMask)> {
        let verb = Verb::RdmaInitQpAttr;
        let p = self.cm_id(id, verb)?;
        let mut attr: sys::ibv_qp_attr = zeroed();
        attr.qp_state = state.to_raw();
        let mut mask: c_int = 0;
        // SAFETY: `p` is a live rdma_cm id of this backend; `attr` and `mask`
        // are valid for writes for the duration of the call.
        let rc = unsafe { sys::rdma_init_qp_attr(p, &mut attr, &mut mask) };
        if rc != 0 {
            return Err(c_error(verb, last_errno(), "rdma_init_qp_attr"));
        }
        Ok((qp_attr_from_c(&attr), QpAttrMask(mask as u32)))
    }

    #[cfg(feature = "mlx5")]
    fn mlx5dv_query_device(
        &mut self,
        ctx: &HwContext,
        comp_mask: Mlx5ContextMask,
    ) -> Result<Mlx5Context> {
        self.mlx5dv_query_device_impl(ctx, comp_mask)
    }

    #[cfg(feature = "mlx5")]
    fn mlx5dv_create_qp(
        &mut self,
        ctx: &HwContext,
        attr: &mut QpInitAttrEx<'_, Self>,
        mlx5_attr: &Mlx5QpInitAttr,
    ) -> Result<HwQp> {
        self.mlx5dv_create_qp_impl(ctx, attr, mlx5_attr)
    }

    #[cfg(feature = "mlx5")]
    fn mlx5dv_dci_stream_id_reset(&mut self, qp: &HwQp, stream_id: u16) -> Result<()> {
        let p = self.qp_ptr(qp, Verb::Mlx5dvDciStreamIdReset)?;
        // SAFETY: live QP (a DCI with streams, or the library refuses).
        match unsafe { crate::ffi::mlx5dv::mlx5dv_dci_stream_id_reset(p, stream_id) } {
            0 => Ok(()),
            rc => Err(c_error(
                Verb::Mlx5dvDciStreamIdReset,
                rc,
                "mlx5dv_dci_stream_id_reset",
            )),
        }
    }

    #[cfg(feature = "mlx5")]
    fn mlx5dv_reserved_qpn_alloc(&mut self, ctx: &HwContext) -> Result<u32> {
        self.mlx5dv_reserved_qpn_alloc_impl(ctx)
    }

    #[cfg(feature = "mlx5")]
    fn mlx5dv_reserved_qpn_dealloc(&mut self, ctx: &HwContext, qpn: u32) -> Result<()> {
        self.mlx5dv_reserved_qpn_dealloc_impl(ctx, qpn)
    }

    #[cfg(feature = "mlx5")]
    fn mlx5dv_get_clock_info(&mut self, ctx: &HwContext) -> Result<ClockInfo> {
        self.mlx5dv_get_clock_info_impl(ctx)
    }

    fn query_rt_values_ex(&mut self, ctx: &HwContext) -> Result<u64> {
        self.ext_query_rt_values_ex(ctx)
    }
}

#[cfg(test)]
mod tests;
