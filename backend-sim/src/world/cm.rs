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
    AccessFlags, AhAttr, CmEventType, ConnParam, Error, GlobalRoute, LinkLayer, Mtu, PortSpace,
    ProcessId, QpAttr, QpAttrMask, QpInitAttrEx, QpInitAttrMask, QpState, QpType, Result, Verb,
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
    /// Which simulated process opens the CM's device contexts (librdmacm
    /// opens one context per device for the whole process).
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
}

/// An event queued on a channel.
#[derive(Clone, Debug)]
pub(crate) struct QueuedEvent {
    pub(crate) event: CmEventType,
    pub(crate) id: CmIdHandle,
    pub(crate) listen_id: Option<CmIdHandle>,
    pub(crate) status: i32,
    pub(crate) conn: ConnParam,
}

#[derive(Debug, Default)]
pub(crate) struct CmChannel {
    pub(crate) ids: u32,
    pub(crate) events: VecDeque<QueuedEvent>,
}

/// Per device: the CM's context and default PD.
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
}

/// The connection manager's state, a field of the [`World`].
#[derive(Debug, Default)]
pub(crate) struct Cm {
    pub(crate) channels: Arena<CmChannel>,
    pub(crate) ids: Arena<CmId>,
    pub(crate) devs: BTreeMap<u32, CmDevice>,
    actions: Vec<Option<Action>>,
    free: Vec<u32>,
    /// Actions scheduled and not yet run.
    pub(crate) pending: u32,
    next_port: u16,
    psn_seq: u64,
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

impl World {
    // ------------------------------------------------------------ plumbing

    fn cm_id(&self, id: CmIdHandle, verb: Verb) -> Result<&CmId> {
        self.cm.ids.get(id.index, id.generation).ok_or_else(|| {
            invalid(
                verb,
                format!("invalid or destroyed rdma_cm id handle {id:?}"),
            )
        })
    }

    fn cm_id_mut(&mut self, id: CmIdHandle, verb: Verb) -> Result<&mut CmId> {
        self.cm.ids.get_mut(id.index, id.generation).ok_or_else(|| {
            invalid(
                verb,
                format!("invalid or destroyed rdma_cm id handle {id:?}"),
            )
        })
    }

    /// Schedules `action` at `now + delay`.
    fn cm_schedule(&mut self, delay: u64, action: Action) {
        let at = self.now_ns.saturating_add(delay);
        let slot = match self.cm.free.pop() {
            Some(s) => {
                self.cm.actions[s as usize] = Some(action);
                s
            }
            None => {
                self.cm.actions.push(Some(action));
                (self.cm.actions.len() - 1) as u32
            }
        };
        let timer = TimerEvent {
            kind: TimerKind::Scheduled,
            owner: CM_TIMER_TAG | slot,
            generation: 0,
        };
        if self
            .fabric
            .schedule_timer(SimInstant::from_nanos(at), timer)
            .is_ok()
        {
            self.cm.pending += 1;
        } else {
            // A full event queue loses the message, as congestion would.
            self.cm.actions[slot as usize] = None;
            self.cm.free.push(slot);
        }
    }

    /// A [`TimerKind::Scheduled`] timer fired; runs it if it is the CM's.
    pub(crate) fn cm_timer(&mut self, t: TimerEvent) {
        if t.owner & CM_TIMER_TAG == 0 {
            return;
        }
        let slot = (t.owner & !CM_TIMER_TAG) as usize;
        let Some(action) = self.cm.actions.get_mut(slot).and_then(Option::take) else {
            return;
        };
        self.cm.free.push(slot as u32);
        self.cm.pending -= 1;
        self.cm_run(action);
    }

    /// Queues an event on the channel of `id` (and traces it).
    fn cm_event(&mut self, id: CmIdHandle, ev: QueuedEvent) {
        let Some(i) = self.cm.ids.get(id.index, id.generation) else {
            return;
        };
        let ch = i.channel;
        let device = i.dev.unwrap_or(u32::MAX);
        self.record(TraceEvent::CmEvent {
            device,
            id: id.index,
            event: ev.event,
            status: ev.status,
        });
        if let Some(c) = self.cm.channels.get_mut(ch.index, ch.generation) {
            c.events.push_back(ev);
        }
    }

    fn cm_simple_event(&mut self, id: CmIdHandle, event: CmEventType, status: i32) {
        self.cm_event(
            id,
            QueuedEvent {
                event,
                id,
                listen_id: None,
                status,
                conn: ConnParam::default(),
            },
        );
    }

    /// True when both ports of a CM message's path are up.
    fn cm_path_up(&self, a: u32, b: u32) -> bool {
        let up = |d: u32| {
            self.fabric
                .link_up(PortRef {
                    device: DeviceIndex(u16::try_from(d).unwrap_or(u16::MAX)),
                    port: 1,
                })
                .unwrap_or(false)
        };
        up(a) && up(b)
    }

    /// Sends a CM message from device `a` to device `b` (lost if a link is down).
    fn cm_send(&mut self, a: u32, b: u32, action: Action) {
        if self.cm_path_up(a, b) {
            let lat = self.config.cm.msg_latency_ns;
            self.cm_schedule(lat, action);
        }
    }

    fn cm_next_psn(&mut self) -> u32 {
        self.cm.psn_seq += 1;
        (splitmix(self.config.seed ^ 0x636d_5f70_736e ^ self.cm.psn_seq) & 0xff_ffff) as u32
    }

    /// The device owning `ip` (its port 1), loopback → device 0.
    fn cm_device_of(&self, ip: IpAddr) -> Option<u32> {
        if ip.is_loopback() {
            return (!self.devices.is_empty()).then_some(0);
        }
        (0..self.devices.len() as u32).find(|&d| match ip {
            IpAddr::V4(a) => a == device_ipv4(d),
            IpAddr::V6(a) => a == device_ipv6(d),
        })
    }

    fn cm_device_addr(dev: u32, v6: bool) -> IpAddr {
        if v6 {
            IpAddr::V6(device_ipv6(dev))
        } else {
            IpAddr::V4(device_ipv4(dev))
        }
    }

    /// The CM's context for `dev`, opened on first use.
    fn cm_dev_ctx(&mut self, dev: u32) -> Result<ContextHandle> {
        if let Some(d) = self.cm.devs.get(&dev) {
            return Ok(d.ctx);
        }
        let ctx = self.open_device(dev as usize, self.config.cm.process)?;
        self.cm.devs.insert(
            dev,
            CmDevice {
                ctx,
                pd: None,
                bound: 0,
            },
        );
        Ok(ctx)
    }

    /// Binds `id` to `dev`: the device's default PD is allocated with the
    /// first id (librdmacm `ucma_get_device`).
    fn cm_attach_dev(&mut self, id: CmIdHandle, dev: u32, verb: Verb) -> Result<()> {
        let ctx = self.cm_dev_ctx(dev).map_err(|e| reverb(e, verb))?;
        let has_pd = self.cm.devs.get(&dev).and_then(|d| d.pd).is_some();
        if !has_pd {
            let pd = self.alloc_pd(ctx)?;
            if let Some(d) = self.cm.devs.get_mut(&dev) {
                d.pd = Some(pd);
            }
        }
        if let Some(d) = self.cm.devs.get_mut(&dev) {
            d.bound += 1;
        }
        self.cm_id_mut(id, verb)?.dev = Some(dev);
        Ok(())
    }

    /// The id leaves its device: the default PD goes with the last id, if
    /// nothing uses it any more (librdmacm `ucma_put_device`; a PD still in
    /// use stays allocated and is reused).
    fn cm_detach_dev(&mut self, dev: u32) {
        let Some(d) = self.cm.devs.get_mut(&dev) else {
            return;
        };
        d.bound = d.bound.saturating_sub(1);
        if d.bound > 0 {
            return;
        }
        if let Some(pd) = d.pd {
            if self.dealloc_pd(pd).is_ok() {
                if let Some(d) = self.cm.devs.get_mut(&dev) {
                    d.pd = None;
                }
            }
        }
    }

