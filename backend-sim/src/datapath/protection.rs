//! Local (lkey) and remote (rkey) protection checks (data-path §4.2 rows
//! 1–5, 10, 11, 13, 14; §3.3 zero-length rules; §7 atomics; §9.2 access
//! rules), in the order §10.3 prescribes: local checks first, then remote.

use verbs_api::{AccessFlags, SendFlags, Sge, WcStatus, WrOpcode};

use super::opcode::{opcode_info, OpClass};
use super::scenario::ErrorScenario;
use super::{MrLookup, MrView, Transport};

/// Checks a requester's gather/scatter list against its MRs and returns
/// the total length (data-path §4.2 rows 1–4, §9.2).
///
/// Each SGE with a non-zero length must name, by `lkey`, a valid
/// (registered) MR of the QP's `pd` that contains every byte of
/// `[addr, addr + length)`; if `need_local_write` (the SGE receives data:
/// READ or atomic landing buffer, row 3) the MR must grant `LOCAL_WRITE`.
/// Local read is always allowed (row 4, MAN-MR), so SEND/WRITE sources
/// need no flag. Any failure is `LOC_PROT_ERR`.
///
/// A zero-length SGE carries no byte and is not checked (as §3.3 does for
/// zero-length remote access, and as mlx5 skips zero-length SGEs).
///
/// # Errors
///
/// `WcStatus::LocProtErr` for the first SGE that fails.
///
/// # Divergence from hardware
///
/// rxe reports an lkey that names no MR as `LOC_QP_OP_ERR` (§4.2 row 1);
/// the simulator uses `LOC_PROT_ERR`, as hardware does, in both flavours.
pub fn check_local_sges<L: MrLookup + ?Sized>(
    sges: &[Sge],
    mrs: &L,
    pd: u32,
    need_local_write: bool,
) -> Result<u64, WcStatus> {
    let mut total = 0u64;
    for sge in sges {
        if sge.length == 0 {
            continue;
        }
        let len = u64::from(sge.length);
        let ok = match mrs.by_lkey(sge.lkey) {
            Some(mr) => {
                mr.valid
                    && mr.pd == pd
                    && mr.offset_of(sge.addr, len).is_some()
                    && (!need_local_write || mr.access.contains(AccessFlags::LOCAL_WRITE))
            }
            None => false,
        };
        if !ok {
            return Err(WcStatus::LocProtErr);
        }
        total += len;
    }
    Ok(total)
}

/// Every requester-side check of one work request before it is sent
/// (data-path §10.3 "local checks first"), returning the message length.
///
/// 1. `IBV_SEND_INLINE` on SEND/WRITE: the data was copied at post time and
///    "the L_Key will not be checked" (MAN-PS, §3.1); READ and atomic
///    landing buffers are checked later, when the response is scattered
///    (after the responder's checks, so a bad rkey wins: rdma-unit-test
///    `ReadInvalidRKeyAndInvalidLKey`); otherwise [`check_local_sges`] →
///    [`ErrorScenario::LocalProtection`] (rows 1, 2: a gathering request's
///    local key is checked before the remote one).
/// 2. Atomics: the local SGEs must total exactly 8 bytes →
///    [`ErrorScenario::AtomicLocalLength`] (rows 11–12).
/// 3. UD: a payload longer than `path_mtu` bytes →
///    [`ErrorScenario::UdPayloadExceedsMtu`] (UD/UC table).
///
/// An opcode without [`opcode_info`] (vendor/unknown) is
/// [`ErrorScenario::LocalQpOperation`].
///
/// # Errors
///
/// The scenario of the first failed check; feed it to
/// [`super::error_outcome`].
pub fn check_requester_local<L: MrLookup + ?Sized>(
    op: WrOpcode,
    send_flags: SendFlags,
    transport: Transport,
    sges: &[Sge],
    mrs: &L,
    pd: u32,
    path_mtu: u32,
) -> Result<u64, ErrorScenario> {
    let Some(info) = opcode_info(op) else {
        return Err(ErrorScenario::LocalQpOperation);
    };
    let inline = send_flags.contains(SendFlags::INLINE)
        && matches!(info.class, OpClass::Send | OpClass::Write);
    // Landing buffers (READ, atomics) are checked when the response is
    // scattered, after the responder's checks (`check_local_sges` there).
    let total = if inline || info.local_write {
        sges.iter().map(|s| u64::from(s.length)).sum()
    } else {
        check_local_sges(sges, mrs, pd, info.local_write)
            .map_err(|_| ErrorScenario::LocalProtection)?
    };
    if info.class == OpClass::Atomic && total != 8 {
        return Err(ErrorScenario::AtomicLocalLength);
    }
    if transport == Transport::Ud && total > u64::from(path_mtu) {
        return Err(ErrorScenario::UdPayloadExceedsMtu);
    }
    Ok(total)
}

