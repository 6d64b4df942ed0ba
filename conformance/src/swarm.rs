//! Swarm testing (issue #12 item 13): random verb calls, valid and
//! invalid, across the verb families, with invariants checked after every
//! call, in the manner of TigerBeetle's VOPR and FoundationDB's simulation.
//!
//! Each seed picks which families are on and how heavily (swarm testing:
//! rare interactions get weight in some seeds), then makes `calls` calls
//! on a fresh backend. After every call:
//!
//! * no panic (a panic is caught and reported with its step);
//! * a refused call changes nothing observable: the caller's snapshot
//!   (for the simulator, its live objects) and the state of every QP are
//!   the same before and after (except `connect`, several calls, and
//!   `poll_cq`, which drives the simulator's virtual time);
//! * every completion names a request that was posted on that QP and is
//!   reported once, and none overtakes a signalled send or a receive
//!   posted earlier on the same queue;
//! * at the end, a full teardown succeeds and leaves the snapshot empty.
//!
//! Delivery under faults (exactly once, in order, byte-exact, or the
//! documented error) is checked against a reference model by the property
//! test `conformance/tests/prop_rc_traffic.rs`; the swarm injects the same
//! faults while it mixes everything else in.
//!
//! A failure is shrunk (ops are dropped while the failure stays) and
//! printed as a `.verbs` script with its seed. `verbsim fuzz --seeds A..B`
//! runs any range; CI runs a fixed one.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};

use verbs_api::{
    AccessFlags, CqInit, FaultAction, FaultScope, FaultWhen, Mtu, OpenFlags, PortSpace, ProcessId,
    QpAttr, QpAttrMask, QpCap, QpInitAttrEx, QpState, QpType, RdmaInfo, RecvWr, SendFlags, SendWr,
    Sge, SimCommand, SrqAttr, Verbs, Wc, WcOpcode, WrOpcode, XrcdFile,
};

/// What one swarm run does.
#[derive(Clone, Copy, Debug)]
pub struct SwarmConfig {
    /// The seed: it picks the families, the calls and the simulator's seed.
    pub seed: u64,
    /// Calls to make before the teardown.
    pub calls: usize,
    /// The `#! devices:` header of a failure's script (the profiles the
    /// `make` closure builds for this seed, e.g. `cx6 cx6`), so `verbsim
    /// run` replays it on the same world; empty for none.
    pub devices: &'static str,
}

/// A failed invariant.
#[derive(Clone, Debug)]
pub struct SwarmFailure {
    /// The seed that fails.
    pub seed: u64,
    /// What went wrong, at which call of the shrunk sequence.
    pub why: String,
    /// The shrunk sequence as a `.verbs` script (headers include the seed).
    pub script: String,
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct SwarmReport {
    /// Calls made (including the teardown's).
    pub calls: u64,
    /// Per verb: (succeeded, refused).
    pub per_verb: BTreeMap<&'static str, (u64, u64)>,
    /// The first failure, shrunk.
    pub failure: Option<SwarmFailure>,
    /// A digest of everything observable: each call's script line and
    /// answer (handles, completions, errnos) and the backend's trace
    /// fingerprint before the teardown. Two runs of one seed must agree.
    pub digest: u64,
}

/// FNV-1a, folded into `h`.
fn fnv(h: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(h, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl SwarmReport {
    /// Adds another run's counters (not its failure).
    pub fn absorb(&mut self, other: &Self) {
        self.calls += other.calls;
        self.digest = fnv(self.digest, &other.digest.to_le_bytes());
        for (verb, (ok, err)) in &other.per_verb {
            let e = self.per_verb.entry(verb).or_default();
            e.0 += ok;
            e.1 += err;
        }
    }

    /// The coverage counters as a table, one verb a line.
    pub fn coverage(&self) -> String {
        let mut s = String::new();
        for (verb, (ok, err)) in &self.per_verb {
            let _ = writeln!(s, "{verb:<22} {ok:>9} ok {err:>9} refused");
        }
        s
    }
}

/// Operation families a seed turns on or off.
const FAMILIES: usize = 10;
const F_CONTROL: usize = 0;
const F_QP: usize = 1;
const F_DATA: usize = 2;
const F_SRQ: usize = 3;
const F_FAULTS: usize = 4;
const F_XRC: usize = 5;
const F_CM: usize = 6;
const F_INVALID: usize = 7;
const F_DC: usize = 8;
const F_MW: usize = 9;

/// splitmix64: small, seedable, the same everywhere.
#[derive(Clone, Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const SLOTS: u8 = 4;

/// One generated call, on slots (not handles), so a subsequence replays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    OpenDevice {
        slot: u8,
        dev: u8,
        process: u8,
    },
    CloseDevice {
        slot: u8,
    },
    AllocPd {
        slot: u8,
        ctx: u8,
    },
    DeallocPd {
        slot: u8,
    },
    CreateCq {
        slot: u8,
        ctx: u8,
        cqe: u32,
    },
    DestroyCq {
        slot: u8,
    },
    RegMr {
        slot: u8,
        pd: u8,
        len: u32,
        access: u32,
    },
    DeregMr {
        slot: u8,
    },
    FillMr {
        slot: u8,
        byte: u8,
    },
    /// `ibv_resize_cq`.
    ResizeCq {
        slot: u8,
        cqe: u32,
    },
    /// `ibv_rereg_mr` changing the access and/or the PD (the keys stay).
    ReregMr {
        slot: u8,
        pd: u8,
        flags: u32,
        access: u32,
    },
    CreateSrq {
        slot: u8,
        pd: u8,
        max_wr: u32,
        max_sge: u32,
    },
    DestroySrq {
        slot: u8,
    },
    PostSrqRecv {
        srq: u8,
        mr: u8,
        off: u32,
        len: u32,
    },
    CreateQp {
        slot: u8,
        pd: u8,
        cq: u8,
        qp_type: u8,
        srq: Option<u8>,
        wr: u32,
        sge: u32,
    },
    Connect {
        a: u8,
        b: u8,
        mtu: u8,
        retry: u8,
        rnr: u8,
    },
    ToError {
        slot: u8,
    },
    ToReset {
        slot: u8,
    },
    DestroyQp {
        slot: u8,
    },
    PostSend {
        qp: u8,
        opcode: u8,
        mr: u8,
        off: u32,
        len: u32,
        remote: u8,
        roff: u32,
        flags: u8,
    },
    PostRecv {
        qp: u8,
        mr: u8,
        off: u32,
        len: u32,
    },
    PollCq {
        slot: u8,
    },
    Fault {
        action: u8,
        ppm: u32,
    },
    ClearFaults,
    Advance {
        ns: u64,
    },
    OpenXrcDomain {
        slot: u8,
        ctx: u8,
        inode: u8,
    },
    CloseXrcDomain {
        slot: u8,
    },
    CreateXrcRcvQp {
        xrcd: u8,
    },
    RegXrcRcvQp {
        xrcd: u8,
        nth: u8,
    },
    UnregXrcRcvQp {
        xrcd: u8,
        nth: u8,
    },
    CmCreateId {
        slot: u8,
    },
    CmBind {
        slot: u8,
        dev: u8,
        port: u16,
    },
    CmDestroyId {
        slot: u8,
    },
    /// `mlx5dv_create_qp`: a DCI, or a DCT on an SRQ.
    CreateDc {
        slot: u8,
        pd: u8,
        cq: u8,
        srq: u8,
        dct: bool,
    },
    /// `ibv_create_srq_ex` of type XRC.
    CreateXrcSrq {
        slot: u8,
        pd: u8,
        xrcd: u8,
        cq: u8,
    },
    /// `ibv_create_qp_ex`: XRC_INI (on a PD) or XRC_TGT (on a domain).
    CreateXrcQp {
        slot: u8,
        pd: u8,
        xrcd: u8,
        cq: u8,
        tgt: bool,
    },
    /// `ibv_modify_srq`: `which` 0 resizes, 1 arms the limit, 2 both.
    ModifySrq {
        slot: u8,
        max_wr: u32,
        limit: u32,
        which: u8,
    },
    /// `ibv_alloc_mw` of type 1 or 2.
    AllocMw {
        slot: u8,
        pd: u8,
        type2: bool,
    },
    /// `ibv_dealloc_mw`.
    DeallocMw {
        slot: u8,
    },
    /// `ibv_bind_mw` over `[off, off + len)` of an MR, or an unbind.
    BindMw {
        mw: u8,
        qp: u8,
        mr: u8,
        off: u32,
        len: u32,
        unbind: bool,
    },
    /// An 8-byte RDMA WRITE through a window's rkey, where it was bound.
    WriteViaMw {
        qp: u8,
        mr: u8,
        mw: u8,
    },
    /// `IBV_WR_LOCAL_INV` of a window's rkey.
    LocalInvMw {
        qp: u8,
        mw: u8,
    },
    /// `rdma_create_qp` (RC, UD) or `rdma_create_qp_ex` (XRC_SEND) on an id.
    CmCreateQp {
        slot: u8,
        kind: u8,
    },
    /// `rdma_destroy_qp`.
    CmDestroyQp {
        slot: u8,
    },
    /// `rdma_listen`.
    CmListen {
        slot: u8,
    },
    /// `rdma_resolve_addr` towards device `dev`'s address.
    CmResolveAddr {
        slot: u8,
        dev: u8,
    },
    /// RESET→INIT→RTR(→RTS) of a DCT (DCI) alone, as the script's
    /// one-QP `connect`.
    ConnectDc {
        slot: u8,
    },
    /// `ibv_create_ah` towards a PD's own port (InfiniBand devices).
    CreateAh {
        slot: u8,
        pd: u8,
    },
    /// A signalled WRITE or SEND on a DCI, addressed to a DCT.
    PostDc {
        dci: u8,
        dct: u8,
        ah: u8,
        mr: u8,
        remote: u8,
        send: bool,
    },
    /// RESET→INIT→RTR(→RTS) of an XRC_INI QP and an XRC_TGT QP towards
    /// each other, as the script's `connect INI TGT`.
    ConnectXrc {
        ini: u8,
        tgt: u8,
    },
    /// A signalled SEND on an XRC_INI QP to an XRC SRQ's number.
    PostXrc {
        qp: u8,
        srq: u8,
        mr: u8,
    },
}

impl Op {
    /// The verb's name in the coverage counters (the script statement).
    fn verb(&self) -> &'static str {
        match self {
            Self::OpenDevice { .. } => "open_device",
            Self::CloseDevice { .. } => "close_device",
            Self::AllocPd { .. } => "alloc_pd",
            Self::DeallocPd { .. } => "dealloc_pd",
            Self::CreateCq { .. } => "create_cq",
            Self::DestroyCq { .. } => "destroy_cq",
            Self::RegMr { .. } => "reg_mr",
            Self::DeregMr { .. } => "dereg_mr",
            Self::FillMr { .. } => "fill",
            Self::ResizeCq { .. } => "resize_cq",
            Self::ReregMr { .. } => "rereg_mr",
            Self::CreateSrq { .. } => "create_srq",
            Self::DestroySrq { .. } => "destroy_srq",
            Self::PostSrqRecv { .. } => "post_srq_recv",
            Self::CreateQp { .. } => "create_qp",
            Self::Connect { .. } => "connect",
            Self::ToError { .. } | Self::ToReset { .. } => "modify_qp",
            Self::DestroyQp { .. } => "destroy_qp",
            Self::PostSend { .. } => "post_send",
            Self::PostRecv { .. } => "post_recv",
            Self::PollCq { .. } => "poll_cq",
            Self::Fault { .. } | Self::ClearFaults | Self::Advance { .. } => "sim",
            Self::OpenXrcDomain { .. } => "open_xrc_domain",
            Self::CloseXrcDomain { .. } => "close_xrc_domain",
            Self::CreateXrcRcvQp { .. } => "create_xrc_rcv_qp",
            Self::RegXrcRcvQp { .. } => "reg_xrc_rcv_qp",
            Self::UnregXrcRcvQp { .. } => "unreg_xrc_rcv_qp",
            Self::CmCreateId { .. } => "rdma_create_id",
            Self::CmBind { .. } => "rdma_bind_addr",
            Self::CmDestroyId { .. } => "rdma_destroy_id",
            Self::CreateDc { .. } => "mlx5dv_create_qp",
            Self::CreateXrcSrq { .. } => "create_srq_ex",
            Self::CreateXrcQp { .. } => "create_qp_ex",
            Self::ModifySrq { .. } => "modify_srq",
            Self::AllocMw { .. } => "alloc_mw",
            Self::DeallocMw { .. } => "dealloc_mw",
            Self::BindMw { .. } => "bind_mw",
            Self::WriteViaMw { .. } | Self::LocalInvMw { .. } => "post_send (window)",
            Self::CmCreateQp { .. } => "rdma_create_qp",
            Self::CmDestroyQp { .. } => "rdma_destroy_qp",
            Self::CmListen { .. } => "rdma_listen",
            Self::CmResolveAddr { .. } => "rdma_resolve_addr",
            Self::ConnectDc { .. } => "connect (DC)",
            Self::ConnectXrc { .. } => "connect (XRC)",
            Self::CreateAh { .. } => "create_ah",
            Self::PostDc { .. } => "post_send (DC)",
            Self::PostXrc { .. } => "post_send (XRC)",
        }
    }
}