    /// Whether `(ps, addr)` may be bound by `me` (kernel `cma_check_port`):
    /// a wildcard on either side conflicts with `EADDRNOTAVAIL`, the same
    /// address with `EADDRINUSE`.
    fn cm_check_port(&self, me: Option<CmIdHandle>, ps: PortSpace, addr: SocketAddr) -> Result<()> {
        for (index, generation, other) in self.cm.ids.iter() {
            if me.is_some_and(|m| m.index == index && m.generation == generation) {
                continue;
            }
            let Some(o) = other.local.filter(|_| other.owns_port && other.ps == ps) else {
                continue;
            };
            if o.port() != addr.port() {
                continue;
            }
            // `afonly` is set for IPv4 ids only (IPv6 ones follow
            // bindv6only = 0), so ids of both families share a port space.
            if is_any(o.ip()) || is_any(addr.ip()) {
                return Err(Error::from_errno(
                    Verb::RdmaBindAddr,
                    EADDRNOTAVAIL,
                    format!(
                        "port {} of {ps} is already bound to {o} (a wildcard on either side conflicts)",
                        addr.port()
                    ),
                ));
            }
            if o.ip() == addr.ip() {
                return Err(Error::from_errno(
                    Verb::RdmaBindAddr,
                    EADDRINUSE,
                    format!("{addr} is already bound in {ps}"),
                ));
            }
        }
        Ok(())
    }

    /// A free ephemeral port for `addr` in `ps`.
    fn cm_ephemeral(&mut self, ps: PortSpace, addr: SocketAddr) -> Result<u16> {
        let c = &self.config.cm;
        let (first, last) = (c.ephemeral_first, c.ephemeral_last.max(c.ephemeral_first));
        let span = u32::from(last - first) + 1;
        for _ in 0..span {
            let p = if (first..=last).contains(&self.cm.next_port) {
                self.cm.next_port
            } else {
                first
            };
            self.cm.next_port = if p >= last { first } else { p + 1 };
            let mut a = addr;
            a.set_port(p);
            if self.cm_check_port(None, ps, a).is_ok() {
                return Ok(p);
            }
        }
        Err(Error::from_errno(
            Verb::RdmaBindAddr,
            EADDRINUSE,
            "no free ephemeral port",
        ))
    }

    /// `rdma_bind_addr`'s work (also the implicit binds of resolve/listen).
    fn cm_bind(&mut self, id: CmIdHandle, addr: SocketAddr, verb: Verb) -> Result<()> {
        let i = self.cm_id(id, verb)?;
        if i.state != IdState::Idle {
            return Err(invalid(
                verb,
                format!(
                    "the id is not idle (state {:?}): it is already bound",
                    i.state
                ),
            ));
        }
        let ps = i.ps;
        let dev = if is_any(addr.ip()) || addr.ip().is_loopback() {
            None
        } else {
            Some(self.cm_device_of(addr.ip()).ok_or_else(|| {
                Error::from_errno(
                    verb,
                    EADDRNOTAVAIL,
                    format!(
                        "no simulated device owns {} (see docs/rdma-cm.md, address plan)",
                        addr.ip()
                    ),
                )
            })?)
        };
        let mut addr = addr;
        if addr.port() == 0 {
            addr.set_port(self.cm_ephemeral(ps, addr).map_err(|e| reverb(e, verb))?);
        } else {
            self.cm_check_port(Some(id), ps, addr)
                .map_err(|e| reverb(e, verb))?;
        }
        if let Some(d) = dev {
            self.cm_attach_dev(id, d, verb)?;
        }
        let i = self.cm_id_mut(id, verb)?;
        i.local = Some(addr);
        i.owns_port = true;
        i.state = IdState::AddrBound;
        Ok(())
    }

    // --------------------------------------------------------------- verbs

    /// `rdma_create_event_channel`.
    pub fn rdma_create_event_channel(&mut self) -> CmChannelHandle {
        CmChannelHandle::from_parts(self.cm.channels.insert(CmChannel::default()))
    }

    /// `rdma_destroy_event_channel`: `EBUSY` while ids use it.
    pub fn rdma_destroy_event_channel(&mut self, ch: CmChannelHandle) -> Result<()> {
        let v = Verb::RdmaDestroyEventChannel;
        let c = self
            .cm
            .channels
            .get(ch.index, ch.generation)
            .ok_or_else(|| {
                invalid(
                    v,
                    format!("invalid or destroyed rdma_cm event channel {ch:?}"),
                )
            })?;
        if c.ids > 0 {
            return Err(busy(
                v,
                format!("{} rdma_cm id(s) of this channel are still alive", c.ids),
            ));
        }
        self.cm.channels.remove(ch.index, ch.generation);
        Ok(())
    }

    /// `rdma_create_id`.
    pub fn rdma_create_id(&mut self, ch: CmChannelHandle, ps: PortSpace) -> Result<CmIdHandle> {
        let v = Verb::RdmaCreateId;
        if !matches!(ps, PortSpace::Tcp | PortSpace::Udp | PortSpace::Ib) {
            return Err(Error::from_errno(
                v,
                verbs_api::errno::EPROTONOSUPPORT,
                format!("port space {ps} is not modelled (TCP, UDP and IB are)"),
            ));
        }
        let c = self
            .cm
            .channels
            .get_mut(ch.index, ch.generation)
            .ok_or_else(|| {
                invalid(
                    v,
                    format!("invalid or destroyed rdma_cm event channel {ch:?}"),
                )
            })?;
        c.ids += 1;
        Ok(self.cm_new_id(ch, ps))
    }

    fn cm_new_id(&mut self, channel: CmChannelHandle, ps: PortSpace) -> CmIdHandle {
        CmIdHandle::from_parts(self.cm.ids.insert(CmId {
            channel,
            ps,
            state: IdState::Idle,
            local: None,
            peer: None,
            owns_port: false,
            dev: None,
            qp: None,
            unacked: Vec::new(),
            remote: None,
            param: ConnParam::default(),
            req: ConnParam::default(),
            remote_qpn: 0,
            remote_psn: 0,
            remote_dev: 0,
            psn: 0,
            gen: 0,
            ud: ps == PortSpace::Udp,
            dreq_sent: false,
            rd: (0, 0),
        }))
    }

    /// `rdma_destroy_id`: `EBUSY` with unacknowledged events or a QP. A
    /// connection in progress is rejected (`IB_CM_REJ_TIMEOUT`), an
    /// established one disconnected (DREQ), as `ib_destroy_cm_id` does.
    pub fn rdma_destroy_id(&mut self, id: CmIdHandle) -> Result<()> {
        let v = Verb::RdmaDestroyId;
        let i = self.cm_id(id, v)?;
        if !i.unacked.is_empty() {
            return Err(busy(
                v,
                format!(
                    "{} rdma_cm event(s) of this id are not acknowledged; rdma_destroy_id would wait for them forever",
                    i.unacked.len()
                ),
            ));
        }
        if i.qp.is_some() {
            return Err(busy(v, "the id still has a QP: rdma_destroy_qp first"));
        }
        let (state, remote, dev, ud) = (i.state, i.remote, i.dev, i.ud);
        // An active id whose REQ is being handled knows its peer only once
        // the REP arrives; the passive id knows it.
        let remote = remote.or_else(|| {
            self.cm
                .ids
                .iter()
                .find(|(_, _, o)| o.remote == Some(id))
                .map(|(index, generation, _)| CmIdHandle { index, generation })
        });
        let here = dev.unwrap_or(0);
        let there = self.cm_id(id, v)?.remote_dev;
        if let Some(r) = remote {
            match state {
                IdState::Connect(Conn::Established) if !ud => {
                    self.cm_send(here, there, Action::Dreq { to: r });
                }
                IdState::Connect(Conn::ReqSent | Conn::ReqRcvd | Conn::RepSent) if !ud => {
                    self.cm_send(
                        here,
                        there,
                        Action::Rej {
                            to: r,
                            reason: reject_reason::TIMEOUT,
                            data: Vec::new(),
                        },
                    );
                }
                _ => {}
            }
        }
        self.cm_forget_id(id);
        Ok(())
    }

    /// Removes `id` and the events queued for it; connection requests it
    /// received as a listener and nobody fetched yet are rejected and their
    /// new ids removed too.
    fn cm_forget_id(&mut self, id: CmIdHandle) {
        let Some(i) = self.cm.ids.remove(id.index, id.generation) else {
            return;
        };
        let mut orphans = Vec::new();
        if let Some(c) = self
            .cm
            .channels
            .get_mut(i.channel.index, i.channel.generation)
        {
            c.ids -= 1;
            c.events.retain(|e| {
                if e.listen_id == Some(id) {
                    orphans.push(e.id);
                }
                e.id != id && e.listen_id != Some(id)
            });
        }
        if let Some(d) = i.dev {
            self.cm_detach_dev(d);
        }
        for o in orphans {
            if let Some(n) = self.cm.ids.get(o.index, o.generation) {
                let (here, there, remote) = (n.dev.unwrap_or(0), n.remote_dev, n.remote);
                if let Some(r) = remote {
                    let action = if n.ud {
                        Action::SidrRep {
                            to: r,
                            status: reject_reason::SIDR_UNSUPPORTED,
                            data: Vec::new(),
                            qpn: 0,
                        }
                    } else {
                        Action::Rej {
                            to: r,
                            reason: reject_reason::TIMEOUT,
                            data: Vec::new(),
                        }
                    };
                    self.cm_send(here, there, action);
                }
            }
            self.cm_forget_id(o);
        }
    }