/// The remote operation a request performs at the responder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RemoteOp {
    /// RDMA WRITE (with or without immediate): needs REMOTE_WRITE.
    Write,
    /// RDMA READ: needs REMOTE_READ and responder resources.
    Read,
    /// CMP_AND_SWP / FETCH_AND_ADD: needs REMOTE_ATOMIC and responder
    /// resources; 8 bytes, 8-byte aligned.
    Atomic,
}

impl RemoteOp {
    /// The remote operation of a WR opcode; `None` for opcodes without an
    /// rkey (SEND, local operations, …).
    pub const fn of(op: WrOpcode) -> Option<Self> {
        match op {
            WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm | WrOpcode::AtomicWrite => {
                Some(Self::Write)
            }
            WrOpcode::RdmaRead => Some(Self::Read),
            WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd => Some(Self::Atomic),
            _ => None,
        }
    }

    /// The access bit the target MR/MW and the responder QP must grant.
    pub const fn access(self) -> AccessFlags {
        match self {
            Self::Write => AccessFlags::REMOTE_WRITE,
            Self::Read => AccessFlags::REMOTE_READ,
            Self::Atomic => AccessFlags::REMOTE_ATOMIC,
        }
    }
}

/// The remote half of a request as the responder sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RemoteRequest {
    /// What is done.
    pub op: RemoteOp,
    /// `wr.rdma.remote_addr` / `wr.atomic.remote_addr`.
    pub remote_addr: u64,
    /// `rkey`.
    pub rkey: u32,
    /// Bytes accessed (ignored for atomics, which access 8).
    pub len: u64,
}

/// The responder QP's side of the remote checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ResponderView {
    /// The responder QP's `qp_access_flags` (set at INIT).
    pub qp_access_flags: AccessFlags,
    /// The responder QP's PD.
    pub pd: u32,
    /// The responder QP's `max_dest_rd_atomic` (READ/atomic resources).
    pub max_dest_rd_atomic: u8,
}

/// Checks a remote access at the responder and returns the byte offset
/// of `remote_addr` inside the target region (data-path §4.2, §3.3, §7,
/// §9.2). `mr` is the region the `rkey` names, if any.
///
/// Order of the checks (first failure wins):
///
/// 1. The responder QP's `qp_access_flags` must grant the operation's
///    REMOTE_WRITE / REMOTE_READ / REMOTE_ATOMIC, and READ/atomic need
///    `max_dest_rd_atomic > 0` → [`ErrorScenario::ResponderQpAccess`]
///    (§9.2 "responder QP `qp_access_flags` gate", rows 13–14).
/// 2. Atomics: `remote_addr % 8 == 0` → else
///    [`ErrorScenario::AtomicMisaligned`] (row 10, §7).
/// 3. A zero-length READ/WRITE succeeds whatever the rkey and address
///    (§3.3); the returned offset is then 0.
/// 4. The rkey must name a valid region of the responder's PD that holds
///    every accessed byte and grants the operation's access →
///    [`ErrorScenario::RemoteAccess`] (row 5; RXE-MR `lookup_mr` checks key,
///    PD, access and state).
///
/// # Errors
///
/// The scenario of the first failed check; feed it to
/// [`super::error_outcome`].
///
/// # Divergence from hardware
///
/// Check 1 is rxe's (RXE-RESP); mlx5 instead silently disables READ and
/// atomics in the QP context when `max_dest_rd_atomic == 0` (K-MLX5) and
/// its resulting status is not recorded; the simulator reports rxe's
/// invalid request in both flavours. The order of checks 1, 2 and 4 is
/// rxe's; hardware's is not documented.
#[inline(always)]
pub fn check_remote(
    req: &RemoteRequest,
    mr: Option<MrView>,
    responder: &ResponderView,
) -> Result<u64, ErrorScenario> {
    let needed = req.op.access();
    let needs_resources = matches!(req.op, RemoteOp::Read | RemoteOp::Atomic);
    if !responder.qp_access_flags.contains(needed)
        || (needs_resources && responder.max_dest_rd_atomic == 0)
    {
        return Err(ErrorScenario::ResponderQpAccess);
    }
    let len = match req.op {
        RemoteOp::Atomic => {
            if req.remote_addr & 7 != 0 {
                return Err(ErrorScenario::AtomicMisaligned);
            }
            8
        }
        RemoteOp::Read | RemoteOp::Write => req.len,
    };
    if len == 0 {
        return Ok(0);
    }
    match mr {
        Some(mr) if mr.valid && mr.pd == responder.pd && mr.access.contains(needed) => mr
            .offset_of(req.remote_addr, len)
            .ok_or(ErrorScenario::RemoteAccess),
        _ => Err(ErrorScenario::RemoteAccess),
    }
}

