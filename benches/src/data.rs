//! Data-path workloads: `sim_rc_write_msg_rate`, `sim_send_recv_bw`,
//! `sim_read_rate` and `sim_atomic_rate`, over one connected RC pair.
//!
//! # The posting contract, and how these workloads keep it
//!
//! Posting is `unsafe fn` ([`Verbs::post_send`], [`Verbs::post_recv`]): every
//! byte a posted request names must stay valid, and must not be touched by
//! the caller, until the request's completion (or a later signalled one's)
//! has been reaped. The workloads keep it by construction:
//!
//! * every MR is registered when the workload is built and deregistered
//!   only in `teardown`, which first drains every outstanding request
//!   (`drain`); the addresses in the requests are the MRs' own `addr`s
//!   plus offsets inside their `length`;
//! * the workloads never read or write MR bytes after posting starts
//!   (pages are touched once, before the first post); WRITE and SEND only
//!   read their source slots, and a receive or READ/atomic landing buffer
//!   is not looked at by the caller;
//! * a send slot is reused only after the signalled completion that covers
//!   it has been reaped: at most `outstanding` requests are in flight and
//!   the offset tables cycle over more slots than that.
//!
//! # While the data path is missing
//!
//! A backend whose data path is not there yet either does not advertise
//! [`Capabilities::DATA_PATH`] (the simulator accepts posts but does not
//! execute them until it does) or returns [`Error::is_not_implemented`]
//! errors from `post_*`. Every workload checks the capability before
//! creating anything and returns a not-implemented
//! [`WorkloadError::Verbs`] without it ([`require_data_path`]), passes
//! not-implemented post errors through the same way, and
//! [`WorkloadError::is_not_implemented`] tells the benchmark to skip.

use verbs_api::{
    errno, AccessFlags, AtomicInfo, Capabilities, Error, ErrorKind, MrInfo, QpCap, RdmaInfo,
    RecvWr, SendFlags, SendWr, Sge, Verb, Verbs, Wc, WcOpcode, WcStatus, WrOpcode,
};

use crate::calibration::{random_offsets, sequential_offsets, touch_pages, PAGE_BYTES};
use crate::fixture::{connect_rc, peer_device_index, rc_attr, Endpoint};
use crate::WorkloadError;

/// The longest post list the workloads build (requests per `post_send`).
pub const MAX_POST_LIST: usize = 16;

/// Entries of the offset tables the requests cycle through.
pub const OFFSET_TABLE_LEN: usize = 1 << 20;

/// Empty polls in a row after which a workload reports
/// [`WorkloadError::Stalled`] (hardware may need many; the simulator none).
pub const MAX_EMPTY_POLLS: u64 = 100_000_000;

/// Fails with a not-implemented error (`post_send`, `ENOSYS`) unless the
/// backend advertises [`Capabilities::DATA_PATH`].
///
/// # Errors
/// [`WorkloadError::Verbs`] with [`Error::is_not_implemented`] true.
pub fn require_data_path<V: Verbs>(v: &mut V) -> Result<(), WorkloadError> {
    if v.capabilities().contains(Capabilities::DATA_PATH) {
        Ok(())
    } else {
        let message = format!(
            "the {} backend does not advertise the data_path capability",
            v.backend().name()
        );
        Err(Error::new(Verb::PostSend, ErrorKind::Unsupported, message)
            .with_errno(errno::ENOSYS)
            .into())
    }
}

/// Where in the responder's MR the requests land.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spread {
    /// Consecutive `msg_bytes` slots, wrapping at the end of the MR.
    Sequential,
    /// Seeded random `msg_bytes`-aligned slots anywhere in the MR.
    Random {
        /// Seed of the offset table.
        seed: u64,
    },
}

/// The requester-side operation of a [`MessageRate`] workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateOp {
    /// `IBV_WR_RDMA_WRITE`.
    Write,
    /// `IBV_WR_RDMA_READ`.
    Read,
    /// `IBV_WR_ATOMIC_FETCH_AND_ADD` (8 bytes).
    FetchAdd,
    /// `IBV_WR_ATOMIC_CMP_AND_SWP` (8 bytes).
    CompSwap,
}

impl RateOp {
    fn opcode(self) -> WrOpcode {
        match self {
            Self::Write => WrOpcode::RdmaWrite,
            Self::Read => WrOpcode::RdmaRead,
            Self::FetchAdd => WrOpcode::AtomicFetchAndAdd,
            Self::CompSwap => WrOpcode::AtomicCmpAndSwp,
        }
    }

