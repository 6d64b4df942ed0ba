//! The simulated connection manager (librdmacm + the kernel's rdma_cm and
//! IB CM), see docs/rdma-cm.md.
//!
//! Event channels and ids live in arenas of [`Cm`]. CM messages (REQ, REP,
//! RTU, REJ, DREQ, DREP, SIDR REQ/REP) and the CM's timers (address and
//! route resolution, response timeouts, timewait) are timed actions: each is
//! kept in [`Cm::actions`] and scheduled on the fabric's event queue as a
//! [`TimerKind::Scheduled`] timer whose owner carries [`CM_TIMER_TAG`], so
//! they are processed in virtual-time order with the data path. Nothing
//! here blocks: `rdma_get_cm_event` runs virtual time forward until its
//! channel has an event or nothing is left that could produce one.
//!
//! QPs made by `rdma_create_qp` go through the world's own `create_qp`,
//! `modify_qp`, `create_cq`, ... so every kernel check applies.

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use verbs_api::errno::{EADDRINUSE, EADDRNOTAVAIL, EINVAL, ETIMEDOUT};
use verbs_api::transitions::{transition_masks, TableFlavor};
use verbs_api::{
    AccessFlags, AhAttr, CmEventType, ConnParam, Error, Gid, GlobalRoute, LinkLayer, McJoinFlag,
    Mtu, PortSpace, ProcessId, QpAttr, QpAttrMask, QpInitAttrEx, QpInitAttrMask, QpState, QpType,
    Result, UdParam, Verb,
};

use super::{busy, invalid, World};
use crate::arena::Arena;
use crate::fabric::{DeviceIndex, PortRef, SimInstant, TimerEvent, TimerKind};
use crate::handles::*;
use crate::trace::TraceEvent;
use crate::SimVerbs;

/// Marks the owner of a [`TimerKind::Scheduled`] timer as a CM action.
pub(crate) const CM_TIMER_TAG: u32 = 0x8000_0000;

/// `RDMA_UDP_QKEY`: the Q_Key of UD ids in the UDP and IB port spaces.
pub const RDMA_UDP_QKEY: u32 = 0x0123_4567;

/// IB CM reject reasons used (IBTA Table 112; `enum ib_cm_rej_reason`).
pub mod reject_reason {
    /// `IB_CM_REJ_TIMEOUT`: the peer's id was destroyed mid-handshake.
    pub const TIMEOUT: i32 = 1;
    /// `IB_CM_REJ_INVALID_SERVICE_ID`: nobody listens on the port.
    pub const INVALID_SERVICE_ID: i32 = 8;
    /// `IB_CM_REJ_CONSUMER_DEFINED`: `rdma_reject`.
    pub const CONSUMER_DEFINED: i32 = 28;
    /// `IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED`: `rdma_reject_ece`.
    pub const VENDOR_OPTION_NOT_SUPPORTED: i32 = 35;
    /// `IB_SIDR_REJECT` (SIDR REP status): `rdma_reject` on a UD id.
    pub const SIDR_REJECT: i32 = 1;
    /// `IB_SIDR_UNSUPPORTED` (SIDR REP status): nobody listens (UD).
    pub const SIDR_UNSUPPORTED: i32 = 2;
}

/// Private-data sizes of the IB CM messages (`IB_CM_*_PRIVATE_DATA_SIZE`).
const REQ_PD: usize = 92;
const REP_PD: usize = 196;
const REJ_PD: usize = 148;
const SIDR_REQ_PD: usize = 216;
const SIDR_REP_PD: usize = 136;
/// The rdma_cm header in front of the user's REQ data for the TCP, UDP and
/// IPoIB port spaces (`struct cma_hdr`); none for `RDMA_PS_IB`.
const CMA_HDR: usize = 36;

