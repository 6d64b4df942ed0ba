//! The packet the fabric carries: addressing, PSN, opcode class, length and
//! an opaque cookie. Never payload bytes.
//!
//! A [`Packet`] is small and `Copy` (40 bytes) so the event queue can hold it
//! by value. The data path keeps payload, WR identity and anything else it
//! needs in its own tables and points at them with [`Packet::cookie`] (and,
//! if it likes, [`Packet::offset`]); the fabric never reads either.

use core::fmt;

use verbs_api::Gid;

use super::psn::Psn;
use super::segment::SegmentPosition;

/// Index of a simulated HCA in the fabric, in the order devices were added
/// (the same number `SimCommand::Link { device, .. }` uses).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceIndex(pub u16);

/// A device's port, as the verbs API numbers it (from 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortRef {
    /// The device.
    pub device: DeviceIndex,
    /// The port number, from 1.
    pub port: u8,
}

/// One end of a packet: a QP on a device's port, fully resolved.
///
/// The destination of a packet is resolved from a LID or GID once, when the
/// data path learns the address (a QP reaching RTR, an AH being created),
/// with [`crate::fabric::Fabric::resolve`]; packets then carry the resolved
/// form so no lookup by address happens per packet.
#[derive(Clone, Copy, Debug, PartialOrd, Ord)]
pub struct Endpoint {
    /// The QP number (24 bits; the data path's own numbering).
    pub qpn: u32,
    /// The device.
    pub device: DeviceIndex,
    /// The port number on the device, from 1.
    pub port: u8,
}

/// Field by field, as one 64-bit comparison (the data path compares
/// endpoints on every packet it takes in a batch).
impl PartialEq for Endpoint {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.packed() == other.packed()
    }
}

impl Eq for Endpoint {}

/// The fields in declaration order, as `derive(Hash)` would (consistent
/// with [`PartialEq`]: equal endpoints have equal fields).
impl core::hash::Hash for Endpoint {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.qpn.hash(state);
        self.device.hash(state);
        self.port.hash(state);
    }
}

impl Endpoint {
    /// The three fields in one number: equal exactly when all three are.
    #[inline]
    const fn packed(self) -> u64 {
        self.qpn as u64 | (self.device.0 as u64) << 32 | (self.port as u64) << 48
    }

    /// The port this endpoint sits on.
    pub const fn port_ref(self) -> PortRef {
        PortRef {
            device: self.device,
            port: self.port,
        }
    }
}

/// Prints `dev<d>:<port>/qp<qpn>`.
impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dev{}:{}/qp{:#x}", self.device.0, self.port, self.qpn)
    }
}

/// A link-layer address as the verbs API gives it: a LID on InfiniBand, a
/// GID on RoCE (or in a GRH on IB).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Address {
    /// An InfiniBand local identifier.
    Lid(u16),
    /// A global identifier (RoCE v2: an IPv4-mapped or IPv6 address).
    Gid(Gid),
}

/// The AETH syndrome of an acknowledgement (IBTA vol. 1 §9.7.5.2.2,
/// table 42 "AETH syndrome encoding").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AckSyndrome {
    /// Positive acknowledgement.
    Ack,
    /// Receiver not ready; `timer` is the 5-bit RNR timer code the requester
    /// must wait before retrying (the responder's `min_rnr_timer`).
    RnrNak {
        /// 5-bit encoded RNR timer (qp-state-machine.md §5.2).
        timer: u8,
    },
    /// NAK: PSN sequence error (a packet was missed; go back).
    PsnSequenceError,
    /// NAK: invalid request.
    InvalidRequest,
    /// NAK: remote access error.
    RemoteAccessError,
    /// NAK: remote operational error.
    RemoteOperationalError,
}

impl AckSyndrome {
    /// True for everything but a plain ACK.
    pub const fn is_nak(self) -> bool {
        !matches!(self, Self::Ack)
    }
}

impl fmt::Display for AckSyndrome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ack => f.write_str("ACK"),
            Self::RnrNak { timer } => write!(f, "RNR_NAK(timer={timer})"),
            Self::PsnSequenceError => f.write_str("NAK_PSN_SEQ_ERR"),
            Self::InvalidRequest => f.write_str("NAK_INV_REQ"),
            Self::RemoteAccessError => f.write_str("NAK_REM_ACCESS_ERR"),
            Self::RemoteOperationalError => f.write_str("NAK_REM_OP_ERR"),
        }
    }
}

