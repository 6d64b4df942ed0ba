//! State-machine property test of the control path: random sequences of
//! 20–100 verbs (create, modify, query, destroy, and destroying a PD or CQ
//! still in use), some of them invalid, on two devices and four QP slots,
//! applied to a backend and to the reference model (`conformance::model`)
//! and compared on every step. Each case sets up and tears down its own
//! world; a failing case prints the shrunk sequence as a `.verbs` script
//! with the seed and device profiles in its headers.
//!
//! Operations are generated without looking at the state and interpreted
//! against the model's current state when they run (a "legal transition"
//! pick means a legal one from wherever the QP is then), so shrinking keeps
//! sequences meaningful. The runner is generic over `V: Verbs`.

mod prop_common;

use backend_sim::{SimConfig, SimVerbs};
use conformance::model::{masks_for, valid_attr, Slot, WorldModel, STALE_HANDLE_ERRNOS};
use prop_common::*;
use proptest::prelude::*;
use verbs_api::*;

const SLOTS: usize = 4;

/// One generated operation.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// Create a QP in `slot` on `dev` (skipped while the slot holds a live QP).
    Create {
        slot: u8,
        dev: u8,
        class: u8,
        over_limit: bool,
    },
    /// Modify the QP of `slot`.
    Modify {
        slot: u8,
        legal: bool,
        target: u8,
        flip: Option<u8>,
        opt: u32,
        bad: Option<u8>,
    },
    /// Query the QP of `slot`.
    Query { slot: u8 },
    /// Destroy the QP of `slot`.
    Destroy { slot: u8 },
    /// `dealloc_pd` of a device, issued only while a QP still uses it (EBUSY).
    DeallocBusyPd { dev: u8 },
    /// `destroy_cq` of a device, issued only while a QP still uses it (EBUSY).
    DestroyBusyCq { dev: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    let slot = 0u8..SLOTS as u8;
    prop_oneof![
        3 => (slot.clone(), 0u8..2, 0u8..3, prop::bool::weighted(0.1))
            .prop_map(|(slot, dev, class, over_limit)| Op::Create { slot, dev, class, over_limit }),
        10 => (
            slot.clone(),
            prop::bool::weighted(0.75),
            any::<u8>(),
            prop::option::weighted(0.25, 0u8..26),
            any::<u32>(),
            prop::option::weighted(0.15, 0u8..10),
        )
            .prop_map(|(slot, legal, target, flip, opt, bad)| Op::Modify { slot, legal, target, flip, opt, bad }),
        2 => slot.clone().prop_map(|slot| Op::Query { slot }),
        2 => slot.prop_map(|slot| Op::Destroy { slot }),
        1 => (0u8..2).prop_map(|dev| Op::DeallocBusyPd { dev }),
        1 => (0u8..2).prop_map(|dev| Op::DestroyBusyCq { dev }),
    ]
}

