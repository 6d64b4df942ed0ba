//! `ibv_modify_qp`: the kernel's validation, the range checks, and the
//! state-entry side effects, all-or-nothing.

use verbs_api::{
    check_modify, strip_mask, AsyncEventType, Error, ErrorKind, ModifyRefusal, Mtu, PathMigState,
    QpAttr, QpAttrMask as M, QpClass, QpState, Result, TableFlavor, Verb,
};

use super::state::{AltPath, QpPhase};
use super::{invalid, AsyncSubject, Device, World};
use crate::handles::QpHandle;
use crate::profile::DriverModel;
use crate::trace::TraceEvent;

const PSN_MASK: u32 = 0xff_ffff;

/// A state change that has happened, as [`World::state_entered`] needs it
/// (taken from the QP by the caller, which has it at hand).
#[derive(Clone, Copy)]
struct Entered {
    from: QpState,
    to: QpState,
    device: u32,
    qpn: u32,
    class: QpClass,
}

/// `EINVAL` for a `cur_qp_state` that is not the QP's state.
#[cold]
#[inline(never)]
fn cur_state_mismatch(given: QpState, cur: QpState) -> Error {
    refuse(format!(
        "cur_qp_state {given} does not match the QP's state {cur}"
    ))
}

/// The error of a modify the table refused, with the transition, the rule
/// and what was wrong, e.g. `RTR->RTS for RC requires
/// TIMEOUT|RETRY_CNT|RNR_RETRY|MAX_QP_RD_ATOMIC|SQ_PSN; missing TIMEOUT`
/// (the `Display` of [`ModifyRefusal`]). The message is kept as data and
/// formatted only when shown: a refused modify allocates nothing.
#[cold]
#[inline(never)]
fn table_error(
    class: QpClass,
    flavor: TableFlavor,
    state: QpState,
    attr: &QpAttr,
    mask: M,
    kind: ErrorKind,
) -> Error {
    Error::modify_refused(
        Verb::ModifyQp,
        ModifyRefusal::new(
            class,
            flavor,
            state,
            mask,
            attr.qp_state,
            attr.cur_qp_state,
            kind,
        ),
    )
}

/// The attributes with a plain range (one test skips all four).
const RANGED: M = M::TIMEOUT
    .union(M::RETRY_CNT)
    .union(M::RNR_RETRY)
    .union(M::MIN_RNR_TIMER);

/// The attributes checked against the device or a value list.
const RARE: M = M::MAX_QP_RD_ATOMIC
    .union(M::MAX_DEST_RD_ATOMIC)
    .union(M::ALT_PATH)
    .union(M::PATH_MIG_STATE)
    .union(M::RATE_LIMIT);

/// The attributes of the responder path.
const PATH_BITS: M = M::AV
    .union(M::PATH_MTU)
    .union(M::DEST_QPN)
    .union(M::RQ_PSN)
    .union(M::MAX_DEST_RD_ATOMIC)
    .union(M::MIN_RNR_TIMER)
    .union(M::PATH_MIG_STATE);

/// The attributes of the requester.
const REQ_BITS: M = M::SQ_PSN
    .union(M::TIMEOUT)
    .union(M::RETRY_CNT)
    .union(M::RNR_RETRY)
    .union(M::MAX_QP_RD_ATOMIC)
    .union(M::RATE_LIMIT)
    .union(M::EN_SQD_ASYNC_NOTIFY);

fn mtu_ok(mtu: Mtu) -> bool {
    matches!(
        mtu,
        Mtu::Mtu256 | Mtu::Mtu512 | Mtu::Mtu1024 | Mtu::Mtu2048 | Mtu::Mtu4096
    )
}

/// `EINVAL` with `msg` (out of line: the error paths stay out of the
/// hot code).
#[cold]
#[inline(never)]
fn refuse(msg: String) -> Error {
    invalid(Verb::ModifyQp, msg)
}

/// `EINVAL` for an attribute above its field's range.
#[cold]
#[inline(never)]
fn out_of_range(name: &str, value: u8, max: u8) -> Error {
    refuse(format!("{name} {value} is out of range 0..={max}"))
}