    fn wc_opcode(self) -> WcOpcode {
        match self {
            Self::Write => WcOpcode::RdmaWrite,
            Self::Read => WcOpcode::RdmaRead,
            Self::FetchAdd => WcOpcode::FetchAdd,
            Self::CompSwap => WcOpcode::CompSwap,
        }
    }

    fn is_atomic(self) -> bool {
        matches!(self, Self::FetchAdd | Self::CompSwap)
    }

    /// The access the responder's MR needs.
    fn remote_access(self) -> AccessFlags {
        AccessFlags::LOCAL_WRITE.union(match self {
            Self::Write => AccessFlags::REMOTE_WRITE,
            Self::Read => AccessFlags::REMOTE_READ,
            Self::FetchAdd | Self::CompSwap => AccessFlags::REMOTE_ATOMIC,
        })
    }
}

/// Shape of a [`MessageRate`] workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageRateConfig {
    /// The operation.
    pub op: RateOp,
    /// Bytes per request (8 for atomics).
    pub msg_bytes: u32,
    /// Requests in flight at most (the send queue is this deep).
    pub outstanding: u32,
    /// Every `signal_every`-th request is signalled; requests are posted in
    /// lists of this length (at most [`MAX_POST_LIST`]), the last one
    /// signalled.
    pub signal_every: u32,
    /// Completions asked for per `poll_cq`.
    pub poll_batch: u32,
    /// Bytes of the responder's MR.
    pub remote_mr_bytes: usize,
    /// Where in it the requests go.
    pub spread: Spread,
}

impl MessageRateConfig {
    /// `sim_rc_write_msg_rate/64`: 64 B RDMA WRITE, 128 outstanding,
    /// signal every 16th, poll batches of 16, over a 1 MiB MR.
    pub fn rc_write_64() -> Self {
        Self {
            op: RateOp::Write,
            msg_bytes: 64,
            outstanding: 128,
            signal_every: 16,
            poll_batch: 16,
            remote_mr_bytes: 1 << 20,
            spread: Spread::Sequential,
        }
    }

    /// The same over a 1 GiB MR, addresses spread at random over all of it.
    pub fn rc_write_64_1gib() -> Self {
        Self {
            remote_mr_bytes: 1 << 30,
            spread: Spread::Random { seed: 0x1_6b },
            ..Self::rc_write_64()
        }
    }

    /// `sim_read_rate`: 64 B RDMA READ, 16 outstanding, signalled every 4th,
    /// over a 1 MiB MR.
    pub fn read_64() -> Self {
        Self {
            op: RateOp::Read,
            outstanding: 16,
            signal_every: 4,
            ..Self::rc_write_64()
        }
    }

    /// `sim_atomic_rate/{fadd,cswap}`: 8 B atomics, 16 outstanding,
    /// signalled every 4th, over a 1 MiB MR.
    pub fn atomic(op: RateOp) -> Self {
        Self {
            op,
            msg_bytes: 8,
            ..Self::read_64()
        }
    }

    fn check(&self) -> Result<(), WorkloadError> {
        let bad = |what: &str| {
            Err(WorkloadError::Unsupported(format!(
                "workload shape: {what}"
            )))
        };
        if self.signal_every == 0 || self.signal_every as usize > MAX_POST_LIST {
            return bad("signal_every must be in 1..=MAX_POST_LIST");
        }
        if self.outstanding < self.signal_every || self.poll_batch == 0 || self.msg_bytes == 0 {
            return bad("outstanding < signal_every, or a zero poll batch or message size");
        }
        if self.op.is_atomic() && self.msg_bytes != 8 {
            return bad("atomics move exactly 8 bytes");
        }
        if self.remote_mr_bytes < self.msg_bytes as usize || self.remote_mr_bytes > 1 << 32 {
            return bad("the responder's MR must hold one message and at most 4 GiB");
        }
        Ok(())
    }
}

/// One side of an RC pair: its device objects, QP and MR.
struct Side<V: Verbs> {
    ep: Endpoint<V>,
    qp: V::Qp,
    mr: V::Mr,
    mr_info: MrInfo,
}

/// Two RC QPs connected to each other, each on its own context, PD, CQ and
/// MR; the responder on device 1 when there is one (else loopback).
struct RcPair<V: Verbs> {
    requester: Side<V>,
    responder: Side<V>,
}

/// What [`RcPair::new`] builds.
struct PairShape {
    send_wr: u32,
    recv_wr: u32,
    requester_cqe: u32,
    responder_cqe: u32,
    requester_mr: (usize, AccessFlags),
    responder_mr: (usize, AccessFlags),
}

