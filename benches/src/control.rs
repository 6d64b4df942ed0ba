//! Control-path workloads: `sim_qp_lifecycle_rate` and `sim_modify_qp_rate`.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use verbs_api::{
    check_modify, legal_transitions, transition_masks, ErrorKind, QpAttr, QpAttrMask, QpCap,
    QpClass, QpState, TableFlavor, Verbs,
};

use crate::fixture::{connect_rc, rc_attr, Endpoint};
use crate::WorkloadError;

/// Capabilities of the QPs the control-path workloads create: a realistic
/// small RC QP (64 send and 64 receive requests, one SGE each), so creation
/// pays for real rings rather than one-entry ones.
pub const CONTROL_QP_CAP: QpCap = QpCap {
    max_send_wr: 64,
    max_recv_wr: 64,
    max_send_sge: 1,
    max_recv_sge: 1,
    max_inline_data: 0,
};

/// `sim_qp_lifecycle_rate`: one iteration creates an RC QP, walks it
/// RESET→INIT→RTR→RTS towards a peer QP, and destroys it.
///
/// The peer QP (the `dest_qp_num` of RTR) is created once, on the same PD,
/// and reused by every iteration; it stays in RESET, which a real HCA
/// allows (nothing is sent).
pub struct QpLifecycle<V: Verbs> {
    side: Endpoint<V>,
    peer: V::Qp,
    attr: QpAttr,
}

impl<V: Verbs> QpLifecycle<V> {
    /// Opens device 0 and creates the peer QP.
    ///
    /// # Errors
    /// The first verb that fails; nothing is left behind.
    pub fn new(v: &mut V) -> Result<Self, WorkloadError> {
        let side = Endpoint::open(v, 0, 16)?;
        let peer = match side
            .create_rc_qp(v, CONTROL_QP_CAP)
            .and_then(|qp| v.qp_num(&qp).map(|n| (qp, n)))
        {
            Ok(p) => p,
            Err(e) => {
                let _ = side.close(v);
                return Err(e.into());
            }
        };
        let attr = rc_attr(&side.limits, &side.path, &side.path, peer.1);
        Ok(Self {
            side,
            peer: peer.0,
            attr,
        })
    }

    /// One lifecycle: create, RESET→INIT→RTR→RTS, destroy. A QP whose
    /// modify fails is still destroyed before the error is returned.
    ///
    /// # Errors
    /// The first verb that fails.
    pub fn run(&mut self, v: &mut V) -> Result<(), WorkloadError> {
        let qp = self.side.create_rc_qp(v, CONTROL_QP_CAP)?;
        let walked = connect_rc(v, &qp, &mut self.attr);
        let destroyed = v.destroy_qp(&qp);
        walked?;
        destroyed?;
        Ok(())
    }

    /// Destroys the peer QP and closes the side.
    ///
    /// # Errors
    /// The first verb that fails (`EBUSY` from `dealloc_pd` means a QP leaked).
    pub fn teardown(self, v: &mut V) -> Result<(), WorkloadError> {
        v.destroy_qp(&self.peer)?;
        self.side.close(v)?;
        Ok(())
    }
}

/// What a [`ModifyStep`] tries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StepKind {
    /// A legal transition with its required bits and some safe optional ones.
    Legal,
    /// A legal `(from, to)` pair with one required bit removed.
    MissingRequired,
    /// A legal `(from, to)` pair with one bit the transition does not allow.
    ExtraBit,
    /// A `(from, to)` pair that is not in the table.
    IllegalTarget,
}

/// One `ibv_modify_qp` of a [`ModifyPlan`], with the outcome the table
/// predicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModifyStep {
    /// Index of the QP in the workload's set.
    pub qp: u32,
    /// The state the QP is in before the call.
    pub from: QpState,
    /// `attr.qp_state`.
    pub to: QpState,
    /// The attribute mask (always holds `STATE`, never `CUR_STATE`).
    pub mask: QpAttrMask,
    /// What was tried.
    pub kind: StepKind,
    /// The predicted outcome: the new state, or the error kind.
    pub expect: Result<QpState, ErrorKind>,
}

/// Optional bits a legal step may add: the ones whose values in the
/// workload's attribute template are valid in every state they are allowed
/// in. (`ALT_PATH`, `PATH_MIG_STATE`, `CUR_STATE` and the like need values
/// tied to the QP's history and are left out.)
const SAFE_OPTIONAL: QpAttrMask = QpAttrMask::ACCESS_FLAGS
    .union(QpAttrMask::PKEY_INDEX)
    .union(QpAttrMask::PORT)
    .union(QpAttrMask::MIN_RNR_TIMER);