/// Which check refused a remote access: what [`check_remote`] only says
/// as [`ErrorScenario::RemoteAccess`] (or `ResponderQpAccess`,
/// `AtomicMisaligned`), named for the trace and the drop-in library's log.
/// Hardware reports all of these as the same `REM_ACCESS_ERR` (or
/// `REM_INV_REQ_ERR`) completion; the cause is the simulator's extra.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessCause {
    /// The responder QP's `qp_access_flags` lack the operation's access.
    QpAccess,
    /// READ or atomic with the responder's `max_dest_rd_atomic` at 0.
    NoReadResources,
    /// An atomic's remote address is not 8-byte aligned.
    Misaligned,
    /// The rkey names no memory region or window.
    UnknownRkey,
    /// The region was deregistered or invalidated.
    RegionInvalid,
    /// The region belongs to another protection domain.
    OtherPd,
    /// The region does not grant the operation's access.
    RegionAccess,
    /// The access lies (partly) outside the region.
    OutOfBounds,
}

impl AccessCause {
    /// The cause in a few words.
    pub const fn describe(self) -> &'static str {
        match self {
            Self::QpAccess => "the responder QP's qp_access_flags do not grant the access",
            Self::NoReadResources => "the responder QP's max_dest_rd_atomic is 0",
            Self::Misaligned => "the atomic's remote address is not 8-byte aligned",
            Self::UnknownRkey => "bad rkey: it names no memory region or window",
            Self::RegionInvalid => "the rkey's region was deregistered or invalidated",
            Self::OtherPd => "the rkey's region belongs to another PD",
            Self::RegionAccess => "the rkey's region does not grant the access",
            Self::OutOfBounds => "out of bounds: the access goes past the rkey's region",
        }
    }
}

impl core::fmt::Display for AccessCause {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.describe())
    }
}

/// The check [`check_remote`] failed on, in its order; `None` when it
/// passes. Only called once a check has failed (off the fast path).
pub fn remote_cause(
    req: &RemoteRequest,
    mr: Option<MrView>,
    responder: &ResponderView,
) -> Option<AccessCause> {
    let needed = req.op.access();
    if !responder.qp_access_flags.contains(needed) {
        return Some(AccessCause::QpAccess);
    }
    if matches!(req.op, RemoteOp::Read | RemoteOp::Atomic) && responder.max_dest_rd_atomic == 0 {
        return Some(AccessCause::NoReadResources);
    }
    let len = match req.op {
        RemoteOp::Atomic if req.remote_addr & 7 != 0 => return Some(AccessCause::Misaligned),
        RemoteOp::Atomic => 8,
        RemoteOp::Read | RemoteOp::Write => req.len,
    };
    if len == 0 {
        return None;
    }
    let Some(mr) = mr else {
        return Some(AccessCause::UnknownRkey);
    };
    if !mr.valid {
        Some(AccessCause::RegionInvalid)
    } else if mr.pd != responder.pd {
        Some(AccessCause::OtherPd)
    } else if !mr.access.contains(needed) {
        Some(AccessCause::RegionAccess)
    } else if mr.offset_of(req.remote_addr, len).is_none() {
        Some(AccessCause::OutOfBounds)
    } else {
        None
    }
}