/// The CM's timing and limits (all virtual time). See docs/rdma-cm.md.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CmConfig {
    /// The simulated process of the event channels made by
    /// `rdma_create_event_channel` (and so of their ids and of the device
    /// contexts and default PDs the CM opens for them; librdmacm opens one
    /// context per device in each process). `rdma_create_event_channel_of`
    /// names another process.
    pub process: ProcessId,
    /// Delay from `rdma_resolve_addr` to `ADDR_RESOLVED` (neighbour lookup).
    pub addr_resolve_ns: u64,
    /// Delay from `rdma_resolve_route` to `ROUTE_RESOLVED`.
    pub route_resolve_ns: u64,
    /// One-way latency of a CM message.
    pub msg_latency_ns: u64,
    /// How long a sender waits for the answer to a REQ/DREQ/SIDR REQ before
    /// resending (`4.096 µs × 2^CMA_CM_RESPONSE_TIMEOUT(20)` ×2 in the kernel).
    pub response_timeout_ns: u64,
    /// Resends before giving up (`CMA_MAX_CM_RETRIES` = 15).
    pub max_retries: u32,
    /// How long the active side waits once the passive CM acknowledged a
    /// REQ (MRA) for the application's accept or reject.
    pub mra_timeout_ns: u64,
    /// Time a disconnected connection spends in timewait before
    /// `TIMEWAIT_EXIT`.
    pub timewait_ns: u64,
    /// The QP `timeout` (local ACK timeout exponent) set at RTS.
    pub ack_timeout: u8,
    /// The QP `min_rnr_timer` set at RTR (the kernel CM uses 0 = 655.36 ms).
    pub min_rnr_timer: u8,
    /// First ephemeral port handed out for port 0 (sequential, wrapping
    /// inside `ephemeral_first..=ephemeral_last`).
    pub ephemeral_first: u16,
    /// Last ephemeral port.
    pub ephemeral_last: u16,
    /// Whether events carry the transport's full private-data area (zero
    /// padded, as the kernel reports it) or exactly the bytes sent.
    pub pad_private_data: bool,
    /// Delay from `rdma_join_multicast` to `MULTICAST_JOIN` (the SA's
    /// MCMemberRecord round trip).
    pub mcast_join_ns: u64,
    /// Whether a UD multicast SEND is also delivered to the sending QP when
    /// it is attached to the group (mlx5's default: only
    /// `IBV_QP_CREATE_BLOCK_SELF_MCAST_LB` stops it). See docs/rdma-cm.md.
    pub mcast_self_loopback: bool,
}

impl Default for CmConfig {
    fn default() -> Self {
        Self {
            process: ProcessId(0),
            addr_resolve_ns: 1_000,
            route_resolve_ns: 1_000,
            msg_latency_ns: 2_000,
            // 2 × 4.096 µs × 2^20 (local + remote CM response timeout).
            response_timeout_ns: 2 * 4_096 * (1 << 20),
            max_retries: 15,
            // 4.096 µs × 2^24 (CMA_CM_MRA_SETTING).
            mra_timeout_ns: 4_096 * (1 << 24),
            // 4.096 µs × 2^14: one local ACK timeout.
            timewait_ns: 4_096 * (1 << 14),
            ack_timeout: 14,
            min_rnr_timer: 0,
            ephemeral_first: 32768,
            ephemeral_last: 60999,
            pad_private_data: true,
            mcast_join_ns: 2 * 2_000,
            mcast_self_loopback: true,
        }
    }
}

/// `enum rdma_cm_state` (kernel), what each verb checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IdState {
    Idle,
    AddrQuery,
    AddrResolved,
    RouteQuery,
    RouteResolved,
    AddrBound,
    Listen,
    /// Connecting or connected (the kernel's `RDMA_CM_CONNECT`).
    Connect(Conn),
    /// After a DREQ was sent or received.
    Disconnect,
    /// After REJ / UNREACHABLE / CONNECT_ERROR: only destroy is useful.
    Failed,
}

/// The IB CM side of a connecting id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Conn {
    /// Active: REQ sent, waiting for REP/REJ.
    ReqSent,
    /// Passive: REQ received, waiting for accept/reject.
    ReqRcvd,
    /// Passive: REP sent, waiting for RTU.
    RepSent,
    /// Active without a QP: REP received, `CONNECT_RESPONSE` delivered,
    /// waiting for `rdma_establish` to send the RTU (IB CM `REP_RCVD`).
    RepRcvd,
    /// Both: connected.
    Established,
}

/// What `rdma_create_qp` made for an id.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CmQp {
    pub(crate) qp: QpHandle,
    pub(crate) pd: PdHandle,
    pub(crate) send_cq: Option<CqHandle>,
    pub(crate) recv_cq: Option<CqHandle>,
    pub(crate) send_ch: Option<CompChannelHandle>,
    pub(crate) recv_ch: Option<CompChannelHandle>,
}