    /// `rdma_bind_addr`: `EINVAL` unless idle, `EADDRNOTAVAIL` for an
    /// address no device owns, `EADDRINUSE`/`EADDRNOTAVAIL` for a taken port.
    pub fn rdma_bind_addr(&mut self, id: CmIdHandle, addr: SocketAddr) -> Result<()> {
        self.cm_bind(id, addr, Verb::RdmaBindAddr)
    }

    /// `rdma_resolve_addr`: binds first if idle; `ADDR_RESOLVED` after
    /// `addr_resolve_ns`, or `ADDR_ERROR` (`-ETIMEDOUT`) after `timeout_ms`
    /// for an address no device owns.
    pub fn rdma_resolve_addr(
        &mut self,
        id: CmIdHandle,
        src: Option<SocketAddr>,
        dst: SocketAddr,
        timeout_ms: u32,
    ) -> Result<()> {
        let v = Verb::RdmaResolveAddr;
        let i = self.cm_id(id, v)?;
        if let Some(s) = src {
            if s.is_ipv4() != dst.is_ipv4() {
                return Err(invalid(
                    v,
                    format!("src {s} and dst {dst} are of different families"),
                ));
            }
        }
        if i.state == IdState::Idle {
            let any = match dst {
                SocketAddr::V4(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
                SocketAddr::V6(_) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
            };
            self.cm_bind(id, src.unwrap_or(any), v)?;
        }
        let i = self.cm_id(id, v)?;
        if i.state != IdState::AddrBound {
            return Err(invalid(
                v,
                format!(
                    "rdma_resolve_addr needs an idle or bound id (state {:?})",
                    i.state
                ),
            ));
        }
        let bound_dev = i.dev;
        let i = self.cm_id_mut(id, v)?;
        i.state = IdState::AddrQuery;
        i.peer = Some(dst);
        i.gen += 1;
        let gen = i.gen;
        match self.cm_device_of(dst.ip()) {
            Some(d) if !is_any(dst.ip()) => {
                let dev = bound_dev.unwrap_or(d);
                let delay = self.config.cm.addr_resolve_ns;
                self.cm_schedule(delay, Action::AddrResolved { id, gen, dev });
            }
            _ => {
                let delay = u64::from(timeout_ms) * 1_000_000;
                self.cm_schedule(delay, Action::AddrError { id, gen });
            }
        }
        Ok(())
    }

    /// `rdma_resolve_route`: `EINVAL` unless the address is resolved.
    ///
    /// With port 1 of the id's device or of the destination's down the path
    /// query is lost: `ROUTE_ERROR` (`-ETIMEDOUT`) after `timeout_ms`.
    pub fn rdma_resolve_route(&mut self, id: CmIdHandle, timeout_ms: u32) -> Result<()> {
        let v = Verb::RdmaResolveRoute;
        let i = self.cm_id(id, v)?;
        let here = i.dev.unwrap_or(0);
        let there = i
            .peer
            .and_then(|p| self.cm_device_of(p.ip()))
            .unwrap_or(here);
        let up = self.cm_path_up(here, there);
        let i = self.cm_id_mut(id, v)?;
        if i.state != IdState::AddrResolved {
            return Err(invalid(
                v,
                format!(
                    "rdma_resolve_route needs a resolved address (ADDR_RESOLVED first; state {:?})",
                    i.state
                ),
            ));
        }
        i.state = IdState::RouteQuery;
        i.gen += 1;
        let gen = i.gen;
        if up {
            let delay = self.config.cm.route_resolve_ns;
            self.cm_schedule(delay, Action::RouteResolved { id, gen });
        } else {
            let delay = u64::from(timeout_ms) * 1_000_000;
            self.cm_schedule(delay, Action::RouteError { id, gen });
        }
        Ok(())
    }

    /// `rdma_listen`: binds to the IPv4 wildcard first if idle; `EINVAL`
    /// unless bound.
    pub fn rdma_listen(&mut self, id: CmIdHandle, _backlog: i32) -> Result<()> {
        let v = Verb::RdmaListen;
        if self.cm_id(id, v)?.state == IdState::Idle {
            self.cm_bind(id, SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)), v)?;
        }
        let i = self.cm_id_mut(id, v)?;
        if i.state != IdState::AddrBound {
            return Err(invalid(
                v,
                format!("rdma_listen needs a bound id (state {:?})", i.state),
            ));
        }
        i.state = IdState::Listen;
        Ok(())
    }

    /// Checks `responder_resources` / `initiator_depth` against the device
    /// (librdmacm `ucma_valid_param`; 255 means "the device's maximum").
    fn cm_valid_param(&self, dev: u32, p: &ConnParam, verb: Verb) -> Result<ConnParam> {
        let a = self.device(dev).attr();
        let mut p = p.clone();
        let max_res = u8::try_from(a.max_qp_rd_atom).unwrap_or(u8::MAX);
        let max_init = u8::try_from(a.max_qp_init_rd_atom).unwrap_or(u8::MAX);
        if p.responder_resources == u8::MAX {
            p.responder_resources = max_res;
        } else if p.responder_resources > max_res {
            return Err(invalid(
                verb,
                format!(
                    "responder_resources {} is above the device's max_qp_rd_atom {max_res}",
                    p.responder_resources
                ),
            ));
        }
        if p.initiator_depth == u8::MAX {
            p.initiator_depth = max_init;
        } else if p.initiator_depth > max_init {
            return Err(invalid(
                verb,
                format!(
                    "initiator_depth {} is above the device's max_qp_init_rd_atom {max_init}",
                    p.initiator_depth
                ),
            ));
        }
        Ok(p)
    }

    fn cm_private_limit(verb: Verb, data: &[u8], max: usize) -> Result<()> {
        if data.len() > max {
            return Err(invalid(
                verb,
                format!(
                    "{} bytes of private data, at most {max} fit in this message",
                    data.len()
                ),
            ));
        }
        Ok(())
    }

    /// `rdma_connect`: `EINVAL` unless the route is resolved.
    pub fn rdma_connect(&mut self, id: CmIdHandle, param: &ConnParam) -> Result<()> {
        let v = Verb::RdmaConnect;
        let i = self.cm_id(id, v)?;
        if i.state != IdState::RouteResolved {
            return Err(invalid(
                v,
                format!(
                    "rdma_connect needs a resolved route (rdma_resolve_route and ROUTE_RESOLVED first; state {:?})",
                    i.state
                ),
            ));
        }
        let (dev, ps, ud) = (i.dev.unwrap_or(0), i.ps, i.ud);
        let qp = i.qp.map(|q| q.qp);
        let (local, peer) = (i.local, i.peer);
        Self::cm_private_limit(v, &param.private_data, connect_limit(ps, ud))?;
        let mut p = if ud {
            param.clone()
        } else {
            self.cm_valid_param(dev, param, v)?
        };
        let qpn = match qp {
            Some(q) => {
                let n = self.qp(q, v)?.qp_num;
                p.srq = u8::from(self.qp(q, v)?.srq.is_some());
                n
            }
            None => param.qp_num,
        };
        p.qp_num = qpn;
        let (Some(src), Some(dst)) = (local, peer) else {
            return Err(invalid(v, "the id has no resolved addresses"));
        };
        let psn = self.cm_next_psn();
        let to_dev = self.cm_device_of(dst.ip()).unwrap_or(0);
        let i = self.cm_id_mut(id, v)?;
        i.state = IdState::Connect(Conn::ReqSent);
        i.param = p.clone();
        i.psn = psn;
        i.remote_dev = to_dev;
        i.gen += 1;
        let gen = i.gen;
        let req = Box::new(ReqMsg {
            from: id,
            from_dev: dev,
            src,
            dst,
            ps,
            ud,
            param: p,
            qpn,
            psn,
        });
        self.cm_send(dev, to_dev, Action::Req(req.clone()));
        let t = self.config.cm.response_timeout_ns;
        self.cm_schedule(
            t,
            Action::ReqTimeout {
                id,
                gen,
                attempt: 0,
                req,
            },
        );
        Ok(())
    }