/// The opcode class of a packet (IBTA vol. 1 §9.2, table 38), with the
/// FIRST/MIDDLE/LAST/ONLY position where a message may span packets.
///
/// The `_WITH_IMMEDIATE` and `_WITH_INVALIDATE` opcode variants are not
/// separate classes: they are [`PacketFlags::WITH_IMMEDIATE`] and
/// [`PacketFlags::WITH_INVALIDATE`] on the LAST or ONLY packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Opcode {
    /// RC/UC/XRC SEND.
    Send(SegmentPosition),
    /// RC/UC/XRC RDMA WRITE.
    RdmaWrite(SegmentPosition),
    /// RDMA READ request (one packet whatever the read length).
    ReadRequest,
    /// RDMA READ response carrying data back to the requester.
    ReadResponse(SegmentPosition),
    /// ATOMIC compare-and-swap request.
    CompareSwap,
    /// ATOMIC fetch-and-add request.
    FetchAdd,
    /// ATOMIC acknowledgement (carries the original value; the data path
    /// keeps it behind the cookie).
    AtomicAcknowledge,
    /// ACK or NAK, with its syndrome.
    Acknowledge(AckSyndrome),
    /// UD SEND (always a single packet).
    UdSend,
}

impl Opcode {
    /// True for packets a requester sends (carrying a new or retried
    /// request), false for responses and acknowledgements.
    pub const fn is_request(self) -> bool {
        matches!(
            self,
            Self::Send(_)
                | Self::RdmaWrite(_)
                | Self::ReadRequest
                | Self::CompareSwap
                | Self::FetchAdd
                | Self::UdSend
        )
    }

    /// True for packets that end a message (LAST or ONLY, and every
    /// single-packet opcode).
    pub const fn ends_message(self) -> bool {
        match self {
            Self::Send(p) | Self::RdmaWrite(p) | Self::ReadResponse(p) => p.ends_message(),
            _ => true,
        }
    }

    /// Transport extension-header bytes this opcode carries beyond the BTH
    /// (IBTA vol. 1 §9.3: RETH 16, AETH 4, AtomicETH 28, AtomicAckETH 8,
    /// DETH 8), used by the link model to size the packet on the wire.
    /// Immediate data and invalidate keys (4 each) are added by
    /// [`Packet::wire_header_extra_bytes`].
    pub const fn extension_header_bytes(self) -> u32 {
        match self {
            Self::Send(_) => 0,
            Self::RdmaWrite(p) => {
                if p.starts_message() {
                    16
                } else {
                    0
                }
            }
            Self::ReadRequest => 16,
            Self::ReadResponse(p) => match p {
                SegmentPosition::Middle => 0,
                _ => 4,
            },
            Self::CompareSwap | Self::FetchAdd => 28,
            Self::AtomicAcknowledge => 4 + 8,
            Self::Acknowledge(_) => 4,
            Self::UdSend => 8,
        }
    }
}

/// Prints the IBTA opcode name (`SEND_FIRST`, `RDMA_WRITE_ONLY`,
/// `RDMA_READ_RESPONSE_LAST`, `ACKNOWLEDGE(RNR_NAK(timer=14))`, …).
impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Send(p) => write!(f, "SEND_{p}"),
            Self::RdmaWrite(p) => write!(f, "RDMA_WRITE_{p}"),
            Self::ReadRequest => f.write_str("RDMA_READ_REQUEST"),
            Self::ReadResponse(p) => write!(f, "RDMA_READ_RESPONSE_{p}"),
            Self::CompareSwap => f.write_str("COMPARE_SWAP"),
            Self::FetchAdd => f.write_str("FETCH_ADD"),
            Self::AtomicAcknowledge => f.write_str("ATOMIC_ACKNOWLEDGE"),
            Self::Acknowledge(s) => write!(f, "ACKNOWLEDGE({s})"),
            Self::UdSend => f.write_str("UD_SEND_ONLY"),
        }
    }
}

/// Header bits of a packet the data path may need at the far end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PacketFlags(pub u8);

impl PacketFlags {
    /// No flags.
    pub const NONE: Self = Self(0);
    /// BTH SE: solicited event.
    pub const SOLICITED: Self = Self(1 << 0);
    /// BTH A: acknowledge request.
    pub const ACK_REQUEST: Self = Self(1 << 1);
    /// Carries immediate data (an ImmDt header; `_WITH_IMMEDIATE` opcode).
    pub const WITH_IMMEDIATE: Self = Self(1 << 2);
    /// Carries an invalidate key (an IETH header; `SEND_..._WITH_INVALIDATE`).
    pub const WITH_INVALIDATE: Self = Self(1 << 3);
    /// A retransmission of a packet sent before (the data path sets it; it
    /// only shows in traces).
    pub const RETRY: Self = Self(1 << 4);

