//! What each send opcode is: which QP types may post it (data-path §2.1),
//! which work-completion opcode and flags it produces on each side (§2.2,
//! §3.2), whether it consumes a receive WQE, which remote access it needs
//! (§9.2), and which way its payload travels.

use verbs_api::{AccessFlags, WcFlags, WcOpcode, WrOpcode};

use super::Transport;
use crate::ErrnoFlavor;

/// The family of an opcode, the unit most data-path rules are stated in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpClass {
    /// SEND, SEND_WITH_IMM, SEND_WITH_INV.
    Send,
    /// RDMA_WRITE, RDMA_WRITE_WITH_IMM.
    Write,
    /// RDMA_READ.
    Read,
    /// ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD.
    Atomic,
    /// LOCAL_INV: a local operation, no packet.
    LocalInvalidate,
    /// BIND_MW: a local operation, no packet.
    BindMw,
    /// TSO (UD / RAW_PACKET segmentation offload).
    Tso,
    /// FLUSH (persistence flush, RC/XRC_SEND per MAN-WR).
    Flush,
    /// ATOMIC_WRITE (8-byte atomic write, RC/XRC_SEND per MAN-WR).
    AtomicWrite,
}

/// Which way an opcode's payload bytes travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PayloadDirection {
    /// From the requester's gather list to the responder (SEND, WRITE).
    RequesterToResponder,
    /// From the responder's memory back into the requester's scatter list
    /// (READ; atomics return the original 8 bytes).
    ResponderToRequester,
    /// No payload crosses the fabric (local operations).
    None,
}

/// The receive completion a message produces at the responder, when it
/// consumes a receive WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ResponderCompletion {
    /// `wc.opcode`.
    pub opcode: WcOpcode,
    /// `wc.wc_flags` apart from `GRH` (which depends on the packet).
    pub flags: WcFlags,
}

/// Everything the data path needs to know about one send opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpcodeInfo {
    /// The family.
    pub class: OpClass,
    /// `wc.opcode` of the requester's (send-queue) completion (§2.2).
    pub requester_opcode: WcOpcode,
    /// The responder's receive completion, `Some` exactly when the message
    /// consumes a receive WQE (§3.2: SEND* and RDMA_WRITE_WITH_IMM).
    pub responder: Option<ResponderCompletion>,
    /// Access the responder's MR/MW (and QP `qp_access_flags`) must grant
    /// (§9.2: WRITE → REMOTE_WRITE, READ → REMOTE_READ, atomic →
    /// REMOTE_ATOMIC; SEND needs none).
    pub remote_access: AccessFlags,
    /// Which way the payload goes.
    pub direction: PayloadDirection,
    /// The requester's local SGEs receive data, so their MRs need
    /// `LOCAL_WRITE` (§9.2 "MR used as local target … READ/atomic result").
    pub local_write: bool,
    /// Carries immediate data (`imm_data`).
    pub with_imm: bool,
    /// Carries an rkey to invalidate (`invalidate_rkey`).
    pub with_inv: bool,
}

const fn info(
    class: OpClass,
    requester_opcode: WcOpcode,
    responder: Option<ResponderCompletion>,
    remote_access: AccessFlags,
    direction: PayloadDirection,
) -> OpcodeInfo {
    OpcodeInfo {
        class,
        requester_opcode,
        responder,
        remote_access,
        direction,
        local_write: matches!(class, OpClass::Read | OpClass::Atomic),
        with_imm: false,
        with_inv: false,
    }
}

const fn recv(opcode: WcOpcode, flags: WcFlags) -> Option<ResponderCompletion> {
    Some(ResponderCompletion { opcode, flags })
}

