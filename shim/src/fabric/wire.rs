//! Owned forms of the trait's borrowing argument types, for the shared
//! fabric's wire.
//!
//! The `Verbs` trait's arguments borrow handles and SGE lists
//! (`QpInitAttrEx<'a, V>` holds `&'a V::Cq`); a message cannot. Each type
//! here owns what its borrowing twin points at: the client builds it with
//! `from`, the fabric rebuilds the borrowing form over it with `view`; what
//! the verb writes back (a QP's `cap`, an SRQ's `attr`) returns in the reply.

use backend_sim::*;
use serde::{Deserialize, Serialize};
use verbs_api::*;

use super::family::Owned;

/// The simulator, whose handle types the wire carries.
type V = SimVerbs;

/// `CqInit`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CqInitW {
    cqe: u32,
    cq_context: u64,
    channel: Option<CompChannelHandle>,
    comp_vector: u32,
}

impl CqInitW {
    pub(crate) fn from(a: &CqInit<'_, V>) -> Self {
        Self {
            cqe: a.cqe,
            cq_context: a.cq_context,
            channel: a.channel.copied(),
            comp_vector: a.comp_vector,
        }
    }
    pub(crate) fn view(&self) -> CqInit<'_, V> {
        CqInit {
            cqe: self.cqe,
            cq_context: self.cq_context,
            channel: self.channel.as_ref(),
            comp_vector: self.comp_vector,
        }
    }
}

/// `CqInitAttrEx`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CqInitAttrExW {
    cqe: u32,
    cq_context: u64,
    channel: Option<CompChannelHandle>,
    comp_vector: u32,
    wc_flags: WcExFlags,
    comp_mask: CqInitAttrMask,
    flags: CreateCqAttrFlags,
}

impl CqInitAttrExW {
    pub(crate) fn from(a: &CqInitAttrEx<'_, V>) -> Self {
        Self {
            cqe: a.cqe,
            cq_context: a.cq_context,
            channel: a.channel.copied(),
            comp_vector: a.comp_vector,
            wc_flags: a.wc_flags,
            comp_mask: a.comp_mask,
            flags: a.flags,
        }
    }
    pub(crate) fn view(&self) -> CqInitAttrEx<'_, V> {
        CqInitAttrEx {
            cqe: self.cqe,
            cq_context: self.cq_context,
            channel: self.channel.as_ref(),
            comp_vector: self.comp_vector,
            wc_flags: self.wc_flags,
            comp_mask: self.comp_mask,
            flags: self.flags,
        }
    }
}

/// `SrqInitAttrEx` (the verb writes `attr` back).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SrqInitAttrExW {
    srq_context: u64,
    pub(crate) attr: SrqAttr,
    comp_mask: SrqInitAttrMask,
    srq_type: SrqType,
    pd: Option<PdHandle>,
    xrcd: Option<XrcdHandle>,
    cq: Option<CqHandle>,
}

impl SrqInitAttrExW {
    pub(crate) fn from(a: &SrqInitAttrEx<'_, V>) -> Self {
        Self {
            srq_context: a.srq_context,
            attr: a.attr,
            comp_mask: a.comp_mask,
            srq_type: a.srq_type,
            pd: a.pd.copied(),
            xrcd: a.xrcd.copied(),
            cq: a.cq.copied(),
        }
    }
    pub(crate) fn view(&self) -> SrqInitAttrEx<'_, V> {
        SrqInitAttrEx {
            srq_context: self.srq_context,
            attr: self.attr,
            comp_mask: self.comp_mask,
            srq_type: self.srq_type,
            pd: self.pd.as_ref(),
            xrcd: self.xrcd.as_ref(),
            cq: self.cq.as_ref(),
        }
    }
}