/// The range checks of qp-state-machine.md §5.1–§5.2 for a modify into
/// `next` (not RESET) from `cur` on device `d`, in the kernel's order;
/// `port` is the QP's port (1 before it has one). Returns the port the QP
/// has after the modify.
#[inline(always)]
fn check_attrs(
    d: &Device,
    mut port: u8,
    cur: QpState,
    next: QpState,
    attr: &QpAttr,
    mask: M,
) -> Result<u8> {
    let v = Verb::ModifyQp;
    let p = &d.profile;
    // PORT (uverbs: 1..=phys_port_cnt).
    if mask.contains(M::PORT) {
        if !d.port_valid(attr.port_num) {
            return Err(refuse(format!(
                "port_num {} is not a port of the device (1..={})",
                attr.port_num, p.attr.phys_port_cnt
            )));
        }
        port = attr.port_num;
    }
    // AV (uverbs, mlx5: port valid and equal to the QP's; GRH on RoCE; sgid_index).
    if mask.contains(M::AV) {
        World::check_ah(d, &attr.ah_attr, v, "ah_attr")?;
        if mask.contains(M::PORT) {
            if attr.ah_attr.port_num != attr.port_num {
                return Err(refuse(format!(
                    "ah_attr.port_num {} differs from port_num {}",
                    attr.ah_attr.port_num, attr.port_num
                )));
            }
        } else if cur == QpState::Init && next == QpState::ReadyToReceive {
            if attr.ah_attr.port_num != port {
                return Err(refuse(format!(
                    "ah_attr.port_num {} differs from the QP's port {port}",
                    attr.ah_attr.port_num
                )));
            }
        } else {
            // The kernel sets PORT implicitly from the AV (K-UVERBS).
            port = attr.ah_attr.port_num;
        }
    }
    let pkey_tbl_len = p.port.pkey_tbl_len;
    if mask.contains(M::PKEY_INDEX) && attr.pkey_index >= pkey_tbl_len {
        return Err(refuse(format!(
            "pkey_index {} is past pkey_tbl_len {pkey_tbl_len}",
            attr.pkey_index
        )));
    }
    if mask.contains(M::PATH_MTU) {
        if !mtu_ok(attr.path_mtu) {
            return Err(refuse(format!(
                "path_mtu {} is not an IBV_MTU value (1..=5)",
                attr.path_mtu.to_raw()
            )));
        }
        if attr.path_mtu.to_raw() > p.port.max_mtu.to_raw() {
            return Err(refuse(format!(
                "path_mtu {} is above the port's max_mtu {}",
                attr.path_mtu, p.port.max_mtu
            )));
        }
    }
    if mask.intersects(RANGED) {
        if mask.contains(M::TIMEOUT) && attr.timeout > 31 {
            return Err(out_of_range("timeout", attr.timeout, 31));
        }
        if mask.contains(M::RETRY_CNT) && attr.retry_cnt > 7 {
            return Err(out_of_range("retry_cnt", attr.retry_cnt, 7));
        }
        if mask.contains(M::RNR_RETRY) && attr.rnr_retry > 7 {
            return Err(out_of_range("rnr_retry", attr.rnr_retry, 7));
        }
        if mask.contains(M::MIN_RNR_TIMER) && attr.min_rnr_timer > 31 {
            return Err(out_of_range("min_rnr_timer", attr.min_rnr_timer, 31));
        }
    }
    if mask.intersects(RARE) {
        if mask.contains(M::MAX_QP_RD_ATOMIC)
            && u32::from(attr.max_rd_atomic) > p.attr.max_qp_init_rd_atom
        {
            return Err(refuse(format!(
                "max_rd_atomic {} is above max_qp_init_rd_atom {}",
                attr.max_rd_atomic, p.attr.max_qp_init_rd_atom
            )));
        }
        if mask.contains(M::MAX_DEST_RD_ATOMIC)
            && u32::from(attr.max_dest_rd_atomic) > p.attr.max_qp_rd_atom
        {
            return Err(refuse(format!(
                "max_dest_rd_atomic {} is above max_qp_rd_atom {}",
                attr.max_dest_rd_atomic, p.attr.max_qp_rd_atom
            )));
        }
        if mask.contains(M::ALT_PATH) {
            check_alt_path(d, attr, pkey_tbl_len)?;
        }
        if mask.contains(M::PATH_MIG_STATE)
            && !matches!(
                attr.path_mig_state,
                PathMigState::Migrated | PathMigState::Rearm | PathMigState::Armed
            )
        {
            return Err(refuse(format!(
                "path_mig_state {} is not a valid value",
                attr.path_mig_state
            )));
        }
        if mask.contains(M::RATE_LIMIT)
            && attr.rate_limit != 0
            && attr.rate_limit > p.rate_limit_max_kbps
        {
            return Err(refuse(if p.rate_limit_max_kbps == 0 {
                format!(
                    "rate_limit {} kbps: the device has no packet pacing",
                    attr.rate_limit
                )
            } else {
                format!(
                    "rate_limit {} kbps is above the device's {} kbps",
                    attr.rate_limit, p.rate_limit_max_kbps
                )
            }));
        }
    }
    Ok(port)
}