    /// The attributes of a connected QP's automatic transitions.
    fn cm_qp_attr(&self, id: &CmId, to: QpState, rd_res: u8, rd_init: u8) -> QpAttr {
        let dev = id.dev.unwrap_or(0);
        let there = id.remote_dev;
        let me = self.device(dev).port_attr(dev);
        let peer = self.device(there).port_attr(there);
        let v6 = id.peer.is_some_and(|p| p.is_ipv6());
        let dgid = if peer.link_layer == LinkLayer::Ethernet {
            match v6 {
                false => self.gid_of(there, 1),
                true => self.gid_of(there, 0),
            }
        } else {
            self.gid_of(there, 0)
        };
        let global =
            peer.link_layer == LinkLayer::Ethernet || self.device(dev).profile.grh_required();
        let sgid_index = if me.link_layer == LinkLayer::Ethernet && !v6 {
            1
        } else {
            0
        };
        let mut mtu = Mtu::Mtu4096;
        for active in [me.active_mtu, peer.active_mtu] {
            if active.bytes().is_some() && active.to_raw() < mtu.to_raw() {
                mtu = active;
            }
        }
        let mut access = AccessFlags::REMOTE_WRITE;
        if rd_res > 0 {
            access |= AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
        }
        QpAttr {
            qp_state: to,
            qp_access_flags: access,
            pkey_index: 0,
            port_num: 1,
            path_mtu: mtu,
            dest_qp_num: id.remote_qpn,
            rq_psn: id.remote_psn,
            sq_psn: id.psn,
            max_dest_rd_atomic: rd_res,
            max_rd_atomic: rd_init,
            min_rnr_timer: self.config.cm.min_rnr_timer,
            timeout: self.config.cm.ack_timeout,
            retry_cnt: id.req.retry_count.min(7),
            rnr_retry: id.req.rnr_retry_count.min(7),
            ah_attr: AhAttr {
                grh: GlobalRoute {
                    dgid,
                    flow_label: 0,
                    sgid_index,
                    hop_limit: 64,
                    traffic_class: 0,
                },
                dlid: peer.lid,
                sl: 0,
                src_path_bits: 0,
                static_rate: 0,
                is_global: global,
                port_num: 1,
            },
            ..QpAttr::default()
        }
    }

    /// INIT→INIT (access flags), INIT→RTR, RTR→RTS with the CM's values.
    fn cm_ready_qp(&mut self, id: CmIdHandle, rd_res: u8, rd_init: u8, verb: Verb) -> Result<()> {
        let i = self.cm_id(id, verb)?;
        let Some(q) = i.qp else {
            return Ok(());
        };
        let class = self.qp(q.qp, verb)?.class;
        let steps = [
            (QpState::Init, QpState::Init),
            (QpState::Init, QpState::ReadyToReceive),
            (QpState::ReadyToReceive, QpState::ReadyToSend),
        ];
        for (from, to) in steps {
            let i = self.cm_id(id, verb)?;
            let attr = self.cm_qp_attr(i, to, rd_res, rd_init);
            let masks =
                transition_masks(class, from, to, TableFlavor::Kernel).ok_or_else(|| {
                    invalid(verb, format!("no {from} -> {to} transition for {class}"))
                })?;
            let mut mask = masks.required | QpAttrMask::STATE;
            if from == QpState::Init && to == QpState::Init {
                mask |= QpAttrMask::ACCESS_FLAGS & (masks.required | masks.optional);
            }
            self.modify_qp(q.qp, &attr, mask)
                .map_err(|e| reverb(e, verb))?;
        }
        Ok(())
    }

    /// `rdma_init_qp_attr`: the attributes and mask of the id's
    /// transition to `state`, as the CM applies them to its own QP
    /// (`cm_ready_qp`): INIT (P_Key index, port, access flags, or the Q_Key
    /// for UDP/IB port spaces), RTR (path, MTU, peer QPN and PSN, responder
    /// resources, RNR timer), RTS (PSN, timeout, retries, initiator depth).
    /// `EINVAL` for another state, or RTR/RTS of a connected port space
    /// before the peer's QP number is known.
    pub fn rdma_init_qp_attr(
        &mut self,
        id: CmIdHandle,
        state: QpState,
    ) -> Result<(QpAttr, QpAttrMask)> {
        let v = Verb::RdmaInitQpAttr;
        let i = self.cm_id(id, v)?;
        if i.dev.is_none() {
            return Err(invalid(v, "the id is not bound to a device yet"));
        }
        let datagram = matches!(i.ps, PortSpace::Udp | PortSpace::Ib) || i.ud;
        let connected = matches!(i.state, IdState::Connect(_)) && i.remote_qpn != 0;
        // Responder resources and initiator depth negotiated for this side.
        let (rd_res, rd_init) = i.rd;
        let mut attr = self.cm_qp_attr(i, state, rd_res, rd_init);
        use QpAttrMask as M;
        let mask = match (state, datagram) {
            (QpState::Init, true) => {
                attr.qkey = RDMA_UDP_QKEY;
                M::STATE | M::PKEY_INDEX | M::PORT | M::QKEY
            }
            (QpState::Init, false) => M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS,
            (QpState::ReadyToReceive, true) => M::STATE,
            (QpState::ReadyToSend, true) => {
                attr.sq_psn = 0;
                M::STATE | M::SQ_PSN
            }
            (QpState::ReadyToReceive | QpState::ReadyToSend, false) if !connected => {
                return Err(invalid(
                    v,
                    format!("{state} needs a connected id (the peer's QP number is not known yet)"),
                ));
            }
            (QpState::ReadyToReceive, false) => {
                M::STATE
                    | M::AV
                    | M::PATH_MTU
                    | M::DEST_QPN
                    | M::RQ_PSN
                    | M::MAX_DEST_RD_ATOMIC
                    | M::MIN_RNR_TIMER
            }
            (QpState::ReadyToSend, false) => {
                M::STATE
                    | M::SQ_PSN
                    | M::TIMEOUT
                    | M::RETRY_CNT
                    | M::RNR_RETRY
                    | M::MAX_QP_RD_ATOMIC
            }
            (other, _) => {
                return Err(invalid(
                    v,
                    format!("no CM attributes for a transition to {other} (INIT, RTR or RTS)"),
                ));
            }
        };
        Ok((attr, mask))
    }

    fn cm_qp_to_err(&mut self, id: CmIdHandle) {
        if let Some(q) = self.cm.ids.get(id.index, id.generation).and_then(|i| i.qp) {
            let attr = QpAttr {
                qp_state: QpState::Error,
                ..QpAttr::default()
            };
            let _ = self.modify_qp(q.qp, &attr, QpAttrMask::STATE);
        }
    }

    /// `rdma_accept`: `EINVAL` unless a CONNECT_REQUEST's id waiting for an
    /// answer. A connected QP goes to RTS before the REP leaves.
    pub fn rdma_accept(&mut self, id: CmIdHandle, param: &ConnParam) -> Result<()> {
        let v = Verb::RdmaAccept;
        let i = self.cm_id(id, v)?;
        if i.state != IdState::Connect(Conn::ReqRcvd) {
            return Err(invalid(
                v,
                format!(
                    "rdma_accept needs the id of a CONNECT_REQUEST not answered yet (state {:?})",
                    i.state
                ),
            ));
        }
        let (dev, ud, remote, there) = (i.dev.unwrap_or(0), i.ud, i.remote, i.remote_dev);
        let qp = i.qp.map(|q| q.qp);
        let Some(remote) = remote else {
            return Err(invalid(v, "the id has no peer"));
        };
        Self::cm_private_limit(
            v,
            &param.private_data,
            if ud { SIDR_REP_PD } else { REP_PD },
        )?;
        let qpn = match qp {
            Some(q) => self.qp(q, v)?.qp_num,
            None => param.qp_num,
        };
        if ud {
            self.cm_id_mut(id, v)?.state = IdState::Connect(Conn::Established);
            self.cm_send(
                dev,
                there,
                Action::SidrRep {
                    to: remote,
                    status: 0,
                    data: param.private_data.clone(),
                    qpn,
                },
            );
            return Ok(());
        }
        let mut p = self.cm_valid_param(dev, param, v)?;
        p.qp_num = qpn;
        if let Some(q) = qp {
            p.srq = u8::from(self.qp(q, v)?.srq.is_some());
        }
        let seq = self.cm.psn_seq;
        let psn = self.cm_next_psn();
        let saved = {
            let i = self.cm_id_mut(id, v)?;
            let saved = (i.psn, i.param.clone(), i.req.rnr_retry_count);
            i.psn = psn;
            i.param = p.clone();
            i.req.rnr_retry_count = p.rnr_retry_count;
            i.rd = (p.responder_resources, p.initiator_depth);
            saved
        };
        if let Err(e) = self.cm_ready_qp(id, p.responder_resources, p.initiator_depth, v) {
            // The id is as before (a QP step that failed changed nothing;
            // steps before it stay, as in librdmacm).
            self.cm.psn_seq = seq;
            let i = self.cm_id_mut(id, v)?;
            (i.psn, i.param, i.req.rnr_retry_count) = saved;
            return Err(e);
        }
        let i = self.cm_id_mut(id, v)?;
        i.state = IdState::Connect(Conn::RepSent);
        i.gen += 1;
        let gen = i.gen;
        let rep = Action::Rep {
            to: remote,
            from: id,
            param: p,
            qpn,
            psn,
        };
        self.cm_send(dev, there, rep.clone());
        let t = self.config.cm.response_timeout_ns;
        self.cm_schedule(
            t,
            Action::RepTimeout {
                id,
                gen,
                attempt: 0,
                rep: Box::new(rep),
            },
        );
        Ok(())
    }

