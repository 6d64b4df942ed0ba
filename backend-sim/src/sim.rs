//! [`SimVerbs`]: the `Verbs` trait over a [`World`] (a thin adapter, R1).

use verbs_api::*;

use crate::handles::*;
use crate::world::cm::CmOwned;
use crate::world::{AsyncSubject, World, TIME_HORIZON_NS};
use crate::{SimConfig, Trace};

/// The simulator backend: one [`World`] behind the [`Verbs`] trait.
///
/// ```
/// use backend_sim::{SimConfig, SimVerbs};
/// use verbs_api::{ProcessId, Verbs};
///
/// let mut sim = SimVerbs::new(SimConfig::default());
/// let ctx = sim.open_device(0, ProcessId(0)).unwrap();
/// let pd = sim.alloc_pd(&ctx).unwrap();
/// sim.dealloc_pd(&pd).unwrap();
/// sim.close_device(&ctx).unwrap();
/// ```
#[derive(Debug)]
pub struct SimVerbs {
    world: World,
}

mod inherent;

impl Verbs for SimVerbs {
    type Context = ContextHandle;
    type Pd = PdHandle;
    type Cq = CqHandle;
    type CompChannel = CompChannelHandle;
    type Mr = MrHandle;
    type Srq = SrqHandle;
    type Qp = QpHandle;
    type Ah = AhHandle;
    type Xrcd = XrcdHandle;
    type Mw = MwHandle;
    type Dm = DmHandle;
    type CmChannel = CmChannelHandle;
    type CmId = CmIdHandle;

    fn backend(&self) -> BackendKind {
        BackendKind::Sim
    }

    fn capabilities(&mut self) -> Capabilities {
        let mut caps = Capabilities::RC
            | Capabilities::UC
            | Capabilities::UD
            | Capabilities::SRQ
            | Capabilities::MCAST
            | Capabilities::MULTI_PROCESS
            | Capabilities::DATA_PATH
            | Capabilities::RDMA_CM
            | Capabilities::SIM;
        if self.world.device_count() >= 2 {
            caps |= Capabilities::TWO_DEVICES;
        }
        if self.world.device_profile(0).is_some_and(|p| p.xrc) {
            caps |= Capabilities::XRC | Capabilities::LEGACY_XRC;
        }
        if self
            .world
            .device_profile(0)
            .is_some_and(|p| p.attr.atomic_cap != AtomicCap::None)
        {
            caps |= Capabilities::ATOMICS;
        }
        // mlx5dv, DC, DCI streams and OOO as device 0's profile has them.
        if let Some(m) = self.world.device_profile(0).and_then(|p| p.mlx5) {
            caps |= Capabilities::MLX5DV;
            if m.dc {
                caps |= Capabilities::DC;
                if m.dci_streams.max_log_num_concurent > 0 {
                    caps |= Capabilities::DCI_STREAMS;
                }
            }
            let o = m.ooo_recv_wrs;
            if o.max_rc | o.max_dct | o.max_xrc | o.max_ud | o.max_uc != 0 {
                caps |= Capabilities::OOO_DP;
            }
        }
        caps
    }

    fn get_device_list(&mut self) -> Result<Vec<DeviceInfo>> {
        Ok(self.world.get_device_list())
    }

    fn open_device(&mut self, index: usize, process: ProcessId) -> Result<ContextHandle> {
        self.world.open_device(index, process)
    }

    fn close_device(&mut self, ctx: &ContextHandle) -> Result<()> {
        self.cm_guard(
            CmOwned::Ctx(*ctx),
            Verb::CloseDevice,
            "the device context librdmacm opened (id->verbs)",
        )?;
        self.world.close_device(*ctx)
    }

    fn query_device(&mut self, ctx: &ContextHandle) -> Result<DeviceAttr> {
        self.world.query_device(*ctx)
    }

    fn query_device_ex(&mut self, ctx: &ContextHandle) -> Result<DeviceAttrEx> {
        self.world.query_device_ex(*ctx)
    }