/// The checks of `IBV_QP_ALT_PATH` (rare: out of line).
#[inline(never)]
fn check_alt_path(d: &Device, attr: &QpAttr, pkey_tbl_len: u16) -> Result<()> {
    let v = Verb::ModifyQp;
    if d.profile.grh_required() {
        return Err(invalid(
            v,
            "IBV_QP_ALT_PATH is not supported on a RoCE port",
        ));
    }
    if !d.port_valid(attr.alt_port_num) {
        return Err(refuse(format!(
            "alt_port_num {} is not a port of the device",
            attr.alt_port_num
        )));
    }
    World::check_ah(d, &attr.alt_ah_attr, v, "alt_ah_attr")?;
    if attr.alt_ah_attr.port_num != attr.alt_port_num {
        return Err(invalid(v, "alt_ah_attr.port_num differs from alt_port_num"));
    }
    if attr.alt_timeout > 31 {
        return Err(refuse(format!(
            "alt_timeout {} is out of range 0..=31",
            attr.alt_timeout
        )));
    }
    if attr.alt_pkey_index >= pkey_tbl_len {
        return Err(refuse(format!(
            "alt_pkey_index {} is past pkey_tbl_len {pkey_tbl_len}",
            attr.alt_pkey_index
        )));
    }
    Ok(())
}

/// Enters `next` (a table state but RESET) and applies every attribute of
/// `mask` (already range-checked), in place (qp-state-machine.md §2, §7):
/// INIT is bound to a port (receives may be posted, IBA C10-25), RTR adds
/// the responder path, RTS the requester, SQD starts not draining
/// (`state_entered` marks it draining while requests are in flight), ERR
/// keeps what was configured for `ibv_query_qp`.
#[inline(always)]
fn apply(phase: &mut QpPhase, next: QpState, attr: &QpAttr, mask: M, port: u8, rxe: bool) {
    let round = |n: u8| {
        if rxe && n > 0 {
            n.next_power_of_two()
        } else {
            n
        }
    };
    phase.reshape(next);
    let (bound, path, req) = phase.parts_mut();
    if let Some(b) = bound {
        if mask.contains(M::PORT) || mask.contains(M::AV) || b.port_num == 0 {
            b.port_num = port;
        }
        if mask.contains(M::PKEY_INDEX) {
            b.pkey_index = attr.pkey_index;
        }
        if mask.contains(M::QKEY) {
            b.qkey = attr.qkey;
        }
        if mask.contains(M::ACCESS_FLAGS) {
            b.access = attr.qp_access_flags;
        }
    }
    if let Some(pa) = path.filter(|_| mask.intersects(PATH_BITS)) {
        if mask.contains(M::AV) {
            pa.ah = attr.ah_attr;
        }
        if mask.contains(M::PATH_MTU) {
            pa.path_mtu = attr.path_mtu;
        }
        if mask.contains(M::DEST_QPN) {
            pa.dest_qpn = attr.dest_qp_num & PSN_MASK;
        }
        if mask.contains(M::RQ_PSN) {
            pa.rq_psn = attr.rq_psn & PSN_MASK;
        }
        if mask.contains(M::MAX_DEST_RD_ATOMIC) {
            pa.max_dest_rd_atomic = round(attr.max_dest_rd_atomic);
        }
        if mask.contains(M::MIN_RNR_TIMER) {
            pa.min_rnr_timer = attr.min_rnr_timer;
        }
        if mask.contains(M::PATH_MIG_STATE) {
            pa.path_mig_state = attr.path_mig_state;
        }
    }
    if let Some(r) = req.filter(|_| mask.intersects(REQ_BITS)) {
        if mask.contains(M::SQ_PSN) {
            r.sq_psn = attr.sq_psn & PSN_MASK;
        }
        if mask.contains(M::TIMEOUT) {
            r.timeout = attr.timeout;
        }
        if mask.contains(M::RETRY_CNT) {
            r.retry_cnt = attr.retry_cnt;
        }
        if mask.contains(M::RNR_RETRY) {
            r.rnr_retry = attr.rnr_retry;
        }
        if mask.contains(M::MAX_QP_RD_ATOMIC) {
            r.max_rd_atomic = round(attr.max_rd_atomic);
        }
        if mask.contains(M::RATE_LIMIT) {
            r.rate_limit = attr.rate_limit;
        }
        if mask.contains(M::EN_SQD_ASYNC_NOTIFY) {
            r.en_sqd_async_notify = attr.en_sqd_async_notify != 0;
        }
    }
}