/// `QpInitAttrEx` (the verb writes `cap` back).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct QpInitAttrExW {
    qp_context: u64,
    send_cq: Option<CqHandle>,
    recv_cq: Option<CqHandle>,
    srq: Option<SrqHandle>,
    pub(crate) cap: QpCap,
    qp_type: QpType,
    sq_sig_all: bool,
    comp_mask: QpInitAttrMask,
    pd: Option<PdHandle>,
    xrcd: Option<XrcdHandle>,
    create_flags: QpCreateFlags,
    max_tso_header: u16,
    source_qpn: u32,
    send_ops_flags: SendOpsFlags,
}

impl QpInitAttrExW {
    pub(crate) fn from(a: &QpInitAttrEx<'_, V>) -> Self {
        Self {
            qp_context: a.qp_context,
            send_cq: a.send_cq.copied(),
            recv_cq: a.recv_cq.copied(),
            srq: a.srq.copied(),
            cap: a.cap,
            qp_type: a.qp_type,
            sq_sig_all: a.sq_sig_all,
            comp_mask: a.comp_mask,
            pd: a.pd.copied(),
            xrcd: a.xrcd.copied(),
            create_flags: a.create_flags,
            max_tso_header: a.max_tso_header,
            source_qpn: a.source_qpn,
            send_ops_flags: a.send_ops_flags,
        }
    }
    pub(crate) fn view(&self) -> QpInitAttrEx<'_, V> {
        QpInitAttrEx {
            qp_context: self.qp_context,
            send_cq: self.send_cq.as_ref(),
            recv_cq: self.recv_cq.as_ref(),
            srq: self.srq.as_ref(),
            cap: self.cap,
            qp_type: self.qp_type,
            sq_sig_all: self.sq_sig_all,
            comp_mask: self.comp_mask,
            pd: self.pd.as_ref(),
            xrcd: self.xrcd.as_ref(),
            create_flags: self.create_flags,
            max_tso_header: self.max_tso_header,
            source_qpn: self.source_qpn,
            send_ops_flags: self.send_ops_flags,
        }
    }
}

/// `ReregMr`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ReregMrW {
    flags: ReregMrFlags,
    pd: Option<PdHandle>,
    length: usize,
    access: AccessFlags,
}

impl ReregMrW {
    pub(crate) fn from(a: &ReregMr<'_, V>) -> Self {
        Self {
            flags: a.flags,
            pd: a.pd.copied(),
            length: a.length,
            access: a.access,
        }
    }
    pub(crate) fn view(&self) -> ReregMr<'_, V> {
        ReregMr {
            flags: self.flags,
            pd: self.pd.as_ref(),
            length: self.length,
            access: self.access,
        }
    }
}

/// `MwBindInfo`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct MwBindInfoW {
    mr: Option<MrHandle>,
    addr: u64,
    length: u64,
    mw_access_flags: AccessFlags,
}

impl MwBindInfoW {
    pub(crate) fn from(a: &MwBindInfo<'_, V>) -> Self {
        Self {
            mr: a.mr.copied(),
            addr: a.addr,
            length: a.length,
            mw_access_flags: a.mw_access_flags,
        }
    }
    pub(crate) fn view(&self) -> MwBindInfo<'_, V> {
        MwBindInfo {
            mr: self.mr.as_ref(),
            addr: self.addr,
            length: self.length,
            mw_access_flags: self.mw_access_flags,
        }
    }
}

/// `MwBind`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct MwBindW {
    wr_id: u64,
    send_flags: SendFlags,
    bind_info: MwBindInfoW,
}

impl MwBindW {
    pub(crate) fn from(a: &MwBind<'_, V>) -> Self {
        Self {
            wr_id: a.wr_id,
            send_flags: a.send_flags,
            bind_info: MwBindInfoW::from(&a.bind_info),
        }
    }
    pub(crate) fn view(&self) -> MwBind<'_, V> {
        MwBind {
            wr_id: self.wr_id,
            send_flags: self.send_flags,
            bind_info: self.bind_info.view(),
        }
    }
}

/// `UdInfo`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct UdInfoW {
    ah: AhHandle,
    remote_qpn: u32,
    remote_qkey: u32,
}