/// Draws the next op for the families of `weights`.
fn gen_op(r: &mut Rng, weights: &[u64; FAMILIES]) -> Op {
    let total: u64 = weights.iter().sum();
    let mut pick = r.below(total.max(1));
    let mut family = F_CONTROL;
    for (i, w) in weights.iter().enumerate() {
        if pick < *w {
            family = i;
            break;
        }
        pick -= w;
    }
    let s = |r: &mut Rng| r.below(u64::from(SLOTS)) as u8;
    let bad = weights[F_INVALID] > 0 && r.chance(20);
    match family {
        F_CONTROL => match r.below(12) {
            0 => Op::OpenDevice {
                slot: s(r),
                dev: r.below(2) as u8,
                process: r.below(2) as u8,
            },
            1 => Op::CloseDevice { slot: s(r) },
            2 => Op::AllocPd {
                slot: s(r),
                ctx: s(r),
            },
            3 => Op::DeallocPd { slot: s(r) },
            4 => Op::CreateCq {
                slot: s(r),
                ctx: s(r),
                cqe: if bad { 1 << 30 } else { 1 + r.below(64) as u32 },
            },
            5 => Op::DestroyCq { slot: s(r) },
            6 => Op::RegMr {
                slot: s(r),
                pd: s(r),
                len: if bad { 0 } else { 64 << r.below(7) },
                access: if bad {
                    0x2
                } else {
                    [0x1, 0x7, 0xf][r.below(3) as usize]
                },
            },
            7 => Op::DeregMr { slot: s(r) },
            8 => Op::FillMr {
                slot: s(r),
                byte: r.next() as u8,
            },
            10 => Op::ResizeCq {
                slot: s(r),
                cqe: if bad { 0 } else { 1 + r.below(128) as u32 },
            },
            11 => Op::ReregMr {
                slot: s(r),
                pd: s(r),
                // CHANGE_PD = 2, CHANGE_ACCESS = 4; none or an unknown bit when bad.
                flags: if bad {
                    [0, 0x8][r.below(2) as usize]
                } else {
                    [0x2, 0x4, 0x6][r.below(3) as usize]
                },
                access: if bad {
                    0x2
                } else {
                    [0x1, 0x7, 0xf][r.below(3) as usize]
                },
            },
            _ => Op::PollCq { slot: s(r) },
        },
        F_QP => match r.below(8) {
            0 | 1 => Op::CreateQp {
                slot: s(r),
                pd: s(r),
                cq: s(r),
                qp_type: r.below(3) as u8,
                srq: (weights[F_SRQ] > 0 && r.chance(30)).then(|| s(r)),
                // Past every profile's max_qp_wr (mlx5 32768, rxe 2^20).
                wr: if bad {
                    (1 << 20) + 1
                } else {
                    1 + r.below(16) as u32
                },
                sge: 1 + r.below(2) as u32,
            },
            2..=4 => Op::Connect {
                a: s(r),
                b: s(r),
                mtu: r.below(3) as u8,
                retry: r.below(8) as u8,
                rnr: r.below(8) as u8,
            },
            5 => Op::ToError { slot: s(r) },
            6 => Op::ToReset { slot: s(r) },
            _ => Op::DestroyQp { slot: s(r) },
        },
        F_DATA => match r.below(4) {
            0 | 1 => Op::PostSend {
                qp: s(r),
                opcode: r.below(5) as u8,
                mr: s(r),
                off: if bad { 1 << 20 } else { r.below(4) as u32 * 64 },
                len: [0, 1, 8, 64, 300, 2000][r.below(6) as usize],
                remote: s(r),
                roff: r.below(4) as u32 * 8,
                flags: r.below(8) as u8,
            },
            2 => Op::PostRecv {
                qp: s(r),
                mr: s(r),
                off: 0,
                len: [8, 64, 4096][r.below(3) as usize],
            },
            _ => Op::PollCq { slot: s(r) },
        },
        F_SRQ => match r.below(5) {
            4 => Op::ModifySrq {
                slot: s(r),
                max_wr: if bad { 1 << 24 } else { 1 + r.below(16) as u32 },
                limit: r.below(10) as u32,
                which: r.below(3) as u8,
            },
            0 => Op::CreateSrq {
                slot: s(r),
                pd: s(r),
                max_wr: if bad { 1 << 24 } else { 1 + r.below(8) as u32 },
                max_sge: 1,
            },
            1 => Op::DestroySrq { slot: s(r) },
            _ => Op::PostSrqRecv {
                srq: s(r),
                mr: s(r),
                off: 0,
                len: [8, 64, 4096][r.below(3) as usize],
            },
        },
        F_FAULTS => match r.below(4) {
            0 => Op::Fault {
                // Action 4 (the invalid arm only): a delay of 2^64-1 ns,
                // far past the virtual-time horizon; accepted, and the
                // packets it holds land at the horizon.
                action: if bad { 4 } else { r.below(4) as u8 },
                ppm: [10_000, 50_000, 100_000][r.below(3) as usize],
            },
            1 => Op::ClearFaults,
            _ => Op::Advance {
                // Invalid: past the virtual-time horizon (2^62 ns).
                ns: if bad {
                    u64::MAX - r.below(2)
                } else {
                    [100, 10_000, 1_000_000][r.below(3) as usize]
                },
            },
        },
        F_XRC => match r.below(9) {
            8 => Op::ConnectXrc {
                ini: s(r),
                tgt: s(r),
            },
            7 => Op::PostXrc {
                qp: s(r),
                srq: s(r),
                mr: s(r),
            },
            5 => Op::CreateXrcSrq {
                slot: s(r),
                pd: s(r),
                xrcd: s(r),
                cq: s(r),
            },
            6 => Op::CreateXrcQp {
                slot: s(r),
                pd: s(r),
                xrcd: s(r),
                cq: s(r),
                tgt: r.chance(50),
            },
            0 => Op::OpenXrcDomain {
                slot: s(r),
                ctx: s(r),
                inode: r.below(2) as u8,
            },
            1 => Op::CloseXrcDomain { slot: s(r) },
            2 => Op::CreateXrcRcvQp { xrcd: s(r) },
            3 => Op::RegXrcRcvQp {
                xrcd: s(r),
                nth: r.below(4) as u8,
            },
            _ => Op::UnregXrcRcvQp {
                xrcd: s(r),
                nth: r.below(4) as u8,
            },
        },
        F_CM => match r.below(8) {
            0 => Op::CmCreateId { slot: s(r) },
            1 | 2 => Op::CmBind {
                slot: s(r),
                dev: r.below(3) as u8,
                port: 7000 + r.below(3) as u16,
            },
            3 => Op::CmCreateQp {
                slot: s(r),
                kind: r.below(3) as u8,
            },
            4 => Op::CmDestroyQp { slot: s(r) },
            5 => Op::CmListen { slot: s(r) },
            6 => Op::CmResolveAddr {
                slot: s(r),
                dev: r.below(3) as u8,
            },
            _ => Op::CmDestroyId { slot: s(r) },
        },
        F_DC => match r.below(7) {
            0 | 1 => Op::CreateDc {
                slot: s(r),
                pd: s(r),
                cq: s(r),
                srq: s(r),
                dct: r.chance(50),
            },
            2 => Op::ConnectDc { slot: s(r) },
            3 => Op::CreateAh {
                slot: s(r),
                pd: s(r),
            },
            4 | 5 => Op::PostDc {
                dci: s(r),
                dct: s(r),
                ah: s(r),
                mr: s(r),
                remote: s(r),
                send: r.chance(30),
            },
            _ => Op::DestroyQp { slot: s(r) },
        },
        F_MW => match r.below(7) {
            0 => Op::AllocMw {
                slot: s(r),
                pd: s(r),
                type2: r.chance(30),
            },
            1 => Op::DeallocMw { slot: s(r) },
            2 | 3 => Op::BindMw {
                mw: s(r),
                qp: s(r),
                mr: s(r),
                off: r.below(4) as u32 * 64,
                len: if bad {
                    (1 << 31) + 64
                } else {
                    [0, 8, 64, 256][r.below(4) as usize]
                },
                unbind: r.chance(15),
            },
            4 | 5 => Op::WriteViaMw {
                qp: s(r),
                mr: s(r),
                mw: s(r),
            },
            _ => Op::LocalInvMw { qp: s(r), mw: s(r) },
        },
        _ => Op::PollCq { slot: s(r) },
    }
}

/// An MR slot: handle, PD slot, address, lkey, rkey, length.
type MrSlot<V> = (<V as Verbs>::Mr, u8, u64, u32, u32, u32);
/// A QP slot: handle, PD slot, type (0 RC, 1 UC, 2 UD, 3 DCI, 5 DCT, 4
/// XRC_INI, 6 XRC_TGT: 0 and 1 are connected in pairs, 3 and 5 alone,
/// 0, 1, 3 and 4 posted to), QP number.
type QpSlot<V> = (<V as Verbs>::Qp, u8, u8, u32);
/// A window slot: handle, PD slot, type 2, the bound MR slot and offset.
type MwSlot<V> = (<V as Verbs>::Mw, u8, bool, Option<(u8, u32)>);

/// The objects of a run, by slot, with their script names.
struct State<V: Verbs> {
    ctx: Vec<Option<(V::Context, u8)>>,
    pd: Vec<Option<(V::Pd, u8)>>,
    cq: Vec<Option<(V::Cq, u8)>>,
    mr: Vec<Option<MrSlot<V>>>,
    srq: Vec<Option<(V::Srq, u8)>>,
    qp: Vec<Option<QpSlot<V>>>,
    xrcd: Vec<Option<(V::Xrcd, u8)>>,
    rcv_qpns: Vec<u32>,
    /// QP slots the last `connect` brought to RTS (until a transition,
    /// destroy or new QP in the slot): posts prefer them.
    rts: Vec<bool>,
    cm_ch: Option<V::CmChannel>,
    cm_id: Vec<Option<V::CmId>>,
    /// The QP `rdma_create_qp` made on the id of the same slot.
    cm_qp: Vec<Option<V::Qp>>,
    /// Memory windows: handle, PD slot, type 2, where the last bind that
    /// was posted put it (MR slot, offset).
    mw: Vec<Option<MwSlot<V>>>,
    /// Address handles: handle, PD slot.
    ah: Vec<Option<(V::Ah, u8)>>,
    /// The number of the XRC SRQ in the SRQ slot of the same index.
    srqn: Vec<Option<u32>>,
    /// The context slot of the XRC_TGT QP in the QP slot of the same index.
    tgt_ctx: Vec<Option<u8>>,
    /// wr_id → (qp slot, qp number, receive?), for posted requests not yet
    /// completed.
    outstanding: BTreeMap<u64, (u8, u32, bool)>,
    /// The outstanding requests whose completions must come in posting
    /// order on their queue (signalled sends and receives of RC/UC QPs);
    /// a QP that goes to RESET or is destroyed drops its own.
    ordered: std::collections::BTreeSet<u64>,
    next_wr_id: u64,
}

impl<V: Verbs> State<V> {
    /// The QP `qpn` went to RESET or away: its requests will not complete
    /// in order any more (those already in a CQ still may complete).
    fn forget_order(&mut self, slot: u8, qpn: u32) {
        let out = &self.outstanding;
        self.ordered
            .retain(|id| out.get(id).is_none_or(|(s, n, _)| *s != slot || *n != qpn));
    }
}

impl<V: Verbs> State<V> {
    fn new() -> Self {
        let n = SLOTS as usize;
        Self {
            ctx: (0..n).map(|_| None).collect(),
            pd: (0..n).map(|_| None).collect(),
            cq: (0..n).map(|_| None).collect(),
            mr: (0..n).map(|_| None).collect(),
            srq: (0..n).map(|_| None).collect(),
            qp: (0..n).map(|_| None).collect(),
            xrcd: (0..n).map(|_| None).collect(),
            rcv_qpns: Vec::new(),
            rts: vec![false; n],
            cm_ch: None,
            cm_id: (0..n).map(|_| None).collect(),
            cm_qp: (0..n).map(|_| None).collect(),
            mw: (0..n).map(|_| None).collect(),
            ah: (0..n).map(|_| None).collect(),
            srqn: vec![None; n],
            tgt_ctx: vec![None; n],
            outstanding: BTreeMap::new(),
            ordered: std::collections::BTreeSet::new(),
            next_wr_id: 1,
        }
    }
}

/// What executing one op found.
enum Step {
    /// Nothing to call (a slot was empty or taken).
    Skipped,
    /// The verb ran: `Ok(())` or the refusal, and the script line.
    Ran(Result<(), verbs_api::Error>, String),
    /// An invariant broke.
    Broken(String),
}

/// Runs one seed: `make` builds a fresh backend for the seed, `snapshot`
/// describes what is alive (compared around refused calls and required
/// to say `nothing` after the teardown).
pub fn run_seed<V: Verbs>(
    cfg: SwarmConfig,
    make: &dyn Fn(u64) -> V,
    snapshot: &dyn Fn(&V) -> String,
) -> SwarmReport {
    run_seed_traced(cfg, make, snapshot, &|_| 0)
}

/// [`run_seed`], with `trace` fingerprinting the backend's own record
/// (for the simulator, its trace) into [`SwarmReport::digest`] before the
/// teardown, so running a seed twice checks determinism below the trait.
pub fn run_seed_traced<V: Verbs>(
    cfg: SwarmConfig,
    make: &dyn Fn(u64) -> V,
    snapshot: &dyn Fn(&V) -> String,
    trace: &dyn Fn(&V) -> u64,
) -> SwarmReport {
    // Panics are caught and reported with their step; while the swarm runs
    // (and replays them shrinking), the hook's message and backtrace for
    // each would drown the report. The first panic's message is kept in
    // the failure. Only this thread is quiet, and only here.
    quietly(|| run_seed_quiet(cfg, make, snapshot, trace))
}

/// The body of [`run_seed_traced`], with this thread's panics quiet.
fn run_seed_quiet<V: Verbs>(
    cfg: SwarmConfig,
    make: &dyn Fn(u64) -> V,
    snapshot: &dyn Fn(&V) -> String,
    trace: &dyn Fn(&V) -> u64,
) -> SwarmReport {
    let ops = generate(&cfg);
    let mut report = SwarmReport::default();
    let outcome = execute(cfg.seed, &ops, make, snapshot, Some((&mut report, trace)));
    if let Err((at, why)) = outcome {
        let shrunk = shrink(
            cfg.seed,
            ops[..=at.min(ops.len() - 1)].to_vec(),
            make,
            snapshot,
        );
        let (why2, script) = match execute(cfg.seed, &shrunk, make, snapshot, None) {
            Err((_, w)) => (w, render(&cfg, &shrunk, make, "failure (shrunk)")),
            Ok(()) => (
                why.clone(),
                render(&cfg, &ops[..=at.min(ops.len() - 1)], make, "failure"),
            ),
        };
        report.failure = Some(SwarmFailure {
            seed: cfg.seed,
            why: why2,
            script,
        });
    }
    report
}

thread_local! {
    /// Whether this thread is inside [`quietly`].
    static QUIET: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// Runs `f` with this thread's panics kept off the panic hook.
///
/// The process's hook is wrapped once, on first use: the wrapper hands
/// every panic to the hook that was there before, except a panic of a
/// thread inside `quietly`. Replacing the hook for the duration (as the
/// swarm did) silenced every other thread's panics meanwhile, and with
/// two such threads could leave the silent hook installed for good.
fn quietly<R>(f: impl FnOnce() -> R) -> R {
    static WRAPPED: std::sync::Once = std::sync::Once::new();
    WRAPPED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(core::cell::Cell::get) {
                previous(info);
            }
        }));
    });
    /// Restores the flag even if `f` unwinds.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            QUIET.with(|q| q.set(self.0));
        }
    }
    let _restore = Restore(QUIET.with(|q| q.replace(true)));
    f()
}

