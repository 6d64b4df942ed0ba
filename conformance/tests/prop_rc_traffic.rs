//! Property test of RC traffic between two QPs on two devices under seeded
//! packet faults (data-path.md §3.1, §3.2, §3.3, §4.2 rows 15 and 19, §5.1,
//! §5.2, §7).
//!
//! A case is a list of 1–16 work requests (SEND, SEND_WITH_IMM, RDMA_WRITE,
//! RDMA_WRITE_WITH_IMM, RDMA_READ, ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD)
//! with sizes from 0 to 3½ path MTUs (boundaries favoured), some of them
//! unsignalled, posted at once from QP `qa` (device 0) to QP `qb` (device 1)
//! after fault rules on every packet (drop, duplicate, delay, reorder, each
//! at 0–5 %) were installed; the path MTU (256/512/1024), `timeout` (1–18),
//! `retry_cnt` (0–7), `max_rd_atomic` (1–4), the start PSNs (near the 24-bit
//! wrap too), the device profile and the simulator seed vary as well.
//!
//! Each case must end in one of the two outcomes the spec allows:
//!
//! * **delivered**: every message executed exactly once, in order and byte
//!   exact — each signalled WR has exactly one SUCCESS completion, in
//!   posting order, with the right opcode (and `byte_len` for READs and
//!   atomics, §6.2); each receive completes in order with the right
//!   `byte_len`, `imm_data` and `wc_flags`; receive buffers, written and
//!   read memory and atomic words hold exactly what the messages put there
//!   (and nothing else changed); both QPs stay in RTS.
//! * **retries exhausted** (§4.2 row 15, §5.2): the signalled WRs before the
//!   failing one succeed as above, the failing WR completes with
//!   RETRY_EXC_ERR (signalled or not), every later WR with WR_FLUSH_ERR in
//!   order (§4.2 row 19), the requester is in ERR and the responder in RTS;
//!   everything acknowledged before the failure is in memory exactly, the
//!   rest is either untouched or written (per byte; atomics as a whole
//!   word: applied at most once), and the responder's receive completions
//!   are an in-order, byte-exact prefix covering at least the acknowledged
//!   messages.
//!
//! In both outcomes the responder is then moved to ERR and its remaining
//! receives must flush in order, so every receive WR gets exactly one
//! completion. A failing case prints the shrunk case as a `.verbs` script
//! (seed and profiles in its headers); its `check` lines carry the expected
//! bytes of everything the outcome makes definite.
//!
//! Cases: 1024 by default (`PROPTEST_CASES` overrides; about 2 s in a debug
//! build); the case runner is generic over `V: Verbs`. A second test checks
//! that the printed script replays through `conformance::run_script`.

mod prop_common;

use backend_sim::{SimConfig, SimVerbs};
use prop_common::datapath::*;
use prop_common::*;
use proptest::prelude::*;
use verbs_api::*;

/// Receive WR ids are `RECV_WR_ID + k` (send WR ids are the message index).
const RECV_WR_ID: u64 = 1000;
/// At most this many messages per case.
const MSGS_MAX: usize = 16;

/// What a message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Send,
    SendImm,
    Write,
    WriteImm,
    Read,
    CmpSwp,
    FetchAdd,
}

impl Kind {
    fn opcode(self) -> WrOpcode {
        match self {
            Self::Send => WrOpcode::Send,
            Self::SendImm => WrOpcode::SendWithImm,
            Self::Write => WrOpcode::RdmaWrite,
            Self::WriteImm => WrOpcode::RdmaWriteWithImm,
            Self::Read => WrOpcode::RdmaRead,
            Self::CmpSwp => WrOpcode::AtomicCmpAndSwp,
            Self::FetchAdd => WrOpcode::AtomicFetchAndAdd,
        }
    }

    /// The requester's completion opcode (§2.2).
    fn wc_opcode(self) -> WcOpcode {
        match self {
            Self::Send | Self::SendImm => WcOpcode::Send,
            Self::Write | Self::WriteImm => WcOpcode::RdmaWrite,
            Self::Read => WcOpcode::RdmaRead,
            Self::CmpSwp => WcOpcode::CompSwap,
            Self::FetchAdd => WcOpcode::FetchAdd,
        }
    }

    /// Whether the message consumes a receive WQE (§3.2).
    fn consumes_recv(self) -> bool {
        matches!(self, Self::Send | Self::SendImm | Self::WriteImm)
    }

    fn has_imm(self) -> bool {
        matches!(self, Self::SendImm | Self::WriteImm)
    }

    fn is_atomic(self) -> bool {
        matches!(self, Self::CmpSwp | Self::FetchAdd)
    }

    /// Whether the payload goes from the requester's memory to the responder.
    fn carries_payload(self) -> bool {
        matches!(
            self,
            Self::Send | Self::SendImm | Self::Write | Self::WriteImm
        )
    }
}

/// A message size, resolved against the path MTU when the case runs (so
/// shrinking the MTU keeps the size's meaning).
#[derive(Clone, Copy, Debug)]
enum Size {
    /// One of the interesting lengths (0, 1, MTU ± 1, 2 MTU, 3 MTU, …).
    Boundary(u8),
    /// Any length up to the maximum.
    Any(u32),
}

/// One generated work request.
#[derive(Clone, Copy, Debug)]
struct Msg {
    kind: Kind,
    size: Size,
    imm: u32,
    signaled: bool,
    /// CMP_AND_SWP: whether `compare_add` equals the target word.
    hit: bool,
    /// FETCH_AND_ADD: the addend.
    add: u64,
}

/// Fault rates (parts per million, 0 = no rule) on every packet.
#[derive(Clone, Copy, Debug)]
struct Faults {
    drop_ppm: u32,
    duplicate_ppm: u32,
    delay_ppm: u32,
    delay_ns: u64,
    reorder_ppm: u32,
    window: u32,
}

impl Faults {
    /// The rules to install, in order.
    fn rules(&self) -> Vec<(FaultAction, u32)> {
        [
            (FaultAction::Drop, self.drop_ppm),
            (FaultAction::Duplicate, self.duplicate_ppm),
            (FaultAction::DelayNs(self.delay_ns), self.delay_ppm),
            (FaultAction::Reorder(self.window), self.reorder_ppm),
        ]
        .into_iter()
        .filter(|(_, ppm)| *ppm > 0)
        .collect()
    }
}

