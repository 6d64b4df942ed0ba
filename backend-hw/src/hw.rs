//! [`HwVerbs`]: the [`Verbs`] trait over libibverbs.

// Handles wrap `Arc`s (style rule R11) although their inners hold `Cell`s
// and raw pointers and so are `!Send`/`!Sync`: the backend is driven from one
// thread through `&mut self`. Making them `Send` needs a justified
// `unsafe impl` per inner and a lock around the pointer cell; not done yet.
#![allow(clippy::arc_with_non_send_sync)]

use core::cell::{Cell, RefCell};
use core::ffi::c_int;
use core::mem::size_of;
use core::ptr::{self, NonNull};
use std::sync::Arc;

use rdma_sys as sys;
use verbs_api::errno::{EINVAL, ENOMEM};
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
    type CmChannel = HwCmChannel;
    type CmId = HwCmId;

    fn backend(&self) -> BackendKind {
        BackendKind::Hw
    }

    fn capabilities(&mut self) -> Capabilities {
        // Only what this backend implements and the device can do; without a
        // device nothing is claimed.
        let Ok(n) = with_device_list(|d| d.len()) else {
            return Capabilities::empty();
        };
        if n == 0 {
            return Capabilities::empty();
        }
        let mut caps = Capabilities::RC
            | Capabilities::UC
            | Capabilities::UD
            | Capabilities::SRQ
            | Capabilities::DATA_PATH
            | Capabilities::MCAST
            | Capabilities::XRC
            | Capabilities::LEGACY_XRC
            | Capabilities::MULTI_PROCESS;
        if n >= 2 {
            caps |= Capabilities::TWO_DEVICES;
        }
        if cfg!(feature = "mlx5") {
            caps |= Capabilities::MLX5DV;
        }
        caps
    }

    fn get_device_list(&mut self) -> Result<Vec<DeviceInfo>> {
        with_device_list(|d| {
            let order = self.order(d)?;
            Ok(order.into_iter().map(|i| device_info(d[i])).collect())
        })?
    }

    fn open_device(&mut self, index: usize, process: ProcessId) -> Result<HwContext> {
        let order = match with_device_list(|d| self.order(d)) {
            Ok(Ok(o)) => o,
            Ok(Err(e)) | Err(e) => {
                return Err(
                    Error::new(Verb::OpenDevice, e.kind(), e.message().to_string())
                        .with_errno(e.errno()),
                )
            }
        };
        let real = order.get(index).copied();
        let opened = with_device_list(|d| match real.and_then(|r| d.get(r)) {
            None => Err(Error::new(
                Verb::OpenDevice,
                ErrorKind::NoDevice,
                format!("no RDMA device at index {index} ({} found)", d.len()),
            )),
            Some(&dev) => {
                let info = device_info(dev);
                // SAFETY: `dev` is an entry of the live list; the opened
                // context holds its own reference to the device, so freeing
                // the list afterwards is allowed.
                let ctx = unsafe { sys::ibv_open_device(dev) };
                if ctx.is_null() {
                    Err(c_error(Verb::OpenDevice, last_errno(), "ibv_open_device"))
                } else {
                    Ok((ctx, info.name))
                }
            }
        });
        let (raw, name) = match opened {
            Ok(r) => r?,
            Err(e) => {
                return Err(
                    Error::new(Verb::OpenDevice, e.kind(), e.message().to_string())
                        .with_errno(e.errno()),
                )
            }
        };
        Ok(HwContext(Arc::new(ContextInner::new(
            raw, self.id, process, name, false,
        ))))
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
        let (c, _) = self.ctx(ctx, Verb::QueryPort)?;
        let mut a: sys::ibv_port_attr = zeroed();
        // SAFETY: live context from `ibv_open_device`; `a` is writable.
        let rc = unsafe { fv::ibv_query_port(c, port_num, &mut a) };
        if rc != 0 {
            return Err(c_error(Verb::QueryPort, rc, "ibv_query_port"));
        }
        Ok(PortAttr {
            state: PortState::from_raw(a.state),
            max_mtu: Mtu::from_raw(a.max_mtu),
            active_mtu: Mtu::from_raw(a.active_mtu),
            gid_tbl_len: a.gid_tbl_len,
            port_cap_flags: a.port_cap_flags,
            max_msg_sz: a.max_msg_sz,
            bad_pkey_cntr: a.bad_pkey_cntr,
            qkey_viol_cntr: a.qkey_viol_cntr,
            pkey_tbl_len: a.pkey_tbl_len,
            lid: a.lid,
            sm_lid: a.sm_lid,
            lmc: a.lmc,
            max_vl_num: a.max_vl_num,
            sm_sl: a.sm_sl,
            subnet_timeout: a.subnet_timeout,
            init_type_reply: a.init_type_reply,
            active_width: a.active_width,
            active_speed: u32::from(a.active_speed),
            phys_state: a.phys_state,
            link_layer: LinkLayer::from_raw(u32::from(a.link_layer)),
            flags: a.flags,
        })
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
        let (c, inner) = self.ctx(ctx, Verb::CreateCq)?;
        let cqe = c_int::try_from(init.cqe)
            .map_err(|_| Error::invalid(Verb::CreateCq, "cqe too large"))?;
        let vector = c_int::try_from(init.comp_vector)
            .map_err(|_| Error::invalid(Verb::CreateCq, "comp_vector too large"))?;
        let chan = match init.channel {
            Some(ch) => {
                self.check_owner(&ch.0.obj.ctx, Verb::CreateCq, "completion channel")?;
                ch.0.obj.get(Verb::CreateCq)?
            }
            None => ptr::null_mut(),
        };
        // SAFETY: live context; the channel is live or NULL; `cq_context` is
        // an opaque value C only stores.
        let p =
            unsafe { sys::ibv_create_cq(c, cqe, init.cq_context as usize as *mut _, chan, vector) };
        let p = NonNull::new(p)
            .ok_or_else(|| c_error(Verb::CreateCq, last_errno(), "ibv_create_cq"))?;
        let cq = HwCq(Arc::new(CqInner {
            obj: Owned::new(p, inner),
            _channel: init.channel.cloned(),
            cq_context: init.cq_context,
            ex: None,
        }));
        register_cq(&cq);
        Ok(cq)
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
        self.check_owner(&cq.0.obj.ctx, Verb::PollCq, "CQ")?;
        let p = cq.0.obj.get(Verb::PollCq)?;
        let n = c_int::try_from(wc.len()).unwrap_or(c_int::MAX);
        let mut raw: Vec<sys::ibv_wc> = (0..n).map(|_| zeroed()).collect();
        // SAFETY: live CQ; `raw` has room for `n` completions; `&mut self`
        // serialises polling through this backend.
        let got = unsafe { fv::ibv_poll_cq(p, n, raw.as_mut_ptr()) };
        if got < 0 {
            return Err(Error::from_errno(
                Verb::PollCq,
                -got,
                "ibv_poll_cq failed (CQ in error: overrun?)",
            ));
        }
        for (dst, src) in wc.iter_mut().zip(&raw[..got as usize]) {
            let opcode = WcOpcode::from_raw(src.opcode);
            // SAFETY: both union members are a plain u32.
            let imm = unsafe { src.imm_data_invalidated_rkey_union.imm_data };
            let flags = WcFlags(src.wc_flags);
            *dst = Wc {
                wr_id: src.wr_id,
                status: WcStatus::from_raw(src.status),
                opcode,
                vendor_err: src.vendor_err,
                byte_len: src.byte_len,
                imm_data: if flags.contains(WcFlags::WITH_INV) {
                    imm
                } else {
                    u32::from_be(imm)
                },
                qp_num: src.qp_num,
                src_qp: src.src_qp,
                wc_flags: flags,
                pkey_index: src.pkey_index,
                slid: src.slid,
                sl: src.sl,
                dlid_path_bits: src.dlid_path_bits,
            };
        }
        Ok(got as usize)
    }

    fn reg_mr(&mut self, pd: &HwPd, length: usize, access: AccessFlags) -> Result<HwMr> {
        self.check_owner(&pd.0.obj.ctx, Verb::RegMr, "PD")?;
        let p = pd.0.obj.get(Verb::RegMr)?;
        let buf = PageBuf::new(length).ok_or_else(|| {
            Error::from_errno(
                Verb::RegMr,
                ENOMEM,
                format!("cannot allocate {length} bytes"),
            )
        })?;
        let acc = c_int::try_from(access.bits())
            .map_err(|_| Error::invalid(Verb::RegMr, "unknown access bits"))?;
        // SAFETY: live PD; `buf` is a live allocation of at least `length`
        // bytes that the MR inner keeps until after deregistration.
        let mr = unsafe { sys::ibv_reg_mr(p, buf.ptr.as_ptr().cast(), length, acc) };
        // On failure `buf` is freed here: nothing stays allocated.
        let mr =
            NonNull::new(mr).ok_or_else(|| c_error(Verb::RegMr, last_errno(), "ibv_reg_mr"))?;
        Ok(HwMr(Arc::new(MrInner {
            obj: Owned::new(mr, &pd.0.obj.ctx),
            buf,
            pd: RefCell::new(pd.clone()),
            access: Cell::new(access),
        })))
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
        self.check_owner(&pd.0.obj.ctx, Verb::CreateSrq, "PD")?;
        let p = pd.0.obj.get(Verb::CreateSrq)?;
        let mut init: sys::ibv_srq_init_attr = zeroed();
        init.attr = sys::ibv_srq_attr {
            max_wr: attr.max_wr,
            max_sge: attr.max_sge,
            srq_limit: attr.srq_limit,
        };
        // SAFETY: live PD; `init` is a valid attribute block.
        let s = unsafe { sys::ibv_create_srq(p, &mut init) };
        let s = NonNull::new(s)
            .ok_or_else(|| c_error(Verb::CreateSrq, last_errno(), "ibv_create_srq"))?;
        attr.max_wr = init.attr.max_wr;
        attr.max_sge = init.attr.max_sge;
        let srq = HwSrq(Arc::new(SrqInner {
            obj: Owned::new(s, &pd.0.obj.ctx),
            _pd: Some(pd.clone()),
            _cq: None,
            _xrcd: None,
        }));
        register_srq(&srq);
        Ok(srq)
    }

    fn create_srq_ex(
        &mut self,
        ctx: &HwContext,
        attr: &mut SrqInitAttrEx<'_, Self>,
    ) -> Result<HwSrq> {
        let verb = Verb::CreateSrqEx;
        let (c, inner) = self.ctx(ctx, verb)?;
        let mut init: sys::ibv_srq_init_attr_ex = zeroed();
        init.srq_context = attr.srq_context as usize as *mut _;
        init.attr = sys::ibv_srq_attr {
            max_wr: attr.attr.max_wr,
            max_sge: attr.attr.max_sge,
            srq_limit: attr.attr.srq_limit,
        };
        init.comp_mask = attr.comp_mask.bits();
        init.srq_type = attr.srq_type.to_raw();
        if let Some(pd) = attr.pd {
            self.check_owner(&pd.0.obj.ctx, verb, "PD")?;
            init.pd = pd.0.obj.get(verb)?;
        }
        if let Some(x) = attr.xrcd {
            self.check_owner(&x.0.obj.ctx, verb, "XRCD")?;
            init.xrcd = x.0.obj.get(verb)?;
        }
        if let Some(cq) = attr.cq {
            self.check_owner(&cq.0.obj.ctx, verb, "CQ")?;
            init.cq = cq.0.obj.get(verb)?;
        }
        // SAFETY: live context; every object named is live and of this
        // context (checked above); `init` is valid for reads and writes.
        let s = unsafe { fv::ibv_create_srq_ex(c, &mut init) }
            .map_err(|e| c_error(verb, e, "ibv_create_srq_ex"))?;
        attr.attr.max_wr = init.attr.max_wr;
        attr.attr.max_sge = init.attr.max_sge;
        let srq = HwSrq(Arc::new(SrqInner {
            obj: Owned::new(s, inner),
            _pd: attr.pd.cloned(),
            _cq: attr.cq.cloned(),
            _xrcd: attr.xrcd.cloned(),
        }));
        register_srq(&srq);
        Ok(srq)
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
        let verb = Verb::CreateQp;
        self.check_owner(&pd.0.obj.ctx, verb, "PD")?;
        let p = pd.0.obj.get(verb)?;
        let ex = self.qp_init_to_c(verb, attr)?;
        let mut init = sys::ibv_qp_init_attr {
            qp_context: ex.qp_context,
            send_cq: ex.send_cq,
            recv_cq: ex.recv_cq,
            srq: ex.srq,
            cap: ex.cap,
            qp_type: ex.qp_type,
            sq_sig_all: ex.sq_sig_all,
        };
        // SAFETY: live PD; every object in `init` is live and checked.
        let q = unsafe { sys::ibv_create_qp(p, &mut init) };
        let q = NonNull::new(q).ok_or_else(|| c_error(verb, last_errno(), "ibv_create_qp"))?;
        attr.cap = cap_from_c(&init.cap);
        let mut owned_attr = QpInitAttrEx {
            pd: Some(pd),
            ..QpInitAttrEx::default()
        };
        owned_attr.qp_type = attr.qp_type;
        owned_attr.send_cq = attr.send_cq;
        owned_attr.recv_cq = attr.recv_cq;
        owned_attr.srq = attr.srq;
        Ok(self.make_qp(verb, q, &pd.0.obj.ctx, &owned_attr, None))
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
        let p = self.qp_ptr(qp, Verb::QueryQp)?;
        let mut a: sys::ibv_qp_attr = zeroed();
        let mut init: sys::ibv_qp_init_attr = zeroed();
        let m = mask.bits() as c_int;
        // SAFETY: live QP; both out-parameters are writable.
        match unsafe { sys::ibv_query_qp(p, &mut a, m, &mut init) } {
            0 => Ok((
                qp_attr_from_c(&a),
                QpInitInfo {
                    qp_type: qp.0.qp_type,
                    cap: cap_from_c(&init.cap),
                    sq_sig_all: init.sq_sig_all != 0,
                    qp_context: init.qp_context as usize as u64,
                    has_srq: !init.srq.is_null(),
                },
            )),
            rc => Err(c_error(Verb::QueryQp, rc, "ibv_query_qp")),
        }
    }

    fn destroy_qp(&mut self, qp: &HwQp) -> Result<()> {
        self.qp_ptr(qp, Verb::DestroyQp)?;
        qp.0.obj.destroy()
    }

    fn open_qp(&mut self, ctx: &HwContext, xrcd: &HwXrcd, attr: &QpOpenAttr) -> Result<HwQp> {
        let verb = Verb::OpenQp;
        let (c, inner) = self.ctx(ctx, verb)?;
        let inner = Arc::clone(inner);
        self.check_owner(&xrcd.0.obj.ctx, verb, "XRCD")?;
        let mut oa: sys::ibv_qp_open_attr = zeroed();
        oa.comp_mask = (sys::ibv_qp_open_attr_mask::IBV_QP_OPEN_ATTR_NUM
            | sys::ibv_qp_open_attr_mask::IBV_QP_OPEN_ATTR_XRCD
            | sys::ibv_qp_open_attr_mask::IBV_QP_OPEN_ATTR_CONTEXT
            | sys::ibv_qp_open_attr_mask::IBV_QP_OPEN_ATTR_TYPE)
            .0;
        oa.qp_num = attr.qp_num;
        oa.xrcd = xrcd.0.obj.get(verb)?;
        oa.qp_context = attr.qp_context as usize as *mut _;
        oa.qp_type = attr.qp_type.to_raw();
        // SAFETY: live context; `oa` is valid and names a live XRCD of it.
        let q =
            unsafe { fv::ibv_open_qp(c, &mut oa) }.map_err(|e| c_error(verb, e, "ibv_open_qp"))?;
        let a = QpInitAttrEx {
            qp_type: attr.qp_type,
            xrcd: Some(xrcd),
            ..QpInitAttrEx::default()
        };
        Ok(self.make_qp(verb, q, &inner, &a, None))
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
        let verb = Verb::PostSend;
        let p = self.qp_ptr(qp, verb)?;
        if wrs.is_empty() {
            return Ok(());
        }
        #[cfg(feature = "mlx5")]
        if qp.0.dc_type == Some(DcType::Dci) {
            // SAFETY: `p` is this live DCI; the memory contract is ours,
            // passed on unchanged.
            return unsafe { self.post_send_dci(p, wrs) };
        }
        // Convert up to the first request that fails a check; the ones
        // before it are posted (C's `bad_wr` contract), then its error is
        // reported.
        let mut sges: Vec<Vec<sys::ibv_sge>> = Vec::with_capacity(wrs.len());
        let mut cw: Vec<sys::ibv_send_wr> = Vec::with_capacity(wrs.len());
        let mut failure = None;
        for (i, w) in wrs.iter().enumerate() {
            match self.send_wr_to_c(w) {
                Ok((c, s)) => {
                    cw.push(c);
                    sges.push(s);
                }
                Err(e) => {
                    failure = Some(e.with_bad_wr(i));
                    break;
                }
            }
        }
        if cw.is_empty() {
            return failure.map_or(Ok(()), Err);
        }
        // Link the chain now that neither vector moves any more.
        let n = cw.len();
        let base = cw.as_mut_ptr();
        for (i, (c, s)) in cw.iter_mut().zip(sges.iter_mut()).enumerate() {
            c.sg_list = if s.is_empty() {
                ptr::null_mut()
            } else {
                s.as_mut_ptr()
            };
            c.next = if i + 1 < n {
                // SAFETY: `i + 1 < n`, so the pointer stays inside `cw`.
                unsafe { base.add(i + 1) }
            } else {
                ptr::null_mut()
            };
        }
        let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
        // SAFETY: (1) live QP of a live context (the inner keeps them);
        // (2) `cw` is a NULL-terminated chain whose `sg_list`s point into
        // `sges`, both alive across the call; (3) `bad` is writable;
        // (4) the memory named by the SGEs is this method's own `# Safety`
        // contract, passed on to our caller.
        let rc = unsafe { fv::ibv_post_send(p, base, &mut bad) };
        if rc != 0 {
            let idx = if bad.is_null() {
                0
            } else {
                (bad as usize - base as usize) / size_of::<sys::ibv_send_wr>()
            };
            return Err(c_error(verb, rc, "ibv_post_send").with_bad_wr(idx));
        }
        failure.map_or(Ok(()), Err)
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

    fn close_xrc_domain(&mut self, xrcd: &HwXrcd) -> Result<()> {
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

    fn create_xrc_srq(
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

    fn create_xrc_rcv_qp(&mut self, xrcd: &HwXrcd) -> Result<u32> {
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

    fn unreg_xrc_rcv_qp(&mut self, xrcd: &HwXrcd, qp_num: u32) -> Result<()> {
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
        use crate::ffi::mlx5dv as dv;
        let (c, _) = self.ctx(ctx, Verb::Mlx5dvQueryDevice)?;
        let mut out = dv::mlx5dv_context::request(comp_mask.bits());
        // SAFETY: live context; `out` is at least as large as the installed
        // library's struct (layout test) and zeroed except `comp_mask`.
        let rc = unsafe { dv::mlx5dv_query_device(c, &mut out) };
        if rc != 0 {
            return Err(c_error(Verb::Mlx5dvQueryDevice, rc, "mlx5dv_query_device"));
        }
        let got = dv::Mlx5dvContext::from_filled(&out);
        let _ = dv::Mlx5dvContext::REQUEST;
        Ok(Mlx5Context {
            version: out.version,
            flags: Mlx5ContextFlags(got.flags),
            comp_mask: Mlx5ContextMask(out.comp_mask),
            dc_odp_caps: out.dc_odp_caps,
            dci_streams_caps: got
                .dci_streams_caps
                .map(|c| DciStreamsCaps {
                    max_log_num_concurent: c.max_log_num_concurent,
                    max_log_num_errored: c.max_log_num_errored,
                })
                .unwrap_or_default(),
            max_dc_rd_atom: got.max_dc_rd_atom.map_or(0, |(a, _)| a),
            max_dc_init_rd_atom: got.max_dc_rd_atom.map_or(0, |(_, b)| b),
            ooo_recv_wrs_caps: got
                .ooo_recv_wrs_caps
                .map(|c| OooRecvWrsCaps {
                    max_rc: c.max_rc,
                    max_xrc: c.max_xrc,
                    max_dct: c.max_dct,
                    max_ud: c.max_ud,
                    max_uc: c.max_uc,
                })
                .unwrap_or_default(),
        })
    }

    #[cfg(feature = "mlx5")]
    fn mlx5dv_create_qp(
        &mut self,
        ctx: &HwContext,
        attr: &mut QpInitAttrEx<'_, Self>,
        mlx5_attr: &Mlx5QpInitAttr,
    ) -> Result<HwQp> {
        use crate::ffi::mlx5dv as dv;
        let verb = Verb::Mlx5dvCreateQp;
        let (c, inner) = self.ctx(ctx, verb)?;
        let inner = Arc::clone(inner);
        let mut ex = self.qp_init_to_c(verb, attr)?;
        let mut m = dv::mlx5dv_qp_init_attr::zeroed();
        m.comp_mask = mlx5_attr.comp_mask.bits();
        m.create_flags = mlx5_attr.create_flags.bits();
        m.send_ops_flags = mlx5_attr.send_ops_flags.bits();
        m.dc_init_attr.dc_type = mlx5_attr.dc_init_attr.dc_type.to_raw();
        let is_dc = mlx5_attr.comp_mask.bits() & dv::MLX5DV_QP_INIT_ATTR_MASK_DC != 0;
        m.dc_init_attr.u =
            if mlx5_attr.comp_mask.bits() & dv::MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS != 0 {
                dv::mlx5dv_dc_init_attr_u {
                    dci_streams: dv::mlx5dv_dci_streams {
                        log_num_concurent: mlx5_attr.dc_init_attr.dci_streams.log_num_concurent,
                        log_num_errored: mlx5_attr.dc_init_attr.dci_streams.log_num_errored,
                    },
                }
            } else {
                dv::mlx5dv_dc_init_attr_u {
                    dct_access_key: mlx5_attr.dc_init_attr.dct_access_key,
                }
            };
        let _ = (
            dv::MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS,
            dv::MLX5DV_QP_CREATE_OOO_DP,
        );
        // SAFETY: live context; `ex` names live objects of this context
        // (checked); `m` is a fully initialised mlx5 attribute block whose
        // layout matches the header (layout test).
        let q = unsafe { dv::mlx5dv_create_qp(c, &mut ex, &mut m) };
        let q = NonNull::new(q).ok_or_else(|| c_error(verb, last_errno(), "mlx5dv_create_qp"))?;
        attr.cap = cap_from_c(&ex.cap);
        let dc = is_dc.then_some(mlx5_attr.dc_init_attr.dc_type);
        Ok(self.make_qp(verb, q, &inner, attr, dc))
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
}

#[cfg(test)]
mod tests;