    fn query_gid_ex(
        &mut self,
        ctx: &ContextHandle,
        port_num: u32,
        gid_index: u32,
        flags: u32,
    ) -> Result<GidEntry> {
        self.world.query_gid_ex(*ctx, port_num, gid_index, flags)
    }

    fn query_gid_table(
        &mut self,
        ctx: &ContextHandle,
        max_entries: usize,
        flags: u32,
    ) -> Result<Vec<GidEntry>> {
        self.world.query_gid_table(*ctx, max_entries, flags)
    }

    fn query_port(&mut self, ctx: &ContextHandle, port_num: u8) -> Result<PortAttr> {
        self.world.query_port(*ctx, port_num)
    }

    fn query_gid(&mut self, ctx: &ContextHandle, port_num: u8, index: u32) -> Result<Gid> {
        self.world.query_gid(*ctx, port_num, index)
    }

    fn query_pkey(&mut self, ctx: &ContextHandle, port_num: u8, index: u16) -> Result<u16> {
        self.world.query_pkey(*ctx, port_num, index)
    }

    fn get_async_event(&mut self, ctx: &ContextHandle) -> Result<Option<AsyncEvent<Self>>> {
        Ok(self
            .world
            .get_async_event(*ctx)?
            .map(|(event_type, s, token)| AsyncEvent {
                event_type,
                element: self.subject_to_element(s),
                token,
            }))
    }

    fn ack_async_event(&mut self, event: &AsyncEvent<Self>) -> Result<()> {
        self.world.ack_async_event(event.token)
    }

    fn alloc_pd(&mut self, ctx: &ContextHandle) -> Result<PdHandle> {
        self.world.alloc_pd(*ctx)
    }

    fn dealloc_pd(&mut self, pd: &PdHandle) -> Result<()> {
        self.cm_guard(CmOwned::Pd(*pd), Verb::DeallocPd, "the rdma_cm default PD")?;
        self.world.dealloc_pd(*pd)
    }

    fn create_comp_channel(&mut self, ctx: &ContextHandle) -> Result<CompChannelHandle> {
        self.world.create_comp_channel(*ctx)
    }

    fn destroy_comp_channel(&mut self, channel: &CompChannelHandle) -> Result<()> {
        self.cm_guard(
            CmOwned::Channel(*channel),
            Verb::DestroyCompChannel,
            "a completion channel made by rdma_create_qp",
        )?;
        self.world.destroy_comp_channel(*channel)
    }

    fn create_cq(&mut self, ctx: &ContextHandle, init: &CqInit<'_, Self>) -> Result<CqHandle> {
        self.world.create_cq(
            *ctx,
            init.cqe,
            init.cq_context,
            init.channel.copied(),
            init.comp_vector,
        )
    }

    fn cq_info(&mut self, cq: &CqHandle) -> Result<CqInfo> {
        let c = self.world.cq(*cq, Verb::CreateCq)?;
        Ok(CqInfo {
            cqe: c.cqe,
            cq_context: c.cq_context,
        })
    }

    fn destroy_cq(&mut self, cq: &CqHandle) -> Result<()> {
        self.cm_guard(
            CmOwned::Cq(*cq),
            Verb::DestroyCq,
            "a CQ made by rdma_create_qp",
        )?;
        self.world.destroy_cq(*cq)
    }

    fn req_notify_cq(&mut self, cq: &CqHandle, solicited_only: bool) -> Result<()> {
        self.world.req_notify_cq(*cq, solicited_only)
    }

    fn get_cq_event(&mut self, channel: &CompChannelHandle) -> Result<Option<CqHandle>> {
        self.world.get_cq_event(*channel)
    }

    fn ack_cq_events(&mut self, cq: &CqHandle, nevents: u32) -> Result<()> {
        self.world.ack_cq_events(*cq, nevents)
    }

    fn poll_cq(&mut self, cq: &CqHandle, wc: &mut [Wc]) -> Result<usize> {
        self.world.poll_cq(*cq, wc)
    }