    /// `rdma_reject`: `EINVAL` unless a CONNECT_REQUEST's id waiting for an
    /// answer; the peer gets `REJECTED` (`IB_CM_REJ_CONSUMER_DEFINED`) or,
    /// for UD, `UNREACHABLE` (`IB_SIDR_REJECT`), with the private data.
    pub fn rdma_reject(&mut self, id: CmIdHandle, data: &[u8]) -> Result<()> {
        let v = Verb::RdmaReject;
        let i = self.cm_id(id, v)?;
        if i.state != IdState::Connect(Conn::ReqRcvd) {
            return Err(invalid(
                v,
                format!(
                    "rdma_reject needs the id of a CONNECT_REQUEST not answered yet (state {:?})",
                    i.state
                ),
            ));
        }
        let (dev, ud, there) = (i.dev.unwrap_or(0), i.ud, i.remote_dev);
        let Some(remote) = i.remote else {
            return Err(invalid(v, "the id has no peer"));
        };
        Self::cm_private_limit(v, data, if ud { SIDR_REP_PD } else { REJ_PD })?;
        self.cm_id_mut(id, v)?.state = IdState::Failed;
        let action = if ud {
            Action::SidrRep {
                to: remote,
                status: reject_reason::SIDR_REJECT,
                data: data.to_vec(),
                qpn: 0,
            }
        } else {
            Action::Rej {
                to: remote,
                reason: reject_reason::CONSUMER_DEFINED,
                data: data.to_vec(),
            }
        };
        self.cm_send(dev, there, action);
        Ok(())
    }

    /// `rdma_disconnect`: the QP goes to ERR and a DREQ leaves; `EINVAL` on
    /// an id that never connected; 0 again while disconnecting.
    pub fn rdma_disconnect(&mut self, id: CmIdHandle) -> Result<()> {
        let v = Verb::RdmaDisconnect;
        let i = self.cm_id(id, v)?;
        match i.state {
            IdState::Connect(Conn::Established) if !i.ud => {}
            IdState::Connect(Conn::RepSent) => {}
            IdState::Disconnect => {
                self.cm_qp_to_err(id);
                return Ok(());
            }
            s => {
                return Err(invalid(
                    v,
                    format!("rdma_disconnect needs a connected id (state {s:?})"),
                ))
            }
        }
        let (dev, there, remote) = (i.dev.unwrap_or(0), i.remote_dev, i.remote);
        self.cm_qp_to_err(id);
        let i = self.cm_id_mut(id, v)?;
        i.state = IdState::Disconnect;
        i.dreq_sent = true;
        i.gen += 1;
        let gen = i.gen;
        if let Some(r) = remote {
            self.cm_send(dev, there, Action::Dreq { to: r });
        }
        let t = self.config.cm.response_timeout_ns;
        self.cm_schedule(
            t,
            Action::DreqTimeout {
                id,
                gen,
                attempt: 0,
            },
        );
        Ok(())
    }

    /// `rdma_get_cm_event`, non-blocking: runs virtual time forward until
    /// the channel has an event or nothing left could produce one. The
    /// How many CM events wait on `ch` for `rdma_get_cm_event` (what makes
    /// an event channel's file descriptor readable in the drop-in library).
    pub fn cm_channel_pending(&self, ch: CmChannelHandle) -> Result<usize> {
        match self.cm.channels.get(ch.index, ch.generation) {
            Some(c) => Ok(c.events.len()),
            None => Err(invalid(
                Verb::RdmaGetCmEvent,
                format!("invalid or destroyed event channel {ch:?}"),
            )),
        }
    }

    /// event comes with its token (for `rdma_ack_cm_event`).
    pub(crate) fn rdma_get_cm_event(
        &mut self,
        ch: CmChannelHandle,
    ) -> Result<Option<(QueuedEvent, u64)>> {
        let v = Verb::RdmaGetCmEvent;
        if self.cm.channels.get(ch.index, ch.generation).is_none() {
            return Err(invalid(
                v,
                format!("invalid or destroyed rdma_cm event channel {ch:?}"),
            ));
        }
        let has = |w: &Self| {
            w.cm.channels
                .get(ch.index, ch.generation)
                .is_some_and(|c| !c.events.is_empty())
        };
        let mut rounds = 0u64;
        while !has(self) {
            if self.cm.pending == 0 && !self.busy() {
                break;
            }
            let Some(next) = self.fabric.next_event_time() else {
                break;
            };
            rounds += 1;
            if rounds > super::state::RUN_EVENT_BUDGET {
                break;
            }
            self.run_events(Some(next.as_nanos()), super::state::RUN_EVENT_BUDGET, has);
            self.now_ns = self.now_ns.max(next.as_nanos());
        }
        let Some(ev) = self
            .cm
            .channels
            .get_mut(ch.index, ch.generation)
            .and_then(|c| c.events.pop_front())
        else {
            return Ok(None);
        };
        let counted = ev.listen_id.unwrap_or(ev.id);
        self.event_tokens += 1;
        let token = self.event_tokens;
        if let Some(i) = self.cm.ids.get_mut(counted.index, counted.generation) {
            i.unacked.push(token);
        }
        Ok(Some((ev, token)))
    }

    /// `rdma_ack_cm_event`.
    pub fn rdma_ack_cm_event(
        &mut self,
        id: CmIdHandle,
        listen_id: Option<CmIdHandle>,
        token: u64,
    ) -> Result<()> {
        let v = Verb::RdmaAckCmEvent;
        let counted = listen_id.unwrap_or(id);
        let i = self.cm_id_mut(counted, v)?;
        let Some(pos) = i.unacked.iter().position(|&t| t == token) else {
            return Err(Error::from_errno(
                v,
                EINVAL,
                format!("rdma_cm event #{token} of this id was never handed out or is already acknowledged"),
            ));
        };
        i.unacked.remove(pos);
        Ok(())
    }

    // ---------------------------------------------------- actions (timed)

    /// The end of an address or route query: if `id` is still the same
    /// query (`gen`) in state `from`, it moves to `to` and gets `event`
    /// with its status; a stale timer does nothing.
    fn cm_query_done(
        &mut self,
        (id, gen): (CmIdHandle, u32),
        from: IdState,
        to: IdState,
        (event, status): (CmEventType, i32),
    ) {
        let Some(i) = self.cm.ids.get_mut(id.index, id.generation) else {
            return;
        };
        if i.gen != gen || i.state != from {
            return;
        }
        i.state = to;
        self.cm_simple_event(id, event, status);
    }