/// One case: a seed, two device profiles and the operations.
#[derive(Clone, Debug)]
struct SeqCase {
    seed: u64,
    profiles: [&'static str; 2],
    ops: Vec<Op>,
}

fn seq_case() -> impl Strategy<Value = SeqCase> {
    (
        0u64..1000,
        prop::sample::select(PROFILES.to_vec()),
        prop::sample::select(PROFILES.to_vec()),
        prop::collection::vec(op(), 20..=100),
    )
        .prop_map(|(seed, a, b, ops)| SeqCase {
            seed,
            profiles: [a, b],
            ops,
        })
}

const CLASSES: [QpClass; 3] = [QpClass::Rc, QpClass::Uc, QpClass::Ud];

fn qp_type_of(class: QpClass) -> QpType {
    match class {
        QpClass::Uc => QpType::Uc,
        QpClass::Ud => QpType::Ud,
        _ => QpType::Rc,
    }
}

/// Out-of-range values (spec §5.2) a modify may carry.
fn perturb(dev: &conformance::model::DeviceModel, attr: &mut QpAttr, pick: u8) {
    match pick % 10 {
        0 => attr.port_num = 0,
        1 => attr.pkey_index = u16::MAX,
        2 => attr.ah_attr.port_num = 0,
        3 => attr.path_mtu = Mtu::Unknown(6),
        4 => attr.timeout = 32,
        5 => attr.retry_cnt = 8,
        6 => attr.min_rnr_timer = 32,
        7 => {
            attr.max_rd_atomic =
                u8::try_from(dev.max_qp_init_rd_atom.saturating_add(1)).unwrap_or(u8::MAX)
        }
        8 => {
            attr.max_dest_rd_atomic =
                u8::try_from(dev.max_qp_rd_atom.saturating_add(1)).unwrap_or(u8::MAX)
        }
        _ => attr.ah_attr.is_global = false,
    }
}

/// What the backend holds for each slot.
struct Handles<V: Verbs> {
    qps: Vec<Option<V::Qp>>,
    names: Vec<String>,
    qpns: Vec<u32>,
}

/// Runs one sequence on `v`, comparing every step with the model.
///
/// # Errors
/// A message with the executed steps as a `.verbs` script when they disagree.
fn run_sequence<V: Verbs>(v: &mut V, case: &SeqCase) -> Result<(), String> {
    let mut script = ScriptText::new(
        "shrunk prop_sequences case: control-path verbs compared with conformance::model",
        &case.profiles,
        case.seed,
    );
    let mut envs = Vec::new();
    for (i, name) in case.profiles.iter().enumerate() {
        envs.push(open_env(v, i, &sim_facts(&profile(name))).map_err(|m| format!("setup: {m}"))?);
        script.env(i);
    }
    let mut world = WorldModel::new(envs.iter().map(|e| e.model.clone()).collect(), SLOTS);
    let mut h: Handles<V> = Handles {
        qps: vec![None; SLOTS],
        names: vec![String::new(); SLOTS],
        qpns: vec![0; SLOTS],
    };
    let mut created = 0usize;

    for (step, op) in case.ops.iter().enumerate() {
        match *op {
            Op::Create {
                slot,
                dev,
                class,
                over_limit,
            } => {
                let s = usize::from(slot);
                if matches!(world.slots[s], Slot::Live { .. }) {
                    continue;
                }
                let d = usize::from(dev);
                let class = CLASSES[usize::from(class)];
                let env = &envs[d];
                let mut cap = small_cap();
                if over_limit {
                    // create-qp.md §4.1/§6: above max_qp_wr is EINVAL on every profile.
                    cap.max_send_wr = env.model.max_qp_wr + 1;
                }
                let want = if over_limit {
                    Err(errno::EINVAL)
                } else {
                    Ok(())
                };
                let name = format!("q{slot}_{created}");
                created += 1;
                script.push(format!(
                    "{}{}",
                    create_line(&name, d, qp_type_of(class), &cap),
                    expect_suffix(want)
                ));
                let r = create_qp(v, env, qp_type_of(class), cap);
                let got =
                    errno_of(&r).map_err(|m| failure(&script, format!("step {step}: {m}")))?;
                if got != want {
                    return Err(step_failure(
                        &script,
                        step,
                        format!("create_qp: backend {}, model {}", show(got), show(want)),
                    ));
                }
                if let Ok(qp) = r {
                    h.qpns[s] = v.qp_num(&qp).map_err(|e| format!("qp_num: {e}"))?;
                    h.qps[s] = Some(qp);
                    h.names[s] = name;
                    world.created(s, d, class);
                }
            }
            Op::Modify {
                slot,
                legal,
                target,
                flip,
                opt,
                bad,
            } => {
                let s = usize::from(slot);
                let Some(qp) = h.qps[s].clone() else { continue };
                let name = h.names[s].clone();
                let (d, state, class) = match world.slots[s] {
                    Slot::Live { dev, qp } => (dev, qp.state, qp.class),
                    Slot::Destroyed => {
                        // create-qp.md §8: a stale handle is EINVAL or ENOENT.
                        let attr = QpAttr {
                            qp_state: QpState::Reset,
                            ..QpAttr::default()
                        };
                        script.push(format!(
                            "modify_qp {name} qp_state=RESET attr_mask=0x1 -> EINVAL"
                        ));
                        let got = errno_of(&v.modify_qp(&qp, &attr, QpAttrMask::STATE))
                            .map_err(|m| failure(&script, format!("step {step}: {m}")))?;
                        if !matches!(got, Err(e) if STALE_HANDLE_ERRNOS.contains(&e)) {
                            return Err(step_failure(
                                &script,
                                step,
                                format!("modify_qp on a destroyed QP: {}", show(got)),
                            ));
                        }
                        continue;
                    }
                    Slot::Empty => continue,
                };
                let dev = world.devices[d].clone();
                let to = if legal {
                    let targets: Vec<QpState> = legal_transitions(class, dev.flavor)
                        .into_iter()
                        .filter(|(f, _, _)| *f == state)
                        .map(|(_, t, _)| t)
                        .collect();
                    targets[usize::from(target) % targets.len()]
                } else {
                    QpState::from_raw(u32::from(target % 7))
                };
                let mut mask = match masks_for(class, dev.flavor, state, to) {
                    Some(m) => {
                        m.required
                            | QpAttrMask(m.optional.bits() & opt & !QpAttrMask::ALT_PATH.bits())
                    }
                    None => QpAttrMask(opt & 0x1_ffff),
                } | QpAttrMask::STATE;
                if let Some(bit) = flip {
                    mask = QpAttrMask(mask.bits() ^ (1 << bit));
                }
                let env = &envs[d];
                let mut attr = valid_attr(&dev, to, state, h.qpns[s]);
                attr.ah_attr.grh.dgid = env.gid;
                attr.ah_attr.dlid = env.port.lid;
                attr.alt_ah_attr = attr.ah_attr;
                if let Some(p) = bad {
                    perturb(&dev, &mut attr, p);
                }
                let want = match &mut world.slots[s] {
                    Slot::Live { qp: m, .. } => m.apply_modify(&dev, &attr, mask),
                    _ => unreachable!("checked above"),
                };
                let line = modify_line(&name, &attr, mask, d, &env.gid, env.port.lid);
                script.push(format!("{line}{}", expect_suffix(want.map(|_| ()))));
                let got = errno_of(&v.modify_qp(&qp, &attr, mask))
                    .map_err(|m| failure(&script, format!("step {step}: {m}")))?;
                if got != want.map(|_| ()) {
                    return Err(step_failure(&script, step,
                        format!(
                            "{class} QP {name} on {}: {state} -> {to} mask {mask}: backend {}, model {} ({})",
                            dev.name,
                            show(got),
                            show(want.map(|_| ())),
                            diagnose_modify(class, dev.flavor, state, mask, attr.qp_state, attr.cur_qp_state)
                        ),
                    ));
                }
            }
            Op::Query { slot } => {
                let s = usize::from(slot);
                let Some(qp) = h.qps[s].clone() else { continue };
                let name = h.names[s].clone();
                match world.slots[s] {
                    Slot::Live { qp: m, .. } => {
                        script.push(format!("let st{step} = query_qp {name}"));
                        script.push(format!(
                            "assert st{step}.qp_state == {}",
                            state_text(m.state)
                        ));
                        let (q, _) = v
                            .query_qp(&qp, QpAttrMask::STATE)
                            .map_err(|e| format!("query_qp: {e}"))?;
                        if q.qp_state != m.state {
                            return Err(step_failure(
                                &script,
                                step,
                                format!("query_qp {name}: {}, model {}", q.qp_state, m.state),
                            ));
                        }
                    }
                    Slot::Destroyed => {
                        script.push(format!("query_qp {name} -> EINVAL"));
                        let got = errno_of(&v.query_qp(&qp, QpAttrMask::STATE))
                            .map_err(|m| failure(&script, format!("step {step}: {m}")))?;
                        if !matches!(got, Err(e) if STALE_HANDLE_ERRNOS.contains(&e)) {
                            return Err(step_failure(
                                &script,
                                step,
                                format!("query_qp on a destroyed QP: {}", show(got)),
                            ));
                        }
                    }
                    Slot::Empty => {}
                }
            }
            Op::Destroy { slot } => {
                let s = usize::from(slot);
                let Some(qp) = h.qps[s].clone() else { continue };
                let name = h.names[s].clone();
                let live = matches!(world.slots[s], Slot::Live { .. });
                // create-qp.md §8: destroy works from any state; a stale handle is EINVAL/ENOENT.
                script.push(format!(
                    "destroy_qp {name}{}",
                    if live { "" } else { " -> EINVAL" }
                ));
                let got = errno_of(&v.destroy_qp(&qp))
                    .map_err(|m| failure(&script, format!("step {step}: {m}")))?;
                let ok = if live {
                    got == Ok(())
                } else {
                    matches!(got, Err(e) if STALE_HANDLE_ERRNOS.contains(&e))
                };
                if !ok {
                    return Err(step_failure(
                        &script,
                        step,
                        format!("destroy_qp {name} (live: {live}): {}", show(got)),
                    ));
                }
                if live {
                    world.destroyed(s);
                }
            }
            Op::DeallocBusyPd { dev } => {
                let d = usize::from(dev);
                let Err(want) = world.expect_parent_destroy(d) else {
                    continue;
                };
                script.push(format!("dealloc_pd pd{d}{}", expect_suffix(Err(want))));
                let got = errno_of(&v.dealloc_pd(&envs[d].pd))
                    .map_err(|m| failure(&script, format!("step {step}: {m}")))?;
                if got != Err(want) {
                    return Err(step_failure(
                        &script,
                        step,
                        format!("dealloc_pd with QPs alive: {}", show(got)),
                    ));
                }
            }
            Op::DestroyBusyCq { dev } => {
                let d = usize::from(dev);
                let Err(want) = world.expect_parent_destroy(d) else {
                    continue;
                };
                script.push(format!("destroy_cq cq{d}{}", expect_suffix(Err(want))));
                let got = errno_of(&v.destroy_cq(&envs[d].cq))
                    .map_err(|m| failure(&script, format!("step {step}: {m}")))?;
                if got != Err(want) {
                    return Err(step_failure(
                        &script,
                        step,
                        format!("destroy_cq with QPs alive: {}", show(got)),
                    ));
                }
            }
        }
    }

    // Teardown: every live QP, then the CQs, PDs and devices, must go.
    for s in 0..SLOTS {
        if let (Slot::Live { .. }, Some(qp)) = (world.slots[s], &h.qps[s]) {
            script.push(format!("destroy_qp {}", h.names[s]));
            if let Err(e) = v.destroy_qp(qp) {
                return Err(step_failure(
                    &script,
                    case.ops.len(),
                    format!("teardown destroy_qp: {e}"),
                ));
            }
            world.destroyed(s);
        }
    }
    for env in &envs {
        script.push(format!("destroy_cq cq{}", env.index));
        script.push(format!("dealloc_pd pd{}", env.index));
        if let Err(m) = close_env(v, env) {
            return Err(step_failure(&script, case.ops.len(), m));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn control_path_sequences_match_model(case in seq_case()) {
        // Goal: long mixed sequences of control-path verbs on two devices keep the backend and
        // the spec model in agreement at every step (states, errno classes, EBUSY parents,
        // stale handles), and always tear down cleanly.
        // Method: hand-rolled state machine (ops interpreted against the model state), one
        // fresh simulator world per case, comparison after every verb; failures print a script.
        let mut v = SimVerbs::new(SimConfig {
            seed: case.seed,
            devices: vec![profile(case.profiles[0]), profile(case.profiles[1])],
            ..SimConfig::default()
        });
        let r = catch_panics(|| run_sequence(&mut v, &case));
        prop_assert!(r.is_ok(), "seed {}: {}", case.seed, r.unwrap_err());
    }
}