impl<V: Verbs> RcPair<V> {
    fn new(v: &mut V, shape: &PairShape) -> Result<Self, WorkloadError> {
        let cap = QpCap {
            max_send_wr: shape.send_wr,
            max_recv_wr: shape.recv_wr,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let requester = Self::side(v, 0, shape.requester_cqe, cap, shape.requester_mr)?;
        let peer = match peer_device_index(v) {
            Ok(peer) => peer,
            Err(e) => {
                let _ = Self::close_side(v, requester);
                return Err(e.into());
            }
        };
        let responder = match Self::side(v, peer, shape.responder_cqe, cap, shape.responder_mr) {
            Ok(side) => side,
            Err(e) => {
                let _ = Self::close_side(v, requester);
                return Err(e);
            }
        };
        let pair = Self {
            requester,
            responder,
        };
        match pair.connect(v) {
            Ok(()) => Ok(pair),
            Err(e) => {
                let _ = pair.close(v);
                Err(e)
            }
        }
    }

    fn side(
        v: &mut V,
        index: usize,
        cqe: u32,
        cap: QpCap,
        mr: (usize, AccessFlags),
    ) -> Result<Side<V>, WorkloadError> {
        let ep = Endpoint::open(v, index, cqe)?;
        let qp = match ep.create_rc_qp(v, cap) {
            Ok(qp) => qp,
            Err(e) => {
                let _ = ep.close(v);
                return Err(e.into());
            }
        };
        let registered = v
            .reg_mr(&ep.pd, mr.0, mr.1)
            .and_then(|m| match v.mr_info(&m) {
                Ok(info) => Ok((m, info)),
                Err(e) => {
                    let _ = v.dereg_mr(&m);
                    Err(e)
                }
            });
        match registered {
            Ok((mr, mr_info)) => {
                let side = Side {
                    ep,
                    qp,
                    mr,
                    mr_info,
                };
                // Touch every page now, so no page fault is timed later.
                match v.mr_bytes_mut(&side.mr) {
                    Ok(bytes) => touch_pages(bytes),
                    Err(e) => {
                        let _ = Self::close_side(v, side);
                        return Err(e.into());
                    }
                }
                Ok(side)
            }
            Err(e) => {
                let _ = v.destroy_qp(&qp);
                let _ = ep.close(v);
                Err(e.into())
            }
        }
    }

    fn connect(&self, v: &mut V) -> Result<(), WorkloadError> {
        let (a, b) = (&self.requester, &self.responder);
        let (a_qpn, b_qpn) = (v.qp_num(&a.qp)?, v.qp_num(&b.qp)?);
        connect_rc(
            v,
            &a.qp,
            &mut rc_attr(&a.ep.limits, &a.ep.path, &b.ep.path, b_qpn),
        )?;
        connect_rc(
            v,
            &b.qp,
            &mut rc_attr(&b.ep.limits, &b.ep.path, &a.ep.path, a_qpn),
        )?;
        Ok(())
    }

    fn close_side(v: &mut V, side: Side<V>) -> Result<(), WorkloadError> {
        v.destroy_qp(&side.qp)?;
        v.dereg_mr(&side.mr)?;
        side.ep.close(v)?;
        Ok(())
    }

    fn close(self, v: &mut V) -> Result<(), WorkloadError> {
        let first = Self::close_side(v, self.requester);
        let second = Self::close_side(v, self.responder);
        first.and(second)
    }
}

/// Polls `cq` into `wc` until at least one completion arrives.
fn poll_some<V: Verbs>(
    v: &mut V,
    cq: &V::Cq,
    wc: &mut [Wc],
    what: &'static str,
) -> Result<usize, WorkloadError> {
    let mut empty = 0u64;
    loop {
        let n = v.poll_cq(cq, wc)?;
        if n > 0 {
            return Ok(n);
        }
        empty += 1;
        if empty >= MAX_EMPTY_POLLS {
            return Err(WorkloadError::Stalled(what));
        }
    }
}

/// Checks one completion: success, the expected opcode, the expected `wr_id`.
fn check_wc(wc: &Wc, opcode: WcOpcode, wr_id: Option<u64>) -> Result<(), WorkloadError> {
    if wc.status != WcStatus::Success {
        return Err(WorkloadError::Completion {
            wr_id: wc.wr_id,
            status: wc.status,
            opcode: wc.opcode,
        });
    }
    if wc.opcode != opcode {
        return Err(WorkloadError::Mismatch(format!(
            "completion wr_id={} has opcode {}, expected {opcode}",
            wc.wr_id, wc.opcode
        )));
    }
    match wr_id {
        Some(id) if id != wc.wr_id => Err(WorkloadError::Mismatch(format!(
            "completion wr_id={} arrived where wr_id={id} was due (RC completes in order)",
            wc.wr_id
        ))),
        _ => Ok(()),
    }
}

/// The send side shared by every data-path workload: a pipeline of post
/// lists of up to `signal_every` requests, the last one signalled, at most
/// `outstanding / signal_every` lists in flight.
struct Pipeline {
    signal_every: usize,
    max_lists: u64,
    posted_lists: u64,
    reaped_lists: u64,
    wc: Vec<Wc>,
}

impl Pipeline {
    fn new(outstanding: u32, signal_every: u32, poll_batch: u32) -> Self {
        Self {
            signal_every: signal_every as usize,
            max_lists: u64::from(outstanding / signal_every),
            posted_lists: 0,
            reaped_lists: 0,
            wc: vec![Wc::default(); poll_batch as usize],
        }
    }