/// Checks the `invalidate_rkey` of a SEND_WITH_INV at the responder:
/// it must name a valid region of the responder's PD (data-path §3.2,
/// §4.2 row 17).
///
/// # Errors
///
/// [`ErrorScenario::SendInvalidateBadRkey`].
pub fn check_invalidate(mr: Option<MrView>, responder_pd: u32) -> Result<(), ErrorScenario> {
    match mr {
        Some(mr) if mr.valid && mr.pd == responder_pd => Ok(()),
        _ => Err(ErrorScenario::SendInvalidateBadRkey),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PD: u32 = 7;

    fn mr(lkey: u32, addr: u64, length: u64, access: AccessFlags) -> MrView {
        MrView {
            addr,
            length,
            lkey,
            rkey: lkey + 100,
            access,
            pd: PD,
            valid: true,
        }
    }

    fn table() -> [MrView; 4] {
        [
            mr(1, 0x1000, 0x1000, AccessFlags::LOCAL_WRITE),
            mr(2, 0x4000, 0x100, AccessFlags::empty()),
            MrView {
                pd: PD + 1,
                ..mr(3, 0x8000, 0x100, AccessFlags::LOCAL_WRITE)
            },
            MrView {
                valid: false,
                ..mr(4, 0x9000, 0x100, AccessFlags::LOCAL_WRITE)
            },
        ]
    }

    fn sge(lkey: u32, addr: u64, length: u32) -> Sge {
        Sge { addr, length, lkey }
    }

    #[test]
    fn remote_cause_names_the_check_that_failed() {
        // Goal: each refusal of check_remote has its own cause, in
        // check_remote's order; a passing access has none.
        // Method: one request per check against the four-MR table.
        let rw = AccessFlags::REMOTE_WRITE;
        let mrs = [
            mr(1, 0x1000, 0x1000, rw),
            mr(2, 0x4000, 0x100, AccessFlags::REMOTE_READ),
            MrView {
                pd: PD + 1,
                ..mr(3, 0x8000, 0x100, rw)
            },
            MrView {
                valid: false,
                ..mr(4, 0x9000, 0x100, rw)
            },
        ];
        let responder = ResponderView {
            qp_access_flags: AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ,
            pd: PD,
            max_dest_rd_atomic: 1,
        };
        let write = |addr: u64, len: u64| RemoteRequest {
            op: RemoteOp::Write,
            remote_addr: addr,
            rkey: 0,
            len,
        };
        let by_lkey = |k: u32| mrs.iter().copied().find(|m| m.lkey == k);
        let cases = [
            (write(0x1000, 8), by_lkey(1), None),
            (write(0x1000, 8), None, Some(AccessCause::UnknownRkey)),
            (write(0x1ff9, 8), by_lkey(1), Some(AccessCause::OutOfBounds)),
            (write(0x8000, 8), by_lkey(3), Some(AccessCause::OtherPd)),
            (
                write(0x9000, 8),
                by_lkey(4),
                Some(AccessCause::RegionInvalid),
            ),
            (
                write(0x4000, 8),
                by_lkey(2),
                Some(AccessCause::RegionAccess),
            ),
        ];
        for (req, mr, want) in cases {
            assert_eq!(remote_cause(&req, mr, &responder), want, "{req:?} {mr:?}");
            assert_eq!(check_remote(&req, mr, &responder).is_ok(), want.is_none());
        }
        let atomic = RemoteRequest {
            op: RemoteOp::Atomic,
            remote_addr: 0x1000,
            rkey: 0,
            len: 8,
        };
        assert_eq!(
            remote_cause(&atomic, by_lkey(1), &responder),
            Some(AccessCause::QpAccess)
        );
    }

    #[test]
    fn local_sge_checks_rows_1_to_4() {
        // Goal: §4.2 rows 1–4: bad lkey, out of range, other PD, deregistered →
        // LOC_PROT_ERR; landing buffer without LOCAL_WRITE → LOC_PROT_ERR;
        // a source without LOCAL_WRITE is fine (local read always allowed).
        // Method: one SGE per case against a four-MR table.
        let mrs = table();
        let mrs = &mrs[..];
        assert_eq!(
            check_local_sges(&[sge(1, 0x1000, 0x1000)], mrs, PD, true),
            Ok(0x1000)
        );
        assert_eq!(
            check_local_sges(&[sge(99, 0x1000, 8)], mrs, PD, false),
            Err(WcStatus::LocProtErr)
        );
        assert_eq!(
            check_local_sges(&[sge(1, 0x1ff9, 8)], mrs, PD, false),
            Err(WcStatus::LocProtErr)
        );
        assert_eq!(
            check_local_sges(&[sge(1, 0x0ff8, 8)], mrs, PD, false),
            Err(WcStatus::LocProtErr)
        );
        assert_eq!(
            check_local_sges(&[sge(3, 0x8000, 8)], mrs, PD, false),
            Err(WcStatus::LocProtErr)
        );
        assert_eq!(
            check_local_sges(&[sge(4, 0x9000, 8)], mrs, PD, false),
            Err(WcStatus::LocProtErr)
        );
        // row 4: SEND/WRITE source in an MR without LOCAL_WRITE succeeds
        assert_eq!(
            check_local_sges(&[sge(2, 0x4000, 0x100)], mrs, PD, false),
            Ok(0x100)
        );
        // row 3: READ/atomic landing buffer without LOCAL_WRITE fails
        assert_eq!(
            check_local_sges(&[sge(2, 0x4000, 8)], mrs, PD, true),
            Err(WcStatus::LocProtErr)
        );
        // several SGEs add up; a zero-length SGE with a bad key is skipped
        let list = [sge(1, 0x1000, 16), sge(99, 0, 0), sge(2, 0x4010, 4)];
        assert_eq!(check_local_sges(&list, mrs, PD, false), Ok(20));
        // an empty list is a zero-length message (§3.3 SendEmptySgl)
        assert_eq!(check_local_sges(&[], mrs, PD, false), Ok(0));
    }

    #[test]
    fn requester_local_inline_atomic_and_ud_mtu() {
        // Goal: INLINE skips the lkey check (MAN-PS "The L_Key will not be
        // checked"); atomic local length ≠ 8 → LOC_LEN_ERR scenario (rows
        // 11–12); UD payload > MTU → LOC_LEN_ERR scenario; bad lkey → row 1.
        // Method: compose the checks through check_requester_local.
        let mrs = table();
        let mrs = &mrs[..];
        let bad = [sge(99, 0, 16)];
        assert_eq!(
            check_requester_local(
                WrOpcode::Send,
                SendFlags::INLINE,
                Transport::Rc,
                &bad,
                mrs,
                PD,
                4096
            ),
            Ok(16)
        );
        assert_eq!(
            check_requester_local(
                WrOpcode::Send,
                SendFlags::empty(),
                Transport::Rc,
                &bad,
                mrs,
                PD,
                4096
            ),
            Err(ErrorScenario::LocalProtection)
        );
        let four = [sge(1, 0x1000, 4)];
        for op in [WrOpcode::AtomicCmpAndSwp, WrOpcode::AtomicFetchAndAdd] {
            assert_eq!(
                check_requester_local(op, SendFlags::empty(), Transport::Rc, &four, mrs, PD, 4096),
                Err(ErrorScenario::AtomicLocalLength)
            );
        }
        // atomic/READ result buffer without LOCAL_WRITE or with a bad lkey:
        // not checked before sending (it is checked when the response is
        // scattered, after the responder's checks; issue #18 item 2)
        let ro = [sge(2, 0x4000, 8)];
        for (op, list) in [
            (WrOpcode::AtomicFetchAndAdd, &ro[..]),
            (WrOpcode::AtomicCmpAndSwp, &[sge(99, 0, 8)][..]),
            (WrOpcode::RdmaRead, &bad[..]),
        ] {
            assert_eq!(
                check_requester_local(op, SendFlags::empty(), Transport::Rc, list, mrs, PD, 4096),
                Ok(if op == WrOpcode::RdmaRead { 16 } else { 8 })
            );
        }
        let big = [sge(1, 0x1000, 2049)];
        assert_eq!(
            check_requester_local(
                WrOpcode::Send,
                SendFlags::empty(),
                Transport::Ud,
                &big,
                mrs,
                PD,
                2048
            ),
            Err(ErrorScenario::UdPayloadExceedsMtu)
        );
        assert_eq!(
            check_requester_local(
                WrOpcode::Send,
                SendFlags::empty(),
                Transport::Rc,
                &big,
                mrs,
                PD,
                2048
            ),
            Ok(2049),
            "RC segments; only UD is limited to one MTU"
        );
    }

    fn target(access: AccessFlags) -> MrView {
        mr(10, 0x10_0000, 0x1000, AccessFlags::LOCAL_WRITE | access)
    }

    const ALL_REMOTE: AccessFlags = AccessFlags(
        AccessFlags::REMOTE_WRITE.0 | AccessFlags::REMOTE_READ.0 | AccessFlags::REMOTE_ATOMIC.0,
    );

    fn responder() -> ResponderView {
        ResponderView {
            qp_access_flags: ALL_REMOTE,
            pd: PD,
            max_dest_rd_atomic: 4,
        }
    }

    fn req(op: RemoteOp, remote_addr: u64, len: u64) -> RemoteRequest {
        RemoteRequest {
            op,
            remote_addr,
            rkey: 110,
            len,
        }
    }

    #[test]
    fn remote_access_row_5() {
        // Goal: §4.2 row 5: invalid rkey, range outside the MR, or MR lacking
        // REMOTE_WRITE/READ/ATOMIC → REMOTE_ACCESS; §9.2 PD must match.
        // Method: a 4 KiB target at 0x100000 probed by each operation.
        let r = responder();
        let full = target(ALL_REMOTE);
        assert_eq!(
            check_remote(&req(RemoteOp::Write, 0x10_0010, 16), Some(full), &r),
            Ok(0x10)
        );
        assert_eq!(
            check_remote(&req(RemoteOp::Write, 0x10_0010, 16), None, &r),
            Err(ErrorScenario::RemoteAccess)
        );
        // exceed rear / front (GUT-BUF Read/WriteExceedFront/Rear)
        assert_eq!(
            check_remote(&req(RemoteOp::Read, 0x10_0ff1, 16), Some(full), &r),
            Err(ErrorScenario::RemoteAccess)
        );
        assert_eq!(
            check_remote(&req(RemoteOp::Read, 0x0f_fff0, 32), Some(full), &r),
            Err(ErrorScenario::RemoteAccess)
        );
        // MR lacking the specific remote right (GUT-ACC MissingDstRemote*)
        let (w, rd, at) = (RemoteOp::Write, RemoteOp::Read, RemoteOp::Atomic);
        let only = |a| Some(target(a));
        assert_eq!(
            check_remote(&req(w, 0x10_0000, 8), only(AccessFlags::REMOTE_READ), &r),
            Err(ErrorScenario::RemoteAccess)
        );
        assert_eq!(
            check_remote(&req(rd, 0x10_0000, 8), only(AccessFlags::REMOTE_WRITE), &r),
            Err(ErrorScenario::RemoteAccess)
        );
        assert_eq!(
            check_remote(&req(at, 0x10_0000, 8), only(AccessFlags::REMOTE_WRITE), &r),
            Err(ErrorScenario::RemoteAccess)
        );
        // REMOTE_WRITE/READ are irrelevant to atomics (§7)
        assert_eq!(
            check_remote(&req(at, 0x10_0008, 8), only(AccessFlags::REMOTE_ATOMIC), &r),
            Ok(8)
        );
        // deregistered or other PD
        assert_eq!(
            check_remote(
                &req(w, 0x10_0000, 8),
                Some(MrView {
                    valid: false,
                    ..full
                }),
                &r
            ),
            Err(ErrorScenario::RemoteAccess)
        );
        assert_eq!(
            check_remote(
                &req(w, 0x10_0000, 8),
                Some(MrView { pd: PD + 1, ..full }),
                &r
            ),
            Err(ErrorScenario::RemoteAccess)
        );
    }

    #[test]
    fn zero_length_read_write_skip_rkey_section_3_3() {
        // Goal: §3.3: zero-length READ/WRITE succeed with an invalid rkey or an
        // address outside any MR (GUT-BUF *ZeroByteInvalidRKey, *OutsideMr).
        // Method: len 0 with no MR at all and with an out-of-range address.
        let r = responder();
        assert_eq!(
            check_remote(&req(RemoteOp::Write, 0xdead_0000, 0), None, &r),
            Ok(0)
        );
        assert_eq!(
            check_remote(&req(RemoteOp::Read, 0xdead_0000, 0), None, &r),
            Ok(0)
        );
        assert_eq!(
            check_remote(&req(RemoteOp::Read, 1, 0), Some(target(ALL_REMOTE)), &r),
            Ok(0)
        );
    }

    #[test]
    fn atomic_alignment_row_10_and_section_7() {
        // Goal: §4.2 row 10 / §7: atomic remote_addr must be 8-byte aligned,
        // else invalid request; atomics always access 8 bytes.
        // Method: aligned and unaligned FETCH_ADD; an aligned one in the last
        // 4 bytes of the MR still fails (8 bytes needed, req.len ignored).
        let r = responder();
        let full = Some(target(ALL_REMOTE));
        assert_eq!(
            check_remote(&req(RemoteOp::Atomic, 0x10_0004, 8), full, &r),
            Err(ErrorScenario::AtomicMisaligned)
        );
        assert_eq!(
            check_remote(&req(RemoteOp::Atomic, 0x10_0ff8, 0), full, &r),
            Ok(0xff8)
        );
        assert_eq!(
            check_remote(&req(RemoteOp::Atomic, 0x10_1000, 8), full, &r),
            Err(ErrorScenario::RemoteAccess)
        );
    }

    #[test]
    fn responder_qp_access_gate_rows_13_14() {
        // Goal: §9.2/rows 13–14: the responder QP's qp_access_flags gate
        // WRITE/READ/ATOMIC even when the MR allows them, and READ/atomic need
        // max_dest_rd_atomic > 0 → invalid request (rxe).
        // Method: a fully-permissive MR with a restricted responder QP.
        let full = Some(target(ALL_REMOTE));
        let no_write = ResponderView {
            qp_access_flags: AccessFlags::REMOTE_READ,
            ..responder()
        };
        assert_eq!(
            check_remote(&req(RemoteOp::Write, 0x10_0000, 8), full, &no_write),
            Err(ErrorScenario::ResponderQpAccess)
        );
        assert_eq!(
            check_remote(&req(RemoteOp::Read, 0x10_0000, 8), full, &no_write),
            Ok(0)
        );
        let no_resources = ResponderView {
            max_dest_rd_atomic: 0,
            ..responder()
        };
        assert_eq!(
            check_remote(&req(RemoteOp::Read, 0x10_0000, 8), full, &no_resources),
            Err(ErrorScenario::ResponderQpAccess)
        );
        assert_eq!(
            check_remote(&req(RemoteOp::Atomic, 0x10_0000, 8), full, &no_resources),
            Err(ErrorScenario::ResponderQpAccess)
        );
        assert_eq!(
            check_remote(&req(RemoteOp::Write, 0x10_0000, 8), full, &no_resources),
            Ok(0)
        );
    }

    #[test]
    fn send_with_invalidate_rkey_row_17() {
        // Goal: §4.2 row 17: an invalidate_rkey naming no valid region of the
        // responder's PD is the SendInvalidateBadRkey scenario.
        // Method: none, deregistered, other PD, and valid.
        let m = target(AccessFlags::empty());
        assert_eq!(
            check_invalidate(None, PD),
            Err(ErrorScenario::SendInvalidateBadRkey)
        );
        assert_eq!(
            check_invalidate(Some(MrView { valid: false, ..m }), PD),
            Err(ErrorScenario::SendInvalidateBadRkey)
        );
        assert_eq!(
            check_invalidate(Some(m), PD + 1),
            Err(ErrorScenario::SendInvalidateBadRkey)
        );
        assert_eq!(check_invalidate(Some(m), PD), Ok(()));
        assert_eq!(RemoteOp::of(WrOpcode::Send), None);
        assert_eq!(
            RemoteOp::of(WrOpcode::RdmaWriteWithImm),
            Some(RemoteOp::Write)
        );
    }
}