/// The whole run of `cfg` (without the teardown) as a `.verbs` script,
/// each statement with the outcome `make`'s backend gave (for reproducing
/// and reading a run; a script of a passing run passes on the same
/// backend): `verbsim fuzz --seeds N --print-script` shows it.
pub fn script_for<V: Verbs>(cfg: SwarmConfig, make: &dyn Fn(u64) -> V) -> String {
    render(&cfg, &generate(&cfg), make, "run")
}

/// The calls of one seed: the families' weights (swarm testing: each
/// family off in a quarter of the seeds, else weighted 1-5), an optional
/// working set-up, then `cfg.calls` draws.
fn generate(cfg: &SwarmConfig) -> Vec<Op> {
    let mut r = Rng(cfg.seed ^ 0x5157_4152_4d00_0000);
    let mut weights = [0u64; FAMILIES];
    for w in &mut weights {
        *w = if r.chance(75) { 1 + r.below(5) } else { 0 };
    }
    weights[F_CONTROL] = weights[F_CONTROL].max(2);
    weights[F_QP] = weights[F_QP].max(1);
    let mut ops: Vec<Op> = Vec::with_capacity(cfg.calls + 16);
    if r.chance(60) {
        // Half the seeds start from a working set-up (two devices, an RC
        // or UC pair connected, registered memory), so the data path and
        // its faults get most of their calls from a live connection.
        let qp_type = if r.chance(75) { 0 } else { 1 };
        ops.extend([
            Op::OpenDevice {
                slot: 0,
                dev: 0,
                process: 0,
            },
            Op::OpenDevice {
                slot: 1,
                dev: 1,
                process: 1,
            },
            Op::AllocPd { slot: 0, ctx: 0 },
            Op::AllocPd { slot: 1, ctx: 1 },
            Op::CreateCq {
                slot: 0,
                ctx: 0,
                cqe: 64,
            },
            Op::CreateCq {
                slot: 1,
                ctx: 1,
                cqe: 64,
            },
            Op::RegMr {
                slot: 0,
                pd: 0,
                len: 8192,
                access: 0xf,
            },
            Op::RegMr {
                slot: 1,
                pd: 1,
                len: 8192,
                access: 0xf,
            },
            Op::CreateQp {
                slot: 0,
                pd: 0,
                cq: 0,
                qp_type,
                srq: None,
                wr: 16,
                sge: 1,
            },
            Op::CreateQp {
                slot: 1,
                pd: 1,
                cq: 1,
                qp_type,
                srq: None,
                wr: 16,
                sge: 1,
            },
            Op::Connect {
                a: 0,
                b: 1,
                mtu: r.below(3) as u8,
                retry: 7,
                rnr: 3,
            },
        ]);
        weights[F_DATA] = weights[F_DATA].max(6);
    }
    ops.extend((0..cfg.calls).map(|_| gen_op(&mut r, &weights)));
    ops
}

/// Drops ops while the failure stays (greedy, halving chunk sizes).
fn shrink<V: Verbs>(
    seed: u64,
    mut ops: Vec<Op>,
    make: &dyn Fn(u64) -> V,
    snapshot: &dyn Fn(&V) -> String,
) -> Vec<Op> {
    let mut chunk = ops.len() / 2;
    let mut budget = 2_000;
    while chunk >= 1 && budget > 0 {
        let mut i = 0;
        let mut removed = false;
        while i < ops.len() && budget > 0 {
            let end = (i + chunk).min(ops.len());
            let mut candidate = ops.clone();
            candidate.drain(i..end);
            budget -= 1;
            if !candidate.is_empty() && execute(seed, &candidate, make, snapshot, None).is_err() {
                ops = candidate;
                removed = true;
            } else {
                i += chunk;
            }
        }
        if !removed {
            chunk /= 2;
        }
    }
    ops
}

/// The ops as a `.verbs` script whose expectations are what the backend
/// answered when they ran (replayed once more to learn them).
fn render<V: Verbs>(cfg: &SwarmConfig, ops: &[Op], make: &dyn Fn(u64) -> V, what: &str) -> String {
    let seed = cfg.seed;
    let mut v = make(seed);
    let mut st = State::<V>::new();
    let replay = if what.starts_with("property") {
        "`verbsim run` on this file replays the calls and checks the swarm's invariants; \
         your test's own invariant is not in it (check it with your test)"
            .to_owned()
    } else {
        format!(
            "`verbsim fuzz --seeds {seed}..{} --calls {}` replays the run",
            seed + 1,
            cfg.calls
        )
    };
    let mut s = format!(
        "#! description: swarm {what}, seed {seed}; {replay}\n#! backends: sim\n#! seed: {seed}\n"
    );
    if !cfg.devices.is_empty() {
        let _ = writeln!(s, "#! devices: {}", cfg.devices);
    }
    for op in ops {
        let op = &resolve(op, &st);
        let step = catch_unwind(AssertUnwindSafe(|| exec_op(&mut v, &mut st, op)));
        match step {
            Ok(Step::Ran(res, line)) => {
                let _ = match res {
                    Ok(()) => writeln!(s, "{line}"),
                    Err(e) => writeln!(
                        s,
                        "{line} -> {}",
                        verbs_api::errno::name(e.errno()).unwrap_or("error")
                    ),
                };
            }
            Ok(Step::Broken(line)) => {
                let _ = writeln!(s, "# broke here: {line}");
            }
            Ok(Step::Skipped) => {}
            Err(_) => {
                let _ = writeln!(s, "# panicked: {op:?}");
                break;
            }
        }
    }
    s
}

/// Where a counted run records: its report and the backend's trace
/// fingerprint.
type Recording<'a, V> = (&'a mut SwarmReport, &'a dyn Fn(&V) -> u64);

/// Runs `ops` on a fresh backend and the teardown; `Err((index, why))`
/// at the first broken invariant.
fn execute<V: Verbs>(
    seed: u64,
    ops: &[Op],
    make: &dyn Fn(u64) -> V,
    snapshot: &dyn Fn(&V) -> String,
    mut report: Option<Recording<'_, V>>,
) -> Result<(), (usize, String)> {
    execute_checked(seed, ops, make, snapshot, report.take(), &mut |_| Ok(()))
}

/// [`execute`] with the caller's own invariant, asked after every call.
fn execute_checked<V: Verbs>(
    seed: u64,
    ops: &[Op],
    make: &dyn Fn(u64) -> V,
    snapshot: &dyn Fn(&V) -> String,
    mut report: Option<Recording<'_, V>>,
    check: &mut dyn FnMut(&mut V) -> Result<(), String>,
) -> Result<(), (usize, String)> {
    let mut v = make(seed);
    let mut st = State::<V>::new();
    for (i, op) in ops.iter().enumerate() {
        let op = &resolve(op, &st);
        let before = observe(&mut v, &st, snapshot);
        let step = catch_unwind(AssertUnwindSafe(|| exec_op(&mut v, &mut st, op)));
        let step = match step {
            Ok(s) => s,
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                return Err((i, format!("call {i} ({op:?}) panicked: {msg}")));
            }
        };
        if !matches!(step, Step::Skipped) {
            if let Err(why) = check(&mut v) {
                return Err((i, format!("call {i} ({op:?}): the invariant failed: {why}")));
            }
        }
        match step {
            Step::Skipped => {}
            Step::Broken(why) => return Err((i, format!("call {i} ({op:?}): {why}"))),
            Step::Ran(res, line) => {
                if let Some((rep, _)) = report.as_mut() {
                    rep.digest = fnv(rep.digest, line.as_bytes());
                    let answer = res.as_ref().err().map_or(0, verbs_api::Error::errno);
                    rep.digest = fnv(rep.digest, &answer.to_le_bytes());
                    rep.calls += 1;
                    // Polls that returned a completion, apart: they show
                    // the data path really ran.
                    let verb = if matches!(op, Op::PollCq { .. }) && line.contains("wr_id=") {
                        "poll_cq (completion)"
                    } else {
                        op.verb()
                    };
                    let e = rep.per_verb.entry(verb).or_default();
                    if res.is_ok() {
                        e.0 += 1;
                    } else {
                        e.1 += 1;
                    }
                }
                if let Err(e) = res {
                    // `connect` is up to six modify_qp calls: the ones
                    // before the refused one legitimately changed states.
                    // `poll_cq` drives virtual time on the simulator
                    // (script-format.md): packets land during it, so a CQ
                    // that overruns moves its QPs to ERR while the poll
                    // reports EIO; that change is progress, not the poll's.
                    if e.is_not_implemented()
                        || matches!(
                            op,
                            Op::Connect { .. }
                                | Op::ConnectDc { .. }
                                | Op::ConnectXrc { .. }
                                | Op::PollCq { .. }
                        )
                    {
                        continue;
                    }
                    let after = observe(&mut v, &st, snapshot);
                    if after != before {
                        return Err((
                            i,
                            format!(
                                "call {i} ({op:?}) was refused ({e}) but changed the world:\n  before: {before}\n  after:  {after}"
                            ),
                        ));
                    }
                }
            }
        }
    }
    if let Some((rep, trace)) = report.as_mut() {
        rep.digest = fnv(rep.digest, &trace(&v).to_le_bytes());
    }
    teardown(&mut v, &mut st).map_err(|why| (ops.len().saturating_sub(1), why))?;
    let left = snapshot(&v);
    if left != "nothing" {
        return Err((
            ops.len().saturating_sub(1),
            format!("teardown left objects behind: {left}"),
        ));
    }
    Ok(())
}

/// The slot at or after `slot` (cyclically) that `want` accepts.
fn find<T>(v: &[Option<T>], slot: u8, want: impl Fn(Option<&T>) -> bool) -> u8 {
    let n = v.len();
    (0..n)
        .map(|k| (slot as usize + k) % n)
        .find(|&i| want(v[i].as_ref()))
        .map_or(slot, |i| i as u8)
}

/// A live object's slot: `slot` if taken, else the next taken one.
fn used<T>(v: &[Option<T>], slot: u8) -> u8 {
    find(v, slot, |x| x.is_some())
}

/// A free slot for a new object: `slot` if free, else the next free one.
fn free<T>(v: &[Option<T>], slot: u8) -> u8 {
    find(v, slot, |x| x.is_none())
}

/// A QP a `connect` brought to RTS, else any live QP (posts on QPs in
/// other states are refused calls the swarm wants too, but fewer).
fn connected<V: Verbs>(st: &State<V>, slot: u8) -> u8 {
    let n = st.qp.len();
    (0..n)
        .map(|k| (slot as usize + k) % n)
        .find(|&i| st.rts[i] && st.qp[i].is_some())
        .map_or_else(|| used(&st.qp, slot), |i| i as u8)
}