    fn in_flight(&self) -> u64 {
        self.posted_lists - self.reaped_lists
    }

    /// Reaps at least one signalled completion; the `wr_id` of list `k` is `k`.
    fn reap<V: Verbs>(
        &mut self,
        v: &mut V,
        cq: &V::Cq,
        opcode: WcOpcode,
    ) -> Result<(), WorkloadError> {
        let n = poll_some(v, cq, &mut self.wc, "requester CQ")?;
        for wc in &self.wc[..n] {
            check_wc(wc, opcode, Some(self.reaped_lists))?;
            self.reaped_lists += 1;
        }
        Ok(())
    }
}

/// Builds the post list for the next `n` requests and posts it. `fill`
/// gives request `k` its local SGE and its `wr.rdma`/`wr.atomic` part.
///
/// # Safety (kept here, see the module documentation)
/// The SGEs and remote addresses `fill` returns lie inside MRs the workload
/// owns until `teardown`, and no slot is reused before its completion is
/// reaped.
// The only call of an `unsafe fn` in this module: `post_send`, whose
// contract is kept as the module documentation explains.
#[allow(unsafe_code)]
fn post_list<V: Verbs>(
    v: &mut V,
    qp: &V::Qp,
    wr_id: u64,
    opcode: WrOpcode,
    n: usize,
    mut fill: impl FnMut(usize) -> (Sge, RdmaInfo, AtomicInfo),
) -> Result<(), WorkloadError> {
    debug_assert!(n > 0 && n <= MAX_POST_LIST);
    let mut sges = [Sge::default(); MAX_POST_LIST];
    let mut remote = [(RdmaInfo::default(), AtomicInfo::default()); MAX_POST_LIST];
    for k in 0..n {
        let (sge, rdma, atomic) = fill(k);
        sges[k] = sge;
        remote[k] = (rdma, atomic);
    }
    let wrs: [SendWr<'_, V>; MAX_POST_LIST] = core::array::from_fn(|k| SendWr {
        wr_id,
        sg_list: core::slice::from_ref(&sges[k]),
        opcode,
        send_flags: if k + 1 == n {
            SendFlags::SIGNALED
        } else {
            SendFlags::empty()
        },
        rdma: remote[k].0,
        atomic: remote[k].1,
        ..SendWr::default()
    });
    // SAFETY: every SGE and remote address names memory inside an MR the
    // workload registered at construction and deregisters only after
    // draining (module docs); the caller never touches MR bytes while
    // requests are outstanding, and slots are reused only after the
    // signalled completion covering them has been reaped.
    unsafe { v.post_send(qp, &wrs[..n]) }?;
    Ok(())
}

/// Posts receives for the slots `first..first + n` (wrapping at `slots`)
/// of the responder's MR, in lists of at most [`MAX_POST_LIST`].
// Calls `post_recv`, an `unsafe fn`; its contract is kept as the module
// documentation explains.
#[allow(unsafe_code)]
fn post_recvs<V: Verbs>(
    v: &mut V,
    qp: &V::Qp,
    mr: &MrInfo,
    msg_bytes: u32,
    slots: u64,
    first: u64,
    n: u64,
) -> Result<(), WorkloadError> {
    let mut done = 0;
    while done < n {
        let len = (n - done).min(MAX_POST_LIST as u64) as usize;
        let sges: [Sge; MAX_POST_LIST] = core::array::from_fn(|k| Sge {
            addr: mr.addr + ((first + done + k as u64) % slots) * u64::from(msg_bytes),
            length: msg_bytes,
            lkey: mr.lkey,
        });
        let wrs: [RecvWr<'_>; MAX_POST_LIST] = core::array::from_fn(|k| RecvWr {
            wr_id: first + done + k as u64,
            sg_list: core::slice::from_ref(&sges[k]),
        });
        // SAFETY: each SGE is a slot inside the responder's MR, registered
        // until teardown; the caller never reads or writes MR bytes while
        // receives are posted (module docs).
        unsafe { v.post_recv(qp, &wrs[..len]) }?;
        done += len as u64;
    }
    Ok(())
}