    fn resize_cq(&mut self, cq: &CqHandle, cqe: u32) -> Result<()> {
        self.world.resize_cq(*cq, cqe)
    }

    fn create_cq_ex(
        &mut self,
        ctx: &ContextHandle,
        attr: &CqInitAttrEx<'_, Self>,
    ) -> Result<CqHandle> {
        self.world.create_cq_ex(*ctx, attr)
    }

    fn poll_cq_ex(&mut self, cq: &CqHandle, wc: &mut [WcEx]) -> Result<usize> {
        self.world.poll_cq_ex(*cq, wc)
    }

    fn reg_mr(&mut self, pd: &PdHandle, length: usize, access: AccessFlags) -> Result<MrHandle> {
        self.world.reg_mr(*pd, length, access)
    }

    fn mr_info(&mut self, mr: &MrHandle) -> Result<MrInfo> {
        self.world.mr_info(*mr)
    }

    fn mr_bytes<'a>(&'a self, mr: &'a MrHandle) -> Result<&'a [u8]> {
        self.world.mr_bytes(*mr)
    }

    fn mr_bytes_mut<'a>(&'a mut self, mr: &'a MrHandle) -> Result<&'a mut [u8]> {
        self.world.mr_bytes_mut(*mr)
    }

    fn dereg_mr(&mut self, mr: &MrHandle) -> Result<()> {
        // "ibv_dereg_mr() fails if any memory window is still bound to
        // this MR" (ibv_alloc_mw(3)); the errno is the simulator's choice.
        let bound = self.world.mws_bound_to(*mr);
        if bound > 0 {
            return Err(Error::from_errno(
                Verb::DeregMr,
                self.world.config.mw.dereg_bound_errno,
                format!("{bound} memory windows are still bound to the MR"),
            ));
        }
        self.world.dereg_mr(*mr)
    }

    fn rereg_mr(&mut self, mr: &MrHandle, args: &ReregMr<'_, Self>) -> Result<()> {
        self.world
            .rereg_mr(*mr, args.flags, args.pd.copied(), args.length, args.access)
    }

    fn advise_mr(
        &mut self,
        pd: &PdHandle,
        advice: AdviseMrAdvice,
        flags: u32,
        sg_list: &[Sge],
    ) -> Result<()> {
        self.world.advise_mr(*pd, advice, flags, sg_list)
    }

    fn alloc_mw(&mut self, pd: &PdHandle, mw_type: MwType) -> Result<MwHandle> {
        self.world.alloc_mw(*pd, mw_type)
    }

    fn dealloc_mw(&mut self, mw: &MwHandle) -> Result<()> {
        self.world.dealloc_mw(*mw)
    }

    fn mw_info(&mut self, mw: &MwHandle) -> Result<MwInfo> {
        self.world.mw_info(*mw)
    }

    fn bind_mw(&mut self, qp: &QpHandle, mw: &MwHandle, bind: &MwBind<'_, Self>) -> Result<()> {
        let qp = self.world.resolve_qp(*qp, Verb::BindMw)?;
        self.world.bind_mw(qp, *mw, bind)
    }

    fn alloc_dm(&mut self, ctx: &ContextHandle, attr: &AllocDmAttr) -> Result<DmHandle> {
        self.world.alloc_dm(*ctx, attr)
    }

    fn free_dm(&mut self, dm: &DmHandle) -> Result<()> {
        self.world.free_dm(*dm)
    }

    fn memcpy_to_dm(&mut self, dm: &DmHandle, offset: u64, host: &[u8]) -> Result<()> {
        self.world.memcpy_to_dm(*dm, offset, host)
    }

    fn memcpy_from_dm(&mut self, dm: &DmHandle, offset: u64, host: &mut [u8]) -> Result<()> {
        self.world.memcpy_from_dm(*dm, offset, host)
    }

    fn reg_dm_mr(
        &mut self,
        pd: &PdHandle,
        dm: &DmHandle,
        offset: u64,
        length: usize,
        access: AccessFlags,
    ) -> Result<MrHandle> {
        self.world.reg_dm_mr(*pd, *dm, offset, length, access)
    }