/// Bits an [`StepKind::ExtraBit`] step may add: standard bits whose values
/// in the template are in range, so the mask check is the only failure
/// whatever order a backend checks in (`ALT_PATH`, `CAP`, `PATH_MIG_STATE`,
/// `EN_SQD_ASYNC_NOTIFY` and `CUR_STATE` are left out for that reason, and
/// `AV`, from which the kernel derives the port when `PORT` is absent).
const EXTRA_CANDIDATES: [QpAttrMask; 14] = [
    QpAttrMask::ACCESS_FLAGS,
    QpAttrMask::PKEY_INDEX,
    QpAttrMask::PORT,
    QpAttrMask::QKEY,
    QpAttrMask::PATH_MTU,
    QpAttrMask::TIMEOUT,
    QpAttrMask::RETRY_CNT,
    QpAttrMask::RNR_RETRY,
    QpAttrMask::RQ_PSN,
    QpAttrMask::MAX_QP_RD_ATOMIC,
    QpAttrMask::MIN_RNR_TIMER,
    QpAttrMask::SQ_PSN,
    QpAttrMask::MAX_DEST_RD_ATOMIC,
    QpAttrMask::DEST_QPN,
];

/// The states the plan walks through and aims at (the seven table states).
const STATES: [QpState; 7] = [
    QpState::Reset,
    QpState::Init,
    QpState::ReadyToReceive,
    QpState::ReadyToSend,
    QpState::SendQueueDrain,
    QpState::SendQueueError,
    QpState::Error,
];

/// Steps per block; exactly one per block is illegal (so 80 % legal).
const BLOCK: usize = 5;

/// Both table flavors' verdict on one modify, when they agree.
fn predict(from: QpState, to: QpState, mask: QpAttrMask) -> Option<Result<QpState, ErrorKind>> {
    let kernel = check_modify(QpClass::Rc, TableFlavor::Kernel, from, mask, to, from);
    let mlx5 = check_modify(QpClass::Rc, TableFlavor::Mlx5, from, mask, to, from);
    (kernel == mlx5).then_some(kernel)
}

/// The legal RC transitions of both flavors, without SQD and SQE (which a
/// plan never enters: RTS→SQD is not implemented by mlx5, SQE is entered
/// only by the device).
fn legal_pairs() -> Vec<(QpState, QpState, QpAttrMask, QpAttrMask)> {
    legal_transitions(QpClass::Rc, TableFlavor::Mlx5)
        .into_iter()
        .filter(|(from, to, _)| {
            !matches!(to, QpState::SendQueueDrain | QpState::SendQueueError)
                && !matches!(from, QpState::SendQueueDrain | QpState::SendQueueError)
                && transition_masks(QpClass::Rc, *from, *to, TableFlavor::Kernel).is_some()
        })
        .map(|(from, to, m)| (from, to, m.required, m.optional))
        .collect()
}

/// A deterministic, replayable sequence of modifies over a set of RC QPs:
/// exactly 80 % legal, 20 % illegal (a required bit missing, a bit the
/// transition does not allow, or a target the table does not have), with
/// every outcome predicted by [`check_modify`] under both table flavors.
///
/// Every QP starts and ends in RESET, so the plan can be replayed any
/// number of times on the same QPs. Steps come in blocks of five with one
/// illegal step at a seeded position; the closing blocks return each QP to
/// RESET (→RESET is legal from every state).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModifyPlan {
    /// The number of QPs the plan addresses.
    pub qps: usize,
    /// The steps, in order.
    pub steps: Vec<ModifyStep>,
}

impl ModifyPlan {
    /// The plan `sim_modify_qp_rate` uses: 64 QPs, ~5 000 steps, seed 0x5eed.
    pub fn standard() -> Self {
        Self::generate(64, 5_000, 0x5eed)
    }