/// `sim_rc_write_msg_rate`, `sim_read_rate`, `sim_atomic_rate`: one RC
/// pair, the requester keeping `outstanding` requests in flight.
///
/// The pipeline persists across [`MessageRate::run`] calls (a benchmark
/// iteration sees the steady state, not a ramp-up); [`MessageRate::drain`]
/// empties it.
pub struct MessageRate<V: Verbs> {
    cfg: MessageRateConfig,
    pair: RcPair<V>,
    pipe: Pipeline,
    local_offsets: Vec<u32>,
    remote_offsets: Vec<u32>,
    cursor: usize,
}

impl<V: Verbs> MessageRate<V> {
    /// Builds and connects the pair, registers the MRs (requester: 1 MiB,
    /// or less if the responder's is smaller; responder:
    /// `cfg.remote_mr_bytes`) and precomputes the offset tables.
    ///
    /// # Errors
    /// [`WorkloadError::Unsupported`] for atomics on a device without them
    /// or an inconsistent `cfg`; a not-implemented error without
    /// [`Capabilities::DATA_PATH`]; otherwise the first verb that fails.
    pub fn new(v: &mut V, cfg: MessageRateConfig) -> Result<Self, WorkloadError> {
        cfg.check()?;
        require_data_path(v)?;
        let local_bytes = cfg.remote_mr_bytes.min(1 << 20);
        let shape = PairShape {
            send_wr: cfg.outstanding,
            recv_wr: 1,
            requester_cqe: cfg.outstanding / cfg.signal_every + 1,
            responder_cqe: 1,
            requester_mr: (local_bytes, AccessFlags::LOCAL_WRITE),
            responder_mr: (cfg.remote_mr_bytes, cfg.op.remote_access()),
        };
        let pair = RcPair::new(v, &shape)?;
        if cfg.op.is_atomic()
            && !(pair.requester.ep.limits.atomics && pair.responder.ep.limits.atomics)
        {
            let _ = pair.close(v);
            return Err(WorkloadError::Unsupported(
                "RDMA atomics (atomic_cap is NONE)".into(),
            ));
        }
        let len = cfg.msg_bytes as usize;
        let local_offsets = sequential_offsets(OFFSET_TABLE_LEN, local_bytes, len);
        let remote_offsets = match cfg.spread {
            Spread::Sequential => sequential_offsets(OFFSET_TABLE_LEN, cfg.remote_mr_bytes, len),
            Spread::Random { seed } => {
                random_offsets(seed, OFFSET_TABLE_LEN, cfg.remote_mr_bytes, len, len)
            }
        };
        let pipe = Pipeline::new(cfg.outstanding, cfg.signal_every, cfg.poll_batch);
        Ok(Self {
            cfg,
            pair,
            pipe,
            local_offsets,
            remote_offsets,
            cursor: 0,
        })
    }

    /// The shape this workload runs.
    pub fn config(&self) -> &MessageRateConfig {
        &self.cfg
    }

    /// Posts `requests` more requests, in lists of `signal_every` (the last
    /// list may be shorter; the last request of every list is signalled),
    /// reaping completions whenever `outstanding` are in flight. Up to
    /// `outstanding` stay in flight afterwards.
    ///
    /// # Errors
    /// The first verb that fails, a completion with an error status, or a
    /// stalled CQ.
    pub fn run(&mut self, v: &mut V, requests: u64) -> Result<(), WorkloadError> {
        let opcode = self.cfg.op.opcode();
        let wc_opcode = self.cfg.op.wc_opcode();
        let (local, remote) = (self.pair.requester.mr_info, self.pair.responder.mr_info);
        let len = self.cfg.msg_bytes;
        let atomic = self.cfg.op.is_atomic();
        let mut left = requests;
        while left > 0 {
            let n = left.min(self.pipe.signal_every as u64);
            while self.pipe.in_flight() >= self.pipe.max_lists {
                self.pipe.reap(v, &self.pair.requester.ep.cq, wc_opcode)?;
            }
            let (locals, remotes, cursor) =
                (&self.local_offsets, &self.remote_offsets, &mut self.cursor);
            post_list(
                v,
                &self.pair.requester.qp,
                self.pipe.posted_lists,
                opcode,
                n as usize,
                |_| {
                    let at = *cursor;
                    *cursor = (at + 1) & (OFFSET_TABLE_LEN - 1);
                    let sge = Sge {
                        addr: local.addr + u64::from(locals[at]),
                        length: len,
                        lkey: local.lkey,
                    };
                    let remote_addr = remote.addr + u64::from(remotes[at]);
                    if atomic {
                        let info = AtomicInfo {
                            remote_addr,
                            compare_add: 1,
                            swap: 2,
                            rkey: remote.rkey,
                        };
                        (sge, RdmaInfo::default(), info)
                    } else {
                        (
                            sge,
                            RdmaInfo {
                                remote_addr,
                                rkey: remote.rkey,
                            },
                            AtomicInfo::default(),
                        )
                    }
                },
            )?;
            self.pipe.posted_lists += 1;
            left -= n;
        }
        Ok(())
    }