/// Points the op's slots at objects that exist (a reference to an empty
/// slot moves to the next live object, a new object to the next free
/// slot), so most generated calls reach the backend instead of being
/// skipped, and a QP pair to connect has one type. The op stays a pure
/// function of the generated op and the state, so a subsequence replays.
fn resolve<V: Verbs>(op: &Op, st: &State<V>) -> Op {
    let mut op = *op;
    match &mut op {
        Op::OpenDevice { slot, .. } => *slot = free(&st.ctx, *slot),
        Op::CloseDevice { slot } => *slot = used(&st.ctx, *slot),
        Op::AllocPd { slot, ctx } => {
            *slot = free(&st.pd, *slot);
            *ctx = used(&st.ctx, *ctx);
        }
        Op::DeallocPd { slot } => *slot = used(&st.pd, *slot),
        Op::CreateCq { slot, ctx, .. } => {
            *slot = free(&st.cq, *slot);
            *ctx = used(&st.ctx, *ctx);
        }
        Op::DestroyCq { slot } | Op::PollCq { slot } => *slot = used(&st.cq, *slot),
        Op::RegMr { slot, pd, .. } => {
            *slot = free(&st.mr, *slot);
            *pd = used(&st.pd, *pd);
        }
        Op::DeregMr { slot } | Op::FillMr { slot, .. } => *slot = used(&st.mr, *slot),
        Op::ResizeCq { slot, .. } => *slot = used(&st.cq, *slot),
        Op::ReregMr { slot, pd, .. } => {
            *slot = used(&st.mr, *slot);
            *pd = used(&st.pd, *pd);
        }
        Op::CreateSrq { slot, pd, .. } => {
            *slot = free(&st.srq, *slot);
            *pd = used(&st.pd, *pd);
        }
        Op::DestroySrq { slot } => *slot = used(&st.srq, *slot),
        Op::PostSrqRecv { srq, mr, .. } => {
            *srq = used(&st.srq, *srq);
            let pd = st.srq[*srq as usize].as_ref().map(|s| s.1);
            *mr = find(&st.mr, *mr, |m| m.is_some_and(|m| Some(m.1) == pd));
            *mr = used(&st.mr, *mr);
        }
        Op::CreateQp {
            slot, pd, cq, srq, ..
        } => {
            *slot = free(&st.qp, *slot);
            *pd = used(&st.pd, *pd);
            let ctx = st.pd[*pd as usize].as_ref().map(|p| p.1);
            *cq = find(&st.cq, *cq, |c| c.is_some_and(|c| Some(c.1) == ctx));
            *cq = used(&st.cq, *cq);
            if let Some(s) = srq {
                *s = used(&st.srq, *s);
            }
        }
        Op::Connect { a, b, .. } => {
            *a = find(&st.qp, *a, |q| q.is_some_and(|q| q.2 < 2));
            let ta = st.qp[*a as usize].as_ref().map(|q| q.2);
            let a0 = *a;
            *b = find(&st.qp, a0.wrapping_add(1 + *b % SLOTS) % SLOTS, |q| {
                q.is_some_and(|q| Some(q.2) == ta)
            });
            if *b == a0 {
                *b = (a0 + 1) % SLOTS;
            }
        }
        Op::ToError { slot } | Op::ToReset { slot } | Op::DestroyQp { slot } => {
            *slot = used(&st.qp, *slot);
        }
        Op::PostSend { qp, mr, remote, .. } => {
            *qp = connected(st, *qp);
            let pd = st.qp[*qp as usize].as_ref().map(|q| q.1);
            *mr = find(&st.mr, *mr, |m| m.is_some_and(|m| Some(m.1) == pd));
            *mr = used(&st.mr, *mr);
            *remote = used(&st.mr, *remote);
        }
        Op::PostRecv { qp, mr, .. } => {
            *qp = connected(st, *qp);
            let pd = st.qp[*qp as usize].as_ref().map(|q| q.1);
            *mr = find(&st.mr, *mr, |m| m.is_some_and(|m| Some(m.1) == pd));
            *mr = used(&st.mr, *mr);
        }
        Op::OpenXrcDomain { slot, ctx, .. } => {
            *slot = free(&st.xrcd, *slot);
            *ctx = used(&st.ctx, *ctx);
        }
        Op::CloseXrcDomain { slot } => *slot = used(&st.xrcd, *slot),
        Op::CreateXrcRcvQp { xrcd }
        | Op::RegXrcRcvQp { xrcd, .. }
        | Op::UnregXrcRcvQp { xrcd, .. } => *xrcd = used(&st.xrcd, *xrcd),
        Op::CmCreateId { slot } => *slot = free(&st.cm_id, *slot),
        Op::CmBind { slot, .. } | Op::CmDestroyId { slot } => *slot = used(&st.cm_id, *slot),
        Op::CreateDc {
            slot, pd, cq, srq, ..
        } => {
            *slot = free(&st.qp, *slot);
            *pd = used(&st.pd, *pd);
            let ctx = st.pd[*pd as usize].as_ref().map(|p| p.1);
            *cq = find(&st.cq, *cq, |c| c.is_some_and(|c| Some(c.1) == ctx));
            *cq = used(&st.cq, *cq);
            *srq = used(&st.srq, *srq);
        }
        Op::CreateXrcSrq { slot, pd, xrcd, cq } => {
            *slot = free(&st.srq, *slot);
            *xrcd = used(&st.xrcd, *xrcd);
            let ctx = st.xrcd[*xrcd as usize].as_ref().map(|x| x.1);
            *pd = find(&st.pd, *pd, |p| p.is_some_and(|p| Some(p.1) == ctx));
            *pd = used(&st.pd, *pd);
            *cq = find(&st.cq, *cq, |c| c.is_some_and(|c| Some(c.1) == ctx));
            *cq = used(&st.cq, *cq);
        }
        Op::CreateXrcQp {
            slot, pd, xrcd, cq, ..
        } => {
            *slot = free(&st.qp, *slot);
            *xrcd = used(&st.xrcd, *xrcd);
            *pd = used(&st.pd, *pd);
            let ctx = st.pd[*pd as usize].as_ref().map(|p| p.1);
            *cq = find(&st.cq, *cq, |c| c.is_some_and(|c| Some(c.1) == ctx));
            *cq = used(&st.cq, *cq);
        }
        Op::ModifySrq { slot, .. } => *slot = used(&st.srq, *slot),
        Op::AllocMw { slot, pd, .. } => {
            *slot = free(&st.mw, *slot);
            *pd = used(&st.pd, *pd);
        }
        Op::DeallocMw { slot } => *slot = used(&st.mw, *slot),
        Op::BindMw { mw, qp, mr, .. } => {
            *mw = used(&st.mw, *mw);
            let pd = st.mw[*mw as usize].as_ref().map(|m| m.1);
            *qp = find(&st.qp, *qp, |q| {
                q.is_some_and(|q| Some(q.1) == pd && q.2 < 2)
            });
            *qp = used(&st.qp, *qp);
            *mr = find(&st.mr, *mr, |m| m.is_some_and(|m| Some(m.1) == pd));
            *mr = used(&st.mr, *mr);
        }
        Op::WriteViaMw { qp, mr, mw } => {
            *qp = connected(st, *qp);
            let pd = st.qp[*qp as usize].as_ref().map(|q| q.1);
            *mr = find(&st.mr, *mr, |m| m.is_some_and(|m| Some(m.1) == pd));
            *mr = used(&st.mr, *mr);
            *mw = find(&st.mw, *mw, |m| m.is_some_and(|m| m.3.is_some()));
            *mw = used(&st.mw, *mw);
        }
        Op::LocalInvMw { qp, mw } => {
            *mw = used(&st.mw, *mw);
            let pd = st.mw[*mw as usize].as_ref().map(|m| m.1);
            *qp = find(&st.qp, *qp, |q| {
                q.is_some_and(|q| Some(q.1) == pd && q.2 < 2)
            });
            *qp = used(&st.qp, *qp);
        }
        Op::CmCreateQp { slot, .. }
        | Op::CmDestroyQp { slot }
        | Op::CmListen { slot }
        | Op::CmResolveAddr { slot, .. } => *slot = used(&st.cm_id, *slot),
        Op::ConnectDc { slot } => {
            *slot = find(&st.qp, *slot, |q| q.is_some_and(|q| q.2 == 3 || q.2 == 5));
        }
        Op::CreateAh { slot, pd } => {
            *slot = free(&st.ah, *slot);
            *pd = used(&st.pd, *pd);
        }
        Op::PostDc {
            dci,
            dct,
            ah,
            mr,
            remote,
            ..
        } => {
            *dci = find(&st.qp, *dci, |q| q.is_some_and(|q| q.2 == 3));
            *dct = find(&st.qp, *dct, |q| q.is_some_and(|q| q.2 == 5));
            let pd = st.qp[*dci as usize].as_ref().map(|q| q.1);
            *ah = find(&st.ah, *ah, |a| a.is_some_and(|a| Some(a.1) == pd));
            *ah = used(&st.ah, *ah);
            *mr = find(&st.mr, *mr, |m| m.is_some_and(|m| Some(m.1) == pd));
            *mr = used(&st.mr, *mr);
            let tpd = st.qp[*dct as usize].as_ref().map(|q| q.1);
            *remote = find(&st.mr, *remote, |m| m.is_some_and(|m| Some(m.1) == tpd));
            *remote = used(&st.mr, *remote);
        }
        Op::ConnectXrc { ini, tgt } => {
            *ini = find(&st.qp, *ini, |q| q.is_some_and(|q| q.2 == 4));
            *tgt = find(&st.qp, *tgt, |q| q.is_some_and(|q| q.2 == 6));
        }
        Op::PostXrc { qp, srq, mr } => {
            *qp = find(&st.qp, *qp, |q| q.is_some_and(|q| q.2 == 4));
            let pd = st.qp[*qp as usize].as_ref().map(|q| q.1);
            *mr = find(&st.mr, *mr, |m| m.is_some_and(|m| Some(m.1) == pd));
            *mr = used(&st.mr, *mr);
            let n = st.srqn.len();
            *srq = (0..n)
                .map(|k| (*srq as usize + k) % n)
                .find(|&k| st.srq[k].is_some() && st.srqn[k].is_some())
                .map_or(*srq, |k| k as u8);
        }
        Op::Fault { .. } | Op::ClearFaults | Op::Advance { .. } => {}
    }
    op
}

/// The snapshot plus every live QP's state and, where the backend keeps
/// one (the simulator's `state_digest` directive), the digest of its whole
/// state: a refused call must leave all of it as it was.
fn observe<V: Verbs>(v: &mut V, st: &State<V>, snapshot: &dyn Fn(&V) -> String) -> String {
    let mut s = snapshot(v);
    if let Ok(verbs_api::SimReply::Text(d)) = v.sim_control(SimCommand::Raw {
        name: "state_digest",
        args: &[],
    }) {
        let _ = write!(s, " state={d}");
    }
    for (i, q) in st.qp.iter().enumerate() {
        if let Some((qp, ..)) = q {
            let state = v
                .query_qp(qp, QpAttrMask::STATE)
                .map(|(a, _)| a.qp_state.to_string())
                .unwrap_or_else(|e| format!("?{}", e.errno()));
            let _ = write!(s, " q{i}={state}");
        }
    }
    s
}

fn ran(res: verbs_api::Result<()>, line: String) -> Step {
    Step::Ran(res, line)
}