    fn create_srq(&mut self, pd: &PdHandle, attr: &mut SrqAttr) -> Result<SrqHandle> {
        self.world.create_srq(*pd, attr)
    }

    fn modify_srq(&mut self, srq: &SrqHandle, attr: &SrqAttr, mask: SrqAttrMask) -> Result<()> {
        self.world.modify_srq(*srq, attr, mask)
    }

    fn query_srq(&mut self, srq: &SrqHandle) -> Result<SrqAttr> {
        self.world.query_srq(*srq)
    }

    fn destroy_srq(&mut self, srq: &SrqHandle) -> Result<()> {
        self.world.destroy_any_srq(*srq)
    }

    fn create_srq_ex(
        &mut self,
        ctx: &ContextHandle,
        attr: &mut SrqInitAttrEx<'_, Self>,
    ) -> Result<SrqHandle> {
        self.world.create_srq_ex(*ctx, attr)
    }

    fn get_srq_num(&mut self, srq: &SrqHandle) -> Result<u32> {
        self.world.get_srq_num(*srq)
    }

    fn create_qp(&mut self, pd: &PdHandle, attr: &mut QpInitAttrEx<'_, Self>) -> Result<QpHandle> {
        let ctx = self.world.pd(*pd, Verb::CreateQp)?.ctx;
        self.world.create_qp(ctx, attr, Some(*pd), Verb::CreateQp)
    }

    fn create_qp_ex(
        &mut self,
        ctx: &ContextHandle,
        attr: &mut QpInitAttrEx<'_, Self>,
    ) -> Result<QpHandle> {
        let qp = self.world.create_qp(*ctx, attr, None, Verb::CreateQpEx)?;
        if attr.comp_mask.contains(QpInitAttrMask::SEND_OPS_FLAGS) {
            self.world.record_send_ops(qp, attr.send_ops_flags);
        }
        Ok(qp)
    }

    fn query_qp_data_in_order(
        &mut self,
        qp: &QpHandle,
        op: WrOpcode,
        flags: DataInOrderFlags,
    ) -> Result<DataInOrderCaps> {
        let qp = self.world.resolve_qp(*qp, Verb::QueryQpDataInOrder)?;
        self.world.query_qp_data_in_order(qp, op, flags)
    }

    fn query_ece(&mut self, qp: &QpHandle) -> Result<Ece> {
        let qp = self.world.resolve_qp(*qp, Verb::QueryEce)?;
        self.world.query_ece(qp)
    }

    fn set_ece(&mut self, qp: &QpHandle, ece: &mut Ece) -> Result<()> {
        let qp = self.world.resolve_qp(*qp, Verb::SetEce)?;
        self.world.set_ece(qp, ece)
    }

    // An XRC_TGT QP handle (created or opened) acts on the real QP
    // (`World::resolve_qp`).
    fn qp_num(&mut self, qp: &QpHandle) -> Result<u32> {
        let qp = self.world.resolve_qp(*qp, Verb::QueryQp)?;
        self.world.qp_num(qp)
    }

    #[inline]
    fn modify_qp(&mut self, qp: &QpHandle, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        self.world.modify_qp_handle(*qp, attr, mask)
    }

    fn query_qp(&mut self, qp: &QpHandle, mask: QpAttrMask) -> Result<(QpAttr, QpInitInfo)> {
        self.world.query_qp_handle(*qp, mask)
    }

    fn destroy_qp(&mut self, qp: &QpHandle) -> Result<()> {
        self.cm_guard(CmOwned::Qp(*qp), Verb::DestroyQp, "the QP of an rdma_cm id")?;
        let r = self.world.destroy_qp_handle(*qp);
        if r.is_ok() {
            self.world.unpark_rnr();
        }
        r
    }