/// The table of data-path §2.2 and §3.2 for one WR opcode; `None` for
/// `IBV_WR_DRIVER1` (vendor-specific) and unknown values.
///
/// * SEND / SEND_WITH_IMM / SEND_WITH_INV → requester `IBV_WC_SEND`;
///   responder `IBV_WC_RECV` (+`WITH_IMM` / +`WITH_INV`, never both).
/// * RDMA_WRITE(_WITH_IMM) → requester `IBV_WC_RDMA_WRITE`; only the
///   `_WITH_IMM` form consumes a receive WQE, completing as
///   `IBV_WC_RECV_RDMA_WITH_IMM` + `WITH_IMM`.
/// * RDMA_READ → `IBV_WC_RDMA_READ`; CMP_AND_SWP → `IBV_WC_COMP_SWAP`;
///   FETCH_AND_ADD → `IBV_WC_FETCH_ADD`; none consumes a receive WQE.
/// * LOCAL_INV, BIND_MW, TSO, FLUSH, ATOMIC_WRITE → their own WC opcode.
///
/// MAN-WR's claim that SEND_WITH_IMM completes as `RECV_RDMA_WITH_IMM` is
/// wrong (§2.2); the providers' `IBV_WC_RECV` + `WITH_IMM` is used.
pub const fn opcode_info(op: WrOpcode) -> Option<OpcodeInfo> {
    use AccessFlags as A;
    use PayloadDirection as D;
    use WcOpcode as W;
    let none = A::empty();
    Some(match op {
        WrOpcode::Send => info(
            OpClass::Send,
            W::Send,
            recv(W::Recv, WcFlags::empty()),
            none,
            D::RequesterToResponder,
        ),
        WrOpcode::SendWithImm => OpcodeInfo {
            with_imm: true,
            ..info(
                OpClass::Send,
                W::Send,
                recv(W::Recv, WcFlags::WITH_IMM),
                none,
                D::RequesterToResponder,
            )
        },
        WrOpcode::SendWithInv => OpcodeInfo {
            with_inv: true,
            ..info(
                OpClass::Send,
                W::Send,
                recv(W::Recv, WcFlags::WITH_INV),
                none,
                D::RequesterToResponder,
            )
        },
        WrOpcode::RdmaWrite => info(
            OpClass::Write,
            W::RdmaWrite,
            None,
            A::REMOTE_WRITE,
            D::RequesterToResponder,
        ),
        WrOpcode::RdmaWriteWithImm => OpcodeInfo {
            with_imm: true,
            ..info(
                OpClass::Write,
                W::RdmaWrite,
                recv(W::RecvRdmaWithImm, WcFlags::WITH_IMM),
                A::REMOTE_WRITE,
                D::RequesterToResponder,
            )
        },
        WrOpcode::RdmaRead => info(
            OpClass::Read,
            W::RdmaRead,
            None,
            A::REMOTE_READ,
            D::ResponderToRequester,
        ),
        WrOpcode::AtomicCmpAndSwp => info(
            OpClass::Atomic,
            W::CompSwap,
            None,
            A::REMOTE_ATOMIC,
            D::ResponderToRequester,
        ),
        WrOpcode::AtomicFetchAndAdd => info(
            OpClass::Atomic,
            W::FetchAdd,
            None,
            A::REMOTE_ATOMIC,
            D::ResponderToRequester,
        ),
        WrOpcode::LocalInv => info(OpClass::LocalInvalidate, W::LocalInv, None, none, D::None),
        WrOpcode::BindMw => info(OpClass::BindMw, W::BindMw, None, none, D::None),
        WrOpcode::Tso => info(
            OpClass::Tso,
            W::Tso,
            recv(W::Recv, WcFlags::empty()),
            none,
            D::RequesterToResponder,
        ),
        WrOpcode::Flush => info(OpClass::Flush, W::Flush, None, none, D::None),
        WrOpcode::AtomicWrite => info(
            OpClass::AtomicWrite,
            W::AtomicWrite,
            None,
            A::REMOTE_WRITE,
            D::RequesterToResponder,
        ),
        WrOpcode::Driver1 | WrOpcode::Unknown(_) => return None,
    })
}

/// Whether a message of this opcode consumes a receive WQE at the
/// responder (§3.2: SEND, SEND_WITH_IMM, SEND_WITH_INV, RDMA_WRITE_WITH_IMM;
/// plain WRITE, READ and atomics do not).
pub const fn consumes_recv_wqe(op: WrOpcode) -> bool {
    match opcode_info(op) {
        Some(i) => i.responder.is_some(),
        None => false,
    }
}