    /// Reaps until nothing is in flight.
    ///
    /// # Errors
    /// As [`MessageRate::run`].
    pub fn drain(&mut self, v: &mut V) -> Result<(), WorkloadError> {
        while self.pipe.in_flight() > 0 {
            self.pipe
                .reap(v, &self.pair.requester.ep.cq, self.cfg.op.wc_opcode())?;
        }
        Ok(())
    }

    /// Drains, then destroys everything the workload created.
    ///
    /// # Errors
    /// The first failure; teardown continues past a failed drain.
    pub fn teardown(mut self, v: &mut V) -> Result<(), WorkloadError> {
        let drained = self.drain(v);
        let closed = self.pair.close(v);
        drained.and(closed)
    }
}

/// Shape of a [`SendRecvBw`] workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendRecvConfig {
    /// Bytes per SEND.
    pub msg_bytes: u32,
    /// Receives kept posted (the receive queue's depth).
    pub rq_depth: u32,
    /// SENDs in flight at most.
    pub outstanding: u32,
    /// Every `signal_every`-th SEND is signalled (lists of this length).
    pub signal_every: u32,
    /// Completions asked for per `poll_cq`.
    pub poll_batch: u32,
}

/// Bytes of receive buffers a [`SendRecvBw`] workload registers at most;
/// beyond it the `rq_depth` receive slots wrap and share buffers (legal:
/// the content of a shared buffer is then undefined, and nobody reads it).
pub const RECV_MR_BYTES_MAX: usize = 64 << 20;

impl SendRecvConfig {
    /// `sim_send_recv_bw/{4K,64K,1M}`: RQ depth 256, 128 SENDs in flight,
    /// signal every 16th, poll batches of 16.
    pub fn bw(msg_bytes: u32) -> Self {
        Self {
            msg_bytes,
            rq_depth: 256,
            outstanding: 128,
            signal_every: 16,
            poll_batch: 16,
        }
    }

    fn check(&self) -> Result<(), WorkloadError> {
        let ok = self.signal_every > 0
            && self.signal_every as usize <= MAX_POST_LIST
            && self.outstanding >= self.signal_every
            && self.outstanding <= self.rq_depth
            && self.poll_batch > 0
            && self.msg_bytes > 0;
        if ok {
            Ok(())
        } else {
            Err(WorkloadError::Unsupported(
                "workload shape: need 0 < signal_every <= MAX_POST_LIST <= ..., signal_every <= outstanding <= rq_depth"
                    .into(),
            ))
        }
    }
}

/// `sim_send_recv_bw`: RC SEND/RECV, the responder keeping `rq_depth`
/// receives posted and reposting each as its completion is reaped.
///
/// Every SEND reads the same `msg_bytes` source buffer (legal: posted
/// requests may share source bytes nobody writes); receives land in
/// distinct slots up to [`RECV_MR_BYTES_MAX`].
pub struct SendRecvBw<V: Verbs> {
    cfg: SendRecvConfig,
    pair: RcPair<V>,
    pipe: Pipeline,
    recv_slots: u64,
    recvs_posted: u64,
    recvs_reaped: u64,
    sends_posted: u64,
    recv_wc: Vec<Wc>,
}

