//! librdmacm value types: port spaces, connection parameters, CM events.

use crate::{AhAttr, QpInitAttrEx, Verbs};
use std::net::SocketAddr;

c_enum! {
    /// `enum rdma_port_space`.
    pub enum PortSpace : "RDMA_PS_" {
        /// `RDMA_PS_IPOIB`.
        Ipoib = 0x0002 => "IPOIB",
        /// `RDMA_PS_TCP` (connected: RC).
        Tcp = 0x0106 => "TCP",
        /// `RDMA_PS_UDP` (datagram: UD).
        Udp = 0x0111 => "UDP",
        /// `RDMA_PS_IB` (any QP type).
        Ib = 0x013F => "IB",
    }
}

c_enum! {
    /// `enum rdma_cm_event_type`.
    pub enum CmEventType : "RDMA_CM_EVENT_" {
        /// `RDMA_CM_EVENT_ADDR_RESOLVED`.
        AddrResolved = 0 => "ADDR_RESOLVED",
        /// `RDMA_CM_EVENT_ADDR_ERROR`.
        AddrError = 1 => "ADDR_ERROR",
        /// `RDMA_CM_EVENT_ROUTE_RESOLVED`.
        RouteResolved = 2 => "ROUTE_RESOLVED",
        /// `RDMA_CM_EVENT_ROUTE_ERROR`.
        RouteError = 3 => "ROUTE_ERROR",
        /// `RDMA_CM_EVENT_CONNECT_REQUEST`.
        ConnectRequest = 4 => "CONNECT_REQUEST",
        /// `RDMA_CM_EVENT_CONNECT_RESPONSE`.
        ConnectResponse = 5 => "CONNECT_RESPONSE",
        /// `RDMA_CM_EVENT_CONNECT_ERROR`.
        ConnectError = 6 => "CONNECT_ERROR",
        /// `RDMA_CM_EVENT_UNREACHABLE`.
        Unreachable = 7 => "UNREACHABLE",
        /// `RDMA_CM_EVENT_REJECTED`.
        Rejected = 8 => "REJECTED",
        /// `RDMA_CM_EVENT_ESTABLISHED`.
        Established = 9 => "ESTABLISHED",
        /// `RDMA_CM_EVENT_DISCONNECTED`.
        Disconnected = 10 => "DISCONNECTED",
        /// `RDMA_CM_EVENT_DEVICE_REMOVAL`.
        DeviceRemoval = 11 => "DEVICE_REMOVAL",
        /// `RDMA_CM_EVENT_MULTICAST_JOIN`.
        MulticastJoin = 12 => "MULTICAST_JOIN",
        /// `RDMA_CM_EVENT_MULTICAST_ERROR`.
        MulticastError = 13 => "MULTICAST_ERROR",
        /// `RDMA_CM_EVENT_ADDR_CHANGE`.
        AddrChange = 14 => "ADDR_CHANGE",
        /// `RDMA_CM_EVENT_TIMEWAIT_EXIT`.
        TimewaitExit = 15 => "TIMEWAIT_EXIT",
    }
}

/// `struct rdma_conn_param`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ConnParam {
    /// `private_data` (at most 56 bytes on connect, 196 on accept, 148 on reject, for IB).
    pub private_data: Vec<u8>,
    /// `responder_resources`.
    pub responder_resources: u8,
    /// `initiator_depth`.
    pub initiator_depth: u8,
    /// `flow_control`.
    pub flow_control: u8,
    /// `retry_count`.
    pub retry_count: u8,
    /// `rnr_retry_count`.
    pub rnr_retry_count: u8,
    /// `srq`.
    pub srq: u8,
    /// `qp_num` (when the id has no QP).
    pub qp_num: u32,
}