/// One case.
#[derive(Clone, Debug)]
struct TrafficCase {
    seed: u64,
    profile: &'static str,
    mtu: Mtu,
    timeout: u8,
    retry_cnt: u8,
    max_rd_atomic: u8,
    /// `qa`'s send PSN (`qb`'s receive PSN).
    psn_a: u32,
    /// `qb`'s send PSN (`qa`'s receive PSN).
    psn_b: u32,
    faults: Faults,
    msgs: Vec<Msg>,
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Send),
        Just(Kind::SendImm),
        Just(Kind::Write),
        Just(Kind::WriteImm),
        Just(Kind::Read),
        Just(Kind::CmpSwp),
        Just(Kind::FetchAdd),
    ]
}

fn msg() -> impl Strategy<Value = Msg> {
    (
        kind(),
        prop_oneof![
            (0u8..10).prop_map(Size::Boundary),
            any::<u32>().prop_map(Size::Any)
        ],
        any::<u32>(),
        prop::bool::weighted(0.8),
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(|(kind, size, imm, signaled, hit, add)| Msg {
            kind,
            size,
            imm,
            signaled,
            hit,
            add,
        })
}

fn rate() -> impl Strategy<Value = u32> {
    prop_oneof![2 => Just(0u32), 3 => 1u32..=50_000]
}

fn faults() -> impl Strategy<Value = Faults> {
    (rate(), rate(), rate(), 500u64..=100_000, rate(), 1u32..=4).prop_map(
        |(drop_ppm, duplicate_ppm, delay_ppm, delay_ns, reorder_ppm, window)| Faults {
            drop_ppm,
            duplicate_ppm,
            delay_ppm,
            delay_ns,
            reorder_ppm,
            window,
        },
    )
}

fn psn() -> impl Strategy<Value = u32> {
    prop_oneof![0u32..16, 0xff_fff0u32..=0xff_ffff, 0u32..=0xff_ffff]
}

fn traffic_case() -> impl Strategy<Value = TrafficCase> {
    (
        0u64..1000,
        prop::sample::select(PROFILES.to_vec()),
        prop::sample::select(vec![Mtu::Mtu256, Mtu::Mtu512, Mtu::Mtu1024]),
        1u8..=18,
        0u8..=7,
        1u8..=4,
        psn(),
        psn(),
        faults(),
        prop::collection::vec(msg(), 1..=MSGS_MAX),
    )
        .prop_map(
            |(
                seed,
                profile,
                mtu,
                timeout,
                retry_cnt,
                max_rd_atomic,
                psn_a,
                psn_b,
                faults,
                msgs,
            )| {
                TrafficCase {
                    seed,
                    profile,
                    mtu,
                    timeout,
                    retry_cnt,
                    max_rd_atomic,
                    psn_a,
                    psn_b,
                    faults,
                    msgs,
                }
            },
        )
}

// ---------------------------------------------------------------------------
// What the case means: lengths, memory layout, contents

/// Payload byte `off` of stream `tag`: differs between messages and between
/// the packets of one message.
fn pattern(tag: u64, off: usize) -> u8 {
    let off = off as u64;
    (tag.wrapping_mul(0x9d) ^ off.wrapping_mul(0x3b) ^ (off >> 8).wrapping_mul(0x51)) as u8
}

fn payload(tag: u64, len: u32) -> Vec<u8> {
    (0..len as usize).map(|k| pattern(tag, k)).collect()
}

/// The tag of the bytes an RDMA READ of message `i` fetches.
fn read_tag(i: usize) -> u64 {
    500 + i as u64
}

/// The word an atomic of message `i` finds at its target.
fn atomic_initial(i: usize) -> u64 {
    0x8000_0000_0000_0000 ^ 0x0101_0101_0101_0101u64.wrapping_mul(i as u64 + 3)
}

/// CMP_AND_SWP's `swap` for message `i`.
fn atomic_swap(i: usize) -> u64 {
    !atomic_initial(i)
}

/// CMP_AND_SWP's `compare_add` for message `i`.
fn atomic_compare(i: usize, hit: bool) -> u64 {
    if hit {
        atomic_initial(i)
    } else {
        atomic_initial(i) ^ 1
    }
}

/// The word an atomic of message `m` (index `i`) leaves at its target.
fn atomic_result(i: usize, m: &Msg) -> u64 {
    let old = atomic_initial(i);
    match m.kind {
        Kind::CmpSwp if m.hit => atomic_swap(i),
        Kind::FetchAdd => old.wrapping_add(m.add),
        _ => old,
    }
}

fn rounded8(n: u32) -> u64 {
    u64::from(n).div_ceil(8) * 8
}

/// Lengths and where everything lives: message `i` has `local[i]` in `ma`
/// (device 0) and `remote[i]` in `mb` (device 1); receive `k` is
/// `recv_off[k]` in `mb` and is consumed by message `recv_msg[k]`.
struct Plan {
    lens: Vec<u32>,
    signaled: Vec<bool>,
    local: Vec<u64>,
    remote: Vec<u64>,
    recv_msg: Vec<usize>,
    recv_of: Vec<Option<usize>>,
    recv_off: Vec<u64>,
    recv_len: u32,
    len_a: usize,
    len_b: usize,
}

fn plan(case: &TrafficCase) -> Plan {
    let mtu = case.mtu.bytes().expect("a generated MTU is known");
    let max = 3 * mtu + mtu / 2;
    let lens: Vec<u32> = case
        .msgs
        .iter()
        .map(|m| {
            if m.kind.is_atomic() {
                8
            } else {
                match m.size {
                    Size::Boundary(b) => [
                        0,
                        1,
                        mtu - 1,
                        mtu,
                        mtu + 1,
                        2 * mtu,
                        2 * mtu + 1,
                        3 * mtu,
                        3 * mtu + 1,
                        max,
                    ][usize::from(b) % 10],
                    Size::Any(r) => r % (max + 1),
                }
            }
        })
        .collect();
    let n = case.msgs.len();
    // The last WR is always signalled, so "everything completed" is observable.
    let signaled: Vec<bool> = (0..n)
        .map(|i| case.msgs[i].signaled || i + 1 == n)
        .collect();
    let (mut lo, mut ro) = (0u64, 0u64);
    let (mut local, mut remote) = (Vec::new(), Vec::new());
    for &len in &lens {
        local.push(lo);
        remote.push(ro);
        lo += rounded8(len).max(8);
        ro += rounded8(len).max(8);
    }
    let recv_len = u32::try_from(rounded8(max)).expect("small");
    let mut recv_msg = Vec::new();
    let mut recv_of = vec![None; n];
    let mut recv_off = Vec::new();
    for (i, m) in case.msgs.iter().enumerate() {
        if m.kind.consumes_recv() {
            recv_of[i] = Some(recv_msg.len());
            recv_msg.push(i);
            recv_off.push(ro);
            ro += u64::from(recv_len);
        }
    }
    Plan {
        lens,
        signaled,
        local,
        remote,
        recv_msg,
        recv_of,
        recv_off,
        recv_len,
        len_a: usize::try_from(lo.max(8)).expect("small"),
        len_b: usize::try_from(ro.max(8)).expect("small"),
    }
}

/// What may be in one region after the case: `new` for sure, or — for a
/// message whose fate the outcome leaves open — `old` or `new` per byte
/// (`whole`: all of `old` or all of `new`, for atomics).
struct Span {
    mr: usize,
    off: usize,
    old: Vec<u8>,
    new: Vec<u8>,
    whole: bool,
    what: String,
}

/// The memory the outcome allows: `want` for every byte outside `open`.
struct MemModel {
    want: [Vec<u8>; 2],
    open: Vec<Span>,
    /// Regions whose contents are definite, for `check` lines: (mr, offset, bytes, is_u64).
    definite: Vec<(usize, u64, Vec<u8>, bool)>,
}

/// The bytes before any message ran: payload sources in `ma`, READ
/// sources and atomic target words in `mb`.
fn initial_memory(case: &TrafficCase, p: &Plan) -> [Vec<u8>; 2] {
    let mut a = vec![0u8; p.len_a];
    let mut b = vec![0u8; p.len_b];
    for (i, m) in case.msgs.iter().enumerate() {
        let len = p.lens[i];
        if m.kind.carries_payload() {
            let at = p.local[i] as usize;
            a[at..at + len as usize].copy_from_slice(&payload(i as u64, len));
        }
        let at = p.remote[i] as usize;
        match m.kind {
            Kind::Read => b[at..at + len as usize].copy_from_slice(&payload(read_tag(i), len)),
            Kind::CmpSwp | Kind::FetchAdd => {
                b[at..at + 8].copy_from_slice(&atomic_initial(i).to_le_bytes())
            }
            _ => {}
        }
    }
    [a, b]
}

/// The memory after the case when messages before `acked` were
/// acknowledged and the first `recv_ok` receives completed successfully.
fn expected_memory(case: &TrafficCase, p: &Plan, acked: usize, recv_ok: usize) -> MemModel {
    let mut model = MemModel {
        want: initial_memory(case, p),
        open: Vec::new(),
        definite: Vec::new(),
    };
    for (i, m) in case.msgs.iter().enumerate() {
        let len = p.lens[i];
        let received = p.recv_of[i].is_some_and(|k| k < recv_ok);
        let definite = i < acked || received;
        let mut effects: Vec<(usize, u64, Vec<u8>, bool)> = Vec::new();
        match m.kind {
            Kind::Send | Kind::SendImm => {
                let k = p.recv_of[i].expect("a send consumes a receive");
                effects.push((1, p.recv_off[k], payload(i as u64, len), false));
            }
            Kind::Write | Kind::WriteImm => {
                effects.push((1, p.remote[i], payload(i as u64, len), false));
            }
            Kind::Read => effects.push((0, p.local[i], payload(read_tag(i), len), false)),
            Kind::CmpSwp | Kind::FetchAdd => {
                effects.push((
                    1,
                    p.remote[i],
                    atomic_result(i, m).to_le_bytes().to_vec(),
                    true,
                ));
                effects.push((
                    0,
                    p.local[i],
                    atomic_initial(i).to_le_bytes().to_vec(),
                    true,
                ));
            }
        }
        for (mr, off, new, is_word) in effects {
            let at = off as usize;
            if definite {
                model.want[mr][at..at + new.len()].copy_from_slice(&new);
                model.definite.push((mr, off, new, is_word));
            } else {
                let old = model.want[mr][at..at + new.len()].to_vec();
                model.open.push(Span {
                    mr,
                    off: at,
                    old,
                    new,
                    whole: is_word,
                    what: format!("message {i} ({})", m.kind.opcode().name()),
                });
            }
        }
    }
    model
}

/// Compares the final memory with the model; the first violation, named.
fn check_memory(model: &MemModel, got: [&[u8]; 2]) -> Result<(), String> {
    const NAMES: [&str; 2] = ["ma", "mb"];
    for mr in 0..2 {
        let (want, got) = (&model.want[mr], got[mr]);
        if want.len() != got.len() {
            return Err(format!(
                "{} has {} bytes, expected {}",
                NAMES[mr],
                got.len(),
                want.len()
            ));
        }
        let mut open = vec![false; want.len()];
        for s in model.open.iter().filter(|s| s.mr == mr) {
            let g = &got[s.off..s.off + s.new.len()];
            if s.whole {
                if g != s.old.as_slice() && g != s.new.as_slice() {
                    return Err(format!(
                        "{} offset {}: {}: the word is {:#x}, neither the old {:#x} nor the new {:#x} (applied twice?)",
                        NAMES[mr],
                        s.off,
                        s.what,
                        u64::from_le_bytes(g.try_into().expect("8 bytes")),
                        u64::from_le_bytes(s.old.as_slice().try_into().expect("8 bytes")),
                        u64::from_le_bytes(s.new.as_slice().try_into().expect("8 bytes")),
                    ));
                }
            } else if let Some(k) = (0..g.len()).find(|&k| g[k] != s.old[k] && g[k] != s.new[k]) {
                return Err(format!(
                    "{} offset {}: {} left byte {:#04x}, neither the old {:#04x} nor the new {:#04x}",
                    NAMES[mr],
                    s.off + k,
                    s.what,
                    g[k],
                    s.old[k],
                    s.new[k]
                ));
            }
            open[s.off..s.off + s.new.len()].fill(true);
        }
        if let Some(k) = (0..want.len()).find(|&k| !open[k] && got[k] != want[k]) {
            let region = model
                .definite
                .iter()
                .find(|(m, off, bytes, _)| {
                    *m == mr && (*off as usize..*off as usize + bytes.len()).contains(&k)
                })
                .map_or_else(
                    || "outside every message's target (a stray write)".to_owned(),
                    |(_, off, _, _)| format!("in the region at offset {off}"),
                );
            return Err(format!(
                "{} byte {k} is {:#04x}, expected {:#04x}, {region}",
                NAMES[mr], got[k], want[k]
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Running a case

/// The names the script gives the two QPs and MRs (`qa`/`ma` on device 0,
/// the requester; `qb`/`mb` on device 1, the responder).
const QP_NAMES: [&str; 2] = ["qa", "qb"];
const MR_NAMES: [&str; 2] = ["ma", "mb"];

/// Polls one completion.
fn poll_one<V: Verbs>(v: &mut V, cq: &V::Cq) -> Result<Option<Wc>, String> {
    let mut wc = [Wc::default()];
    match v.poll_cq(cq, &mut wc) {
        Ok(0) => Ok(None),
        Ok(_) => Ok(Some(wc[0])),
        Err(e) => Err(format!("poll_cq: {e}")),
    }
}

/// An address vector to port 1 of `peer`.
fn av_to<V: Verbs>(peer: &Env<V>) -> AhAttr {
    AhAttr {
        grh: GlobalRoute {
            dgid: peer.gid,
            sgid_index: 0,
            hop_limit: 64,
            ..GlobalRoute::default()
        },
        dlid: peer.port.lid,
        is_global: peer.model.grh_required,
        port_num: 1,
        ..AhAttr::default()
    }
}

/// One case in progress: the backend objects, the plan and the script so far.
struct Run<'c, V: Verbs> {
    case: &'c TrafficCase,
    plan: Plan,
    script: ScriptText,
    envs: Vec<Env<V>>,
    qps: Vec<V::Qp>,
    qpns: Vec<u32>,
    mrs: Vec<V::Mr>,
}

impl<'c, V: Verbs> Run<'c, V> {
    /// A failure message with the script so far.
    fn fail(&self, msg: impl Into<String>) -> String {
        failure(&self.script, msg.into())
    }

    /// Opens both devices, creates `qa` and `qb` and connects them
    /// (RESET→INIT→RTR→RTS, A INIT, B INIT, A RTR, B RTR, A RTS, B RTS).
    fn setup(v: &mut V, case: &'c TrafficCase) -> Result<Self, String> {
        let mut script = ScriptText::new(
            "shrunk prop_rc_traffic case: RC traffic under faults, delivered exactly once or RETRY_EXC_ERR",
            &[case.profile, case.profile],
            case.seed,
        );
        script
            .headers
            .push("#! requires: data_path atomics".to_owned());
        let mut envs = Vec::new();
        for i in 0..2 {
            envs.push(
                open_env(v, i, &sim_facts(&profile(case.profile)))
                    .map_err(|m| format!("setup: {m}"))?,
            );
            script.env(i);
        }
        let mut run = Self {
            case,
            plan: plan(case),
            script,
            envs,
            qps: Vec::new(),
            qpns: Vec::new(),
            mrs: Vec::new(),
        };
        let cap = QpCap {
            max_send_wr: MSGS_MAX as u32 * 2,
            max_recv_wr: MSGS_MAX as u32 * 2,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        for (i, name) in QP_NAMES.iter().enumerate() {
            run.script.push(create_line(name, i, QpType::Rc, &cap));
            let qp = create_qp(v, &run.envs[i], QpType::Rc, cap)
                .map_err(|e| run.fail(format!("create_qp: {e}")))?;
            run.qpns
                .push(v.qp_num(&qp).map_err(|e| format!("qp_num: {e}"))?);
            run.qps.push(qp);
        }
        let psns = [case.psn_a, case.psn_b];
        let init = QpAttr {
            qp_state: QpState::Init,
            port_num: 1,
            pkey_index: 0,
            qp_access_flags: AccessFlags::REMOTE_WRITE
                | AccessFlags::REMOTE_READ
                | AccessFlags::REMOTE_ATOMIC,
            ..QpAttr::default()
        };
        let mut steps: Vec<(usize, QpAttr, QpAttrMask)> = Vec::new();
        for i in 0..2 {
            steps.push((
                i,
                init,
                QpAttrMask::STATE
                    | QpAttrMask::PKEY_INDEX
                    | QpAttrMask::PORT
                    | QpAttrMask::ACCESS_FLAGS,
            ));
        }
        for i in 0..2 {
            let peer = 1 - i;
            let rtr = QpAttr {
                qp_state: QpState::ReadyToReceive,
                ah_attr: av_to(&run.envs[peer]),
                path_mtu: case.mtu,
                dest_qp_num: run.qpns[peer],
                rq_psn: psns[peer],
                max_dest_rd_atomic: case.max_rd_atomic,
                min_rnr_timer: 12,
                ..QpAttr::default()
            };
            let mask = QpAttrMask::STATE
                | QpAttrMask::AV
                | QpAttrMask::PATH_MTU
                | QpAttrMask::DEST_QPN
                | QpAttrMask::RQ_PSN
                | QpAttrMask::MAX_DEST_RD_ATOMIC
                | QpAttrMask::MIN_RNR_TIMER;
            steps.push((i, rtr, mask));
        }
        for (i, &sq_psn) in psns.iter().enumerate() {
            let rts = QpAttr {
                qp_state: QpState::ReadyToSend,
                timeout: case.timeout,
                retry_cnt: case.retry_cnt,
                rnr_retry: 7,
                sq_psn,
                max_rd_atomic: case.max_rd_atomic,
                ..QpAttr::default()
            };
            let mask = QpAttrMask::STATE
                | QpAttrMask::TIMEOUT
                | QpAttrMask::RETRY_CNT
                | QpAttrMask::RNR_RETRY
                | QpAttrMask::SQ_PSN
                | QpAttrMask::MAX_QP_RD_ATOMIC;
            steps.push((i, rts, mask));
        }
        for (i, attr, mask) in steps {
            let peer = &run.envs[1 - i];
            let line = modify_line(QP_NAMES[i], &attr, mask, 1 - i, &peer.gid, peer.port.lid);
            run.script.push(line);
            v.modify_qp(&run.qps[i], &attr, mask)
                .map_err(|e| run.fail(format!("connecting {}: {e}", QP_NAMES[i])))?;
        }
        Ok(run)
    }

    /// Registers `ma` and `mb` and writes their initial contents.
    fn memory(&mut self, v: &mut V) -> Result<(), String> {
        let access = [
            AccessFlags::LOCAL_WRITE,
            AccessFlags::LOCAL_WRITE
                | AccessFlags::REMOTE_WRITE
                | AccessFlags::REMOTE_READ
                | AccessFlags::REMOTE_ATOMIC,
        ];
        let lens = [self.plan.len_a, self.plan.len_b];
        for i in 0..2 {
            let line = reg_mr_line(MR_NAMES[i], &format!("pd{i}"), lens[i], access[i]);
            self.script.push(line);
            let mr = v
                .reg_mr(&self.envs[i].pd, lens[i], access[i])
                .map_err(|e| self.fail(format!("reg_mr: {e}")))?;
            self.mrs.push(mr);
        }
        let (case, p) = (self.case, &self.plan);
        let initial = initial_memory(case, p);
        let mut lines = Vec::new();
        for (i, m) in case.msgs.iter().enumerate() {
            let len = p.lens[i] as usize;
            let (local, remote) = (p.local[i] as usize, p.remote[i] as usize);
            if m.kind.carries_payload() {
                lines.extend(write_hex_line(
                    "ma",
                    p.local[i],
                    &initial[0][local..local + len],
                ));
            }
            match m.kind {
                Kind::Read => {
                    lines.extend(write_hex_line(
                        "mb",
                        p.remote[i],
                        &initial[1][remote..remote + len],
                    ));
                }
                Kind::CmpSwp | Kind::FetchAdd => {
                    lines.push(write_u64_line("mb", p.remote[i], atomic_initial(i)));
                }
                _ => {}
            }
        }
        for line in lines {
            self.script.push(line);
        }
        for (mr, bytes) in self.mrs.iter().zip(&initial) {
            v.mr_bytes_mut(mr)
                .map_err(|e| failure(&self.script, format!("mr_bytes_mut: {e}")))?
                .copy_from_slice(bytes);
        }
        Ok(())
    }

    /// Posts the receives on `qb`, installs the fault rules, posts the
    /// messages on `qa`.
    fn post(&mut self, v: &mut V) -> Result<(), String> {
        let (case, p) = (self.case, &self.plan);
        let info_a = v
            .mr_info(&self.mrs[0])
            .map_err(|e| format!("mr_info: {e}"))?;
        let info_b = v
            .mr_info(&self.mrs[1])
            .map_err(|e| format!("mr_info: {e}"))?;
        let recv_sges: Vec<[Sge; 1]> = p
            .recv_off
            .iter()
            .map(|&off| {
                [Sge {
                    addr: info_b.addr + off,
                    length: p.recv_len,
                    lkey: info_b.lkey,
                }]
            })
            .collect();
        let recv_wrs: Vec<RecvWr<'_>> = recv_sges
            .iter()
            .enumerate()
            .map(|(k, s)| RecvWr {
                wr_id: RECV_WR_ID + k as u64,
                sg_list: s,
            })
            .collect();
        if !recv_wrs.is_empty() {
            let text: Vec<(u64, String, u64, u32)> = p
                .recv_off
                .iter()
                .enumerate()
                .map(|(k, &off)| (RECV_WR_ID + k as u64, "mb".to_owned(), off, p.recv_len))
                .collect();
            self.script.push(post_recv_line("qb", &text));
            // SAFETY: `mb` stays registered until every receive has completed
            // or been flushed and been reaped, and nothing writes it meanwhile.
            #[allow(unsafe_code)]
            unsafe { v.post_recv(&self.qps[1], &recv_wrs) }
                .map_err(|e| failure(&self.script, format!("post_recv: {e}")))?;
        }
        for (action, ppm) in case.faults.rules() {
            let when = FaultWhen::RatePpm(ppm);
            self.script.push(fault_line(action, when));
            v.sim_control(SimCommand::Fault {
                scope: FaultScope::All,
                action,
                when,
            })
            .map_err(|e| failure(&self.script, format!("sim fault: {e}")))?;
        }
        let send_sges: Vec<Vec<Sge>> = (0..case.msgs.len())
            .map(|i| {
                if p.lens[i] == 0 {
                    Vec::new()
                } else {
                    vec![Sge {
                        addr: info_a.addr + p.local[i],
                        length: p.lens[i],
                        lkey: info_a.lkey,
                    }]
                }
            })
            .collect();
        let mut texts = Vec::new();
        let mut wrs: Vec<SendWr<'_, V>> = Vec::new();
        for (i, m) in case.msgs.iter().enumerate() {
            let remote_addr = info_b.addr + p.remote[i];
            let atomic = match m.kind {
                Kind::CmpSwp => Some((atomic_compare(i, m.hit), atomic_swap(i))),
                Kind::FetchAdd => Some((m.add, 0)),
                _ => None,
            };
            let imm_data = if m.kind.has_imm() { m.imm } else { 0 };
            let send_flags = if p.signaled[i] {
                SendFlags::SIGNALED
            } else {
                SendFlags::empty()
            };
            texts.push(SendWrText {
                wr_id: i as u64,
                opcode: m.kind.opcode(),
                send_flags,
                imm_data,
                sges: send_sges[i]
                    .iter()
                    .map(|_| ("ma".to_owned(), p.local[i], p.lens[i]))
                    .collect(),
                remote: Some(("mb".to_owned(), p.remote[i])),
                atomic,
            });
            let (compare_add, swap) = atomic.unwrap_or((0, 0));
            // As the script runner builds it from `remote=`: both the RDMA
            // and the atomic address name the target.
            wrs.push(SendWr {
                wr_id: i as u64,
                sg_list: &send_sges[i],
                opcode: m.kind.opcode(),
                send_flags,
                imm_data,
                rdma: RdmaInfo {
                    remote_addr,
                    rkey: info_b.rkey,
                },
                atomic: AtomicInfo {
                    remote_addr,
                    compare_add,
                    swap,
                    rkey: info_b.rkey,
                },
                ..SendWr::default()
            });
        }
        self.script.push(post_send_line("qa", &texts));
        // SAFETY: `ma` and `mb` stay registered until every completion has
        // been reaped, and nothing writes them meanwhile.
        #[allow(unsafe_code)]
        unsafe { v.post_send(&self.qps[0], &wrs) }
            .map_err(|e| failure(&self.script, format!("post_send: {e}")))
    }

    /// Drains `qa`'s CQ against the two allowed sequences: SUCCESS for the
    /// signalled WRs in order; or, at some point, RETRY_EXC_ERR for a WR no
    /// later than the next signalled one and WR_FLUSH_ERR for every WR after
    /// it. Returns the WR that failed, if one did.
    fn drain_requester(&mut self, v: &mut V) -> Result<Option<usize>, String> {
        let (case, n) = (self.case, self.case.msgs.len());
        let qp_num = || ("qp_num", "qa.qp_num".to_owned());
        let mut next = 0usize;
        let mut failed: Option<usize> = None;
        // `byte_len` is defined on requester completions of READs (the bytes
        // read) and atomics (8) only (§6.2).
        let byte_len = |i: usize| match case.msgs[i].kind {
            Kind::Read | Kind::CmpSwp | Kind::FetchAdd => Some(self.plan.lens[i]),
            _ => None,
        };
        loop {
            let got = poll_one(v, &self.envs[0].cq).map_err(|m| self.fail(m))?;
            let signaled_next = (next..n).find(|&i| self.plan.signaled[i]);
            // What the next completion must be (the first choice, for the script).
            let want: Vec<(&str, String)> = match (failed, signaled_next) {
                (None, Some(s)) => {
                    let mut f = vec![
                        ("wr_id", s.to_string()),
                        ("status", "SUCCESS".to_owned()),
                        ("opcode", case.msgs[s].kind.wc_opcode().name().to_owned()),
                    ];
                    f.extend(byte_len(s).map(|b| ("byte_len", b.to_string())));
                    f.push(qp_num());
                    f
                }
                (Some(_), _) if next < n => vec![
                    ("wr_id", next.to_string()),
                    ("status", "WR_FLUSH_ERR".to_owned()),
                    qp_num(),
                ],
                _ => Vec::new(),
            };
            let Some(wc) = got else {
                self.script.push(poll_line("cq0", &want));
                if want.is_empty() {
                    return Ok(failed);
                }
                return Err(self.fail(format!(
                    "requester: no more completions (the simulator is idle), but WR {} has not completed",
                    want[0].1
                )));
            };
            let wr = usize::try_from(wc.wr_id).unwrap_or(usize::MAX);
            let accepted = wc.qp_num == self.qpns[0]
                && match (failed, signaled_next) {
                    (None, Some(s))
                        if wc.status == WcStatus::Success
                            && wr == s
                            && wc.opcode == case.msgs[s].kind.wc_opcode()
                            && byte_len(s).is_none_or(|b| wc.byte_len == b) =>
                    {
                        next = s + 1;
                        true
                    }
                    (None, Some(s))
                        if wc.status == WcStatus::RetryExcErr && (next..=s).contains(&wr) =>
                    {
                        failed = Some(wr);
                        next = wr + 1;
                        true
                    }
                    (Some(_), _) if next < n && wc.status == WcStatus::WrFlushErr && wr == next => {
                        next += 1;
                        true
                    }
                    _ => false,
                };
            if !accepted {
                self.script.push(poll_line("cq0", &want));
                let expected = if want.is_empty() {
                    "no more completions"
                } else if failed.is_none() {
                    "the next signalled WR's SUCCESS, or RETRY_EXC_ERR for it or an unsignalled WR before it"
                } else {
                    "WR_FLUSH_ERR for the next WR"
                };
                return Err(self.fail(format!(
                    "requester: got {}, expected {expected}",
                    wc_text(&wc)
                )));
            }
            let mut seen = vec![
                ("wr_id", wc.wr_id.to_string()),
                ("status", wc.status.name().to_owned()),
            ];
            if wc.status == WcStatus::Success {
                seen.push(("opcode", wc.opcode.name().to_owned()));
                if byte_len(wr).is_some() {
                    seen.push(("byte_len", wc.byte_len.to_string()));
                }
            }
            seen.push(qp_num());
            self.script.push(poll_line("cq0", &seen));
        }
    }

    /// The completion receive `k` must have: SUCCESS, its message's opcode
    /// class, length, immediate and flags (§2.2, §3.2, §6.2).
    fn recv_want(&self, k: usize) -> (Vec<(&'static str, String)>, Wc) {
        let i = self.plan.recv_msg[k];
        let m = &self.case.msgs[i];
        let wc = Wc {
            wr_id: RECV_WR_ID + k as u64,
            status: WcStatus::Success,
            opcode: if m.kind == Kind::WriteImm {
                WcOpcode::RecvRdmaWithImm
            } else {
                WcOpcode::Recv
            },
            byte_len: self.plan.lens[i],
            imm_data: if m.kind.has_imm() { m.imm } else { 0 },
            qp_num: self.qpns[1],
            wc_flags: if m.kind.has_imm() {
                WcFlags::WITH_IMM
            } else {
                WcFlags::empty()
            },
            ..Wc::default()
        };
        let mut fields = vec![
            ("wr_id", wc.wr_id.to_string()),
            ("status", "SUCCESS".to_owned()),
            ("opcode", wc.opcode.name().to_owned()),
            ("byte_len", wc.byte_len.to_string()),
            ("qp_num", "qb.qp_num".to_owned()),
            (
                "wc_flags",
                if m.kind.has_imm() { "WITH_IMM" } else { "0" }.to_owned(),
            ),
        ];
        if m.kind.has_imm() {
            fields.push(("imm_data", format!("{:#x}", m.imm)));
        }
        (fields, wc)
    }

    /// Drains `qb`'s CQ: the receives complete in order, each as
    /// [`Self::recv_want`]; all of them after a delivery, at least those of
    /// the messages acknowledged before `failed` otherwise. Returns how many
    /// completed.
    fn drain_responder(&mut self, v: &mut V, failed: Option<usize>) -> Result<usize, String> {
        let receives = self.plan.recv_msg.len();
        let required = match failed {
            None => receives,
            Some(j) => self.plan.recv_msg.iter().filter(|&&i| i < j).count(),
        };
        let mut done = 0usize;
        loop {
            let got = poll_one(v, &self.envs[1].cq).map_err(|m| self.fail(m))?;
            let Some(wc) = got else {
                if done < required {
                    let (fields, _) = self.recv_want(done);
                    self.script.push(poll_line("cq1", &fields));
                    return Err(self.fail(format!(
                        "responder: no completion for receive {done} although its message {} was {}",
                        self.plan.recv_msg[done],
                        if failed.is_none() {
                            "completed at the requester"
                        } else {
                            "acknowledged before the failure"
                        }
                    )));
                }
                self.script.push(poll_line("cq1", &[]));
                return Ok(done);
            };
            if done >= receives {
                self.script.push(poll_line("cq1", &[]));
                return Err(self.fail(format!(
                    "responder: unexpected completion {} (every receive was used already)",
                    wc_text(&wc)
                )));
            }
            let (fields, want) = self.recv_want(done);
            self.script.push(poll_line("cq1", &fields));
            let ok = wc.status == want.status
                && wc.wr_id == want.wr_id
                && wc.opcode == want.opcode
                && wc.byte_len == want.byte_len
                && wc.qp_num == want.qp_num
                && wc.wc_flags == want.wc_flags
                && (want.wc_flags.is_empty() || wc.imm_data == want.imm_data);
            if !ok {
                let i = self.plan.recv_msg[done];
                return Err(self.fail(format!(
                    "responder: receive {done} (message {i}, {}): got {}, expected {}",
                    self.case.msgs[i].kind.opcode().name(),
                    wc_text(&wc),
                    wc_text(&want)
                )));
            }
            done += 1;
        }
    }

    /// The requester is in RTS after a delivery and in ERR after
    /// RETRY_EXC_ERR; the responder is in RTS either way (§4.3).
    fn check_states(&mut self, v: &mut V, failed: Option<usize>) -> Result<(), String> {
        let want = [
            if failed.is_some() {
                QpState::Error
            } else {
                QpState::ReadyToSend
            },
            QpState::ReadyToSend,
        ];
        for (i, name) in QP_NAMES.iter().enumerate() {
            self.script.push(format!("let s{name} = query_qp {name}"));
            self.script.push(format!(
                "assert s{name}.qp_state == {}",
                state_text(want[i])
            ));
            let (attr, _) = v
                .query_qp(&self.qps[i], QpAttrMask::STATE)
                .map_err(|e| self.fail(format!("query_qp: {e}")))?;
            if attr.qp_state != want[i] {
                return Err(self.fail(format!(
                    "{name} is in {}, expected {}",
                    attr.qp_state, want[i]
                )));
            }
        }
        Ok(())
    }

    /// Moves `qb` to ERR: its unused receives (from `done` on) must flush in
    /// order, then nothing more (§4.2 row 19).
    fn flush_responder(&mut self, v: &mut V, done: usize) -> Result<(), String> {
        let to_err = QpAttr {
            qp_state: QpState::Error,
            ..QpAttr::default()
        };
        let (gid, lid) = (self.envs[0].gid, self.envs[0].port.lid);
        self.script
            .push(modify_line("qb", &to_err, QpAttrMask::STATE, 0, &gid, lid));
        v.modify_qp(&self.qps[1], &to_err, QpAttrMask::STATE)
            .map_err(|e| self.fail(format!("modify_qp qb to ERR: {e}")))?;
        for k in done..self.plan.recv_msg.len() {
            let wr_id = RECV_WR_ID + k as u64;
            self.script.push(poll_line(
                "cq1",
                &[
                    ("wr_id", wr_id.to_string()),
                    ("status", "WR_FLUSH_ERR".to_owned()),
                    ("qp_num", "qb.qp_num".to_owned()),
                ],
            ));
            let got = poll_one(v, &self.envs[1].cq).map_err(|m| self.fail(m))?;
            let flushed = got.is_some_and(|wc| {
                wc.status == WcStatus::WrFlushErr && wc.wr_id == wr_id && wc.qp_num == self.qpns[1]
            });
            if !flushed {
                return Err(self.fail(format!(
                    "responder in ERR: receive {k} should flush, got {}",
                    got.map_or_else(|| "nothing".to_owned(), |w| wc_text(&w))
                )));
            }
        }
        self.script.push(poll_line("cq1", &[]));
        if let Some(wc) = poll_one(v, &self.envs[1].cq).map_err(|m| self.fail(m))? {
            return Err(self.fail(format!(
                "responder in ERR: unexpected completion {}",
                wc_text(&wc)
            )));
        }
        Ok(())
    }

    /// Both MRs, byte for byte, against what the outcome allows.
    fn check_memory(
        &mut self,
        v: &mut V,
        failed: Option<usize>,
        done: usize,
    ) -> Result<(), String> {
        let n = self.case.msgs.len();
        let acked = failed.unwrap_or(n);
        let model = expected_memory(self.case, &self.plan, acked, done);
        for (mr, off, bytes, is_word) in &model.definite {
            let name = MR_NAMES[*mr];
            if *is_word {
                let word = u64::from_le_bytes(bytes.as_slice().try_into().expect("8 bytes"));
                self.script.push(check_u64_line(name, *off, word));
            } else if let Some(line) = check_hex_line(name, *off, bytes) {
                self.script.push(line);
            }
        }
        for s in &model.open {
            self.script.push(format!(
                "# {} at {} offset {} ({} bytes): old or new{}",
                s.what,
                MR_NAMES[s.mr],
                s.off,
                s.new.len(),
                if s.whole {
                    " as a whole word"
                } else {
                    " per byte"
                }
            ));
        }
        let mut got = Vec::new();
        for mr in &self.mrs {
            got.push(
                v.mr_bytes(mr)
                    .map_err(|e| self.fail(format!("mr_bytes: {e}")))?
                    .to_vec(),
            );
        }
        check_memory(&model, [&got[0], &got[1]]).map_err(|m| {
            self.fail(format!(
                "memory after {} ({acked} of {n} WRs acknowledged, {done} receives completed): {m}",
                if failed.is_some() {
                    "RETRY_EXC_ERR"
                } else {
                    "delivery"
                }
            ))
        })
    }

    /// Destroys everything; all of it must succeed.
    fn teardown(mut self, v: &mut V) -> Result<String, String> {
        for (name, qp) in QP_NAMES.iter().zip(&self.qps) {
            self.script.push(format!("destroy_qp {name}"));
            v.destroy_qp(qp)
                .map_err(|e| failure(&self.script, format!("teardown destroy_qp: {e}")))?;
        }
        for (name, mr) in MR_NAMES.iter().zip(&self.mrs) {
            self.script.push(format!("dereg_mr {name}"));
            v.dereg_mr(mr)
                .map_err(|e| failure(&self.script, format!("teardown dereg_mr: {e}")))?;
        }
        for env in &self.envs {
            self.script.push(format!("destroy_cq cq{}", env.index));
            self.script.push(format!("dealloc_pd pd{}", env.index));
            close_env(v, env).map_err(|m| failure(&self.script, m))?;
        }
        Ok(self.script.text())
    }
}

/// Runs `case` on `v` and checks the outcome; returns what it did as a
/// `.verbs` script.
///
/// # Errors
/// A message with the case as a `.verbs` script when the backend breaks a rule.
fn run_case<V: Verbs>(v: &mut V, case: &TrafficCase) -> Result<String, String> {
    let caps = v.capabilities();
    let needed = Capabilities::DATA_PATH | Capabilities::ATOMICS | Capabilities::SIM;
    if !caps.contains(needed) {
        return Err(format!(
            "the backend lacks some of {} (it has: {})",
            needed.names(),
            caps.names()
        ));
    }
    let mut run = Run::setup(v, case)?;
    run.memory(v)?;
    run.post(v)?;
    let failed = run.drain_requester(v)?;
    let done = run.drain_responder(v, failed)?;
    run.check_states(v, failed)?;
    run.flush_responder(v, done)?;
    run.check_memory(v, failed, done)?;
    run.teardown(v)
}

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn rc_traffic_is_delivered_exactly_once_or_fails_with_retry_exceeded(case in traffic_case()) {
        // Goal: random RC traffic (all RC opcodes, 0 to 3½ MTU, signalled or
        // not) under random packet faults ends in one of the two outcomes the
        // spec allows: every message executed exactly once, in order, byte
        // exact, with one completion per signalled WR and per receive; or
        // RETRY_EXC_ERR on the requester, WR_FLUSH_ERR for the rest in order
        // and the requester in ERR (data-path §4.2 rows 15 and 19, §5).
        // Method: one fresh two-device simulator per case; post everything,
        // drain both CQs one completion at a time against an oracle of the
        // allowed completion sequences, check QP states, flush the
        // responder's unused receives, compare both MRs byte for byte with
        // the memory the outcome allows; failures print a `.verbs` script.
        let mut v = sim_for(&case);
        let r = catch_panics(|| run_case(&mut v, &case).map(|_| ()));
        prop_assert!(r.is_ok(), "VERBS_SIM_SEED={}: {}", case.seed, r.unwrap_err());
    }
}

/// A simulator for `case`: its seed and its profile on both devices,
/// configured as the script runners configure one from a script's headers
/// (`SimConfig::for_profiles`), so a printed script replays the same.
fn sim_for(case: &TrafficCase) -> SimVerbs {
    SimVerbs::new(SimConfig::for_profiles(
        case.seed,
        vec![profile(case.profile), profile(case.profile)],
    ))
}

#[test]
fn a_case_replays_as_the_script_it_prints() {
    // Goal: the `.verbs` script a case prints is a faithful replay: the
    // script runner, making the same verb calls on a simulator with the
    // seed and profiles of its headers, sees the same completions, states
    // and bytes, so a printed failure reproduces with `verbsim run`.
    // Method: run two fixed cases (every opcode, multi-packet sizes,
    // unsignalled WRs, every fault; one delivered, one with retry_cnt 0 and
    // half the packets dropped, which must end in RETRY_EXC_ERR), then parse
    // the script each prints and run it with the script runner.
    let msgs: Vec<Msg> = [
        (Kind::Send, Size::Boundary(5), true),
        (Kind::WriteImm, Size::Boundary(9), true),
        (Kind::Read, Size::Boundary(7), false),
        (Kind::CmpSwp, Size::Any(0), true),
        (Kind::SendImm, Size::Boundary(0), true),
        (Kind::FetchAdd, Size::Any(0), false),
        (Kind::Write, Size::Any(700), true),
    ]
    .iter()
    .enumerate()
    .map(|(i, &(kind, size, signaled))| Msg {
        kind,
        size,
        imm: 0x1000 + i as u32,
        signaled,
        hit: i % 2 == 1,
        add: 5 + i as u64,
    })
    .collect();
    let gentle = Faults {
        drop_ppm: 40_000,
        duplicate_ppm: 30_000,
        delay_ppm: 30_000,
        delay_ns: 20_000,
        reorder_ppm: 30_000,
        window: 2,
    };
    // Half the packets lost and no retransmission allowed: the retries run
    // out whatever the seed draws.
    let harsh = Faults {
        drop_ppm: 500_000,
        ..gentle
    };
    for (seed, retry_cnt, timeout, faults, exhausted) in
        [(11, 7, 10, gentle, false), (12, 0, 1, harsh, true)]
    {
        let case = TrafficCase {
            seed,
            profile: "cx6",
            mtu: Mtu::Mtu256,
            timeout,
            retry_cnt,
            max_rd_atomic: 2,
            psn_a: 0xff_fffe,
            psn_b: 3,
            faults,
            msgs: msgs.clone(),
        };
        let mut text = String::new();
        if let Err(m) = catch_panics(|| {
            text = run_case(&mut sim_for(&case), &case)?;
            Ok(())
        }) {
            panic!("VERBS_SIM_SEED={seed}: the case itself fails: {m}");
        }
        assert_eq!(
            text.contains("status=RETRY_EXC_ERR"),
            exhausted,
            "VERBS_SIM_SEED={seed}: the case should end in {}:\n{text}",
            if exhausted {
                "RETRY_EXC_ERR"
            } else {
                "delivery"
            }
        );
        let script = conformance::parse("prop_rc_traffic.verbs", &text)
            .unwrap_or_else(|e| panic!("the printed script does not parse: {e}\n{text}"));
        let outcome = conformance::run_script(&mut sim_for(&case), &script);
        assert!(
            matches!(outcome, conformance::Outcome::Pass),
            "VERBS_SIM_SEED={seed}: the printed script does not replay: {}\n{text}",
            outcome.report_line(&script.path)
        );
    }
}