    /// Generates a plan over `qps` QPs (at least one) with at least
    /// `min_steps` steps, from `seed`.
    pub fn generate(qps: usize, min_steps: usize, seed: u64) -> Self {
        let qps = qps.max(1);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let pairs = legal_pairs();
        let mut state = vec![QpState::Reset; qps];
        let mut steps = Vec::with_capacity(min_steps + qps * 2 + BLOCK);
        let mut closing = false;
        loop {
            if steps.len() >= min_steps.max(1) {
                closing = true;
                if state.iter().all(|s| *s == QpState::Reset) && steps.len() % BLOCK == 0 {
                    break;
                }
            }
            let illegal_at = below(&mut rng, BLOCK);
            for pos in 0..BLOCK {
                let step = if pos == illegal_at {
                    let qp = below(&mut rng, qps);
                    illegal_step(&mut rng, &pairs, qp, state[qp])
                } else if closing {
                    let qp = match state.iter().position(|s| *s != QpState::Reset) {
                        Some(qp) => qp,
                        None => below(&mut rng, qps),
                    };
                    legal_step(
                        qp,
                        state[qp],
                        QpState::Reset,
                        QpAttrMask::empty(),
                        QpAttrMask::empty(),
                    )
                } else {
                    let qp = below(&mut rng, qps);
                    random_legal_step(&mut rng, &pairs, qp, state[qp])
                };
                if let Ok(next) = step.expect {
                    state[step.qp as usize] = next;
                }
                steps.push(step);
            }
        }
        Self { qps, steps }
    }

    /// How many steps are predicted to succeed.
    pub fn legal_count(&self) -> usize {
        self.steps.iter().filter(|s| s.expect.is_ok()).count()
    }
}

/// A uniform draw in `0..n` (`n` ≥ 1; the bias of the modulo is below 2⁻⁵⁰
/// for the sizes used here).
fn below(rng: &mut ChaCha8Rng, n: usize) -> usize {
    (rng.next_u64() % n as u64) as usize
}

fn legal_step(
    qp: usize,
    from: QpState,
    to: QpState,
    required: QpAttrMask,
    optional: QpAttrMask,
) -> ModifyStep {
    let mask = QpAttrMask::STATE.union(required).union(optional);
    let expect = predict(from, to, mask).filter(|r| *r == Ok(to));
    debug_assert!(
        expect.is_some(),
        "legal step {from}->{to} {mask} not legal in both flavors"
    );
    ModifyStep {
        qp: qp as u32,
        from,
        to,
        mask,
        kind: StepKind::Legal,
        expect: Ok(to),
    }
}

/// A legal step from `from`, forward moves weighted 4, staying 2, ERR and
/// RESET 1, with each safe optional bit present with probability ½.
fn random_legal_step(
    rng: &mut ChaCha8Rng,
    pairs: &[(QpState, QpState, QpAttrMask, QpAttrMask)],
    qp: usize,
    from: QpState,
) -> ModifyStep {
    let weight = |to: QpState| -> u64 {
        match to {
            QpState::Reset | QpState::Error if to != from => 1,
            _ if to == from => 2,
            _ => 4,
        }
    };
    let choices: Vec<_> = pairs.iter().filter(|p| p.0 == from).collect();
    let total: u64 = choices.iter().map(|p| weight(p.1)).sum();
    let mut pick = rng.next_u64() % total;
    let mut chosen = choices[0];
    for p in &choices {
        let w = weight(p.1);
        if pick < w {
            chosen = p;
            break;
        }
        pick -= w;
    }
    let bits = rng.next_u64();
    let optional = QpAttrMask(chosen.3.intersection(SAFE_OPTIONAL).bits() & bits as u32);
    legal_step(qp, from, chosen.1, chosen.2, optional)
}

/// An illegal step from `from`: one of the three kinds, drawn until both
/// flavors agree it fails (they disagree only on RTS→SQD and SQD→SQD).
fn illegal_step(
    rng: &mut ChaCha8Rng,
    pairs: &[(QpState, QpState, QpAttrMask, QpAttrMask)],
    qp: usize,
    from: QpState,
) -> ModifyStep {
    let legal_from: Vec<_> = pairs.iter().filter(|p| p.0 == from).collect();
    loop {
        let (kind, to, mask) = match below(rng, 3) {
            0 => {
                let with_required: Vec<_> = legal_from.iter().filter(|p| !p.2.is_empty()).collect();
                if with_required.is_empty() {
                    continue;
                }
                let p = with_required[below(rng, with_required.len())];
                let bits: Vec<QpAttrMask> = QpAttrMask::NAMED
                    .iter()
                    .map(|(_, b)| *b)
                    .filter(|b| p.2.contains(*b))
                    .collect();
                let drop = bits[below(rng, bits.len())];
                (
                    StepKind::MissingRequired,
                    p.1,
                    QpAttrMask::STATE.union(p.2).difference(drop),
                )
            }
            1 => {
                let p = legal_from[below(rng, legal_from.len())];
                let allowed = p.2.union(p.3).union(QpAttrMask::STATE);
                let extras: Vec<_> = EXTRA_CANDIDATES
                    .iter()
                    .filter(|b| !allowed.contains(**b))
                    .collect();
                if extras.is_empty() {
                    continue;
                }
                let extra = *extras[below(rng, extras.len())];
                (
                    StepKind::ExtraBit,
                    p.1,
                    QpAttrMask::STATE.union(p.2).union(extra),
                )
            }
            _ => {
                let targets: Vec<_> = STATES
                    .iter()
                    .filter(|to| {
                        transition_masks(QpClass::Rc, from, **to, TableFlavor::Kernel).is_none()
                            && transition_masks(QpClass::Rc, from, **to, TableFlavor::Mlx5)
                                .is_none()
                    })
                    .collect();
                if targets.is_empty() {
                    continue;
                }
                (
                    StepKind::IllegalTarget,
                    *targets[below(rng, targets.len())],
                    QpAttrMask::STATE,
                )
            }
        };
        if let Some(Err(kind_err)) = predict(from, to, mask) {
            return ModifyStep {
                qp: qp as u32,
                from,
                to,
                mask,
                kind,
                expect: Err(kind_err),
            };
        }
    }
}