impl<V: Verbs> SendRecvBw<V> {
    /// Builds and connects the pair, registers the buffers and posts
    /// `rq_depth` receives.
    ///
    /// # Errors
    /// A not-implemented error without [`Capabilities::DATA_PATH`];
    /// otherwise the first verb that fails.
    pub fn new(v: &mut V, cfg: SendRecvConfig) -> Result<Self, WorkloadError> {
        cfg.check()?;
        require_data_path(v)?;
        let msg = cfg.msg_bytes as usize;
        let recv_slots = (RECV_MR_BYTES_MAX / msg).clamp(1, cfg.rq_depth as usize);
        let shape = PairShape {
            send_wr: cfg.outstanding,
            recv_wr: cfg.rq_depth,
            requester_cqe: cfg.outstanding / cfg.signal_every + 1,
            responder_cqe: cfg.rq_depth,
            requester_mr: (msg.max(PAGE_BYTES), AccessFlags::LOCAL_WRITE),
            responder_mr: (recv_slots * msg, AccessFlags::LOCAL_WRITE),
        };
        let pair = RcPair::new(v, &shape)?;
        let mut bw = Self {
            cfg,
            pair,
            pipe: Pipeline::new(cfg.outstanding, cfg.signal_every, cfg.poll_batch),
            recv_slots: recv_slots as u64,
            recvs_posted: 0,
            recvs_reaped: 0,
            sends_posted: 0,
            recv_wc: vec![Wc::default(); cfg.poll_batch as usize],
        };
        if let Err(e) = bw.repost(v, u64::from(cfg.rq_depth)) {
            let _ = bw.pair.close(v);
            return Err(e);
        }
        Ok(bw)
    }

    /// The shape this workload runs.
    pub fn config(&self) -> &SendRecvConfig {
        &self.cfg
    }

    fn repost(&mut self, v: &mut V, n: u64) -> Result<(), WorkloadError> {
        let r = &self.pair.responder;
        post_recvs(
            v,
            &r.qp,
            &r.mr_info,
            self.cfg.msg_bytes,
            self.recv_slots,
            self.recvs_posted,
            n,
        )?;
        self.recvs_posted += n;
        Ok(())
    }

    /// Reaps receive completions while full batches come back, reposting
    /// as many receives.
    fn reap_recvs(&mut self, v: &mut V) -> Result<(), WorkloadError> {
        loop {
            let n = v.poll_cq(&self.pair.responder.ep.cq, &mut self.recv_wc)?;
            for wc in &self.recv_wc[..n] {
                check_wc(wc, WcOpcode::Recv, Some(self.recvs_reaped))?;
                if wc.byte_len != self.cfg.msg_bytes {
                    return Err(WorkloadError::Mismatch(format!(
                        "receive wr_id={} got {} bytes, expected {}",
                        wc.wr_id, wc.byte_len, self.cfg.msg_bytes
                    )));
                }
                self.recvs_reaped += 1;
            }
            if n > 0 {
                self.repost(v, n as u64)?;
            }
            if n < self.recv_wc.len() {
                return Ok(());
            }
        }
    }

    /// Posts `sends` more SENDs, in lists of `signal_every` (the last may be
    /// shorter), reaping send and receive completions as it goes.
    ///
    /// # Errors
    /// The first verb that fails, a completion with an error status, or a
    /// stalled CQ.
    pub fn run(&mut self, v: &mut V, sends: u64) -> Result<(), WorkloadError> {
        let source = self.pair.requester.mr_info;
        let len = self.cfg.msg_bytes;
        let mut left = sends;
        while left > 0 {
            let n = left.min(self.pipe.signal_every as u64);
            while self.pipe.in_flight() >= self.pipe.max_lists {
                self.pipe
                    .reap(v, &self.pair.requester.ep.cq, WcOpcode::Send)?;
                self.reap_recvs(v)?;
            }
            post_list(
                v,
                &self.pair.requester.qp,
                self.pipe.posted_lists,
                WrOpcode::Send,
                n as usize,
                |_| {
                    let sge = Sge {
                        addr: source.addr,
                        length: len,
                        lkey: source.lkey,
                    };
                    (sge, RdmaInfo::default(), AtomicInfo::default())
                },
            )?;
            self.pipe.posted_lists += 1;
            self.sends_posted += n;
            left -= n;
        }
        Ok(())
    }

    /// Reaps every outstanding SEND and the receive of each.
    ///
    /// # Errors
    /// As [`SendRecvBw::run`].
    pub fn drain(&mut self, v: &mut V) -> Result<(), WorkloadError> {
        while self.pipe.in_flight() > 0 {
            self.pipe
                .reap(v, &self.pair.requester.ep.cq, WcOpcode::Send)?;
        }
        let sent = self.sends_posted;
        let mut empty = 0u64;
        while self.recvs_reaped < sent {
            let before = self.recvs_reaped;
            self.reap_recvs(v)?;
            if self.recvs_reaped == before {
                empty += 1;
                if empty >= MAX_EMPTY_POLLS {
                    return Err(WorkloadError::Stalled("responder CQ"));
                }
            }
        }
        Ok(())
    }