/// Executes one op against the backend and the slots.
fn exec_op<V: Verbs>(v: &mut V, st: &mut State<V>, op: &Op) -> Step {
    match *op {
        Op::OpenDevice { slot, dev, process } => {
            if st.ctx[slot as usize].is_some() {
                return Step::Skipped;
            }
            let line = format!("let c{slot} = open_device index={dev} process={process}");
            match v.open_device(dev as usize, ProcessId(u32::from(process))) {
                Ok(c) => {
                    st.ctx[slot as usize] = Some((c, dev));
                    ran(Ok(()), line)
                }
                Err(e) => ran(Err(e), line),
            }
        }
        Op::CloseDevice { slot } => {
            let Some((c, _)) = &st.ctx[slot as usize] else {
                return Step::Skipped;
            };
            let r = v.close_device(c);
            if r.is_ok() {
                st.ctx[slot as usize] = None;
            }
            ran(r, format!("close_device c{slot}"))
        }
        Op::AllocPd { slot, ctx } => {
            if st.pd[slot as usize].is_some() {
                return Step::Skipped;
            }
            let Some((c, _)) = &st.ctx[ctx as usize] else {
                return Step::Skipped;
            };
            let line = format!("let pd{slot} = alloc_pd c{ctx}");
            match v.alloc_pd(c) {
                Ok(p) => {
                    st.pd[slot as usize] = Some((p, ctx));
                    ran(Ok(()), line)
                }
                Err(e) => ran(Err(e), line),
            }
        }
        Op::DeallocPd { slot } => {
            let Some((p, _)) = &st.pd[slot as usize] else {
                return Step::Skipped;
            };
            let r = v.dealloc_pd(p);
            if r.is_ok() {
                st.pd[slot as usize] = None;
            }
            ran(r, format!("dealloc_pd pd{slot}"))
        }
        Op::CreateCq { slot, ctx, cqe } => {
            if st.cq[slot as usize].is_some() {
                return Step::Skipped;
            }
            let Some((c, _)) = &st.ctx[ctx as usize] else {
                return Step::Skipped;
            };
            let line = format!("let cq{slot} = create_cq c{ctx} cqe={cqe}");
            match v.create_cq(
                c,
                &CqInit {
                    cqe,
                    ..CqInit::default()
                },
            ) {
                Ok(q) => {
                    st.cq[slot as usize] = Some((q, ctx));
                    ran(Ok(()), line)
                }
                Err(e) => ran(Err(e), line),
            }
        }
        Op::DestroyCq { slot } => {
            let Some((q, _)) = &st.cq[slot as usize] else {
                return Step::Skipped;
            };
            let r = v.destroy_cq(q);
            if r.is_ok() {
                st.cq[slot as usize] = None;
            }
            ran(r, format!("destroy_cq cq{slot}"))
        }
        Op::RegMr {
            slot,
            pd,
            len,
            access,
        } => {
            if st.mr[slot as usize].is_some() {
                return Step::Skipped;
            }
            let Some((p, _)) = &st.pd[pd as usize] else {
                return Step::Skipped;
            };
            let access = AccessFlags(access);
            let line = format!("let m{slot} = reg_mr pd{pd} length={len} access={access}");
            match v.reg_mr(p, len as usize, access) {
                Ok(m) => match v.mr_info(&m) {
                    Ok(i) => {
                        st.mr[slot as usize] = Some((m, pd, i.addr, i.lkey, i.rkey, len));
                        ran(Ok(()), line)
                    }
                    Err(e) => Step::Broken(format!("mr_info of a new MR failed: {e}")),
                },
                Err(e) => ran(Err(e), line),
            }
        }
        Op::DeregMr { slot } => {
            let Some((m, ..)) = &st.mr[slot as usize] else {
                return Step::Skipped;
            };
            let r = v.dereg_mr(m);
            if r.is_ok() {
                st.mr[slot as usize] = None;
            }
            ran(r, format!("dereg_mr m{slot}"))
        }
        Op::ResizeCq { slot, cqe } => {
            let Some((q, _)) = &st.cq[slot as usize] else {
                return Step::Skipped;
            };
            ran(v.resize_cq(q, cqe), format!("resize_cq cq{slot} cqe={cqe}"))
        }
        Op::ReregMr {
            slot,
            pd,
            flags,
            access,
        } => {
            let Some((m, _, _, len, ..)) = &st.mr[slot as usize] else {
                return Step::Skipped;
            };
            let change_pd = flags & 0x2 != 0;
            // Access flags go with CHANGE_ACCESS, and in one draw of three
            // without it (libibverbs refuses that: EINVAL).
            let pass_access = flags & 0x4 != 0 || access == 0xf;
            let access = if pass_access { access } else { 0 };
            let new_pd = if change_pd {
                match &st.pd[pd as usize] {
                    Some((p, _)) => Some(p),
                    None => return Step::Skipped,
                }
            } else {
                None
            };
            let args = verbs_api::ReregMr::<V> {
                flags: verbs_api::ReregMrFlags(flags),
                pd: new_pd,
                length: *len as usize,
                access: AccessFlags(access),
            };
            let r = v.rereg_mr(m, &args);
            if r.is_ok() && change_pd {
                if let Some(e) = st.mr[slot as usize].as_mut() {
                    e.1 = pd;
                }
            }
            let mut line = format!("rereg_mr m{slot} flags={flags:#x}");
            if change_pd {
                line.push_str(&format!(" pd=pd{pd}"));
            }
            if access != 0 {
                line.push_str(&format!(" access={access}"));
            }
            ran(r, line)
        }
        Op::FillMr { slot, byte } => {
            let Some((m, .., len)) = &st.mr[slot as usize] else {
                return Step::Skipped;
            };
            let len = *len;
            let r = v.mr_bytes_mut(m).map(|b| b.fill(byte));
            ran(
                r,
                format!("fill m{slot} offset=0 length={len} byte={byte:#x}"),
            )
        }
        Op::CreateSrq {
            slot,
            pd,
            max_wr,
            max_sge,
        } => {
            if st.srq[slot as usize].is_some() {
                return Step::Skipped;
            }
            let Some((p, _)) = &st.pd[pd as usize] else {
                return Step::Skipped;
            };
            let mut a = SrqAttr {
                max_wr,
                max_sge,
                srq_limit: 0,
            };
            let line = format!("let s{slot} = create_srq pd{pd} max_wr={max_wr} max_sge={max_sge}");
            match v.create_srq(p, &mut a) {
                Ok(s) => {
                    st.srq[slot as usize] = Some((s, pd));
                    ran(Ok(()), line)
                }
                Err(e) => ran(Err(e), line),
            }
        }
        Op::DestroySrq { slot } => {
            let Some((s, _)) = &st.srq[slot as usize] else {
                return Step::Skipped;
            };
            let r = v.destroy_srq(s);
            if r.is_ok() {
                st.srq[slot as usize] = None;
                st.srqn[slot as usize] = None;
            }
            ran(r, format!("destroy_srq s{slot}"))
        }
        Op::PostSrqRecv { srq, mr, off, len } => {
            let (Some((s, _)), Some((_, _, addr, lkey, _, _))) =
                (&st.srq[srq as usize], &st.mr[mr as usize])
            else {
                return Step::Skipped;
            };
            let wr_id = st.next_wr_id;
            st.next_wr_id += 1;
            let sg = [Sge {
                addr: addr + u64::from(off),
                length: len,
                lkey: *lkey,
            }];
            // SAFETY: the simulator owns the MR's bytes and checks every
            // address; on hardware the swarm is not run.
            #[allow(unsafe_code)]
            let r = unsafe {
                v.post_srq_recv(
                    s,
                    &[RecvWr {
                        wr_id,
                        sg_list: &sg,
                    }],
                )
            };
            if r.is_ok() {
                st.outstanding.insert(wr_id, (u8::MAX, 0, true));
            }
            ran(
                r,
                format!("post_srq_recv s{srq} wr_id={wr_id} sge=m{mr}:{off}:{len}"),
            )
        }
        Op::CreateQp {
            slot,
            pd,
            cq,
            qp_type,
            srq,
            wr,
            sge,
        } => {
            if st.qp[slot as usize].is_some() {
                return Step::Skipped;
            }
            let (Some((p, _)), Some((c, _))) = (&st.pd[pd as usize], &st.cq[cq as usize]) else {
                return Step::Skipped;
            };
            let s = srq.and_then(|i| st.srq[i as usize].as_ref().map(|x| (&x.0, i)));
            let t = [QpType::Rc, QpType::Uc, QpType::Ud][qp_type as usize % 3];
            let mut init = QpInitAttrEx::<V> {
                qp_type: t,
                send_cq: Some(c),
                recv_cq: Some(c),
                srq: s.map(|x| x.0),
                cap: QpCap {
                    max_send_wr: wr,
                    max_recv_wr: if s.is_some() { 0 } else { wr },
                    max_send_sge: sge,
                    max_recv_sge: if s.is_some() { 0 } else { sge },
                    max_inline_data: 0,
                },
                ..QpInitAttrEx::default()
            };
            let srq_arg = s.map_or(String::new(), |x| format!(" srq=s{}", x.1));
            let line = format!(
                "let q{slot} = create_qp pd{pd} qp_type={t} send_cq=cq{cq} recv_cq=cq{cq}{srq_arg} max_send_wr={wr} max_recv_wr={} max_send_sge={sge} max_recv_sge={}",
                init.cap.max_recv_wr, init.cap.max_recv_sge
            );
            match v.create_qp(p, &mut init) {
                Ok(q) => {
                    let qpn = v.qp_num(&q).unwrap_or(0);
                    st.qp[slot as usize] = Some((q, pd, qp_type % 3, qpn));
                    st.rts[slot as usize] = false;
                    ran(Ok(()), line)
                }
                Err(e) => ran(Err(e), line),
            }
        }
        Op::Connect {
            a,
            b,
            mtu,
            retry,
            rnr,
        } => connect(v, st, a, b, mtu, retry, rnr),
        Op::ToError { slot } | Op::ToReset { slot } => {
            let Some((q, ..)) = &st.qp[slot as usize] else {
                return Step::Skipped;
            };
            let to = if matches!(op, Op::ToError { .. }) {
                QpState::Error
            } else {
                QpState::Reset
            };
            let attr = QpAttr {
                qp_state: to,
                ..QpAttr::default()
            };
            let r = v.modify_qp(q, &attr, QpAttrMask::STATE);
            if r.is_ok() {
                st.rts[slot as usize] = false;
                if to == QpState::Reset {
                    let qpn = st.qp[slot as usize].as_ref().map_or(0, |x| x.3);
                    st.forget_order(slot, qpn);
                }
            }
            ran(r, format!("modify_qp q{slot} qp_state={to}"))
        }
        Op::DestroyQp { slot } => {
            let Some((q, ..)) = &st.qp[slot as usize] else {
                return Step::Skipped;
            };
            let r = v.destroy_qp(q);
            if r.is_ok() {
                let qpn = st.qp[slot as usize].as_ref().map_or(0, |x| x.3);
                st.forget_order(slot, qpn);
                st.qp[slot as usize] = None;
                st.rts[slot as usize] = false;
            }
            ran(r, format!("destroy_qp q{slot}"))
        }
        Op::PostSend {
            qp,
            opcode,
            mr,
            off,
            len,
            remote,
            roff,
            flags,
        } => {
            let (Some((q, _, qt, qpn)), Some((_, _, addr, lkey, _, _))) =
                (&st.qp[qp as usize], &st.mr[mr as usize])
            else {
                return Step::Skipped;
            };
            if *qt >= 2 {
                // UD needs an address handle; the data-path families cover
                // RC and UC here.
                return Step::Skipped;
            }
            let (raddr, rkey) = st.mr[remote as usize]
                .as_ref()
                .map_or((0, 0xdead_beef), |m| (m.2, m.4));
            let op = [
                WrOpcode::Send,
                WrOpcode::RdmaWrite,
                WrOpcode::RdmaRead,
                WrOpcode::AtomicFetchAndAdd,
                WrOpcode::SendWithImm,
            ][opcode as usize % 5];
            let atomic = op == WrOpcode::AtomicFetchAndAdd;
            let len = if atomic { 8 } else { len };
            let mut send_flags = SendFlags::empty();
            if flags & 1 != 0 {
                send_flags |= SendFlags::SIGNALED;
            }
            if flags & 2 != 0 && len <= 64 {
                send_flags |= SendFlags::INLINE;
            }
            if flags & 4 != 0 {
                send_flags |= SendFlags::FENCE;
            }
            let wr_id = st.next_wr_id;
            st.next_wr_id += 1;
            let sg = [Sge {
                addr: addr + u64::from(off),
                length: len,
                lkey: *lkey,
            }];
            let sg_list: &[Sge] = if len == 0 { &[] } else { &sg };
            let wr = SendWr {
                wr_id,
                sg_list,
                opcode: op,
                send_flags,
                rdma: RdmaInfo {
                    remote_addr: raddr + u64::from(roff),
                    rkey,
                },
                atomic: verbs_api::AtomicInfo {
                    remote_addr: raddr + u64::from(roff),
                    compare_add: 1,
                    swap: 0,
                    rkey,
                },
                ..SendWr::default()
            };
            // SAFETY: as for post_srq_recv.
            #[allow(unsafe_code)]
            let r = unsafe { v.post_send(q, &[wr]) };
            if r.is_ok() {
                st.outstanding.insert(wr_id, (qp, *qpn, false));
                if send_flags.contains(SendFlags::SIGNALED) {
                    st.ordered.insert(wr_id);
                }
            }
            let sge = if len == 0 {
                String::new()
            } else {
                format!(" sge=m{mr}:{off}:{len}")
            };
            let flags_s = if send_flags.is_empty() {
                String::new()
            } else {
                format!(" send_flags={send_flags}")
            };
            let remote_s = match st.mr[remote as usize] {
                Some(_) => format!(" remote=m{remote}:{roff}"),
                None => " remote_addr=0 rkey=0xdeadbeef".to_owned(),
            };
            let extra = if atomic { " compare_add=1" } else { "" };
            ran(
                r,
                format!("post_send q{qp} wr_id={wr_id} opcode={op}{flags_s}{sge}{remote_s}{extra}"),
            )
        }
        Op::PostRecv { qp, mr, off, len } => {
            let (Some((q, _, _, qpn)), Some((_, _, addr, lkey, _, _))) =
                (&st.qp[qp as usize], &st.mr[mr as usize])
            else {
                return Step::Skipped;
            };
            let wr_id = st.next_wr_id;
            st.next_wr_id += 1;
            let sg = [Sge {
                addr: addr + u64::from(off),
                length: len,
                lkey: *lkey,
            }];
            // SAFETY: as for post_srq_recv.
            #[allow(unsafe_code)]
            let r = unsafe {
                v.post_recv(
                    q,
                    &[RecvWr {
                        wr_id,
                        sg_list: &sg,
                    }],
                )
            };
            if r.is_ok() {
                st.outstanding.insert(wr_id, (qp, *qpn, true));
                st.ordered.insert(wr_id);
            }
            ran(
                r,
                format!("post_recv q{qp} wr_id={wr_id} sge=m{mr}:{off}:{len}"),
            )
        }
        Op::PollCq { slot } => {
            let Some((c, _)) = &st.cq[slot as usize] else {
                return Step::Skipped;
            };
            let mut wc = [Wc::default(); 1];
            match v.poll_cq(c, &mut wc) {
                Ok(0) => ran(Ok(()), format!("poll_cq cq{slot} -> empty")),
                Ok(_) => {
                    let w = wc[0];
                    let Some((qslot, qpn, recv)) = st.outstanding.remove(&w.wr_id) else {
                        return Step::Broken(format!(
                            "a completion names wr_id {} that is not outstanding (never posted, or reported twice): {w:?}",
                            w.wr_id
                        ));
                    };
                    let is_recv = matches!(w.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm);
                    if w.status == verbs_api::WcStatus::Success && is_recv != recv {
                        return Step::Broken(format!(
                            "completion {w:?} has the wrong direction (posted as {})",
                            if recv { "a receive" } else { "a send" }
                        ));
                    }
                    if qpn != 0 && w.qp_num != qpn && w.status == verbs_api::WcStatus::Success {
                        return Step::Broken(format!(
                            "completion {w:?} names QP {:#x}, the request was posted on {qpn:#x}",
                            w.qp_num
                        ));
                    }
                    // A work queue completes in posting order (IB spec
                    // 10.8.3 / 11.4.2.1), with errors and flushes too. QP
                    // numbers are per device: the slot tells QPs apart.
                    let earlier = st.ordered.range(..w.wr_id).find(|id| {
                        st.outstanding.get(id).is_some_and(|(sl, n, r)| {
                            qpn != 0 && *sl == qslot && *n == qpn && *r == recv
                        })
                    });
                    if let Some(e) = earlier {
                        return Step::Broken(format!(
                            "completion {w:?} overtook wr_id {e}, posted earlier on the same {} queue of QP {qpn:#x}",
                            if recv { "receive" } else { "send" }
                        ));
                    }
                    st.ordered.remove(&w.wr_id);
                    ran(
                        Ok(()),
                        format!("poll_cq cq{slot} -> wr_id={} status={}", w.wr_id, w.status),
                    )
                }
                Err(e) => ran(Err(e), format!("poll_cq cq{slot}")),
            }
        }
        Op::Fault { action, ppm } => {
            let a = match action % 5 {
                0 => FaultAction::Drop,
                1 => FaultAction::Duplicate,
                2 => FaultAction::DelayNs(5_000),
                4 => FaultAction::DelayNs(u64::MAX),
                _ => FaultAction::Reorder(4),
            };
            let r = v
                .sim_control(SimCommand::Fault {
                    scope: FaultScope::All,
                    action: a,
                    when: FaultWhen::RatePpm(ppm),
                })
                .map(|_| ());
            let name = match a {
                FaultAction::Drop => "action=drop".to_owned(),
                FaultAction::Duplicate => "action=duplicate".to_owned(),
                FaultAction::DelayNs(ns) => format!("action=delay ns={ns}"),
                FaultAction::Reorder(w) => format!("action=reorder window={w}"),
                other => format!("{other:?}"),
            };
            ran(r, format!("sim fault {name} rate_ppm={ppm}"))
        }
        Op::ClearFaults => ran(
            v.sim_control(SimCommand::ClearFaults).map(|_| ()),
            "sim clear_faults".to_owned(),
        ),
        Op::Advance { ns } => ran(
            v.sim_control(SimCommand::AdvanceNs(ns)).map(|_| ()),
            format!("sim advance ns={ns}"),
        ),
        Op::OpenXrcDomain { slot, ctx, inode } => {
            if st.xrcd[slot as usize].is_some() {
                return Step::Skipped;
            }
            let Some((c, _)) = &st.ctx[ctx as usize] else {
                return Step::Skipped;
            };
            let line = format!(
                "let x{slot} = open_xrc_domain c{ctx} fd={} oflags=O_CREAT",
                100 + u32::from(inode)
            );
            match v.open_xrc_domain(c, XrcdFile::Inode(100 + u64::from(inode)), OpenFlags::CREAT) {
                Ok(x) => {
                    st.xrcd[slot as usize] = Some((x, ctx));
                    ran(Ok(()), line)
                }
                Err(e) => ran(Err(e), line),
            }
        }
        Op::CloseXrcDomain { slot } => {
            let Some((x, _)) = &st.xrcd[slot as usize] else {
                return Step::Skipped;
            };
            let r = v.close_xrc_domain(x);
            if r.is_ok() {
                st.xrcd[slot as usize] = None;
            }
            ran(r, format!("close_xrc_domain x{slot}"))
        }
        Op::CreateXrcRcvQp { xrcd } => {
            let Some((x, _)) = &st.xrcd[xrcd as usize] else {
                return Step::Skipped;
            };
            match v.create_xrc_rcv_qp(x) {
                Ok(n) => {
                    st.rcv_qpns.push(n);
                    ran(
                        Ok(()),
                        format!("let r{} = create_xrc_rcv_qp x{xrcd}", st.rcv_qpns.len() - 1),
                    )
                }
                Err(e) => ran(Err(e), format!("create_xrc_rcv_qp x{xrcd}")),
            }
        }
        Op::RegXrcRcvQp { xrcd, nth } | Op::UnregXrcRcvQp { xrcd, nth } => {
            let Some((x, _)) = &st.xrcd[xrcd as usize] else {
                return Step::Skipped;
            };
            let Some(&n) = st.rcv_qpns.get(nth as usize) else {
                return Step::Skipped;
            };
            let reg = matches!(op, Op::RegXrcRcvQp { .. });
            let r = if reg {
                v.reg_xrc_rcv_qp(x, n)
            } else {
                v.unreg_xrc_rcv_qp(x, n)
            };
            let verb = if reg {
                "reg_xrc_rcv_qp"
            } else {
                "unreg_xrc_rcv_qp"
            };
            ran(r, format!("{verb} x{xrcd} qp_num={n:#x}"))
        }
        Op::CmCreateId { slot } => {
            if st.cm_id[slot as usize].is_some() {
                return Step::Skipped;
            }
            let mut prefix = String::new();
            if st.cm_ch.is_none() {
                match v.rdma_create_event_channel() {
                    Ok(ch) => st.cm_ch = Some(ch),
                    Err(e) => return ran(Err(e), "let ch = rdma_create_event_channel".to_owned()),
                }
                prefix = "let ch = rdma_create_event_channel\n".to_owned();
            }
            let ch = st.cm_ch.as_ref().expect("made above");
            match v.rdma_create_id(ch, 0, PortSpace::Tcp) {
                Ok(id) => {
                    st.cm_id[slot as usize] = Some(id);
                    ran(
                        Ok(()),
                        format!("{prefix}let id{slot} = rdma_create_id ch ps=TCP"),
                    )
                }
                Err(e) => ran(Err(e), format!("{prefix}rdma_create_id ch ps=TCP")),
            }
        }
        Op::CmBind { slot, dev, port } => {
            let Some(id) = &st.cm_id[slot as usize] else {
                return Step::Skipped;
            };
            // 10.0.N.1 is device N (docs/rdma-cm.md, address plan); device 2
            // does not exist: an EADDRNOTAVAIL.
            let addr = std::net::SocketAddr::from(([10, 0, dev, 1], port));
            let r = v.rdma_bind_addr(id, addr);
            ran(r, format!("rdma_bind_addr id{slot} addr={addr}"))
        }
        Op::CmDestroyId { slot } => {
            let Some(id) = &st.cm_id[slot as usize] else {
                return Step::Skipped;
            };
            let r = v.rdma_destroy_id(id);
            if r.is_ok() {
                st.cm_id[slot as usize] = None;
            }
            ran(r, format!("rdma_destroy_id id{slot}"))
        }
        Op::CreateDc { .. } | Op::CreateXrcSrq { .. } | Op::CreateXrcQp { .. } => {
            exec_create_ex(v, st, op)
        }
        Op::ModifySrq { .. }
        | Op::AllocMw { .. }
        | Op::DeallocMw { .. }
        | Op::BindMw { .. }
        | Op::WriteViaMw { .. }
        | Op::LocalInvMw { .. } => exec_mw_srq(v, st, op),
        Op::CmCreateQp { .. }
        | Op::CmDestroyQp { .. }
        | Op::CmListen { .. }
        | Op::CmResolveAddr { .. } => exec_cm(v, st, op),
        Op::ConnectDc { .. }
        | Op::ConnectXrc { .. }
        | Op::CreateAh { .. }
        | Op::PostDc { .. }
        | Op::PostXrc { .. } => exec_dc_xrc(v, st, op),
    }
}