/// How one pass of a [`ModifyMix`] went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MixTally {
    /// Modifies that succeeded (all predicted to).
    pub succeeded: usize,
    /// Modifies that were refused with the predicted kind.
    pub refused: usize,
}

/// `sim_modify_qp_rate`: replays a [`ModifyPlan`] on a prepared set of RC
/// QPs and checks every outcome against the plan's prediction (success, or
/// the exact [`ErrorKind`], including the missing and extra bits).
pub struct ModifyMix<V: Verbs> {
    side: Endpoint<V>,
    qps: Vec<V::Qp>,
    plan: ModifyPlan,
    attr: QpAttr,
    cursor: usize,
}

impl<V: Verbs> ModifyMix<V> {
    /// Opens device 0 and creates `plan.qps` RC QPs; their RTR transitions
    /// point at the first of them.
    ///
    /// # Errors
    /// The first verb that fails; nothing is left behind.
    pub fn new(v: &mut V, plan: ModifyPlan) -> Result<Self, WorkloadError> {
        let side = Endpoint::open(v, 0, 16)?;
        let mut qps = Vec::with_capacity(plan.qps);
        let mut created = || -> verbs_api::Result<u32> {
            for _ in 0..plan.qps {
                qps.push(side.create_rc_qp(v, CONTROL_QP_CAP)?);
            }
            v.qp_num(&qps[0])
        };
        match created() {
            Ok(dest) => {
                let attr = rc_attr(&side.limits, &side.path, &side.path, dest);
                Ok(Self {
                    side,
                    qps,
                    plan,
                    attr,
                    cursor: 0,
                })
            }
            Err(e) => {
                for qp in &qps {
                    let _ = v.destroy_qp(qp);
                }
                let _ = side.close(v);
                Err(e.into())
            }
        }
    }

    /// The plan being replayed.
    pub fn plan(&self) -> &ModifyPlan {
        &self.plan
    }

    /// One pass over the whole plan, from its first step. Every QP is back
    /// in RESET afterwards.
    ///
    /// # Errors
    /// [`WorkloadError::Mismatch`] at the first outcome that differs from the
    /// prediction (the QPs are then in an unknown state: tear down).
    pub fn run(&mut self, v: &mut V) -> Result<MixTally, WorkloadError> {
        self.cursor = 0;
        self.run_steps(v, self.plan.steps.len() as u64)
    }

    /// The next `steps` steps, continuing where the previous call stopped
    /// and wrapping around the plan (which is replayable: it ends where it
    /// starts).
    ///
    /// # Errors
    /// As [`ModifyMix::run`].
    pub fn run_steps(&mut self, v: &mut V, steps: u64) -> Result<MixTally, WorkloadError> {
        let mut tally = MixTally::default();
        let len = self.plan.steps.len();
        for _ in 0..steps {
            let i = self.cursor;
            self.cursor = if i + 1 == len { 0 } else { i + 1 };
            let step = &self.plan.steps[i];
            self.attr.qp_state = step.to;
            self.attr.cur_qp_state = step.from;
            let got = v.modify_qp(&self.qps[step.qp as usize], &self.attr, step.mask);
            match (&got, &step.expect) {
                (Ok(()), Ok(_)) => tally.succeeded += 1,
                (Err(e), Err(kind)) if e.kind() == *kind => tally.refused += 1,
                _ => {
                    return Err(WorkloadError::Mismatch(format!(
                        "step {i}: QP #{} {} -> {} mask {} ({:?}): expected {:?}, got {:?}",
                        step.qp,
                        step.from,
                        step.to,
                        step.mask,
                        step.kind,
                        step.expect,
                        got.map_err(|e| e.to_string())
                    )))
                }
            }
        }
        Ok(tally)
    }