impl World {
    /// `ibv_modify_qp`, exactly as the kernel validates it:
    ///
    /// 1. [`check_modify`] (uverbs mask bits, `ib_modify_qp_is_ok`, the
    ///    mlx5 gaps for mlx5 profiles);
    /// 2. `cur_qp_state` must be the real state;
    /// 3. the range checks of qp-state-machine.md §5.1–§5.2;
    /// 4. the state-entry side effects of §7 (through `state_entered`).
    ///
    /// Nothing changes on error. The QP is looked up once and its phase
    /// changed in place.
    ///
    /// # Divergence from hardware
    /// Out-of-range `timeout`, `retry_cnt`, `rnr_retry` and `min_rnr_timer`
    /// are `EINVAL` (mlx5 truncates them to their field width); the
    /// simulator validates against the QP's real state (there is no stale
    /// cached state after a device-initiated ERR).
    pub fn modify_qp(&mut self, qp: QpHandle, attr: &QpAttr, mask: M) -> Result<()> {
        self.modify_qp_in_place::<false>(qp, attr, mask)
    }

    /// [`Self::modify_qp`], inlined into [`Self::modify_qp_handle`] (the
    /// verb's path, one call deep); with `UNPARK` a success ends with
    /// `unpark_rnr`.
    #[inline(always)]
    fn modify_qp_in_place<const UNPARK: bool>(
        &mut self,
        qp: QpHandle,
        attr: &QpAttr,
        mask: M,
    ) -> Result<()> {
        let v = Verb::ModifyQp;
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return self.qp(qp, v).map(|_| ());
        };
        let d = &self.devices[q.device as usize];
        let flavor = d.profile.table_flavor;
        let cur = q.phase.state();
        let next = match check_modify(q.class, flavor, cur, mask, attr.qp_state, attr.cur_qp_state)
        {
            Ok(next) => next,
            Err(k) => return Err(table_error(q.class, flavor, cur, attr, mask, k)),
        };
        let mask = strip_mask(q.class, mask);
        if mask.contains(M::CUR_STATE) && attr.cur_qp_state != cur {
            return Err(cur_state_mismatch(attr.cur_qp_state, cur));
        }
        if let QpPhase::SendQueueDrain(.., true) = q.phase {
            if d.profile.driver == DriverModel::Rxe && next != QpState::Error {
                return Err(invalid(
                    v,
                    "the send queue is still draining: only ERR is allowed (rxe)",
                ));
            }
        }
        if next == QpState::Reset {
            q.phase = QpPhase::Reset;
        } else {
            let port = q.phase.bound().map_or(1, |b| b.port_num);
            let port = check_attrs(d, port, cur, next, attr, mask)?;
            let rxe = d.profile.driver == DriverModel::Rxe;
            apply(&mut q.phase, next, attr, mask, port, rxe);
        }
        let has_path = q.phase.path().is_some();
        if !has_path {
            // The alternate path belongs to the path.
            q.alt = None;
        }
        // The phase is now `next`'s (`apply` reshaped it).
        let entered = Entered {
            from: cur,
            to: next,
            device: q.device,
            qpn: q.qp_num,
            class: q.class,
        };
        if mask.contains(M::ALT_PATH) && has_path {
            // Set before the entry side effects, which never read it (only
            // `ibv_query_qp` does): every refusal comes before the first
            // change.
            q.alt = Some(Box::new(AltPath {
                ah: attr.alt_ah_attr,
                pkey_index: attr.alt_pkey_index,
                port_num: attr.alt_port_num,
                timeout: attr.alt_timeout,
            }));
        }
        self.state_entered(qp, entered);
        if !self.ext.ece_is_empty() {
            // ECE options set with ibv_set_ece go to the device with the
            // next modify (mlx5), whatever it changes.
            self.ece_on_modify(qp);
        }
        if UNPARK {
            self.unpark_rnr();
        }
        Ok(())
    }

    /// `ibv_modify_qp` through any handle (a TGT handle modifies its real
    /// QP), then requesters parked in an RNR wait retry (`unpark_rnr`),
    /// whatever the outcome; an invalid handle fails before either.
    pub(crate) fn modify_qp_handle(&mut self, qp: QpHandle, attr: &QpAttr, mask: M) -> Result<()> {
        let qp = self.resolve_qp(qp, Verb::ModifyQp)?;
        if !self.rnr_parked.is_empty() {
            return self.modify_qp_parked(qp, attr, mask);
        }
        // No requester is parked, and a refused modify changes nothing
        // (every refusal comes before the first change), so after one
        // `unpark_rnr` has nothing to do: only a success runs it, and an
        // error is written once, straight into the result.
        self.modify_qp_in_place::<true>(qp, attr, mask)
    }

    /// [`Self::modify_qp_handle`] with requesters parked: they retry after
    /// a modify that succeeded (a refused one changed nothing they could
    /// wait for, and must leave the world as it found it).
    #[cold]
    #[inline(never)]
    fn modify_qp_parked(&mut self, qp: QpHandle, attr: &QpAttr, mask: M) -> Result<()> {
        let r = self.modify_qp(qp, attr, mask);
        if r.is_ok() {
            self.unpark_rnr();
        }
        r
    }

    /// The one place a QP's phase changes (R5): traces `old -> new` and runs
    /// the entry side effects of qp-state-machine.md §7 (`modify_qp`
    /// changes the phase in place and runs the same [`Self::state_entered`]).
    pub(crate) fn set_state(&mut self, qp: QpHandle, phase: QpPhase) {
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return;
        };
        let from = q.phase.state();
        if phase.path().is_none() {
            // The alternate path belongs to the path.
            q.alt = None;
        }
        q.phase = phase;
        let entered = Entered {
            from,
            to: phase.state(),
            device: q.device,
            qpn: q.qp_num,
            class: q.class,
        };
        self.state_entered(qp, entered);
    }

    /// After a QP's phase changed from `e.from` to `e.to` (its current
    /// one): traces the change and runs the entry side effects of
    /// qp-state-machine.md §7. A change with none (into INIT, or staying in
    /// a state but RTS) costs the trace record and no further lookup.
    #[inline(always)]
    fn state_entered(&mut self, qp: QpHandle, e: Entered) {
        let Entered {
            from,
            to,
            device,
            qpn,
            class,
        } = e;
        self.record(TraceEvent::QpState {
            device,
            qpn,
            from,
            to,
        });
        // The side effects of `state_entered_effects` belong to a change
        // into RESET, ERR, SQD or SQE; every other change goes straight to
        // the data path.
        let effects = matches!(
            to,
            QpState::Reset | QpState::Error | QpState::SendQueueDrain | QpState::SendQueueError
        ) && to != from;
        if effects {
            self.state_entered_effects(qp, from, to, class);
        } else {
            self.state_entered_data_path(qp, from, to, class);
        }
    }

    /// [`Self::state_entered`] for a change that may have side effects.
    #[inline(never)]
    fn state_entered_effects(&mut self, qp: QpHandle, from: QpState, to: QpState, class: QpClass) {
        match to {
            // RESET: WQEs are dropped without completions; mlx5 also removes
            // the QP's CQEs from its CQs (M5-VERBS `mlx5_modify_qp`).
            QpState::Reset if from != QpState::Reset => {
                let Some(q) = self.qps.get(qp.index, qp.generation) else {
                    return;
                };
                // Rings with nothing posted and nothing pending leave
                // `discard_queues` nothing to drop or mark done.
                let queued = [
                    (q.sq.head, q.sq.done, q.sq.tail),
                    (q.rq.head, q.rq.done, q.rq.tail),
                ]
                .iter()
                .any(|&(head, done, tail)| head != tail || done != tail);
                let cqs = [q.send_cq, q.recv_cq];
                let mlx5 = self.device(q.device).profile.driver == DriverModel::Mlx5;
                if queued {
                    self.discard_queues(qp);
                }
                if mlx5 {
                    for cq in cqs.into_iter().flatten() {
                        // An empty CQ has no CQE of this QP to remove.
                        if self
                            .cqs
                            .get(cq.index, cq.generation)
                            .is_some_and(|c| !c.entries.is_empty())
                        {
                            self.clean_cq(cq, qp);
                        }
                    }
                }
                // Nothing above completes a work request, so no CQ overran
                // and the QP is still in RESET.
                return self.state_entered_data_path(qp, from, to, class);
            }
            // ERR: every outstanding WR completes with WR_FLUSH_ERR; an
            // SRQ-attached QP raises LAST_WQE_REACHED (§7).
            QpState::Error if from != QpState::Error => {
                let Some(q) = self.qps.get(qp.index, qp.generation) else {
                    return;
                };
                let (ctx, srq) = (q.ctx, q.srq);
                self.flush_queues(qp);
                if srq.is_some() {
                    self.raise_async(ctx, AsyncEventType::QpLastWqeReached, AsyncSubject::Qp(qp));
                }
            }
            // SQD: drained once nothing transmitted is outstanding; notify
            // then if asked (ibv_get_async_event(3)); the executor ends a
            // drain that has to wait.
            QpState::SendQueueDrain if from != QpState::SendQueueDrain => {
                let in_flight = self.sq_in_flight(qp);
                let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
                    return;
                };
                let ctx = q.ctx;
                if let QpPhase::SendQueueDrain(b, p, r, _) = q.phase {
                    if in_flight {
                        q.phase = QpPhase::SendQueueDrain(b, p, r, true);
                    } else if r.en_sqd_async_notify {
                        self.raise_async(ctx, AsyncEventType::SqDrained, AsyncSubject::Qp(qp));
                    }
                }
            }
            // SQE (UD/UC send-side error): the send queue is flushed.
            QpState::SendQueueError if from != QpState::SendQueueError => {
                self.flush_queue(qp, super::state::QueueKind::Send);
            }
            // No side effect ran: the QP is as the caller left it.
            _ => return self.state_entered_data_path(qp, from, to, class),
        }
        // A flush above can overrun a CQ, and a CQ overrun moves its QPs to
        // ERR (data-path §6): that nested transition has run in full, so
        // the one this call began is over.
        if self
            .qps
            .get(qp.index, qp.generation)
            .is_none_or(|q| q.phase.state() != to)
        {
            return;
        }
        self.state_entered_data_path(qp, from, to, class);
    }

    /// The executor's and DC's sides of a state change (the QP is live
    /// and in `to`).
    #[inline(always)]
    fn state_entered_data_path(
        &mut self,
        qp: QpHandle,
        from: QpState,
        to: QpState,
        class: QpClass,
    ) {
        self.exec_on_state(qp, from, to);
        if matches!(class, QpClass::Dci | QpClass::Dct) {
            self.dc_on_state(qp, from, to);
        }
        // R5 invariants of the target state.
        #[cfg(debug_assertions)]
        if let Some(q) = self.qps.get(qp.index, qp.generation) {
            debug_assert_eq!(q.phase.state(), to);
            if to == QpState::Error {
                debug_assert_eq!(q.sq.outstanding(), 0, "entering ERR flushes the SQ");
                debug_assert_eq!(q.rq.outstanding(), 0, "entering ERR flushes the RQ");
            }
        }
    }

    /// Moves a QP to ERR as the device does after a fatal error (for the
    /// data path and tests); no validation.
    pub fn force_error(&mut self, qp: QpHandle) -> Result<()> {
        let q = self.qp(qp, Verb::ModifyQp)?;
        let (b, p, r) = q.phase.parts();
        self.set_state(qp, QpPhase::Error(b, p, r));
        Ok(())
    }
}