/// The DC and modern XRC creations (`mlx5dv_create_qp`,
/// `ibv_create_srq_ex`, `ibv_create_qp_ex`); the objects land in the QP
/// and SRQ slots and are destroyed, refused and torn down like the others.
fn exec_create_ex<V: Verbs>(v: &mut V, st: &mut State<V>, op: &Op) -> Step {
    match *op {
        Op::CreateDc {
            slot,
            pd,
            cq,
            srq,
            dct,
        } => {
            if st.qp[slot as usize].is_some() {
                return Step::Skipped;
            }
            let (Some((p, ctx)), Some((c, _))) = (&st.pd[pd as usize], &st.cq[cq as usize]) else {
                return Step::Skipped;
            };
            let Some((cx, _)) = &st.ctx[*ctx as usize] else {
                return Step::Skipped;
            };
            let s = if dct {
                match &st.srq[srq as usize] {
                    Some((s, _)) => Some(s),
                    None => return Step::Skipped,
                }
            } else {
                None
            };
            let mut init = QpInitAttrEx::<V> {
                qp_type: QpType::Driver,
                comp_mask: verbs_api::QpInitAttrMask::PD,
                pd: Some(p),
                send_cq: Some(c),
                recv_cq: Some(c),
                srq: s,
                cap: QpCap {
                    max_send_wr: if dct { 0 } else { 8 },
                    max_send_sge: if dct { 0 } else { 1 },
                    ..QpCap::default()
                },
                ..QpInitAttrEx::default()
            };
            let mut dv = verbs_api::Mlx5QpInitAttr {
                comp_mask: verbs_api::Mlx5QpInitAttrMask::DC,
                ..verbs_api::Mlx5QpInitAttr::default()
            };
            dv.dc_init_attr.dc_type = if dct {
                verbs_api::DcType::Dct
            } else {
                verbs_api::DcType::Dci
            };
            dv.dc_init_attr.dct_access_key = 0x5157;
            let line = if dct {
                format!("let q{slot} = mlx5dv_create_qp c{ctx} pd=pd{pd} qp_type=DRIVER send_cq=cq{cq} recv_cq=cq{cq} srq=s{srq} dv.dc_type=DCT dv.dct_access_key=0x5157")
            } else {
                format!("let q{slot} = mlx5dv_create_qp c{ctx} pd=pd{pd} qp_type=DRIVER send_cq=cq{cq} recv_cq=cq{cq} max_send_wr=8 max_send_sge=1 max_recv_wr=0 max_recv_sge=0 dv.dc_type=DCI")
            };
            match v.mlx5dv_create_qp(cx, &mut init, &dv) {
                Ok(q) => {
                    let qpn = v.qp_num(&q).unwrap_or(0);
                    st.qp[slot as usize] = Some((q, pd, if dct { 5 } else { 3 }, qpn));
                    st.rts[slot as usize] = false;
                    ran(Ok(()), line)
                }
                Err(e) => ran(Err(e), line),
            }
        }
        Op::CreateXrcSrq { slot, pd, xrcd, cq } => {
            if st.srq[slot as usize].is_some() {
                return Step::Skipped;
            }
            let (Some((p, _)), Some((x, ctx)), Some((c, _))) = (
                &st.pd[pd as usize],
                &st.xrcd[xrcd as usize],
                &st.cq[cq as usize],
            ) else {
                return Step::Skipped;
            };
            let Some((cx, _)) = &st.ctx[*ctx as usize] else {
                return Step::Skipped;
            };
            let mut init = verbs_api::SrqInitAttrEx::<V> {
                attr: SrqAttr {
                    max_wr: 8,
                    max_sge: 1,
                    srq_limit: 0,
                },
                comp_mask: verbs_api::SrqInitAttrMask::TYPE
                    | verbs_api::SrqInitAttrMask::PD
                    | verbs_api::SrqInitAttrMask::XRCD
                    | verbs_api::SrqInitAttrMask::CQ,
                srq_type: verbs_api::SrqType::Xrc,
                pd: Some(p),
                xrcd: Some(x),
                cq: Some(c),
                ..verbs_api::SrqInitAttrEx::default()
            };
            let line = format!(
                "let s{slot} = create_srq_ex c{ctx} srq_type=XRC pd=pd{pd} xrcd=x{xrcd} cq=cq{cq} max_wr=8 max_sge=1"
            );
            match v.create_srq_ex(cx, &mut init) {
                Ok(s) => {
                    st.srqn[slot as usize] = v.get_srq_num(&s).ok();
                    st.srq[slot as usize] = Some((s, pd));
                    ran(Ok(()), line)
                }
                Err(e) => ran(Err(e), line),
            }
        }
        Op::CreateXrcQp {
            slot,
            pd,
            xrcd,
            cq,
            tgt,
        } => {
            if st.qp[slot as usize].is_some() {
                return Step::Skipped;
            }
            let (Some((p, pctx)), Some((x, xctx)), Some((c, _))) = (
                &st.pd[pd as usize],
                &st.xrcd[xrcd as usize],
                &st.cq[cq as usize],
            ) else {
                return Step::Skipped;
            };
            let ctx = if tgt { *xctx } else { *pctx };
            let Some((cx, _)) = &st.ctx[ctx as usize] else {
                return Step::Skipped;
            };
            let mut init = if tgt {
                QpInitAttrEx::<V> {
                    qp_type: QpType::XrcRecv,
                    comp_mask: verbs_api::QpInitAttrMask::XRCD,
                    xrcd: Some(x),
                    ..QpInitAttrEx::default()
                }
            } else {
                QpInitAttrEx::<V> {
                    qp_type: QpType::XrcSend,
                    comp_mask: verbs_api::QpInitAttrMask::PD,
                    pd: Some(p),
                    send_cq: Some(c),
                    recv_cq: Some(c),
                    cap: QpCap {
                        max_send_wr: 8,
                        max_send_sge: 1,
                        ..QpCap::default()
                    },
                    ..QpInitAttrEx::default()
                }
            };
            let line = if tgt {
                format!("let q{slot} = create_qp_ex c{ctx} qp_type=XRC_TGT xrcd=x{xrcd}")
            } else {
                format!("let q{slot} = create_qp_ex c{ctx} qp_type=XRC_INI pd=pd{pd} send_cq=cq{cq} recv_cq=cq{cq} max_send_wr=8 max_send_sge=1")
            };
            match v.create_qp_ex(cx, &mut init) {
                Ok(q) => {
                    let qpn = v.qp_num(&q).unwrap_or(0);
                    st.qp[slot as usize] = Some((q, pd, if tgt { 6 } else { 4 }, qpn));
                    st.tgt_ctx[slot as usize] = tgt.then_some(ctx);
                    st.rts[slot as usize] = false;
                    ran(Ok(()), line)
                }
                Err(e) => ran(Err(e), line),
            }
        }
        _ => Step::Skipped,
    }
}

/// `ibv_modify_srq` and the memory windows: `ibv_alloc_mw`,
/// `ibv_dealloc_mw`, `ibv_bind_mw` (a type 2 window refuses it), a WRITE
/// through a window's rkey and `IBV_WR_LOCAL_INV` of it.
fn exec_mw_srq<V: Verbs>(v: &mut V, st: &mut State<V>, op: &Op) -> Step {
    match *op {
        Op::ModifySrq {
            slot,
            max_wr,
            limit,
            which,
        } => {
            let Some((s, _)) = &st.srq[slot as usize] else {
                return Step::Skipped;
            };
            let (mask, args) = match which {
                0 => (verbs_api::SrqAttrMask::MAX_WR, format!("max_wr={max_wr}")),
                1 => (verbs_api::SrqAttrMask::LIMIT, format!("srq_limit={limit}")),
                _ => (
                    verbs_api::SrqAttrMask::MAX_WR | verbs_api::SrqAttrMask::LIMIT,
                    format!("max_wr={max_wr} srq_limit={limit}"),
                ),
            };
            let attr = SrqAttr {
                max_wr,
                max_sge: 1,
                srq_limit: limit,
            };
            ran(
                v.modify_srq(s, &attr, mask),
                format!("modify_srq s{slot} {args}"),
            )
        }
        Op::AllocMw { slot, pd, type2 } => {
            if st.mw[slot as usize].is_some() {
                return Step::Skipped;
            }
            let Some((p, _)) = &st.pd[pd as usize] else {
                return Step::Skipped;
            };
            let t = if type2 { 2 } else { 1 };
            let ty = if type2 {
                verbs_api::MwType::Type2
            } else {
                verbs_api::MwType::Type1
            };
            match v.alloc_mw(p, ty) {
                Ok(w) => {
                    st.mw[slot as usize] = Some((w, pd, type2, None));
                    ran(Ok(()), format!("let w{slot} = alloc_mw pd{pd} type={t}"))
                }
                Err(e) => ran(Err(e), format!("alloc_mw pd{pd} type={t}")),
            }
        }
        Op::DeallocMw { slot } => {
            let Some((w, ..)) = &st.mw[slot as usize] else {
                return Step::Skipped;
            };
            let r = v.dealloc_mw(w);
            if r.is_ok() {
                st.mw[slot as usize] = None;
            }
            ran(r, format!("dealloc_mw w{slot}"))
        }
        Op::BindMw {
            mw,
            qp,
            mr,
            off,
            len,
            unbind,
        } => {
            let (Some((w, ..)), Some((q, ..))) = (&st.mw[mw as usize], &st.qp[qp as usize]) else {
                return Step::Skipped;
            };
            let m = if unbind {
                None
            } else {
                st.mr[mr as usize].as_ref()
            };
            if !unbind && m.is_none() {
                return Step::Skipped;
            }
            let wr_id = st.next_wr_id;
            st.next_wr_id += 1;
            let bind = verbs_api::MwBind::<V> {
                wr_id,
                send_flags: SendFlags::SIGNALED,
                bind_info: verbs_api::MwBindInfo {
                    mr: m.map(|m| &m.0),
                    addr: m.map_or(0, |m| m.2 + u64::from(off)),
                    length: if unbind { 0 } else { u64::from(len) },
                    mw_access_flags: AccessFlags::REMOTE_WRITE,
                },
            };
            let r = v.bind_mw(q, w, &bind);
            let qpn = st.qp[qp as usize].as_ref().map_or(0, |x| x.3);
            if r.is_ok() {
                st.outstanding.insert(wr_id, (qp, qpn, false));
                st.ordered.insert(wr_id);
                if let Some(x) = st.mw[mw as usize].as_mut() {
                    x.3 = (!unbind).then_some((mr, off));
                }
            }
            let what = if unbind {
                String::new()
            } else {
                format!(" mr=m{mr} addr=m{mr}.addr+{off} length={len}")
            };
            ran(
                r,
                format!("bind_mw q{qp} w{mw}{what} mw_access_flags=REMOTE_WRITE wr_id={wr_id} send_flags=SIGNALED"),
            )
        }
        Op::WriteViaMw { qp, mr, mw } => {
            let (Some((q, _, qt, qpn)), Some((_, _, addr, lkey, _, _)), Some((w, _, _, bound))) = (
                &st.qp[qp as usize],
                &st.mr[mr as usize],
                &st.mw[mw as usize],
            ) else {
                return Step::Skipped;
            };
            let Some((bmr, boff)) = *bound else {
                return Step::Skipped;
            };
            let Some(target) = &st.mr[bmr as usize] else {
                return Step::Skipped;
            };
            if *qt >= 2 {
                return Step::Skipped;
            }
            let Ok(info) = v.mw_info(w) else {
                return Step::Skipped;
            };
            let (qpn, raddr) = (*qpn, target.2 + u64::from(boff));
            let wr_id = st.next_wr_id;
            st.next_wr_id += 1;
            let sg = [Sge {
                addr: *addr,
                length: 8,
                lkey: *lkey,
            }];
            let wr = SendWr {
                wr_id,
                sg_list: &sg,
                opcode: WrOpcode::RdmaWrite,
                send_flags: SendFlags::SIGNALED,
                rdma: RdmaInfo {
                    remote_addr: raddr,
                    rkey: info.rkey,
                },
                ..SendWr::default()
            };
            // SAFETY: as for post_srq_recv.
            #[allow(unsafe_code)]
            let r = unsafe { v.post_send(q, &[wr]) };
            if r.is_ok() {
                st.outstanding.insert(wr_id, (qp, qpn, false));
                st.ordered.insert(wr_id);
            }
            ran(
                r,
                format!("post_send q{qp} wr_id={wr_id} opcode=RDMA_WRITE send_flags=SIGNALED sge=m{mr}:0:8 remote_addr=m{bmr}.addr+{boff} rkey=w{mw}.rkey"),
            )
        }
        Op::LocalInvMw { qp, mw } => {
            let (Some((q, _, qt, qpn)), Some((w, ..))) = (&st.qp[qp as usize], &st.mw[mw as usize])
            else {
                return Step::Skipped;
            };
            if *qt >= 2 {
                return Step::Skipped;
            }
            let qpn = *qpn;
            let Ok(info) = v.mw_info(w) else {
                return Step::Skipped;
            };
            let wr_id = st.next_wr_id;
            st.next_wr_id += 1;
            let wr = SendWr {
                wr_id,
                opcode: WrOpcode::LocalInv,
                send_flags: SendFlags::SIGNALED,
                imm_data: info.rkey,
                ..SendWr::default()
            };
            // SAFETY: names no memory.
            #[allow(unsafe_code)]
            let r = unsafe { v.post_send(q, &[wr]) };
            if r.is_ok() {
                st.outstanding.insert(wr_id, (qp, qpn, false));
                st.ordered.insert(wr_id);
            }
            ran(
                r,
                format!("post_send q{qp} wr_id={wr_id} opcode=LOCAL_INV send_flags=SIGNALED invalidate_rkey=w{mw}.rkey"),
            )
        }
        _ => Step::Skipped,
    }
}