    /// Destroys the QPs and closes the side.
    ///
    /// # Errors
    /// The first verb that fails.
    pub fn teardown(self, v: &mut V) -> Result<(), WorkloadError> {
        for qp in &self.qps {
            v.destroy_qp(qp)?;
        }
        self.side.close(v)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backend_sim::{SimConfig, SimVerbs};
    use std::collections::BTreeMap;

    fn sim() -> SimVerbs {
        SimVerbs::new(SimConfig::default())
    }

    #[test]
    fn plan_is_exactly_80_20_and_replayable() {
        // Goal: the standard plan is exactly 80 % legal, every prediction
        // is what the table says on both flavors, every kind of illegal step
        // occurs, and every QP ends where it started (RESET). Method: replay
        // the plan on the pure table and count.
        let plan = ModifyPlan::standard();
        assert!(plan.steps.len() >= 5_000 && plan.steps.len() % 5 == 0);
        assert_eq!(plan.legal_count() * 5, plan.steps.len() * 4);
        let mut state = vec![QpState::Reset; plan.qps];
        let mut kinds = BTreeMap::new();
        for s in &plan.steps {
            assert_eq!(state[s.qp as usize], s.from);
            assert_eq!(predict(s.from, s.to, s.mask), Some(s.expect), "{s:?}");
            assert_eq!(s.kind == StepKind::Legal, s.expect.is_ok(), "{s:?}");
            assert!(s.mask.contains(QpAttrMask::STATE) && !s.mask.contains(QpAttrMask::CUR_STATE));
            *kinds.entry(format!("{:?}", s.kind)).or_insert(0usize) += 1;
            if let Ok(next) = s.expect {
                state[s.qp as usize] = next;
            }
        }
        assert!(state.iter().all(|s| *s == QpState::Reset));
        assert_eq!(kinds.len(), 4, "{kinds:?}");
        // The walk reaches RTS often, not just INIT.
        let to_rts = plan
            .steps
            .iter()
            .filter(|s| s.expect == Ok(QpState::ReadyToSend))
            .count();
        assert!(to_rts > plan.steps.len() / 20, "{to_rts}");
        assert_eq!(
            plan,
            ModifyPlan::generate(64, 5_000, 0x5eed),
            "deterministic"
        );
    }

    #[test]
    fn modify_mix_matches_the_plan_on_the_simulator() {
        // Goal: on the simulator every legal step succeeds and every illegal
        // one fails with the predicted kind, twice in a row (replayable),
        // also when a call wraps around the plan. Method: run, then check
        // every QP is in RESET with ibv_query_qp, then tear down.
        let mut v = sim();
        let mut mix = ModifyMix::new(&mut v, ModifyPlan::generate(8, 1_000, 3)).expect("set-up");
        let legal = mix.plan().legal_count();
        let len = mix.plan().steps.len();
        for _ in 0..2 {
            let tally = mix.run(&mut v).expect("pass");
            assert_eq!(
                tally,
                MixTally {
                    succeeded: legal,
                    refused: len - legal
                }
            );
        }
        let wrapped = mix.run_steps(&mut v, len as u64 * 2 + 7).expect("wrapping");
        assert_eq!(wrapped.succeeded + wrapped.refused, len * 2 + 7);
        mix.run_steps(&mut v, len as u64 - 7)
            .expect("back to the start");
        for qp in &mix.qps {
            let (attr, _) = v.query_qp(qp, QpAttrMask::STATE).expect("query");
            assert_eq!(attr.qp_state, QpState::Reset);
        }
        mix.teardown(&mut v).expect("teardown");
    }

    #[test]
    fn lifecycle_leaves_nothing_behind() {
        // Goal: a lifecycle iteration destroys what it creates. Method: run
        // 1 000 of them; teardown's dealloc_pd fails with EBUSY if a QP leaked.
        let mut v = sim();
        let mut w = QpLifecycle::new(&mut v).expect("set-up");
        for _ in 0..1_000 {
            w.run(&mut v).expect("lifecycle");
        }
        w.teardown(&mut v).expect("teardown leaves the PD free");
    }
}