    fn cm_run(&mut self, action: Action) {
        match action {
            Action::AddrResolved { id, gen, dev } => {
                let Some(i) = self.cm.ids.get(id.index, id.generation) else {
                    return;
                };
                if i.gen != gen || i.state != IdState::AddrQuery {
                    return;
                }
                let had_dev = i.dev.is_some();
                let v6 = i.peer.is_some_and(|p| p.is_ipv6());
                if !had_dev && self.cm_attach_dev(id, dev, Verb::RdmaResolveAddr).is_err() {
                    self.cm_simple_event(id, CmEventType::AddrError, -verbs_api::errno::ENOMEM);
                    return;
                }
                if let Some(i) = self.cm.ids.get_mut(id.index, id.generation) {
                    i.state = IdState::AddrResolved;
                    if let Some(l) = i.local.as_mut() {
                        if is_any(l.ip()) {
                            l.set_ip(Self::cm_device_addr(dev, v6));
                        }
                    }
                }
                self.cm_simple_event(id, CmEventType::AddrResolved, 0);
            }
            Action::AddrError { id, gen } => self.cm_query_done(
                (id, gen),
                IdState::AddrQuery,
                IdState::AddrBound,
                (CmEventType::AddrError, -ETIMEDOUT),
            ),
            Action::RouteResolved { id, gen } => self.cm_query_done(
                (id, gen),
                IdState::RouteQuery,
                IdState::RouteResolved,
                (CmEventType::RouteResolved, 0),
            ),
            // Back to ADDR_RESOLVED: the application may try again.
            Action::RouteError { id, gen } => self.cm_query_done(
                (id, gen),
                IdState::RouteQuery,
                IdState::AddrResolved,
                (CmEventType::RouteError, -ETIMEDOUT),
            ),
            Action::Req(req) => self.cm_on_req(*req),
            Action::ReqTimeout {
                id,
                gen,
                attempt,
                req,
            } => {
                let Some(i) = self.cm.ids.get_mut(id.index, id.generation) else {
                    return;
                };
                if i.gen != gen || i.state != IdState::Connect(Conn::ReqSent) {
                    return;
                }
                if attempt < self.config.cm.max_retries {
                    let to_dev = i.remote_dev;
                    self.cm_send(req.from_dev, to_dev, Action::Req(req.clone()));
                    let t = self.config.cm.response_timeout_ns;
                    self.cm_schedule(
                        t,
                        Action::ReqTimeout {
                            id,
                            gen,
                            attempt: attempt + 1,
                            req,
                        },
                    );
                    return;
                }
                i.state = IdState::Failed;
                self.cm_qp_to_err(id);
                self.cm_simple_event(id, CmEventType::Unreachable, -ETIMEDOUT);
            }
            Action::Rep {
                to,
                from,
                param,
                qpn,
                psn,
            } => self.cm_on_rep(to, from, param, qpn, psn),
            Action::RepTimeout {
                id,
                gen,
                attempt,
                rep,
            } => {
                let Some(i) = self.cm.ids.get_mut(id.index, id.generation) else {
                    return;
                };
                if i.gen != gen || i.state != IdState::Connect(Conn::RepSent) {
                    return;
                }
                if attempt < self.config.cm.max_retries {
                    let (dev, there) = (i.dev.unwrap_or(0), i.remote_dev);
                    self.cm_send(dev, there, (*rep).clone());
                    let t = self.config.cm.response_timeout_ns;
                    self.cm_schedule(
                        t,
                        Action::RepTimeout {
                            id,
                            gen,
                            attempt: attempt + 1,
                            rep,
                        },
                    );
                    return;
                }
                // IB_CM_REP_ERROR: the RTU never came.
                i.state = IdState::Failed;
                self.cm_qp_to_err(id);
                self.cm_simple_event(id, CmEventType::Unreachable, -ETIMEDOUT);
            }
            Action::Rtu { to } => {
                let Some(i) = self.cm.ids.get_mut(to.index, to.generation) else {
                    return;
                };
                if i.state != IdState::Connect(Conn::RepSent) {
                    return;
                }
                i.state = IdState::Connect(Conn::Established);
                self.cm_simple_event(to, CmEventType::Established, 0);
            }
            Action::Rej { to, reason, data } => {
                let Some(i) = self.cm.ids.get_mut(to.index, to.generation) else {
                    return;
                };
                if !matches!(
                    i.state,
                    IdState::Connect(Conn::ReqSent | Conn::ReqRcvd | Conn::RepSent)
                ) {
                    return;
                }
                i.state = IdState::Failed;
                i.gen += 1;
                self.cm_qp_to_err(to);
                let padded = pad(&data, REJ_PD, self.config.cm.pad_private_data);
                self.cm_event(
                    to,
                    QueuedEvent {
                        event: CmEventType::Rejected,
                        id: to,
                        listen_id: None,
                        status: reason,
                        conn: ConnParam {
                            private_data: padded,
                            ..ConnParam::default()
                        },
                    },
                );
            }
            Action::SidrRep {
                to,
                status,
                data,
                qpn,
            } => {
                let Some(i) = self.cm.ids.get_mut(to.index, to.generation) else {
                    return;
                };
                if i.state != IdState::Connect(Conn::ReqSent) {
                    return;
                }
                i.gen += 1;
                let padded = pad(&data, SIDR_REP_PD, self.config.cm.pad_private_data);
                let (event, conn) = if status == 0 {
                    i.state = IdState::Connect(Conn::Established);
                    i.remote_qpn = qpn;
                    (
                        CmEventType::Established,
                        ConnParam {
                            private_data: padded,
                            qp_num: qpn,
                            ..ConnParam::default()
                        },
                    )
                } else {
                    i.state = IdState::Failed;
                    (
                        CmEventType::Unreachable,
                        ConnParam {
                            private_data: padded,
                            ..ConnParam::default()
                        },
                    )
                };
                self.cm_event(
                    to,
                    QueuedEvent {
                        event,
                        id: to,
                        listen_id: None,
                        status,
                        conn,
                    },
                );
            }
            Action::Dreq { to } => {
                let Some(i) = self.cm.ids.get_mut(to.index, to.generation) else {
                    return;
                };
                let (dev, there, remote) = (i.dev.unwrap_or(0), i.remote_dev, i.remote);
                match i.state {
                    IdState::Connect(Conn::Established | Conn::RepSent) => {
                        i.state = IdState::Disconnect;
                        i.gen += 1;
                        let gen = i.gen;
                        self.cm_simple_event(to, CmEventType::Disconnected, 0);
                        self.cm_enter_timewait(to, gen);
                    }
                    IdState::Disconnect => {}
                    _ => return,
                }
                // The CM answers every DREQ (also a resent one) with a DREP.
                if let Some(r) = remote {
                    self.cm_send(dev, there, Action::Drep { to: r });
                }
            }
            Action::Drep { to } => {
                let Some(i) = self.cm.ids.get_mut(to.index, to.generation) else {
                    return;
                };
                // Only the side that sent the DREQ is still waiting.
                if i.state != IdState::Disconnect || !i.dreq_sent {
                    return;
                }
                i.gen += 1;
                let gen = i.gen;
                self.cm_simple_event(to, CmEventType::Disconnected, 0);
                self.cm_enter_timewait(to, gen);
            }
            Action::DreqTimeout { id, gen, attempt } => {
                let Some(i) = self.cm.ids.get_mut(id.index, id.generation) else {
                    return;
                };
                if i.gen != gen || i.state != IdState::Disconnect {
                    return;
                }
                if attempt < self.config.cm.max_retries {
                    let (dev, there, remote) = (i.dev.unwrap_or(0), i.remote_dev, i.remote);
                    if let Some(r) = remote {
                        self.cm_send(dev, there, Action::Dreq { to: r });
                    }
                    let t = self.config.cm.response_timeout_ns;
                    self.cm_schedule(
                        t,
                        Action::DreqTimeout {
                            id,
                            gen,
                            attempt: attempt + 1,
                        },
                    );
                    return;
                }
                i.gen += 1;
                let gen = i.gen;
                self.cm_simple_event(id, CmEventType::Disconnected, -ETIMEDOUT);
                self.cm_enter_timewait(id, gen);
            }
            Action::Timewait { id, gen } => {
                let Some(i) = self.cm.ids.get(id.index, id.generation) else {
                    return;
                };
                if i.gen != gen {
                    return;
                }
                self.cm_simple_event(id, CmEventType::TimewaitExit, 0);
            }
        }
    }

    fn cm_enter_timewait(&mut self, id: CmIdHandle, gen: u32) {
        if let Some(i) = self.cm.ids.get_mut(id.index, id.generation) {
            i.dreq_sent = false;
        }
        let t = self.config.cm.timewait_ns;
        self.cm_schedule(t, Action::Timewait { id, gen });
    }