impl UdInfoW {
    fn from(a: &UdInfo<'_, V>) -> Self {
        Self {
            ah: *a.ah,
            remote_qpn: a.remote_qpn,
            remote_qkey: a.remote_qkey,
        }
    }
    fn view(&self) -> UdInfo<'_, V> {
        UdInfo {
            ah: &self.ah,
            remote_qpn: self.remote_qpn,
            remote_qkey: self.remote_qkey,
        }
    }
}

/// `DcInfo`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct DcInfoW {
    ah: AhHandle,
    remote_dctn: u32,
    remote_dc_key: u64,
    stream_id: u16,
}

impl DcInfoW {
    fn from(a: &DcInfo<'_, V>) -> Self {
        Self {
            ah: *a.ah,
            remote_dctn: a.remote_dctn,
            remote_dc_key: a.remote_dc_key,
            stream_id: a.stream_id,
        }
    }
    fn view(&self) -> DcInfo<'_, V> {
        DcInfo {
            ah: &self.ah,
            remote_dctn: self.remote_dctn,
            remote_dc_key: self.remote_dc_key,
            stream_id: self.stream_id,
        }
    }
}

/// `SendWr`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SendWrW {
    wr_id: u64,
    sg_list: Vec<Sge>,
    opcode: WrOpcode,
    send_flags: SendFlags,
    imm_data: u32,
    rdma: RdmaInfo,
    atomic: AtomicInfo,
    ud: Option<UdInfoW>,
    remote_srqn: u32,
    dc: Option<DcInfoW>,
    flush: FlushInfo,
}

impl SendWrW {
    pub(crate) fn list(a: &[SendWr<'_, V>]) -> Vec<Self> {
        a.iter()
            .map(|w| Self {
                wr_id: w.wr_id,
                sg_list: w.sg_list.to_vec(),
                opcode: w.opcode,
                send_flags: w.send_flags,
                imm_data: w.imm_data,
                rdma: w.rdma,
                atomic: w.atomic,
                ud: w.ud.as_ref().map(UdInfoW::from),
                remote_srqn: w.remote_srqn,
                dc: w.dc.as_ref().map(DcInfoW::from),
                flush: w.flush,
            })
            .collect()
    }
    pub(crate) fn views(list: &[Self]) -> Vec<SendWr<'_, V>> {
        list.iter()
            .map(|w| SendWr {
                wr_id: w.wr_id,
                sg_list: &w.sg_list,
                opcode: w.opcode,
                send_flags: w.send_flags,
                imm_data: w.imm_data,
                rdma: w.rdma,
                atomic: w.atomic,
                ud: w.ud.as_ref().map(UdInfoW::view),
                remote_srqn: w.remote_srqn,
                dc: w.dc.as_ref().map(DcInfoW::view),
                flush: w.flush,
            })
            .collect()
    }
}

/// `RecvWr`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RecvWrW {
    wr_id: u64,
    sg_list: Vec<Sge>,
}

impl RecvWrW {
    pub(crate) fn list(a: &[RecvWr<'_>]) -> Vec<Self> {
        a.iter()
            .map(|w| Self {
                wr_id: w.wr_id,
                sg_list: w.sg_list.to_vec(),
            })
            .collect()
    }
    pub(crate) fn views(list: &[Self]) -> Vec<RecvWr<'_>> {
        list.iter()
            .map(|w| RecvWr {
                wr_id: w.wr_id,
                sg_list: &w.sg_list,
            })
            .collect()
    }
}

/// `WrOp`.
#[derive(Debug, Clone, Serialize, Deserialize)]
enum WrOpW {
    Send,
    SendImm(u32),
    SendInv(u32),
    RdmaWrite(u32, u64),
    RdmaWriteImm(u32, u64, u32),
    RdmaRead(u32, u64),
    AtomicCmpSwp(u32, u64, u64, u64),
    AtomicFetchAdd(u32, u64, u64),
    BindMw(MwHandle, u32, MwBindInfoW),
    LocalInv(u32),
}