/// rdma_cm beyond ids and addresses: `rdma_create_qp` (RC, UD: automatic
/// CQs, default PD) and `rdma_create_qp_ex` (XRC_SEND), `rdma_destroy_qp`,
/// `rdma_listen`, `rdma_resolve_addr`.
fn exec_cm<V: Verbs>(v: &mut V, st: &mut State<V>, op: &Op) -> Step {
    match *op {
        Op::CmCreateQp { slot, kind } => {
            let Some(id) = &st.cm_id[slot as usize] else {
                return Step::Skipped;
            };
            if st.cm_qp[slot as usize].is_some() {
                return Step::Skipped;
            }
            let (qp_type, name) = match kind {
                0 => (QpType::Rc, "RC"),
                1 => (QpType::Ud, "UD"),
                _ => (QpType::XrcSend, "XRC_SEND"),
            };
            let xrc = qp_type == QpType::XrcSend;
            let mut attr = QpInitAttrEx::<V> {
                qp_type,
                cap: QpCap {
                    max_send_wr: 4,
                    max_recv_wr: if xrc { 0 } else { 4 },
                    max_send_sge: 1,
                    max_recv_sge: if xrc { 0 } else { 1 },
                    max_inline_data: 0,
                },
                ..QpInitAttrEx::default()
            };
            let (r, line) = if xrc {
                (
                    v.rdma_create_qp_ex(id, &mut attr),
                    format!(
                        "rdma_create_qp_ex id{slot} qp_type={name} max_send_wr=4 max_send_sge=1"
                    ),
                )
            } else {
                (
                    v.rdma_create_qp(id, None, &mut attr),
                    format!("rdma_create_qp id{slot} qp_type={name} max_send_wr=4 max_recv_wr=4 max_send_sge=1 max_recv_sge=1"),
                )
            };
            match r {
                Ok(q) => {
                    st.cm_qp[slot as usize] = Some(q);
                    ran(Ok(()), format!("let iq{slot} = {line}"))
                }
                Err(e) => ran(Err(e), line),
            }
        }
        Op::CmDestroyQp { slot } => {
            let Some(id) = &st.cm_id[slot as usize] else {
                return Step::Skipped;
            };
            let r = v.rdma_destroy_qp(id);
            if r.is_ok() {
                st.cm_qp[slot as usize] = None;
            }
            ran(r, format!("rdma_destroy_qp id{slot}"))
        }
        Op::CmListen { slot } => {
            let Some(id) = &st.cm_id[slot as usize] else {
                return Step::Skipped;
            };
            ran(
                v.rdma_listen(id, 4),
                format!("rdma_listen id{slot} backlog=4"),
            )
        }
        Op::CmResolveAddr { slot, dev } => {
            let Some(id) = &st.cm_id[slot as usize] else {
                return Step::Skipped;
            };
            let dst = std::net::SocketAddr::from(([10, 0, dev, 1], 7000));
            ran(
                v.rdma_resolve_addr(id, None, dst, 2000),
                format!("rdma_resolve_addr id{slot} dst={dst} timeout_ms=2000"),
            )
        }
        _ => Step::Skipped,
    }
}

/// The attributes the script's `connect` gives a QP towards a peer on a
/// port like `port` (its defaults: MTU 1024 clamped to the port, timeout
/// 14, retry 7, RNR retry 6, RNR timer 12, one read/atomic; a GRH on
/// Ethernet ports), so that the rendered `connect` line replays.
fn runner_attr(
    port: &verbs_api::PortAttr,
    gid: Option<verbs_api::Gid>,
    dlid: u16,
    dest_qp_num: u32,
    responder: bool,
    atomics: bool,
) -> QpAttr {
    let access = match (responder, atomics) {
        (false, _) => AccessFlags::empty(),
        (true, true) => {
            AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC
        }
        (true, false) => AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ,
    };
    let mtu =
        if port.active_mtu.bytes().is_some() && port.active_mtu.to_raw() < Mtu::Mtu1024.to_raw() {
            port.active_mtu
        } else {
            Mtu::Mtu1024
        };
    let mut attr = QpAttr {
        port_num: 1,
        qp_access_flags: access,
        path_mtu: mtu,
        qkey: 0x1111_1111,
        dest_qp_num,
        min_rnr_timer: 12,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 6,
        max_rd_atomic: 1,
        max_dest_rd_atomic: 1,
        ..QpAttr::default()
    };
    attr.ah_attr.dlid = dlid;
    attr.ah_attr.port_num = 1;
    if port.link_layer == verbs_api::LinkLayer::Ethernet
        || port.flags & verbs_api::QPF_GRH_REQUIRED != 0
    {
        attr.ah_attr.is_global = true;
        attr.ah_attr.grh.dgid = gid.unwrap_or_default();
        attr.ah_attr.grh.hop_limit = 64;
    }
    attr
}

/// Posts on DC and XRC QPs: a DCI or DCT brought up alone, an address
/// handle, a WRITE or SEND from a DCI to a DCT, a SEND from an XRC_INI QP
/// to an XRC SRQ's number.
fn exec_dc_xrc<V: Verbs>(v: &mut V, st: &mut State<V>, op: &Op) -> Step {
    use verbs_api::transitions::{transition_masks, TableFlavor};
    match *op {
        Op::ConnectDc { slot } => {
            let Some((q, pd, qt, own_qpn)) = &st.qp[slot as usize] else {
                return Step::Skipped;
            };
            if *qt != 3 && *qt != 5 {
                return Step::Skipped;
            }
            let dct = *qt == 5;
            let Some((_, ctx)) = &st.pd[*pd as usize] else {
                return Step::Skipped;
            };
            let Some((c, _)) = &st.ctx[*ctx as usize] else {
                return Step::Skipped;
            };
            let Ok(port) = v.query_port(c, 1) else {
                return Step::Skipped;
            };
            let class = if dct {
                verbs_api::QpClass::Dct
            } else {
                verbs_api::QpClass::Dci
            };
            // The attributes of the script's `connect` (its defaults, the
            // QP's own port as the peer): replaying the line gives the
            // same answer.
            let atomics = v
                .query_device(c)
                .map(|a| a.atomic_cap != verbs_api::AtomicCap::None)
                .unwrap_or(false);
            let gid = v.query_gid(c, 1, 0).ok();
            let mut attr = runner_attr(&port, gid, port.lid, *own_qpn, dct, atomics);
            let mut result = Ok(());
            for (from, to) in [
                (QpState::Reset, QpState::Init),
                (QpState::Init, QpState::ReadyToReceive),
                (QpState::ReadyToReceive, QpState::ReadyToSend),
            ] {
                if dct && to == QpState::ReadyToSend {
                    break;
                }
                let Some(masks) = transition_masks(class, from, to, TableFlavor::Kernel) else {
                    break;
                };
                attr.qp_state = to;
                if let Err(e) = v.modify_qp(q, &attr, masks.required | QpAttrMask::STATE) {
                    result = Err(e);
                    break;
                }
            }
            ran(result, format!("connect q{slot}"))
        }
        Op::ConnectXrc { ini, tgt } => {
            let (Some((qi, pi, 4, ni)), Some((qt, _, 6, nt)), Some(tc)) = (
                &st.qp[ini as usize],
                &st.qp[tgt as usize],
                st.tgt_ctx[tgt as usize],
            ) else {
                return Step::Skipped;
            };
            let Some((_, ic)) = &st.pd[*pi as usize] else {
                return Step::Skipped;
            };
            let (Some((ci, _)), Some((ct, _))) = (&st.ctx[*ic as usize], &st.ctx[tc as usize])
            else {
                return Step::Skipped;
            };
            let (Ok(pi_), Ok(pt)) = (v.query_port(ci, 1), v.query_port(ct, 1)) else {
                return Step::Skipped;
            };
            let (gi, gt) = (v.query_gid(ci, 1, 0).ok(), v.query_gid(ct, 1, 0).ok());
            let atomics = |v: &mut V, c: &V::Context| {
                v.query_device(c)
                    .map(|a| a.atomic_cap != verbs_api::AtomicCap::None)
                    .unwrap_or(false)
            };
            let (ai, at) = (atomics(v, ci), atomics(v, ct));
            // Each side's attributes towards the other, as the script's
            // `connect INI TGT` makes them (MTU clamped to both ports).
            let mut attr_i = runner_attr(&pt, gt, pt.lid, *nt, true, ai);
            let mut attr_t = runner_attr(&pi_, gi, pi_.lid, *ni, true, at);
            for a in [&mut attr_i, &mut attr_t] {
                for p in [&pi_, &pt] {
                    if p.active_mtu.bytes().is_some() && p.active_mtu.to_raw() < a.path_mtu.to_raw()
                    {
                        a.path_mtu = p.active_mtu;
                    }
                }
            }
            if pi_.link_layer == verbs_api::LinkLayer::Ethernet
                || (pi_.flags | pt.flags) & verbs_api::QPF_GRH_REQUIRED != 0
            {
                attr_i.ah_attr.is_global = true;
                attr_i.ah_attr.grh.dgid = gt.unwrap_or_default();
                attr_i.ah_attr.grh.hop_limit = 64;
            }
            if pt.link_layer == verbs_api::LinkLayer::Ethernet
                || (pi_.flags | pt.flags) & verbs_api::QPF_GRH_REQUIRED != 0
            {
                attr_t.ah_attr.is_global = true;
                attr_t.ah_attr.grh.dgid = gi.unwrap_or_default();
                attr_t.ah_attr.grh.hop_limit = 64;
            }
            let plan = [
                (qi, verbs_api::QpClass::XrcIni, attr_i),
                (qt, verbs_api::QpClass::XrcTgt, attr_t),
            ];
            let mut result = Ok(());
            'steps: for (from, to) in [
                (QpState::Reset, QpState::Init),
                (QpState::Init, QpState::ReadyToReceive),
                (QpState::ReadyToReceive, QpState::ReadyToSend),
            ] {
                for (q, class, attr) in &plan {
                    if *class == verbs_api::QpClass::XrcTgt && to == QpState::ReadyToSend {
                        continue;
                    }
                    let Some(masks) = transition_masks(*class, from, to, TableFlavor::Kernel)
                    else {
                        continue;
                    };
                    let attr = QpAttr {
                        qp_state: to,
                        ..*attr
                    };
                    if let Err(e) = v.modify_qp(q, &attr, masks.required | QpAttrMask::STATE) {
                        result = Err(e);
                        break 'steps;
                    }
                }
            }
            ran(result, format!("connect q{ini} q{tgt}"))
        }
        Op::CreateAh { slot, pd } => {
            if st.ah[slot as usize].is_some() {
                return Step::Skipped;
            }
            let Some((p, ctx)) = &st.pd[pd as usize] else {
                return Step::Skipped;
            };
            let Some((c, _)) = &st.ctx[*ctx as usize] else {
                return Step::Skipped;
            };
            let Ok(port) = v.query_port(c, 1) else {
                return Step::Skipped;
            };
            if port.link_layer == verbs_api::LinkLayer::Ethernet {
                // RoCE needs a GRH: the InfiniBand seeds cover DC posts.
                return Step::Skipped;
            }
            let attr = verbs_api::AhAttr {
                dlid: port.lid,
                port_num: 1,
                ..verbs_api::AhAttr::default()
            };
            let line = format!("create_ah pd{pd} dlid={} port_num=1", port.lid);
            match v.create_ah(p, &attr) {
                Ok(a) => {
                    st.ah[slot as usize] = Some((a, pd));
                    ran(Ok(()), format!("let ah{slot} = {line}"))
                }
                Err(e) => ran(Err(e), line),
            }
        }
        Op::PostDc {
            dci,
            dct,
            ah,
            mr,
            remote,
            send,
        } => {
            let (
                Some((q, _, 3, qpn)),
                Some((_, _, 5, dctn)),
                Some((a, _)),
                Some((_, _, addr, lkey, _, _)),
                Some((_, _, raddr, _, rkey, _)),
            ) = (
                &st.qp[dci as usize],
                &st.qp[dct as usize],
                &st.ah[ah as usize],
                &st.mr[mr as usize],
                &st.mr[remote as usize],
            )
            else {
                return Step::Skipped;
            };
            // A DCT's number is given at RTR (read it live, as the
            // script's `q.qp_num` does).
            let dctn = st.qp[dct as usize]
                .as_ref()
                .and_then(|d| v.qp_num(&d.0).ok())
                .unwrap_or(*dctn);
            let qpn = *qpn;
            let wr_id = st.next_wr_id;
            st.next_wr_id += 1;
            let sg = [Sge {
                addr: *addr,
                length: 64,
                lkey: *lkey,
            }];
            let opcode = if send {
                WrOpcode::Send
            } else {
                WrOpcode::RdmaWrite
            };
            let wr = SendWr {
                wr_id,
                sg_list: &sg,
                opcode,
                send_flags: SendFlags::SIGNALED,
                rdma: RdmaInfo {
                    remote_addr: *raddr,
                    rkey: *rkey,
                },
                dc: Some(verbs_api::DcInfo {
                    ah: a,
                    remote_dctn: dctn,
                    remote_dc_key: 0x5157,
                    stream_id: 0,
                }),
                ..SendWr::default()
            };
            // SAFETY: as for post_srq_recv.
            #[allow(unsafe_code)]
            let r = unsafe { v.post_send(q, &[wr]) };
            if r.is_ok() {
                st.outstanding.insert(wr_id, (dci, qpn, false));
            }
            let remote_s = if send {
                String::new()
            } else {
                format!(" remote=m{remote}:0")
            };
            ran(
                r,
                format!("post_send q{dci} wr_id={wr_id} opcode={opcode} send_flags=SIGNALED sge=m{mr}:0:64{remote_s} dc_ah=ah{ah} dc_dctn=q{dct}.qp_num dc_key=0x5157"),
            )
        }
        Op::PostXrc { qp, srq, mr } => {
            let (Some((q, _, 4, qpn)), Some(_), Some(n), Some((_, _, addr, lkey, _, _))) = (
                &st.qp[qp as usize],
                &st.srq[srq as usize],
                st.srqn[srq as usize],
                &st.mr[mr as usize],
            ) else {
                return Step::Skipped;
            };
            let qpn = *qpn;
            let wr_id = st.next_wr_id;
            st.next_wr_id += 1;
            let sg = [Sge {
                addr: *addr,
                length: 32,
                lkey: *lkey,
            }];
            let wr = SendWr {
                wr_id,
                sg_list: &sg,
                opcode: WrOpcode::Send,
                send_flags: SendFlags::SIGNALED,
                remote_srqn: n,
                ..SendWr::default()
            };
            // SAFETY: as for post_srq_recv.
            #[allow(unsafe_code)]
            let r = unsafe { v.post_send(q, &[wr]) };
            if r.is_ok() {
                st.outstanding.insert(wr_id, (qp, qpn, false));
            }
            ran(
                r,
                format!("post_send q{qp} wr_id={wr_id} opcode=SEND send_flags=SIGNALED sge=m{mr}:0:32 remote_srqn={n}"),
            )
        }
        _ => Step::Skipped,
    }
}