    /// A REQ (or SIDR REQ) reaches the destination's CM.
    fn cm_on_req(&mut self, req: ReqMsg) {
        // A resent REQ for a connection already being handled is absorbed.
        let dup = self
            .cm
            .ids
            .iter()
            .any(|(_, _, i)| i.remote == Some(req.from));
        if dup {
            return;
        }
        let to_dev = self.cm_device_of(req.dst.ip()).unwrap_or(0);
        let listener = self
            .cm
            .ids
            .iter()
            .find(|(_, _, i)| {
                i.state == IdState::Listen
                    && i.ps == req.ps
                    && i.local.is_some_and(|l| {
                        l.port() == req.dst.port()
                            && (is_any(l.ip()) || l.ip() == req.dst.ip())
                            && (l.is_ipv4() == req.dst.is_ipv4() || l.is_ipv6())
                    })
                    && i.dev.is_none_or(|d| d == to_dev)
            })
            .map(|(index, generation, i)| (CmIdHandle { index, generation }, i.channel));
        let Some((listen, channel)) = listener else {
            let action = if req.ud {
                Action::SidrRep {
                    to: req.from,
                    status: reject_reason::SIDR_UNSUPPORTED,
                    data: Vec::new(),
                    qpn: 0,
                }
            } else {
                Action::Rej {
                    to: req.from,
                    reason: reject_reason::INVALID_SERVICE_ID,
                    data: Vec::new(),
                }
            };
            self.cm_send(to_dev, req.from_dev, action);
            return;
        };
        // The new id: on the listener's channel, bound to the device.
        let ps = req.ps;
        let new = self.cm_new_id(channel, ps);
        if let Some(c) = self.cm.channels.get_mut(channel.index, channel.generation) {
            c.ids += 1;
        }
        if self
            .cm_attach_dev(new, to_dev, Verb::RdmaGetCmEvent)
            .is_err()
        {
            return;
        }
        let limit = connect_limit(ps, req.ud);
        let conn = ConnParam {
            private_data: pad(
                &req.param.private_data,
                limit,
                self.config.cm.pad_private_data,
            ),
            // The CM swaps the two: the active side's initiator depth is
            // what the passive side must offer as responder resources.
            responder_resources: req.param.initiator_depth,
            initiator_depth: req.param.responder_resources,
            flow_control: req.param.flow_control,
            retry_count: req.param.retry_count,
            rnr_retry_count: req.param.rnr_retry_count,
            srq: req.param.srq,
            qp_num: req.qpn,
        };
        if let Some(i) = self.cm.ids.get_mut(new.index, new.generation) {
            i.state = IdState::Connect(Conn::ReqRcvd);
            i.local = Some(req.dst);
            i.peer = Some(req.src);
            i.remote = Some(req.from);
            i.remote_dev = req.from_dev;
            i.remote_qpn = req.qpn;
            i.remote_psn = req.psn;
            i.req = req.param.clone();
            i.ud = req.ud;
        }
        // The passive CM acknowledges the REQ (MRA): the active side now
        // waits `mra_timeout_ns` for the application's answer.
        if let Some(a) = self.cm.ids.get_mut(req.from.index, req.from.generation) {
            if a.state == IdState::Connect(Conn::ReqSent) {
                a.gen += 1;
                let gen = a.gen;
                let t = self.config.cm.mra_timeout_ns;
                let from = req.from;
                let from_dev = req.from_dev;
                self.cm_schedule(
                    t,
                    Action::ReqTimeout {
                        id: from,
                        gen,
                        attempt: u32::MAX,
                        req: Box::new(ReqMsg { from_dev, ..req }),
                    },
                );
            }
        }
        self.cm_event(
            new,
            QueuedEvent {
                event: CmEventType::ConnectRequest,
                id: new,
                listen_id: Some(listen),
                status: 0,
                conn,
            },
        );
    }

    /// A REP reaches the active side: QP to RTS, RTU back, ESTABLISHED (or
    /// CONNECT_ERROR and a REJ when a transition fails); without a QP the
    /// event is CONNECT_RESPONSE.
    fn cm_on_rep(
        &mut self,
        to: CmIdHandle,
        from: CmIdHandle,
        param: ConnParam,
        qpn: u32,
        psn: u32,
    ) {
        let Some(i) = self.cm.ids.get_mut(to.index, to.generation) else {
            return;
        };
        if i.state == IdState::Connect(Conn::Established) && i.remote == Some(from) {
            // A resent REP: our RTU was lost; send it again.
            let (dev, there) = (i.dev.unwrap_or(0), i.remote_dev);
            self.cm_send(dev, there, Action::Rtu { to: from });
            return;
        }
        if i.state != IdState::Connect(Conn::ReqSent) {
            return;
        }
        i.gen += 1;
        i.remote = Some(from);
        i.remote_qpn = qpn;
        i.remote_psn = psn;
        // Our retry count goes into our own RTS, the RNR retry count is
        // the one the REP carries (IB CM `cm_rep_handler`).
        i.req = i.param.clone();
        i.req.rnr_retry_count = param.rnr_retry_count;
        // The active QP's responder resources are the passive side's
        // initiator depth, and the other way round.
        i.rd = (param.initiator_depth, param.responder_resources);
        let (dev, there, has_qp) = (i.dev.unwrap_or(0), i.remote_dev, i.qp.is_some());
        let conn = ConnParam {
            private_data: pad(&param.private_data, REP_PD, self.config.cm.pad_private_data),
            responder_resources: param.initiator_depth,
            initiator_depth: param.responder_resources,
            flow_control: param.flow_control,
            retry_count: 0,
            rnr_retry_count: param.rnr_retry_count,
            srq: param.srq,
            qp_num: qpn,
        };
        if !has_qp {
            if let Some(i) = self.cm.ids.get_mut(to.index, to.generation) {
                i.state = IdState::Connect(Conn::Established);
            }
            self.cm_event(
                to,
                QueuedEvent {
                    event: CmEventType::ConnectResponse,
                    id: to,
                    listen_id: None,
                    status: 0,
                    conn,
                },
            );
            return;
        }
        // Responder resources of the active QP = the passive's initiator
        // depth; its initiator depth = the passive's responder resources.
        let r = self.cm_ready_qp(
            to,
            param.initiator_depth,
            param.responder_resources,
            Verb::RdmaGetCmEvent,
        );
        match r {
            Ok(()) => {
                if let Some(i) = self.cm.ids.get_mut(to.index, to.generation) {
                    i.state = IdState::Connect(Conn::Established);
                }
                self.cm_send(dev, there, Action::Rtu { to: from });
                self.cm_event(
                    to,
                    QueuedEvent {
                        event: CmEventType::Established,
                        id: to,
                        listen_id: None,
                        status: 0,
                        conn,
                    },
                );
            }
            Err(e) => {
                if let Some(i) = self.cm.ids.get_mut(to.index, to.generation) {
                    i.state = IdState::Failed;
                }
                self.cm_qp_to_err(to);
                self.cm_send(
                    dev,
                    there,
                    Action::Rej {
                        to: from,
                        reason: reject_reason::CONSUMER_DEFINED,
                        data: Vec::new(),
                    },
                );
                self.cm_simple_event(to, CmEventType::ConnectError, -e.errno());
            }
        }
    }

    // --------------------------------------------------- rdma_create_qp

    /// How many PDs, CQs, completion channels and QPs live on the
    /// connection manager's context of device `dev` (`None` before the CM
    /// opened one): lets tests check that a refused `rdma_create_qp` left
    /// nothing behind.
    pub fn cm_context_children(&self, dev: u32) -> Option<u32> {
        let d = self.cm.devs.get(&dev)?;
        self.contexts
            .get(d.ctx.index, d.ctx.generation)
            .map(|c| c.children)
    }

    /// The connection manager's default PD of device `dev`, while ids are
    /// bound to the device.
    pub fn cm_device_default_pd(&self, dev: u32) -> Option<PdHandle> {
        self.cm_default_pd(dev)
    }

    /// The device's default PD (allocated while ids are bound to it).
    pub(crate) fn cm_default_pd(&self, dev: u32) -> Option<PdHandle> {
        self.cm.devs.get(&dev).and_then(|d| d.pd)
    }