#[derive(Debug)]
pub(crate) struct CmId {
    /// The process the id belongs to (its channel's when it was made):
    /// picks the CM's device context and default PD it uses.
    pub(crate) process: ProcessId,
    /// Whether `psn` was chosen before `rdma_accept` (a passive side that
    /// asked `rdma_init_qp_attr` for RTS first: its REP then carries it).
    pub(crate) psn_chosen: bool,
    /// `RDMA_OPTION_ID_ACK_TIMEOUT`: the QP's local ACK timeout exponent
    /// the CM's RTS transition uses instead of `CmConfig::ack_timeout`.
    pub(crate) ack_timeout: Option<u8>,
    pub(crate) channel: CmChannelHandle,
    pub(crate) ps: PortSpace,
    pub(crate) state: IdState,
    pub(crate) local: Option<SocketAddr>,
    pub(crate) peer: Option<SocketAddr>,
    /// Holds `(ps, port)` in the bind table.
    pub(crate) owns_port: bool,
    pub(crate) dev: Option<u32>,
    pub(crate) qp: Option<CmQp>,
    /// Tokens of the events handed out and not acknowledged, kept on the
    /// id they count against (the listening id for CONNECT_REQUEST).
    pub(crate) unacked: Vec<u64>,
    pub(crate) remote: Option<CmIdHandle>,
    /// Own connection parameters (connect or accept) and the REQ's.
    pub(crate) param: ConnParam,
    pub(crate) req: ConnParam,
    pub(crate) remote_qpn: u32,
    pub(crate) remote_psn: u32,
    pub(crate) remote_dev: u32,
    pub(crate) psn: u32,
    /// Bumped to cancel pending timeouts.
    pub(crate) gen: u32,
    pub(crate) ud: bool,
    /// Sent a DREQ and waits for the DREP.
    pub(crate) dreq_sent: bool,
    /// The connection's (responder resources, initiator depth) for this
    /// side's QP, once negotiated (accept, or the REP's answer).
    pub(crate) rd: (u8, u8),
    /// Multicast groups joined (`rdma_join_multicast`), in join order.
    pub(crate) joins: Vec<McJoin>,
}

/// One multicast join of an id.
#[derive(Clone, Debug)]
pub(crate) struct McJoin {
    /// Unique in the world: what the join's action and event refer to.
    pub(crate) serial: u64,
    /// The IP multicast address joined (the port is not compared).
    pub(crate) addr: IpAddr,
    pub(crate) context: u64,
    pub(crate) flags: McJoinFlag,
    pub(crate) mgid: Gid,
    pub(crate) mlid: u16,
    /// The id's QP was attached when the join event was fetched.
    pub(crate) attached: Option<QpHandle>,
}

/// A multicast group some id joined: its MLID and how many joins hold it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct McGroup {
    pub(crate) mlid: u16,
    pub(crate) members: u32,
}

/// What a multicast event carries besides the usual fields.
#[derive(Clone, Debug)]
pub(crate) struct McEventInfo {
    pub(crate) serial: u64,
    pub(crate) ud: UdParam,
    pub(crate) context: u64,
}

/// An event queued on a channel.
#[derive(Clone, Debug)]
pub(crate) struct QueuedEvent {
    pub(crate) event: CmEventType,
    pub(crate) id: CmIdHandle,
    pub(crate) listen_id: Option<CmIdHandle>,
    pub(crate) status: i32,
    pub(crate) conn: ConnParam,
    /// For `MULTICAST_JOIN` / `MULTICAST_ERROR`.
    pub(crate) mc: Option<Box<McEventInfo>>,
}

#[derive(Debug, Default)]
pub(crate) struct CmChannel {
    /// The simulated process that created the channel: its ids are that
    /// process's, and so are the device contexts and default PDs the CM
    /// opens for them.
    pub(crate) process: ProcessId,
    pub(crate) ids: u32,
    pub(crate) events: VecDeque<QueuedEvent>,
}

/// Per process and device: the CM's context and default PD (librdmacm
/// opens each device once in every process, `ucma_init_device`, and
/// allocates its default PD there).
#[derive(Debug)]
pub(crate) struct CmDevice {
    pub(crate) ctx: ContextHandle,
    pub(crate) pd: Option<PdHandle>,
    /// Ids bound to the device (the default PD lives while this is > 0).
    pub(crate) bound: u32,
}

/// The data of a REQ / SIDR REQ.
#[derive(Clone, Debug)]
pub(crate) struct ReqMsg {
    from: CmIdHandle,
    from_dev: u32,
    src: SocketAddr,
    dst: SocketAddr,
    ps: PortSpace,
    ud: bool,
    param: ConnParam,
    qpn: u32,
    psn: u32,
}