/// `struct rdma_cm_event`.
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(bound(
        serialize = "V::CmId: serde::Serialize",
        deserialize = "V::CmId: serde::Deserialize<'de>"
    ))
)]
pub struct CmEvent<V: Verbs + ?Sized> {
    /// `event`.
    pub event: CmEventType,
    /// `id`: for CONNECT_REQUEST a new id for the incoming connection.
    pub id: V::CmId,
    /// `listen_id`: the listening id, for CONNECT_REQUEST.
    pub listen_id: Option<V::CmId>,
    /// `status` (0, or a negative errno / a reject reason).
    pub status: i32,
    /// `param.conn.private_data` (or UD param).
    pub private_data: Vec<u8>,
    /// `param.conn` (for CONNECT_REQUEST / ESTABLISHED).
    pub conn: ConnParam,
    /// Which delivery this is: the `struct rdma_cm_event *` that
    /// `rdma_get_cm_event` returned, as the backend identifies it.
    /// `rdma_ack_cm_event` releases exactly that event, so acknowledging
    /// one twice is `EINVAL` even while another event of the id is
    /// pending. Copy it when building an event to acknowledge by hand.
    pub token: u64,
    /// `param.ud` for the datagram events that carry it
    /// (`MULTICAST_JOIN`: the group's address vector, QPN `0xFFFFFF` and
    /// Q_Key); `None` otherwise.
    pub ud: Option<UdParam>,
    /// The user's context of a multicast event (`rdma_join_multicast`'s
    /// `context`, which librdmacm reports in `param.ud.private_data`);
    /// 0 for every other event.
    pub context: u64,
}

/// `struct rdma_ud_param`: what a datagram peer or a multicast group is
/// reached with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct UdParam {
    /// `ah_attr`: for a multicast group `dlid` is the MLID and the GRH's
    /// `dgid` the MGID.
    pub ah_attr: AhAttr,
    /// `qp_num` (`0xFFFFFF` for a multicast group).
    pub qp_num: u32,
    /// `qkey`.
    pub qkey: u32,
}

/// The destination QP number of every multicast packet (IBTA: the
/// multicast QPN `0xFFFFFF`).
pub const MULTICAST_QPN: u32 = 0x00FF_FFFF;

c_enum! {
    /// `enum rdma_cm_mc_join_flags`.
    pub enum McJoinFlag : "RDMA_MC_JOIN_FLAG_" {
        /// `RDMA_MC_JOIN_FLAG_FULLMEMBER`: send and receive (the QP is
        /// attached to the group).
        FullMember = 0 => "FULLMEMBER",
        /// `RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER`: send only (the QP is
        /// not attached).
        SendOnlyFullMember = 1 => "SENDONLY_FULLMEMBER",
    }
}

/// `struct rdma_cm_join_mc_attr_ex` (`rdma_join_multicast_ex`): the
/// `comp_mask` checks are the caller's (the drop-in library does them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct JoinMcAttr {
    /// `addr`: the IP multicast address of the group (the port is ignored).
    pub addr: SocketAddr,
    /// `join_flags`.
    pub join_flags: McJoinFlag,
}

impl<V: Verbs + ?Sized> core::fmt::Debug for CmEvent<V> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CmEvent")
            .field("event", &self.event)
            .field("id", &self.id)
            .field("listen_id", &self.listen_id)
            .field("status", &self.status)
            .field("private_data", &self.private_data)
            .field("ud", &self.ud)
            .field("context", &self.context)
            .finish()
    }
}

/// Arguments of `rdma_create_qp` / `rdma_create_qp_ex`.
///
/// `init.pd == None` (or `comp_mask` without `PD`) selects the device's
/// default PD; missing CQs are created by the call, with completion channels.
pub struct RdmaQpInit<'a, V: Verbs + ?Sized> {
    /// The QP attributes (caps written back on success).
    pub init: QpInitAttrEx<'a, V>,
}

/// Addresses of a CM id (`rdma_get_local_addr` / `rdma_get_peer_addr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct CmAddrs {
    /// Local address, once bound.
    pub local: Option<SocketAddr>,
    /// Peer address, once resolved or connected.
    pub peer: Option<SocketAddr>,
}