/// RESET→INIT→RTR→RTS of two RC/UC QPs towards each other, through the
/// script's `connect` with the same attributes.
fn connect<V: Verbs>(
    v: &mut V,
    st: &mut State<V>,
    a: u8,
    b: u8,
    mtu: u8,
    retry: u8,
    rnr: u8,
) -> Step {
    // The peer: slot `b`, or the next live QP of `a`'s type after it.
    let Some((_, _, ta, _)) = &st.qp[a as usize] else {
        return Step::Skipped;
    };
    let ta = *ta;
    let Some(b) = (0..SLOTS)
        .map(|k| (b + k) % SLOTS)
        .find(|&k| k != a && st.qp[k as usize].as_ref().is_some_and(|q| q.2 == ta))
    else {
        return Step::Skipped;
    };
    // The pair is reset first: what was posted on it will not complete.
    if let (Some(x), Some(y)) = (&st.qp[a as usize], &st.qp[b as usize]) {
        if x.2 < 2 {
            let (na, nb) = (x.3, y.3);
            st.forget_order(a, na);
            st.forget_order(b, nb);
        }
    }
    let (Some((qa, pa, ta, na)), Some((qb, pb, _, nb))) = (&st.qp[a as usize], &st.qp[b as usize])
    else {
        return Step::Skipped;
    };
    if *ta >= 2 {
        return Step::Skipped;
    }
    let (Some((_, ca)), Some((_, cb))) = (&st.pd[*pa as usize], &st.pd[*pb as usize]) else {
        return Step::Skipped;
    };
    let (Some((ctx_a, _)), Some((ctx_b, _))) = (&st.ctx[*ca as usize], &st.ctx[*cb as usize])
    else {
        return Step::Skipped;
    };
    // From wherever the QPs are: back to RESET first (each a modify_qp).
    let mut lines = String::new();
    for (q, name) in [(qa, a), (qb, b)] {
        let state = v.query_qp(q, QpAttrMask::STATE).map(|(x, _)| x.qp_state);
        if !matches!(state, Ok(QpState::Reset)) {
            let attr = QpAttr {
                qp_state: QpState::Reset,
                ..QpAttr::default()
            };
            if let Err(e) = v.modify_qp(q, &attr, QpAttrMask::STATE) {
                return ran(Err(e), format!("modify_qp q{name} qp_state=RESET"));
            }
            let _ = writeln!(lines, "modify_qp q{name} qp_state=RESET");
        }
    }
    let mtu = [Mtu::Mtu256, Mtu::Mtu1024, Mtu::Mtu4096][mtu as usize % 3];
    let lid = |v: &mut V, c: &V::Context| v.query_port(c, 1).map(|p| p.lid).unwrap_or(0);
    let (la, lb) = (lid(v, ctx_a), lid(v, ctx_b));
    let gid = |v: &mut V, c: &V::Context| {
        v.query_port(c, 1)
            .ok()
            .filter(|p| p.link_layer == verbs_api::LinkLayer::Ethernet)
            .and_then(|_| v.query_gid(c, 1, 0).ok())
    };
    let (ga, gb) = (gid(v, ctx_a), gid(v, ctx_b));
    let rc = *ta == 0;
    let mut result = Ok(());
    'outer: for step in 0..3 {
        for (q, peer_qpn, peer_lid, peer_gid) in [(qa, *nb, lb, gb), (qb, *na, la, ga)] {
            let mut attr = QpAttr {
                port_num: 1,
                qp_access_flags: AccessFlags::REMOTE_WRITE
                    | if rc {
                        AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC
                    } else {
                        AccessFlags::empty()
                    },
                path_mtu: mtu,
                dest_qp_num: peer_qpn,
                max_dest_rd_atomic: 1,
                min_rnr_timer: 1,
                timeout: 10,
                retry_cnt: retry,
                rnr_retry: rnr,
                max_rd_atomic: 1,
                ..QpAttr::default()
            };
            attr.ah_attr.dlid = peer_lid;
            attr.ah_attr.port_num = 1;
            if let Some(g) = peer_gid {
                attr.ah_attr.is_global = true;
                attr.ah_attr.grh.dgid = g;
                attr.ah_attr.grh.hop_limit = 64;
            }
            let (state, mask) = match (step, rc) {
                (0, _) => (
                    QpState::Init,
                    QpAttrMask::STATE
                        | QpAttrMask::PKEY_INDEX
                        | QpAttrMask::PORT
                        | QpAttrMask::ACCESS_FLAGS,
                ),
                (1, true) => (
                    QpState::ReadyToReceive,
                    QpAttrMask::STATE
                        | QpAttrMask::AV
                        | QpAttrMask::PATH_MTU
                        | QpAttrMask::DEST_QPN
                        | QpAttrMask::RQ_PSN
                        | QpAttrMask::MAX_DEST_RD_ATOMIC
                        | QpAttrMask::MIN_RNR_TIMER,
                ),
                (1, false) => (
                    QpState::ReadyToReceive,
                    QpAttrMask::STATE
                        | QpAttrMask::AV
                        | QpAttrMask::PATH_MTU
                        | QpAttrMask::DEST_QPN
                        | QpAttrMask::RQ_PSN,
                ),
                (_, true) => (
                    QpState::ReadyToSend,
                    QpAttrMask::STATE
                        | QpAttrMask::TIMEOUT
                        | QpAttrMask::RETRY_CNT
                        | QpAttrMask::RNR_RETRY
                        | QpAttrMask::SQ_PSN
                        | QpAttrMask::MAX_QP_RD_ATOMIC,
                ),
                (_, false) => (QpState::ReadyToSend, QpAttrMask::STATE | QpAttrMask::SQ_PSN),
            };
            attr.qp_state = state;
            if let Err(e) = v.modify_qp(q, &attr, mask) {
                result = Err(e);
                break 'outer;
            }
        }
    }
    let up = result.is_ok();
    st.rts[a as usize] = up;
    st.rts[b as usize] = up;
    ran(
        result,
        format!(
            "{lines}connect q{a} q{b} path_mtu={} timeout=10 retry_cnt={retry} rnr_retry={rnr} max_rd_atomic=1 max_dest_rd_atomic=1 min_rnr_timer=1",
            mtu.bytes().unwrap_or(0)
        ),
    )
}

/// Destroys everything, children first; any refusal is a broken
/// invariant (the order is the documented one).
fn teardown<V: Verbs>(v: &mut V, st: &mut State<V>) -> Result<(), String> {
    let _ = v.sim_control(SimCommand::ClearFaults);
    for c in st.ctx.iter().flatten() {
        while let Ok(Some(ev)) = v.get_async_event(&c.0) {
            let _ = v.ack_async_event(&ev);
        }
    }
    for (slot, q) in st.cm_qp.iter_mut().enumerate() {
        if q.take().is_some() {
            if let Some(id) = &st.cm_id[slot] {
                v.rdma_destroy_qp(id)
                    .map_err(|e| format!("teardown: {e}"))?;
            }
        }
    }
    for id in st.cm_id.iter_mut() {
        if let Some(i) = id.take() {
            // Acknowledge whatever the channel still holds first.
            if let Some(ch) = &st.cm_ch {
                while let Ok(Some(ev)) = v.rdma_get_cm_event(ch) {
                    let _ = v.rdma_ack_cm_event(ev);
                }
            }
            v.rdma_destroy_id(&i)
                .map_err(|e| format!("teardown: {e}"))?;
        }
    }
    if let Some(ch) = st.cm_ch.take() {
        v.rdma_destroy_event_channel(&ch)
            .map_err(|e| format!("teardown: {e}"))?;
    }
    for q in st.qp.iter_mut() {
        if let Some((qp, ..)) = q.take() {
            v.destroy_qp(&qp).map_err(|e| format!("teardown: {e}"))?;
        }
    }
    for w in st.mw.iter_mut() {
        if let Some((w, ..)) = w.take() {
            v.dealloc_mw(&w).map_err(|e| format!("teardown: {e}"))?;
        }
    }
    for a in st.ah.iter_mut() {
        if let Some((a, _)) = a.take() {
            v.destroy_ah(&a).map_err(|e| format!("teardown: {e}"))?;
        }
    }
    for (x, _) in st.xrcd.iter().flatten() {
        for &n in &st.rcv_qpns {
            let _ = v.unreg_xrc_rcv_qp(x, n);
        }
    }
    for s in st.srq.iter_mut() {
        if let Some((s, _)) = s.take() {
            v.destroy_srq(&s).map_err(|e| format!("teardown: {e}"))?;
        }
    }
    for x in st.xrcd.iter_mut() {
        if let Some((x, _)) = x.take() {
            v.close_xrc_domain(&x)
                .map_err(|e| format!("teardown: {e}"))?;
        }
    }
    for m in st.mr.iter_mut() {
        if let Some((m, ..)) = m.take() {
            v.dereg_mr(&m).map_err(|e| format!("teardown: {e}"))?;
        }
    }
    for c in st.cq.iter_mut() {
        if let Some((c, _)) = c.take() {
            v.destroy_cq(&c).map_err(|e| format!("teardown: {e}"))?;
        }
    }
    for p in st.pd.iter_mut() {
        if let Some((p, _)) = p.take() {
            v.dealloc_pd(&p).map_err(|e| format!("teardown: {e}"))?;
        }
    }
    for c in st.ctx.iter_mut() {
        if let Some((c, _)) = c.take() {
            while let Ok(Some(ev)) = v.get_async_event(&c) {
                let _ = v.ack_async_event(&ev);
            }
            v.close_device(&c).map_err(|e| format!("teardown: {e}"))?;
        }
    }
    Ok(())
}

/// A random sequence of verb calls for a property test (a `proptest`
/// value): valid and invalid calls across the families the swarm knows,
/// with the families' weights drawn per case. Compose it with your own
/// invariant through [`check_calls`]; `proptest` shrinks a failing case by
/// dropping calls.
#[derive(Clone)]
pub struct Calls {
    seed: u64,
    ops: Vec<Op>,
}

impl core::fmt::Debug for Calls {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} calls (seed {})", self.ops.len(), self.seed)
    }
}

/// The strategy of [`Calls`]: `len` calls (a range of lengths), the
/// simulator seed drawn too.
pub fn calls(len: core::ops::Range<usize>) -> impl proptest::strategy::Strategy<Value = Calls> {
    use proptest::prelude::*;
    (any::<u64>(), proptest::collection::vec(any::<u64>(), len)).prop_map(|(seed, draws)| {
        let mut r = Rng(seed ^ 0x5157_4152_4d00_0000);
        let mut weights = [0u64; FAMILIES];
        for w in &mut weights {
            *w = if r.chance(75) { 1 + r.below(5) } else { 0 };
        }
        weights[F_CONTROL] = weights[F_CONTROL].max(2);
        weights[F_QP] = weights[F_QP].max(1);
        let ops = draws
            .into_iter()
            .map(|d| gen_op(&mut Rng(d), &weights))
            .collect();
        Calls {
            seed: seed % 1_000_000,
            ops,
        }
    })
}

/// Runs `calls` on a backend from `make(seed)`, checking the swarm's
/// invariants (no panic, a refused call changes nothing `snapshot` shows,
/// completions match posted requests in order, the teardown leaves
/// `snapshot` saying `nothing`) and `invariant` after every call.
///
/// The panic hook is left alone: a panic in a call is caught and reported
/// in the error, and the hook (yours, libtest's) sees it as it sees any
/// other, so other tests of the same binary keep their failure messages.
///
/// # Errors
/// What broke, followed by the calls as a `.verbs` script with the seed
/// in its headers: pass it to `proptest::test_runner::TestCaseError::fail`.
/// `verbsim run` on the script replays the calls and checks the swarm's
/// own invariants; `invariant` is yours and is not in the script, so a
/// failure of it shows only when your test runs the calls again (the
/// error says so).
pub fn check_calls<V: Verbs>(
    calls: &Calls,
    make: &dyn Fn(u64) -> V,
    snapshot: &dyn Fn(&V) -> String,
    invariant: &mut dyn FnMut(&mut V) -> Result<(), String>,
) -> Result<(), String> {
    let r = execute_checked(calls.seed, &calls.ops, make, snapshot, None, invariant);
    r.map_err(|(at, why)| {
        let cfg = SwarmConfig {
            seed: calls.seed,
            calls: calls.ops.len(),
            devices: "",
        };
        let ops = &calls.ops[..=at.min(calls.ops.len().saturating_sub(1))];
        let yours = if why.contains("the invariant failed") {
            "\nnote: the script below replays the calls; `verbsim run` on it checks the \
             swarm's invariants, not yours (your test checks yours: run it again)"
        } else {
            ""
        };
        format!(
            "{why}{yours}\n--- the calls as a script (VERBS_SIM_SEED={}) ---\n{}",
            calls.seed,
            render(&cfg, ops, make, "property-test failure")
        )
    })
}