/// Data-path §2.1: may `op` be executed on a QP of `transport`?
///
/// | opcode | UD | UC | RC | XRC_SEND | RAW | DCI |
/// |---|---|---|---|---|---|---|
/// | RDMA_WRITE(_WITH_IMM) | | X | X | X | | X |
/// | SEND | X | X | X | X | X | X |
/// | SEND_WITH_IMM | X | X | X | X | | X |
/// | RDMA_READ, atomics | | | X | X | | X |
/// | LOCAL_INV, BIND_MW, SEND_WITH_INV | | X | X | X | | X |
/// | TSO | X | | | | X | |
/// | FLUSH, ATOMIC_WRITE | | | X | X | | |
///
/// XRC_RECV and DCT accept no opcode (no send queue); `DRIVER1` and unknown
/// values are valid nowhere (vendor operations are not modelled).
pub const fn opcode_valid_for(op: WrOpcode, transport: Transport) -> bool {
    use Transport as T;
    match op {
        WrOpcode::Send => !matches!(transport, T::XrcRecv | T::Dct),
        WrOpcode::SendWithImm => matches!(transport, T::Ud | T::Uc | T::Rc | T::XrcSend | T::Dci),
        WrOpcode::RdmaWrite
        | WrOpcode::RdmaWriteWithImm
        | WrOpcode::LocalInv
        | WrOpcode::BindMw
        | WrOpcode::SendWithInv => matches!(transport, T::Uc | T::Rc | T::XrcSend | T::Dci),
        WrOpcode::RdmaRead | WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd => {
            matches!(transport, T::Rc | T::XrcSend | T::Dci)
        }
        WrOpcode::Tso => matches!(transport, T::Ud | T::RawPacket),
        WrOpcode::Flush | WrOpcode::AtomicWrite => matches!(transport, T::Rc | T::XrcSend),
        WrOpcode::Driver1 | WrOpcode::Unknown(_) => false,
    }
}

/// `wc_flags` of the requester's successful completion.
///
/// mlx5 also sets `IBV_WC_WITH_IMM` on the requester CQE of SEND_WITH_IMM
/// and RDMA_WRITE_WITH_IMM (data-path §2.2, M5-CQ `handle_good_req`); rxe
/// and the spec set nothing.
///
/// # Divergence from hardware
///
/// None: each flavour reproduces its driver.
pub const fn requester_wc_flags(op: WrOpcode, flavor: ErrnoFlavor) -> WcFlags {
    match (flavor, op) {
        (ErrnoFlavor::Mlx5, WrOpcode::SendWithImm | WrOpcode::RdmaWriteWithImm) => {
            WcFlags::WITH_IMM
        }
        _ => WcFlags::empty(),
    }
}