    fn open_qp(
        &mut self,
        ctx: &ContextHandle,
        xrcd: &XrcdHandle,
        attr: &QpOpenAttr,
    ) -> Result<QpHandle> {
        self.world.open_qp(*ctx, *xrcd, attr, Verb::OpenQp)
    }

    fn attach_mcast(&mut self, qp: &QpHandle, gid: &Gid, lid: u16) -> Result<()> {
        let qp = self.world.resolve_qp(*qp, Verb::AttachMcast)?;
        self.world.attach_mcast(qp, gid, lid)
    }

    fn detach_mcast(&mut self, qp: &QpHandle, gid: &Gid, lid: u16) -> Result<()> {
        let qp = self.world.resolve_qp(*qp, Verb::DetachMcast)?;
        self.world.detach_mcast(qp, gid, lid)
    }

    fn create_ah(&mut self, pd: &PdHandle, attr: &AhAttr) -> Result<AhHandle> {
        self.world.create_ah(*pd, attr)
    }

    fn destroy_ah(&mut self, ah: &AhHandle) -> Result<()> {
        self.world.destroy_ah(*ah)
    }

    // Implementing an `unsafe fn` trips `unsafe_code`; the body contains no
    // unsafe operation (the simulator owns every byte it touches, R13/R14).
    #[allow(unsafe_code)]
    unsafe fn post_send(&mut self, qp: &QpHandle, wrs: &[SendWr<'_, Self>]) -> Result<()> {
        let qp = self.world.resolve_qp(*qp, Verb::PostSend)?;
        // BIND_MW needs `wr.bind_mw`, which SendWr does not carry (C would
        // hand the provider a NULL window): refused at that request.
        if let Some(i) = wrs.iter().position(|w| w.opcode == WrOpcode::BindMw) {
            if i > 0 {
                self.world.post_send(qp, &wrs[..i])?;
            }
            return Err(Error::invalid(
                Verb::PostSend,
                "BIND_MW needs wr.bind_mw, which SendWr does not carry: use bind_mw (type 1) or post_wr with WrOp::BindMw (type 2)",
            )
            .with_bad_wr(i));
        }
        self.world.post_send(qp, wrs)
    }

    // Implementing an `unsafe fn` trips `unsafe_code`; the body contains no
    // unsafe operation (the simulator owns every byte it touches, R13/R14).
    #[allow(unsafe_code)]
    unsafe fn post_wr(&mut self, qp: &QpHandle, batch: &[WrEx<'_, Self>]) -> Result<()> {
        let qp = self.world.resolve_qp(*qp, Verb::PostWr)?;
        self.world.post_wr(qp, batch)
    }

    // Implementing an `unsafe fn` trips `unsafe_code`; the body contains no
    // unsafe operation (the simulator owns every byte it touches, R13/R14).
    #[allow(unsafe_code)]
    unsafe fn post_recv(&mut self, qp: &QpHandle, wrs: &[RecvWr<'_>]) -> Result<()> {
        let qp = self.world.resolve_qp(*qp, Verb::PostRecv)?;
        let r = self.world.post_recv(qp, wrs);
        // A receive can end an endless RNR wait (World::rnr_stalls); a
        // post that queued nothing changes nothing.
        if queued_some(&r) {
            self.world.unpark_rnr();
        }
        r
    }

    // Implementing an `unsafe fn` trips `unsafe_code`; the body contains no
    // unsafe operation (the simulator owns every byte it touches, R13/R14).
    #[allow(unsafe_code)]
    unsafe fn post_srq_recv(&mut self, srq: &SrqHandle, wrs: &[RecvWr<'_>]) -> Result<()> {
        let r = self.world.post_srq_recv(*srq, wrs);
        if queued_some(&r) {
            self.world.unpark_rnr();
        }
        r
    }

    fn mlx5dv_query_device(
        &mut self,
        ctx: &ContextHandle,
        comp_mask: Mlx5ContextMask,
    ) -> Result<Mlx5Context> {
        self.world.mlx5dv_query_device(*ctx, comp_mask)
    }

    fn mlx5dv_get_clock_info(&mut self, ctx: &ContextHandle) -> Result<ClockInfo> {
        self.world.mlx5dv_get_clock_info(*ctx)
    }

    fn query_rt_values_ex(&mut self, ctx: &ContextHandle) -> Result<u64> {
        self.world.query_rt_values_ex(*ctx)
    }

    fn mlx5dv_create_qp(
        &mut self,
        ctx: &ContextHandle,
        attr: &mut QpInitAttrEx<'_, Self>,
        mlx5_attr: &Mlx5QpInitAttr,
    ) -> Result<QpHandle> {
        let qp = self.world.mlx5dv_create_qp(*ctx, attr, mlx5_attr)?;
        if attr.comp_mask.contains(QpInitAttrMask::SEND_OPS_FLAGS) {
            self.world.record_send_ops(qp, attr.send_ops_flags);
        }
        Ok(qp)
    }

    fn mlx5dv_dci_stream_id_reset(&mut self, qp: &QpHandle, stream_id: u16) -> Result<()> {
        self.world.mlx5dv_dci_stream_id_reset(*qp, stream_id)
    }

    fn mlx5dv_reserved_qpn_alloc(&mut self, ctx: &ContextHandle) -> Result<u32> {
        self.world.mlx5dv_reserved_qpn_alloc(*ctx)
    }

    fn mlx5dv_reserved_qpn_dealloc(&mut self, ctx: &ContextHandle, qpn: u32) -> Result<()> {
        self.world.mlx5dv_reserved_qpn_dealloc(*ctx, qpn)
    }

    // ------------------------------------------------------------ XRC
    // The model: backend-sim/src/world/xrc.rs and docs/xrc.md.

    fn open_xrcd(&mut self, ctx: &ContextHandle, attr: &XrcdInitAttr) -> Result<XrcdHandle> {
        self.world.open_xrcd(*ctx, attr, Verb::OpenXrcd)
    }

    fn close_xrcd(&mut self, xrcd: &XrcdHandle) -> Result<()> {
        self.world.close_xrcd(*xrcd, Verb::CloseXrcd)
    }

    fn open_xrc_domain(
        &mut self,
        ctx: &ContextHandle,
        fd: XrcdFile,
        oflags: OpenFlags,
    ) -> Result<XrcdHandle> {
        let attr = XrcdInitAttr {
            comp_mask: XrcdInitAttrMask::FD | XrcdInitAttrMask::OFLAGS,
            fd,
            oflags,
        };
        self.world.open_xrcd(*ctx, &attr, Verb::OpenXrcDomain)
    }

    fn close_xrc_domain(&mut self, xrcd: &XrcdHandle) -> Result<()> {
        self.world.close_xrcd(*xrcd, Verb::CloseXrcDomain)
    }

    fn create_xrc_srq(
        &mut self,
        pd: &PdHandle,
        xrcd: &XrcdHandle,
        xrc_cq: &CqHandle,
        attr: &mut SrqAttr,
    ) -> Result<SrqHandle> {
        let ctx = self.world.pd(*pd, Verb::CreateXrcSrq)?.ctx;
        let mut ex = crate::world::legacy_srq_attr(pd, xrcd, xrc_cq, *attr);
        let srq = self
            .world
            .create_srq_ex(ctx, &mut ex)
            .map_err(|e| Error::new(Verb::CreateXrcSrq, e.kind(), e.message().to_owned()))?;
        *attr = ex.attr;
        Ok(srq)
    }

    fn create_xrc_rcv_qp(&mut self, xrcd: &XrcdHandle) -> Result<u32> {
        self.world.create_xrc_rcv_qp(*xrcd)
    }

    fn modify_xrc_rcv_qp(
        &mut self,
        xrcd: &XrcdHandle,
        qp_num: u32,
        attr: &QpAttr,
        mask: QpAttrMask,
    ) -> Result<()> {
        self.world.modify_xrc_rcv_qp(*xrcd, qp_num, attr, mask)
    }

    fn query_xrc_rcv_qp(
        &mut self,
        xrcd: &XrcdHandle,
        qp_num: u32,
        mask: QpAttrMask,
    ) -> Result<(QpAttr, QpInitInfo)> {
        self.world.query_xrc_rcv_qp(*xrcd, qp_num, mask)
    }

    fn reg_xrc_rcv_qp(&mut self, xrcd: &XrcdHandle, qp_num: u32) -> Result<()> {
        self.world.reg_xrc_rcv_qp(*xrcd, qp_num)
    }

    fn unreg_xrc_rcv_qp(&mut self, xrcd: &XrcdHandle, qp_num: u32) -> Result<()> {
        self.world.unreg_xrc_rcv_qp(*xrcd, qp_num)
    }

    // --------------------------------------------------------------- rdma_cm

    fn rdma_create_event_channel(&mut self) -> Result<CmChannelHandle> {
        Ok(self.world.rdma_create_event_channel())
    }

    fn rdma_destroy_event_channel(&mut self, channel: &CmChannelHandle) -> Result<()> {
        self.world.rdma_destroy_event_channel(*channel)
    }

    fn rdma_create_id(
        &mut self,
        channel: &CmChannelHandle,
        _context: u64,
        ps: PortSpace,
    ) -> Result<CmIdHandle> {
        self.world.rdma_create_id(*channel, ps)
    }

    fn rdma_destroy_id(&mut self, id: &CmIdHandle) -> Result<()> {
        self.world.rdma_destroy_id(*id)
    }

    fn rdma_id_info(&mut self, id: &CmIdHandle) -> Result<CmIdInfo<Self>> {
        let (view, i) = self.world.cm_id_fields(*id)?;
        Ok(CmIdInfo {
            verbs: view.ctx,
            pd: view.pd,
            qp: i.qp.map(|q| q.qp),
            send_cq: i.qp.and_then(|q| q.send_cq),
            recv_cq: i.qp.and_then(|q| q.recv_cq),
            send_cq_channel: i.qp.and_then(|q| q.send_ch),
            recv_cq_channel: i.qp.and_then(|q| q.recv_ch),
            port_num: if i.dev.is_some() { 1 } else { 0 },
            ps: i.ps,
            addrs: CmAddrs {
                local: i.local,
                peer: i.peer,
            },
        })
    }

    fn rdma_bind_addr(&mut self, id: &CmIdHandle, addr: std::net::SocketAddr) -> Result<()> {
        self.world.rdma_bind_addr(*id, addr)
    }

    fn rdma_resolve_addr(
        &mut self,
        id: &CmIdHandle,
        src: Option<std::net::SocketAddr>,
        dst: std::net::SocketAddr,
        timeout_ms: u32,
    ) -> Result<()> {
        self.world.rdma_resolve_addr(*id, src, dst, timeout_ms)
    }

    fn rdma_resolve_route(&mut self, id: &CmIdHandle, timeout_ms: u32) -> Result<()> {
        self.world.rdma_resolve_route(*id, timeout_ms)
    }

    fn rdma_listen(&mut self, id: &CmIdHandle, backlog: i32) -> Result<()> {
        self.world.rdma_listen(*id, backlog)
    }

    fn rdma_connect(&mut self, id: &CmIdHandle, param: &ConnParam) -> Result<()> {
        self.world.rdma_connect(*id, param)
    }

    fn rdma_accept(&mut self, id: &CmIdHandle, param: &ConnParam) -> Result<()> {
        self.world.rdma_accept(*id, param)
    }

    fn rdma_reject(&mut self, id: &CmIdHandle, private_data: &[u8]) -> Result<()> {
        self.world.rdma_reject(*id, private_data)
    }

    fn rdma_reject_ece(&mut self, id: &CmIdHandle, private_data: &[u8]) -> Result<()> {
        self.world.rdma_reject_ece(*id, private_data)
    }

    fn rdma_disconnect(&mut self, id: &CmIdHandle) -> Result<()> {
        self.world.rdma_disconnect(*id)
    }

    fn rdma_get_cm_event(&mut self, channel: &CmChannelHandle) -> Result<Option<CmEvent<Self>>> {
        Ok(self
            .world
            .rdma_get_cm_event(*channel)?
            .map(|(e, token)| CmEvent {
                event: e.event,
                id: e.id,
                listen_id: e.listen_id,
                status: e.status,
                private_data: e.conn.private_data.clone(),
                conn: e.conn,
                token,
                ud: e.mc.as_ref().map(|m| m.ud),
                context: e.mc.as_ref().map_or(0, |m| m.context),
            }))
    }

    fn rdma_establish(&mut self, id: &CmIdHandle) -> Result<()> {
        self.world.rdma_establish(*id)
    }

    fn rdma_migrate_id(&mut self, id: &CmIdHandle, channel: &CmChannelHandle) -> Result<()> {
        self.world.rdma_migrate_id(*id, *channel)
    }

    fn rdma_notify(&mut self, id: &CmIdHandle, event: AsyncEventType) -> Result<()> {
        self.world.rdma_notify(*id, event)
    }

    fn rdma_join_multicast(
        &mut self,
        id: &CmIdHandle,
        addr: std::net::SocketAddr,
        context: u64,
    ) -> Result<()> {
        let attr = JoinMcAttr {
            addr,
            join_flags: McJoinFlag::FullMember,
        };
        self.world
            .rdma_join_multicast(*id, &attr, context, Verb::RdmaJoinMulticast)
    }

    fn rdma_join_multicast_ex(
        &mut self,
        id: &CmIdHandle,
        attr: &JoinMcAttr,
        context: u64,
    ) -> Result<()> {
        self.world
            .rdma_join_multicast(*id, attr, context, Verb::RdmaJoinMulticastEx)
    }

    fn rdma_leave_multicast(&mut self, id: &CmIdHandle, addr: std::net::SocketAddr) -> Result<()> {
        self.world.rdma_leave_multicast(*id, addr)
    }

    fn rdma_ack_cm_event(&mut self, event: CmEvent<Self>) -> Result<()> {
        self.world
            .rdma_ack_cm_event(event.id, event.listen_id, event.token)
    }

    fn rdma_create_qp(
        &mut self,
        id: &CmIdHandle,
        pd: Option<&PdHandle>,
        attr: &mut QpInitAttrEx<'_, Self>,
    ) -> Result<QpHandle> {
        let qp = self.world.rdma_create_qp(*id, Some(pd.copied()), attr)?;
        if attr.comp_mask.contains(QpInitAttrMask::SEND_OPS_FLAGS) {
            self.world.record_send_ops(qp, attr.send_ops_flags);
        }
        Ok(qp)
    }

    fn rdma_create_qp_ex(
        &mut self,
        id: &CmIdHandle,
        attr: &mut QpInitAttrEx<'_, Self>,
    ) -> Result<QpHandle> {
        let qp = self.world.rdma_create_qp(*id, None, attr)?;
        if attr.comp_mask.contains(QpInitAttrMask::SEND_OPS_FLAGS) {
            self.world.record_send_ops(qp, attr.send_ops_flags);
        }
        Ok(qp)
    }

    fn rdma_destroy_qp(&mut self, id: &CmIdHandle) -> Result<()> {
        self.world.rdma_destroy_qp(*id)
    }

    fn rdma_init_qp_attr(
        &mut self,
        id: &CmIdHandle,
        state: QpState,
    ) -> Result<(QpAttr, QpAttrMask)> {
        self.world.rdma_init_qp_attr(*id, state)
    }

    fn sim_control(&mut self, cmd: SimCommand<'_, Self>) -> Result<SimReply> {
        self.control(cmd)
    }
}

/// Whether a post queued at least one request (it succeeded, or failed
/// after its first).
fn queued_some(r: &Result<()>) -> bool {
    match r {
        Ok(()) => true,
        Err(e) => e.bad_wr().is_some_and(|i| i > 0),
    }
}