    /// True when every bit of `other` is set.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// The union of both sets.
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

impl core::ops::BitOr for PacketFlags {
    type Output = Self;
    fn bitor(self, other: Self) -> Self {
        self.union(other)
    }
}

/// One packet on the simulated wire.
///
/// The fabric reads the endpoints (to find ports), the opcode and
/// `payload_len` (to size the packet), and shows everything in traces. The
/// PSN, flags, offset and cookie are the data path's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Packet {
    /// The sending QP; its port is the egress port.
    pub source: Endpoint,
    /// The receiving QP (resolved from its LID/GID, see [`Endpoint`]).
    pub destination: Endpoint,
    /// The packet sequence number (24 bits).
    pub psn: Psn,
    /// What kind of packet this is.
    pub opcode: Opcode,
    /// Solicited, ack-request, immediate, invalidate, retry.
    pub flags: PacketFlags,
    /// Payload bytes (at most the path MTU; zero for ACKs and requests
    /// without data).
    pub payload_len: u32,
    /// Byte offset of this packet's payload within its message (from
    /// [`crate::fabric::Segment::offset`]). Real middle and last packets
    /// carry no address; the simulator keeps one so placement needs no
    /// per-QP arithmetic. The fabric does not read it.
    pub offset: u32,
    /// Opaque to the fabric: the data path's reference to whatever it needs
    /// at the far end (a message slot, a payload-table index and generation,
    /// an atomic result). Never interpreted, only copied and traced.
    pub cookie: u64,
}

impl Packet {
    /// Header bytes beyond the port's fixed per-packet overhead: extension
    /// headers of the opcode plus 4 bytes of ImmDt or IETH when flagged.
    pub const fn wire_header_extra_bytes(&self) -> u32 {
        let mut extra = self.opcode.extension_header_bytes();
        if self.flags.contains(PacketFlags::WITH_IMMEDIATE) {
            extra += 4;
        }
        if self.flags.contains(PacketFlags::WITH_INVALIDATE) {
            extra += 4;
        }
        extra
    }
}

/// Prints `<source> -> <destination> <OPCODE> psn=<n> len=<n> off=<n>
/// cookie=<hex>` and the set flags, on one line.
impl fmt::Display for Packet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} -> {} {} psn={} len={} off={} cookie={:#x}",
            self.source,
            self.destination,
            self.opcode,
            self.psn,
            self.payload_len,
            self.offset,
            self.cookie
        )?;
        for (flag, name) in [
            (PacketFlags::SOLICITED, " SE"),
            (PacketFlags::ACK_REQUEST, " AR"),
            (PacketFlags::WITH_IMMEDIATE, " IMM"),
            (PacketFlags::WITH_INVALIDATE, " INV"),
            (PacketFlags::RETRY, " RETRY"),
        ] {
            if self.flags.contains(flag) {
                f.write_str(name)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packet_is_small_and_prints_stably() {
        // Goal: the packet stays small enough for the event queue to hold by
        // value, and its trace text is exact.
        // Method: assert its size and compare its Display with a literal.
        assert!(size_of::<Packet>() <= 40, "{}", size_of::<Packet>());
        let p = Packet {
            source: Endpoint {
                qpn: 0x11,
                device: DeviceIndex(0),
                port: 1,
            },
            destination: Endpoint {
                qpn: 0x12,
                device: DeviceIndex(1),
                port: 1,
            },
            psn: Psn::new(7),
            opcode: Opcode::RdmaWrite(SegmentPosition::Last),
            flags: PacketFlags::WITH_IMMEDIATE | PacketFlags::SOLICITED,
            payload_len: 64,
            offset: 4096,
            cookie: 0xab,
        };
        assert_eq!(
            p.to_string(),
            "dev0:1/qp0x11 -> dev1:1/qp0x12 RDMA_WRITE_LAST psn=7 len=64 off=4096 cookie=0xab SE IMM"
        );
        assert_eq!(p.wire_header_extra_bytes(), 4);
        let nak = Opcode::Acknowledge(AckSyndrome::RnrNak { timer: 14 });
        assert_eq!(nak.to_string(), "ACKNOWLEDGE(RNR_NAK(timer=14))");
        assert!(!nak.is_request() && nak.ends_message());
        assert!(!Opcode::Send(SegmentPosition::Middle).ends_message());
    }
}