/// `WrData`.
#[derive(Debug, Clone, Serialize, Deserialize)]
enum WrDataW {
    None,
    Sge(Sge),
    SgeList(Vec<Sge>),
    InlineList(Vec<Sge>),
}

/// `WrEx`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WrExW {
    wr_id: u64,
    wr_flags: SendFlags,
    op: WrOpW,
    data: WrDataW,
    ud: Option<UdInfoW>,
    xrc_srqn: Option<u32>,
    raw_wqe: bool,
}

impl WrExW {
    pub(crate) fn list(a: &[WrEx<'_, V>]) -> Vec<Self> {
        a.iter()
            .map(|w| Self {
                wr_id: w.wr_id,
                wr_flags: w.wr_flags,
                op: match &w.op {
                    WrOp::Send => WrOpW::Send,
                    WrOp::SendImm { imm_data } => WrOpW::SendImm(*imm_data),
                    WrOp::SendInv { invalidate_rkey } => WrOpW::SendInv(*invalidate_rkey),
                    WrOp::RdmaWrite { rkey, remote_addr } => WrOpW::RdmaWrite(*rkey, *remote_addr),
                    WrOp::RdmaWriteImm {
                        rkey,
                        remote_addr,
                        imm_data,
                    } => WrOpW::RdmaWriteImm(*rkey, *remote_addr, *imm_data),
                    WrOp::RdmaRead { rkey, remote_addr } => WrOpW::RdmaRead(*rkey, *remote_addr),
                    WrOp::AtomicCmpSwp {
                        rkey,
                        remote_addr,
                        compare,
                        swap,
                    } => WrOpW::AtomicCmpSwp(*rkey, *remote_addr, *compare, *swap),
                    WrOp::AtomicFetchAdd {
                        rkey,
                        remote_addr,
                        add,
                    } => WrOpW::AtomicFetchAdd(*rkey, *remote_addr, *add),
                    WrOp::BindMw {
                        mw,
                        rkey,
                        bind_info,
                    } => WrOpW::BindMw(**mw, *rkey, MwBindInfoW::from(bind_info)),
                    WrOp::LocalInv { invalidate_rkey } => WrOpW::LocalInv(*invalidate_rkey),
                },
                data: match &w.data {
                    WrData::None => WrDataW::None,
                    WrData::Sge(s) => WrDataW::Sge(*s),
                    WrData::SgeList(l) => WrDataW::SgeList(l.to_vec()),
                    WrData::InlineList(l) => WrDataW::InlineList(l.to_vec()),
                },
                ud: w.ud.as_ref().map(UdInfoW::from),
                xrc_srqn: w.xrc_srqn,
                raw_wqe: w.raw_wqe,
            })
            .collect()
    }
    pub(crate) fn views(list: &[Self]) -> Vec<WrEx<'_, V>> {
        list.iter()
            .map(|w| WrEx {
                wr_id: w.wr_id,
                wr_flags: w.wr_flags,
                op: match &w.op {
                    WrOpW::Send => WrOp::Send,
                    WrOpW::SendImm(imm_data) => WrOp::SendImm {
                        imm_data: *imm_data,
                    },
                    WrOpW::SendInv(invalidate_rkey) => WrOp::SendInv {
                        invalidate_rkey: *invalidate_rkey,
                    },
                    WrOpW::RdmaWrite(rkey, remote_addr) => WrOp::RdmaWrite {
                        rkey: *rkey,
                        remote_addr: *remote_addr,
                    },
                    WrOpW::RdmaWriteImm(rkey, remote_addr, imm_data) => WrOp::RdmaWriteImm {
                        rkey: *rkey,
                        remote_addr: *remote_addr,
                        imm_data: *imm_data,
                    },
                    WrOpW::RdmaRead(rkey, remote_addr) => WrOp::RdmaRead {
                        rkey: *rkey,
                        remote_addr: *remote_addr,
                    },
                    WrOpW::AtomicCmpSwp(rkey, remote_addr, compare, swap) => WrOp::AtomicCmpSwp {
                        rkey: *rkey,
                        remote_addr: *remote_addr,
                        compare: *compare,
                        swap: *swap,
                    },
                    WrOpW::AtomicFetchAdd(rkey, remote_addr, add) => WrOp::AtomicFetchAdd {
                        rkey: *rkey,
                        remote_addr: *remote_addr,
                        add: *add,
                    },
                    WrOpW::BindMw(mw, rkey, bind_info) => WrOp::BindMw {
                        mw,
                        rkey: *rkey,
                        bind_info: bind_info.view(),
                    },
                    WrOpW::LocalInv(invalidate_rkey) => WrOp::LocalInv {
                        invalidate_rkey: *invalidate_rkey,
                    },
                },
                data: match &w.data {
                    WrDataW::None => WrData::None,
                    WrDataW::Sge(s) => WrData::Sge(*s),
                    WrDataW::SgeList(l) => WrData::SgeList(l),
                    WrDataW::InlineList(l) => WrData::InlineList(l),
                },
                ud: w.ud.as_ref().map(UdInfoW::view),
                xrc_srqn: w.xrc_srqn,
                raw_wqe: w.raw_wqe,
            })
            .collect()
    }
}