    /// Drains, then destroys everything (the receives still posted are
    /// flushed by the QP's destruction).
    ///
    /// # Errors
    /// The first failure; teardown continues past a failed drain.
    pub fn teardown(mut self, v: &mut V) -> Result<(), WorkloadError> {
        let drained = self.drain(v);
        let closed = self.pair.close(v);
        drained.and(closed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backend_sim::{SimConfig, SimVerbs};

    fn sim() -> SimVerbs {
        SimVerbs::new(SimConfig::default())
    }

    #[test]
    fn inconsistent_shapes_are_refused_before_any_verb() {
        // Goal: a bad configuration is an error, not a hang or a panic.
        // Method: break each constraint once.
        let base = MessageRateConfig::rc_write_64();
        let bad = [
            MessageRateConfig {
                signal_every: 0,
                ..base
            },
            MessageRateConfig {
                signal_every: MAX_POST_LIST as u32 + 1,
                ..base
            },
            MessageRateConfig {
                outstanding: 8,
                ..base
            },
            MessageRateConfig {
                msg_bytes: 64,
                ..MessageRateConfig::atomic(RateOp::FetchAdd)
            },
            MessageRateConfig {
                remote_mr_bytes: 32,
                ..base
            },
        ];
        for cfg in bad {
            assert!(
                matches!(cfg.check(), Err(WorkloadError::Unsupported(_))),
                "{cfg:?}"
            );
        }
        assert!(base.check().is_ok() && MessageRateConfig::rc_write_64_1gib().check().is_ok());
        assert!(SendRecvConfig {
            outstanding: 512,
            ..SendRecvConfig::bw(4096)
        }
        .check()
        .is_err());
    }

    /// Runs a message-rate workload: without a data path it is a clean
    /// not-implemented error before anything is created; with one, it runs,
    /// drains and tears down completely.
    fn exercise_rate(cfg: MessageRateConfig) {
        let mut v = sim();
        let data_path = v.capabilities().contains(Capabilities::DATA_PATH);
        match MessageRate::new(&mut v, cfg) {
            Err(e) => assert!(!data_path && e.is_not_implemented(), "{e}"),
            Ok(mut w) => {
                w.run(&mut v, 1_000).expect("run");
                w.drain(&mut v).expect("drain");
                w.teardown(&mut v).expect("teardown leaves nothing behind");
            }
        }
    }

    #[test]
    fn message_rates_run_or_report_not_implemented() {
        // Goal: every data-path workload either runs on the simulator or
        // fails cleanly while its data path is missing. Method: exercise
        // each shape (1 MiB MRs).
        exercise_rate(MessageRateConfig::rc_write_64());
        exercise_rate(MessageRateConfig::read_64());
        exercise_rate(MessageRateConfig::atomic(RateOp::FetchAdd));
        exercise_rate(MessageRateConfig::atomic(RateOp::CompSwap));
    }

    #[test]
    fn pair_set_up_leaves_nothing_behind() {
        // Goal: building and closing the connected pair (what every
        // data-path workload stands on) works on the simulator today and
        // frees everything. Method: build the write pair, check both QPs
        // reached RTS, close it; close_side's dealloc_pd fails on a leak.
        let mut v = sim();
        let cfg = MessageRateConfig::rc_write_64();
        let shape = PairShape {
            send_wr: cfg.outstanding,
            recv_wr: 1,
            requester_cqe: 9,
            responder_cqe: 1,
            requester_mr: (1 << 20, AccessFlags::LOCAL_WRITE),
            responder_mr: (1 << 20, cfg.op.remote_access()),
        };
        let pair = RcPair::new(&mut v, &shape).expect("pair");
        for qp in [&pair.requester.qp, &pair.responder.qp] {
            let (attr, _) = v.query_qp(qp, verbs_api::QpAttrMask::STATE).expect("query");
            assert_eq!(attr.qp_state, verbs_api::QpState::ReadyToSend);
        }
        pair.close(&mut v).expect("close");
    }

    #[test]
    fn send_recv_runs_or_reports_not_implemented() {
        // Goal: as above for SEND/RECV, whose set-up already posts receives.
        // Method: build; a not-implemented error must come back as such.
        let mut v = sim();
        let data_path = v.capabilities().contains(Capabilities::DATA_PATH);
        match SendRecvBw::new(&mut v, SendRecvConfig::bw(4096)) {
            Err(e) => assert!(!data_path && e.is_not_implemented(), "{e}"),
            Ok(mut w) => {
                w.run(&mut v, 1_000).expect("run");
                w.drain(&mut v).expect("drain");
                w.teardown(&mut v).expect("teardown");
            }
        }
    }
}