/// A timed CM action.
#[derive(Clone, Debug)]
pub(crate) enum Action {
    AddrResolved {
        id: CmIdHandle,
        gen: u32,
        dev: u32,
    },
    AddrError {
        id: CmIdHandle,
        gen: u32,
    },
    RouteResolved {
        id: CmIdHandle,
        gen: u32,
    },
    RouteError {
        id: CmIdHandle,
        gen: u32,
    },
    Req(Box<ReqMsg>),
    ReqTimeout {
        id: CmIdHandle,
        gen: u32,
        attempt: u32,
        req: Box<ReqMsg>,
    },
    Rep {
        to: CmIdHandle,
        from: CmIdHandle,
        param: ConnParam,
        qpn: u32,
        psn: u32,
    },
    RepTimeout {
        id: CmIdHandle,
        gen: u32,
        attempt: u32,
        rep: Box<Self>,
    },
    Rtu {
        to: CmIdHandle,
    },
    Rej {
        to: CmIdHandle,
        reason: i32,
        data: Vec<u8>,
    },
    SidrRep {
        to: CmIdHandle,
        status: i32,
        data: Vec<u8>,
        qpn: u32,
    },
    Dreq {
        to: CmIdHandle,
    },
    DreqTimeout {
        id: CmIdHandle,
        gen: u32,
        attempt: u32,
    },
    Drep {
        to: CmIdHandle,
    },
    Timewait {
        id: CmIdHandle,
        gen: u32,
    },
    /// The SA's answer to a multicast join.
    McJoined {
        id: CmIdHandle,
        serial: u64,
    },
}

/// The connection manager's state, a field of the [`World`].
#[derive(Debug, Default)]
pub(crate) struct Cm {
    pub(crate) channels: Arena<CmChannel>,
    pub(crate) ids: Arena<CmId>,
    /// By (process, device): never shared between processes.
    pub(crate) devs: BTreeMap<(ProcessId, u32), CmDevice>,
    actions: Vec<Option<Action>>,
    free: Vec<u32>,
    /// Actions scheduled and not yet run.
    pub(crate) pending: u32,
    next_port: u16,
    psn_seq: u64,
    /// Multicast groups by MGID (deterministic order).
    pub(crate) groups: BTreeMap<[u8; 16], McGroup>,
    /// Next MLID to try (from `MLID_FIRST`).
    pub(crate) next_mlid: u16,
    pub(crate) join_seq: u64,
}

/// The IPv4 address of device `dev` (its port 1).
pub fn device_ipv4(dev: u32) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, (dev & 0xff) as u8, 1)
}

/// The IPv6 address of device `dev` (its port 1).
pub fn device_ipv6(dev: u32) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, (dev & 0xffff) as u16, 1)
}

fn is_any(ip: IpAddr) -> bool {
    ip.is_unspecified()
}

/// Private-data bytes a message may carry for the user.
fn connect_limit(ps: PortSpace, ud: bool) -> usize {
    let hdr = if ps == PortSpace::Ib { 0 } else { CMA_HDR };
    (if ud { SIDR_REQ_PD } else { REQ_PD }) - hdr
}

fn pad(data: &[u8], len: usize, on: bool) -> Vec<u8> {
    let mut v = data.to_vec();
    if on && v.len() < len {
        v.resize(len, 0);
    }
    v
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

mod actions;
mod connect;
mod ids;
mod mcast;
mod migrate;
pub use mcast::{mcast_mgid, MLID_FIRST, MLID_LAST};
mod plumbing;
mod qp;

/// An object the CM may own.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CmOwned {
    Qp(QpHandle),
    Cq(CqHandle),
    Channel(CompChannelHandle),
    Pd(PdHandle),
    /// The device context librdmacm opened (`id->verbs`).
    Ctx(ContextHandle),
}

/// The handle fields of an id.
pub(crate) struct CmIdView {
    pub(crate) ctx: Option<ContextHandle>,
    pub(crate) pd: Option<PdHandle>,
}

/// `e` reported under `verb` (the step that failed inside a CM verb).
fn reverb(e: Error, verb: Verb) -> Error {
    if e.verb() == verb {
        return e;
    }
    let msg = format!("{}: {}", e.verb(), e.message());
    Error::new(verb, e.kind(), msg).with_errno(e.errno())
}