/// The handles a wire form names, for the fabric's ownership check: each
/// must be one of the calling process's own objects.
pub(crate) trait Handles {
    /// Appends every handle this value names to `out`.
    fn handles(&self, out: &mut Vec<Owned>);
}

impl<T: Handles> Handles for Vec<T> {
    fn handles(&self, out: &mut Vec<Owned>) {
        for x in self {
            x.handles(out);
        }
    }
}

impl Handles for CqInitW {
    fn handles(&self, out: &mut Vec<Owned>) {
        out.extend(self.channel.map(Owned::Channel));
    }
}

impl Handles for CqInitAttrExW {
    fn handles(&self, out: &mut Vec<Owned>) {
        out.extend(self.channel.map(Owned::Channel));
    }
}

impl Handles for SrqInitAttrExW {
    fn handles(&self, out: &mut Vec<Owned>) {
        out.extend(self.pd.map(Owned::Pd));
        out.extend(self.xrcd.map(Owned::Xrcd));
        out.extend(self.cq.map(Owned::Cq));
    }
}

impl Handles for QpInitAttrExW {
    fn handles(&self, out: &mut Vec<Owned>) {
        out.extend(self.send_cq.map(Owned::Cq));
        out.extend(self.recv_cq.map(Owned::Cq));
        out.extend(self.srq.map(Owned::Srq));
        out.extend(self.pd.map(Owned::Pd));
        out.extend(self.xrcd.map(Owned::Xrcd));
    }
}

impl Handles for ReregMrW {
    fn handles(&self, out: &mut Vec<Owned>) {
        out.extend(self.pd.map(Owned::Pd));
    }
}

impl Handles for MwBindInfoW {
    fn handles(&self, out: &mut Vec<Owned>) {
        out.extend(self.mr.map(Owned::Mr));
    }
}

impl Handles for MwBindW {
    fn handles(&self, out: &mut Vec<Owned>) {
        self.bind_info.handles(out);
    }
}

impl Handles for SendWrW {
    fn handles(&self, out: &mut Vec<Owned>) {
        out.extend(self.ud.map(|u| Owned::Ah(u.ah)));
        out.extend(self.dc.map(|d| Owned::Ah(d.ah)));
    }
}

impl Handles for RecvWrW {
    fn handles(&self, _out: &mut Vec<Owned>) {}
}

impl Handles for WrExW {
    fn handles(&self, out: &mut Vec<Owned>) {
        if let WrOpW::BindMw(mw, _, info) = &self.op {
            out.push(Owned::Mw(*mw));
            info.handles(out);
        }
        out.extend(self.ud.map(|u| Owned::Ah(u.ah)));
    }
}