/// `byte_len` of the requester's successful completion for a message of
/// `msg_len` bytes (data-path §6.2).
///
/// mlx5 fills it for READ (bytes read) and atomics (8) only, 0 otherwise
/// (M5-CQ); rxe fills it for every opcode (the message length, 8 for
/// atomics), which the `Spec` flavour follows.
pub const fn requester_byte_len(op: WrOpcode, msg_len: u32, flavor: ErrnoFlavor) -> u32 {
    let class = match opcode_info(op) {
        Some(i) => i.class,
        None => return 0,
    };
    match (flavor, class) {
        (_, OpClass::Atomic) => 8,
        (_, OpClass::Read) => msg_len,
        (ErrnoFlavor::Mlx5, _) => 0,
        (
            ErrnoFlavor::Spec,
            OpClass::Send | OpClass::Write | OpClass::Tso | OpClass::AtomicWrite,
        ) => msg_len,
        (ErrnoFlavor::Spec, _) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wc_opcodes_per_wr_opcode_section_2_2() {
        // Goal: the requester/responder WC opcodes and flags of data-path §2.2
        // and §3.2, including the MAN-WR erratum (SEND_WITH_IMM is RECV +
        // WITH_IMM, not RECV_RDMA_WITH_IMM).
        // Method: a table transcribed from §2.2 compared with opcode_info.
        type Row = (WrOpcode, WcOpcode, Option<(WcOpcode, WcFlags)>);
        let table: [Row; 9] = [
            (
                WrOpcode::Send,
                WcOpcode::Send,
                Some((WcOpcode::Recv, WcFlags::empty())),
            ),
            (
                WrOpcode::SendWithImm,
                WcOpcode::Send,
                Some((WcOpcode::Recv, WcFlags::WITH_IMM)),
            ),
            (
                WrOpcode::SendWithInv,
                WcOpcode::Send,
                Some((WcOpcode::Recv, WcFlags::WITH_INV)),
            ),
            (WrOpcode::RdmaWrite, WcOpcode::RdmaWrite, None),
            (
                WrOpcode::RdmaWriteWithImm,
                WcOpcode::RdmaWrite,
                Some((WcOpcode::RecvRdmaWithImm, WcFlags::WITH_IMM)),
            ),
            (WrOpcode::RdmaRead, WcOpcode::RdmaRead, None),
            (WrOpcode::AtomicCmpAndSwp, WcOpcode::CompSwap, None),
            (WrOpcode::AtomicFetchAndAdd, WcOpcode::FetchAdd, None),
            (WrOpcode::LocalInv, WcOpcode::LocalInv, None),
        ];
        for (op, req, resp) in table {
            let i = opcode_info(op).expect("known opcode");
            assert_eq!(i.requester_opcode, req, "{op}");
            assert_eq!(i.responder.map(|r| (r.opcode, r.flags)), resp, "{op}");
            assert_eq!(consumes_recv_wqe(op), resp.is_some(), "{op}");
        }
        assert_eq!(
            opcode_info(WrOpcode::BindMw).map(|i| i.requester_opcode),
            Some(WcOpcode::BindMw)
        );
        assert_eq!(opcode_info(WrOpcode::Driver1), None);
        assert_eq!(opcode_info(WrOpcode::Unknown(12)), None);
        // "consumers can test if a completion is a receive by testing (opcode & IBV_WC_RECV)"
        assert_ne!(
            WcOpcode::RecvRdmaWithImm.to_raw() & WcOpcode::Recv.to_raw(),
            0
        );
    }

    #[test]
    fn remote_access_and_local_write_section_9_2() {
        // Goal: WRITE needs REMOTE_WRITE, READ REMOTE_READ, atomics
        // REMOTE_ATOMIC, SEND nothing (§9.2, GUT-ACC MissingDstRemoteWrite);
        // READ and atomic landing buffers need LOCAL_WRITE, SEND/WRITE sources
        // do not (§4.2 rows 3 and 4).
        // Method: look the flags up per opcode.
        let need = |op| opcode_info(op).map(|i| (i.remote_access, i.local_write));
        assert_eq!(need(WrOpcode::Send), Some((AccessFlags::empty(), false)));
        assert_eq!(
            need(WrOpcode::RdmaWrite),
            Some((AccessFlags::REMOTE_WRITE, false))
        );
        assert_eq!(
            need(WrOpcode::RdmaWriteWithImm),
            Some((AccessFlags::REMOTE_WRITE, false))
        );
        assert_eq!(
            need(WrOpcode::RdmaRead),
            Some((AccessFlags::REMOTE_READ, true))
        );
        assert_eq!(
            need(WrOpcode::AtomicCmpAndSwp),
            Some((AccessFlags::REMOTE_ATOMIC, true))
        );
        assert_eq!(
            need(WrOpcode::AtomicFetchAndAdd),
            Some((AccessFlags::REMOTE_ATOMIC, true))
        );
        assert_eq!(
            opcode_info(WrOpcode::RdmaRead).map(|i| i.direction),
            Some(PayloadDirection::ResponderToRequester)
        );
        assert_eq!(
            opcode_info(WrOpcode::Send).map(|i| i.direction),
            Some(PayloadDirection::RequesterToResponder)
        );
    }

    #[test]
    fn opcode_validity_table_section_2_1() {
        // Goal: the X marks of the data-path §2.1 table, column by column.
        // Method: for each transport list the opcodes the table allows and
        // check that exactly those are valid among all known opcodes.
        use Transport as T;
        let all = WrOpcode::VALUES;
        let allowed: [(T, &[WrOpcode]); 8] = [
            (
                T::Ud,
                &[WrOpcode::Send, WrOpcode::SendWithImm, WrOpcode::Tso],
            ),
            (
                T::Uc,
                &[
                    WrOpcode::RdmaWrite,
                    WrOpcode::RdmaWriteWithImm,
                    WrOpcode::Send,
                    WrOpcode::SendWithImm,
                    WrOpcode::LocalInv,
                    WrOpcode::BindMw,
                    WrOpcode::SendWithInv,
                ],
            ),
            (
                T::Rc,
                &[
                    WrOpcode::RdmaWrite,
                    WrOpcode::RdmaWriteWithImm,
                    WrOpcode::Send,
                    WrOpcode::SendWithImm,
                    WrOpcode::RdmaRead,
                    WrOpcode::AtomicCmpAndSwp,
                    WrOpcode::AtomicFetchAndAdd,
                    WrOpcode::LocalInv,
                    WrOpcode::BindMw,
                    WrOpcode::SendWithInv,
                    WrOpcode::Flush,
                    WrOpcode::AtomicWrite,
                ],
            ),
            (
                T::XrcSend,
                &[
                    WrOpcode::RdmaWrite,
                    WrOpcode::RdmaWriteWithImm,
                    WrOpcode::Send,
                    WrOpcode::SendWithImm,
                    WrOpcode::RdmaRead,
                    WrOpcode::AtomicCmpAndSwp,
                    WrOpcode::AtomicFetchAndAdd,
                    WrOpcode::LocalInv,
                    WrOpcode::BindMw,
                    WrOpcode::SendWithInv,
                    WrOpcode::Flush,
                    WrOpcode::AtomicWrite,
                ],
            ),
            (T::RawPacket, &[WrOpcode::Send, WrOpcode::Tso]),
            (
                T::Dci,
                &[
                    WrOpcode::RdmaWrite,
                    WrOpcode::RdmaWriteWithImm,
                    WrOpcode::Send,
                    WrOpcode::SendWithImm,
                    WrOpcode::RdmaRead,
                    WrOpcode::AtomicCmpAndSwp,
                    WrOpcode::AtomicFetchAndAdd,
                    WrOpcode::LocalInv,
                    WrOpcode::BindMw,
                    WrOpcode::SendWithInv,
                ],
            ),
            (T::XrcRecv, &[]),
            (T::Dct, &[]),
        ];
        for (t, ok) in allowed {
            for &op in all {
                assert_eq!(opcode_valid_for(op, t), ok.contains(&op), "{op} on {t:?}");
            }
        }
    }

    #[test]
    fn requester_flags_and_byte_len_per_flavour_section_2_2_and_6_2() {
        // Goal: mlx5's WITH_IMM quirk on requester CQEs (§2.2) and the
        // requester byte_len rules (§6.2: mlx5 READ/atomic only; rxe all).
        // Method: evaluate both flavours for a few opcodes.
        use ErrnoFlavor::{Mlx5, Spec};
        assert_eq!(
            requester_wc_flags(WrOpcode::SendWithImm, Mlx5),
            WcFlags::WITH_IMM
        );
        assert_eq!(
            requester_wc_flags(WrOpcode::RdmaWriteWithImm, Mlx5),
            WcFlags::WITH_IMM
        );
        assert_eq!(
            requester_wc_flags(WrOpcode::SendWithImm, Spec),
            WcFlags::empty()
        );
        assert_eq!(requester_wc_flags(WrOpcode::Send, Mlx5), WcFlags::empty());
        assert_eq!(requester_byte_len(WrOpcode::RdmaRead, 100, Mlx5), 100);
        assert_eq!(requester_byte_len(WrOpcode::AtomicFetchAndAdd, 8, Mlx5), 8);
        assert_eq!(requester_byte_len(WrOpcode::Send, 100, Mlx5), 0);
        assert_eq!(requester_byte_len(WrOpcode::Send, 100, Spec), 100);
        assert_eq!(requester_byte_len(WrOpcode::RdmaWrite, 64, Spec), 64);
        assert_eq!(requester_byte_len(WrOpcode::AtomicCmpAndSwp, 8, Spec), 8);
    }
}