    /// `rdma_create_qp` (`legacy = Some(pd)`) / `rdma_create_qp_ex`
    /// (`legacy = None`): create-qp.md §10.
    pub(crate) fn rdma_create_qp(
        &mut self,
        id: CmIdHandle,
        legacy: Option<Option<PdHandle>>,
        attr: &mut QpInitAttrEx<'_, SimVerbs>,
    ) -> Result<QpHandle> {
        let v = if legacy.is_some() {
            Verb::RdmaCreateQp
        } else {
            Verb::RdmaCreateQpEx
        };
        let i = self.cm_id(id, v)?;
        let Some(dev) = i.dev else {
            return Err(invalid(
                v,
                "the rdma_cm id is not bound to a device yet (rdma_bind_addr to a device address, or rdma_resolve_addr and its ADDR_RESOLVED event, first)",
            ));
        };
        if i.qp.is_some() {
            return Err(invalid(
                v,
                "an rdma_cm id may only be associated with a single QP",
            ));
        }
        let (ps, id_ud) = (i.ps, i.ud);
        if id_ud != (attr.qp_type == QpType::Ud) {
            return Err(invalid(
                v,
                format!(
                    "a {} QP does not fit an id of port space {ps} (UDP ids take UD QPs, TCP and IB ids connected ones)",
                    attr.qp_type
                ),
            ));
        }
        let ctx = self.cm_dev_ctx(dev)?;
        let given_pd = match legacy {
            Some(pd) => pd,
            None if attr.comp_mask.contains(QpInitAttrMask::PD) => attr.pd.copied(),
            None => None,
        };
        let pd = match given_pd {
            Some(pd) => {
                let p = self.pd(pd, v)?;
                if p.ctx != ctx {
                    return Err(invalid(
                        v,
                        "the PD belongs to another device context than the rdma_cm id's (allocate it on id.verbs)",
                    ));
                }
                pd
            }
            None => self
                .cm_default_pd(dev)
                .ok_or_else(|| invalid(v, "the device has no default PD"))?,
        };
        for cq in attr.send_cq.iter().chain(attr.recv_cq.iter()) {
            if self.cq(**cq, v)?.ctx != ctx {
                return Err(invalid(
                    v,
                    "the CQ belongs to another device context than the rdma_cm id's",
                ));
            }
        }
        // Missing CQs: a completion channel and a CQ each, sized by the caps.
        let mut made: Vec<(CqHandle, CompChannelHandle)> = Vec::new();
        let auto = |w: &mut Self, cqe: u32| -> Result<Option<(CqHandle, CompChannelHandle)>> {
            if cqe == 0 {
                return Ok(None);
            }
            let ch = w.create_comp_channel(ctx).map_err(|e| reverb(e, v))?;
            match w.create_cq(ctx, cqe, u64::from(id.index), Some(ch), 0) {
                Ok(cq) => Ok(Some((cq, ch))),
                Err(e) => {
                    let _ = w.destroy_comp_channel(ch);
                    Err(reverb(e, v))
                }
            }
        };
        let rollback = |w: &mut Self, made: &[(CqHandle, CompChannelHandle)]| {
            for (cq, ch) in made {
                let _ = w.destroy_cq(*cq);
                let _ = w.destroy_comp_channel(*ch);
            }
        };
        let send_auto = if attr.send_cq.is_none() {
            auto(self, attr.cap.max_send_wr)?
        } else {
            None
        };
        made.extend(send_auto);
        let recv_auto = if attr.recv_cq.is_none() {
            match auto(self, attr.cap.max_recv_wr) {
                Ok(r) => r,
                Err(e) => {
                    rollback(self, &made);
                    return Err(e);
                }
            }
        } else {
            None
        };
        made.extend(recv_auto);
        let send_cq = attr.send_cq.copied().or(send_auto.map(|a| a.0));
        let recv_cq = attr.recv_cq.copied().or(recv_auto.map(|a| a.0));
        let srq = attr.srq.copied();
        let mut inner = QpInitAttrEx::<SimVerbs> {
            qp_context: attr.qp_context,
            send_cq: send_cq.as_ref(),
            recv_cq: recv_cq.as_ref(),
            srq: srq.as_ref(),
            cap: attr.cap,
            qp_type: attr.qp_type,
            sq_sig_all: attr.sq_sig_all,
            comp_mask: attr.comp_mask | QpInitAttrMask::PD,
            pd: Some(&pd),
            xrcd: attr.xrcd,
            create_flags: attr.create_flags,
            max_tso_header: attr.max_tso_header,
            source_qpn: attr.source_qpn,
            send_ops_flags: attr.send_ops_flags,
        };
        let legacy_pd = legacy.map(|_| pd);
        let qp = match self.create_qp(ctx, &mut inner, legacy_pd, v) {
            Ok(q) => q,
            Err(e) => {
                rollback(self, &made);
                return Err(e);
            }
        };
        let cap = inner.cap;
        // Automatic transitions: INIT now; UD straight on to RTS.
        let ud = attr.qp_type == QpType::Ud;
        let class = self.qp(qp, v)?.class;
        let mut steps = vec![(QpState::Reset, QpState::Init)];
        if ud {
            steps.push((QpState::Init, QpState::ReadyToReceive));
            steps.push((QpState::ReadyToReceive, QpState::ReadyToSend));
        }
        let qkey = match ps {
            PortSpace::Udp | PortSpace::Ib => RDMA_UDP_QKEY,
            _ => 0,
        };
        for (from, to) in steps {
            let masks = transition_masks(class, from, to, TableFlavor::Kernel);
            let mask = masks.map_or(QpAttrMask::STATE, |m| m.required | QpAttrMask::STATE);
            let a = QpAttr {
                qp_state: to,
                pkey_index: 0,
                port_num: 1,
                qkey,
                qp_access_flags: AccessFlags::empty(),
                sq_psn: 0,
                ..QpAttr::default()
            };
            if let Err(e) = self.modify_qp(qp, &a, mask) {
                let _ = self.destroy_qp(qp);
                rollback(self, &made);
                return Err(reverb(e, v));
            }
        }
        let i = self.cm_id_mut(id, v)?;
        i.qp = Some(CmQp {
            qp,
            pd,
            send_cq: send_auto.map(|a| a.0),
            recv_cq: recv_auto.map(|a| a.0),
            send_ch: send_auto.map(|a| a.1),
            recv_ch: recv_auto.map(|a| a.1),
        });
        attr.cap = cap;
        Ok(qp)
    }

    /// `rdma_destroy_qp`: the QP, then the CQs and channels made for it.
    /// `EINVAL` without a QP; `EBUSY` (nothing destroyed) when the QP or an
    /// automatic CQ/channel cannot go (multicast, another user, unacked
    /// events), where C would leak them silently.
    pub fn rdma_destroy_qp(&mut self, id: CmIdHandle) -> Result<()> {
        let v = Verb::RdmaDestroyQp;
        let Some(q) = self.cm_id(id, v)?.qp else {
            return Err(invalid(v, "the rdma_cm id has no QP"));
        };
        let qp = self.qp(q.qp, v)?;
        if !qp.mcast.is_empty() {
            return Err(busy(v, "the QP is still attached to multicast groups"));
        }
        for cq in [q.send_cq, q.recv_cq].into_iter().flatten() {
            let c = self.cq(cq, v)?;
            if c.users > 1 || c.events_unacked > 0 {
                return Err(busy(
                    v,
                    "an automatic CQ of the id is used by another QP or has unacknowledged events",
                ));
            }
        }
        // An automatic channel goes with its CQs: any other CQ on it (an
        // application's, made on id->recv_cq_channel) keeps it busy, and
        // then nothing is destroyed (issue #12 item 9).
        for ch in [q.send_ch, q.recv_ch].into_iter().flatten() {
            let own = [(q.send_cq, q.send_ch), (q.recv_cq, q.recv_ch)]
                .iter()
                .filter(|(cq, c)| cq.is_some() && *c == Some(ch))
                .count() as u32;
            if self.channel(ch, v)?.cqs > own {
                return Err(busy(
                    v,
                    "an automatic completion channel of the id has other CQs bound to it",
                ));
            }
        }
        self.destroy_qp(q.qp).map_err(|e| reverb(e, v))?;
        for (cq, ch) in [(q.send_cq, q.send_ch), (q.recv_cq, q.recv_ch)] {
            if let Some(cq) = cq {
                let _ = self.destroy_cq(cq);
            }
            if let Some(ch) = ch {
                let _ = self.destroy_comp_channel(ch);
            }
        }
        self.cm_id_mut(id, v)?.qp = None;
        Ok(())
    }

    /// What `struct rdma_cm_id` holds.
    pub(crate) fn cm_id_fields(&self, id: CmIdHandle) -> Result<(CmIdView, &CmId)> {
        let v = Verb::RdmaGetLocalAddr;
        let i = self.cm_id(id, v)?;
        let ctx = i.dev.and_then(|d| self.cm.devs.get(&d)).map(|d| d.ctx);
        let pd = match i.qp {
            Some(q) => Some(q.pd),
            None => i.dev.and_then(|d| self.cm_default_pd(d)),
        };
        Ok((CmIdView { ctx, pd }, i))
    }

    /// Whether a QP, CQ, channel or PD is owned by the CM (made by
    /// `rdma_create_qp`, or a default PD): the plain destroy verbs refuse
    /// those with `EBUSY`, as the hardware backend does.
    pub(crate) fn cm_owned(&self, what: CmOwned) -> bool {
        if matches!(what, CmOwned::Pd(p) if self.cm.devs.values().any(|d| d.pd == Some(p))) {
            return true;
        }
        // librdmacm opens a device's context once and keeps it for as long
        // as the library is loaded (`ucma_init` / `ucma_cleanup`), whether
        // or not an id is bound to it now.
        if matches!(what, CmOwned::Ctx(c) if self.cm.devs.values().any(|d| d.ctx == c)) {
            return true;
        }
        self.cm
            .ids
            .iter()
            .filter_map(|(_, _, i)| i.qp)
            .any(|q| match what {
                CmOwned::Qp(h) => q.qp == h,
                CmOwned::Cq(h) => q.send_cq == Some(h) || q.recv_cq == Some(h),
                CmOwned::Channel(h) => q.send_ch == Some(h) || q.recv_ch == Some(h),
                CmOwned::Pd(_) | CmOwned::Ctx(_) => false,
            })
    }
}

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
