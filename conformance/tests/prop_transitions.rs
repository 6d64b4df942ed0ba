//! Property test of `ibv_modify_qp` against the reference model
//! (`conformance::model`): from a reachable state of an RC, UC or UD QP, a
//! random target state, attribute mask and attribute values give the error
//! kind (or success and new state) the spec gives, and a refused modify
//! changes nothing that `ibv_query_qp` reports.
//!
//! The case runner is generic over `V: Verbs`; the test instantiates it with
//! the simulator. A failing case prints itself as a `.verbs` script.

mod prop_common;

use backend_sim::{SimConfig, SimVerbs};
use conformance::model::{masks_for, valid_attr, DeviceModel, QpModel};
use prop_common::*;
use proptest::prelude::*;
use verbs_api::*;

/// Which target state the final modify asks for.
#[derive(Clone, Copy, Debug)]
enum TargetPick {
    /// The n-th legal target from the current state (mod the count).
    Legal(u8),
    /// Any table state (n mod 7).
    Any(u8),
    /// A state beyond ERR (`UNKNOWN` or a raw 9).
    BeyondErr(bool),
}

/// How the final attribute mask is built.
#[derive(Clone, Copy, Debug)]
enum MaskPick {
    /// The transition's required bits plus the picked optional bits.
    Exact(u32),
    /// `Exact` with one bit (0..=25) flipped.
    Flip(u32, u8),
    /// Random known bits (bits 0..=20 and 25).
    Random(u32),
    /// Random bits including unknown ones.
    Wild(u32),
}

/// One case: the device, the QP class, a walk of legal transitions, then the
/// final modify.
#[derive(Clone, Debug)]
struct ModifyCase {
    seed: u64,
    profile: &'static str,
    class: QpClass,
    walk: Vec<(u8, u32)>,
    target: TargetPick,
    mask: MaskPick,
    with_state: bool,
    cur: Option<u8>,
    value: Option<u8>,
}

fn modify_case() -> impl Strategy<Value = ModifyCase> {
    let target = prop_oneof![
        6 => any::<u8>().prop_map(TargetPick::Legal),
        3 => any::<u8>().prop_map(TargetPick::Any),
        1 => any::<bool>().prop_map(TargetPick::BeyondErr),
    ];
    let mask = prop_oneof![
        5 => any::<u32>().prop_map(MaskPick::Exact),
        4 => (any::<u32>(), 0u8..26).prop_map(|(o, b)| MaskPick::Flip(o, b)),
        2 => any::<u32>().prop_map(MaskPick::Random),
        1 => any::<u32>().prop_map(MaskPick::Wild),
    ];
    (
        0u64..4,
        prop::sample::select(PROFILES.to_vec()),
        prop::sample::select(vec![QpClass::Rc, QpClass::Uc, QpClass::Ud]),
        prop::collection::vec((any::<u8>(), any::<u32>()), 0..7),
        target,
        mask,
        prop::bool::weighted(0.9),
        prop::option::weighted(0.2, any::<u8>()),
        prop::option::weighted(0.5, any::<u8>()),
    )
        .prop_map(
            |(seed, profile, class, walk, target, mask, with_state, cur, value)| ModifyCase {
                seed,
                profile,
                class,
                walk,
                target,
                mask,
                with_state,
                cur,
                value,
            },
        )
}

/// Known mask bits: `STANDARD_BITS | RATE_LIMIT` (spec §5.1).
const KNOWN_BITS: u32 = QpAttrMask::STANDARD_BITS.bits() | QpAttrMask::RATE_LIMIT.bits();

/// The QP type of a class.
fn qp_type_of(class: QpClass) -> QpType {
    match class {
        QpClass::Uc => QpType::Uc,
        QpClass::Ud => QpType::Ud,
        _ => QpType::Rc,
    }
}

/// Attribute values valid on `dev`, addressed to `dest` over this device's own GID and LID.
fn base_attr(
    dev: &DeviceModel,
    to: QpState,
    cur: QpState,
    dest: u32,
    gid: Gid,
    lid: u16,
) -> QpAttr {
    let mut attr = valid_attr(dev, to, cur, dest);
    attr.ah_attr.grh.dgid = gid;
    attr.ah_attr.dlid = lid;
    attr.alt_ah_attr = attr.ah_attr;
    attr
}

/// Puts the `pick`-th out-of-range (or unusual but valid) value into `attr`
/// (spec §5.2 rows; PSNs above 24 bits and any qkey are valid, §5.1).
fn perturb(dev: &DeviceModel, attr: &mut QpAttr, pick: u8) {
    let over = |v: u32| u8::try_from(v.saturating_add(1)).unwrap_or(u8::MAX);
    match pick % 24 {
        0 => attr.port_num = 0,
        1 => attr.port_num = dev.phys_port_cnt.saturating_add(1),
        2 => attr.pkey_index = dev.pkey_tbl_len,
        3 => attr.pkey_index = u16::MAX,
        4 => attr.ah_attr.port_num = 0,
        5 => attr.ah_attr.port_num = dev.phys_port_cnt.saturating_add(1),
        6 => attr.ah_attr.is_global = false,
        7 => attr.ah_attr.grh.sgid_index = u8::try_from(dev.gid_tbl_len).unwrap_or(u8::MAX),
        8 => attr.path_mtu = Mtu::Unknown(0),
        9 => attr.path_mtu = Mtu::Unknown(6),
        10 => attr.timeout = 32,
        11 => attr.retry_cnt = 8,
        12 => attr.rnr_retry = 8,
        13 => attr.min_rnr_timer = 32,
        14 => attr.max_rd_atomic = over(dev.max_qp_init_rd_atom),
        15 => attr.max_dest_rd_atomic = over(dev.max_qp_rd_atom),
        16 => attr.alt_port_num = 0,
        17 => attr.alt_timeout = 32,
        18 => {
            attr.sq_psn = u32::MAX;
            attr.rq_psn = u32::MAX;
        }
        19 => attr.qkey = u32::MAX,
        20 => attr.path_mtu = Mtu::Mtu256,
        21 => attr.dest_qp_num = 0xff_ffff,
        22 => attr.en_sqd_async_notify = 1,
        _ => {
            attr.qp_access_flags =
                AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC
        }
    }
}

/// Runs one case on `v` and compares every step with the model.
///
/// # Errors
/// A message with the case as a `.verbs` script when the backend and the model disagree.
fn run_modify_case<V: Verbs>(v: &mut V, case: &ModifyCase) -> Result<(), String> {
    let profile = profile(case.profile);
    let facts = sim_facts(&profile);
    let mut script = ScriptText::new(
        "shrunk prop_transitions case: modify_qp compared with conformance::model",
        &[case.profile, case.profile],
        case.seed,
    );
    script.env(0);
    let env = open_env(v, 0, &facts).map_err(|m| format!("setup: {m}"))?;
    let dev = env.model.clone();
    let qp_type = qp_type_of(case.class);
    script.push(create_line("a", 0, qp_type, &small_cap()));
    let qp =
        create_qp(v, &env, qp_type, small_cap()).map_err(|e| format!("setup create_qp: {e}"))?;
    let qpn = v.qp_num(&qp).map_err(|e| format!("qp_num: {e}"))?;
    let mut model = QpModel::new(case.class);
    let lid = env.port.lid;

    // Walk: legal transitions with the required bits, some optional ones
    // (never ALT_PATH, which is refused on RoCE) and valid values.
    for &(idx, opt_pick) in &case.walk {
        let legal: Vec<_> = legal_transitions(case.class, dev.flavor)
            .into_iter()
            .filter(|(from, _, _)| *from == model.state)
            .collect();
        let (from, to, masks) = legal[usize::from(idx) % legal.len()];
        let mask = masks.required
            | QpAttrMask(masks.optional.bits() & opt_pick & !QpAttrMask::ALT_PATH.bits())
            | QpAttrMask::STATE;
        let attr = base_attr(&dev, to, from, qpn, env.gid, lid);
        script.push(modify_line("a", &attr, mask, 0, &env.gid, lid));
        if let Err(e) = model.apply_modify(&dev, &attr, mask) {
            return Err(failure(
                &script,
                format!("test bug: the model refuses a walk step ({})", show(Err(e))),
            ));
        }
        let got = errno_of(&v.modify_qp(&qp, &attr, mask)).map_err(|m| failure(&script, m))?;
        if got != Ok(()) {
            return Err(failure(
                &script,
                format!(
                    "walk step {from} -> {to}: backend {}, model success",
                    show(got)
                ),
            ));
        }
    }

    // The final modify.
    let cur = model.state;
    let target = match case.target {
        TargetPick::Legal(i) => {
            let targets: Vec<QpState> = legal_transitions(case.class, dev.flavor)
                .into_iter()
                .filter(|(from, _, _)| *from == cur)
                .map(|(_, to, _)| to)
                .collect();
            targets[usize::from(i) % targets.len()]
        }
        TargetPick::Any(i) => QpState::from_raw(u32::from(i % 7)),
        TargetPick::BeyondErr(unknown) => {
            if unknown {
                QpState::UnknownState
            } else {
                QpState::Unknown(9)
            }
        }
    };
    let exact = |opt: u32| match masks_for(case.class, dev.flavor, cur, target) {
        Some(m) => m.required.bits() | (m.optional.bits() & opt) | QpAttrMask::STATE.bits(),
        None => QpAttrMask::STATE.bits() | (opt & 0xff),
    };
    let mut mask = QpAttrMask(match case.mask {
        MaskPick::Exact(o) => exact(o),
        MaskPick::Flip(o, bit) => exact(o) ^ (1 << bit),
        MaskPick::Random(r) => (r & KNOWN_BITS) | QpAttrMask::STATE.bits(),
        MaskPick::Wild(r) => r | QpAttrMask::STATE.bits(),
    });
    if !case.with_state {
        mask = mask - QpAttrMask::STATE;
    }
    // cur_qp_state is the real state, or a value beyond ERR (spec §5.1: EINVAL). A *false*
    // in-range cur_qp_state is not generated: the kernel validates against it (§3) while the
    // spec recommends the simulator validate against the real state (§7), so its outcome is
    // not fixed by the spec.
    let cur_attr = case.cur.map_or(cur, |c| {
        if c % 2 == 0 {
            QpState::UnknownState
        } else {
            QpState::Unknown(8 + u32::from(c % 5))
        }
    });
    let mut attr = base_attr(&dev, target, cur_attr, qpn, env.gid, lid);
    if let Some(p) = case.value {
        perturb(&dev, &mut attr, p);
    }
    let before = v
        .query_qp(&qp, QpAttrMask::all_named())
        .map_err(|e| format!("query_qp: {e}"))?;
    let want = model.expect_modify(&dev, &attr, mask);
    let line = modify_line("a", &attr, mask, 0, &env.gid, lid);
    script.push(format!("{line}{}", expect_suffix(want.map(|_| ()))));
    let got = errno_of(&v.modify_qp(&qp, &attr, mask)).map_err(|m| failure(&script, m))?;
    if got != want.map(|_| ()) {
        return Err(failure(
            &script,
            format!(
                "{} QP on {}: {cur} -> {target} mask {mask}: backend {}, model {} ({})",
                case.class,
                dev.name,
                show(got),
                show(want.map(|_| ())),
                diagnose_modify(
                    case.class,
                    dev.flavor,
                    cur,
                    mask,
                    attr.qp_state,
                    attr.cur_qp_state
                )
            ),
        ));
    }
    let after = v
        .query_qp(&qp, QpAttrMask::all_named())
        .map_err(|e| format!("query_qp: {e}"))?;
    match want {
        Ok(next) => {
            script.push("let q = query_qp a");
            script.push(format!("assert q.qp_state == {}", state_text(next)));
            if after.0.qp_state != next {
                return Err(failure(
                    &script,
                    format!(
                        "after a successful modify query_qp says {}, model {next}",
                        after.0.qp_state
                    ),
                ));
            }
        }
        Err(_) => {
            script.push("let q = query_qp a");
            script.push(format!("assert q.qp_state == {}", state_text(cur)));
            // Spec §3 Atomicity: nothing is modified on error.
            if after != before {
                return Err(failure(
                    &script,
                    format!(
                        "a refused modify changed the QP:\n before {before:?}\n after  {after:?}"
                    ),
                ));
            }
        }
    }
    v.destroy_qp(&qp)
        .map_err(|e| format!("teardown destroy_qp: {e}"))?;
    close_env(v, &env)
}

proptest! {
    #![proptest_config(config(192))]

    #[test]
    fn modify_qp_matches_model(case in modify_case()) {
        // Goal: for RC/UC/UD on every profile, modify_qp from any reachable state returns what
        // the spec model returns, and a refused modify leaves query_qp unchanged.
        // Method: walk legal transitions with valid values, then one random (target, mask,
        // cur_qp_state, value) modify; compare errno classes and the queried state/attributes.
        let mut v = SimVerbs::new(SimConfig {
            seed: case.seed,
            devices: vec![profile(case.profile), profile(case.profile)],
            ..SimConfig::default()
        });
        let r = catch_panics(|| run_modify_case(&mut v, &case));
        prop_assert!(r.is_ok(), "seed {}: {}", case.seed, r.unwrap_err());
    }
}

#[test]
fn every_legal_transition_with_its_exact_mask_succeeds() {
    // Goal: each legal (from, to) of RC/UC/UD under each profile's table succeeds with its
    // exact required mask and fails with one required bit missing or one foreign bit added.
    // Method: deterministic enumeration over legal_transitions; the QP is walked to `from`
    // along a shortest legal path, then the three modifies are compared with the model.
    for name in PROFILES {
        for class in [QpClass::Rc, QpClass::Uc, QpClass::Ud] {
            let facts = sim_facts(&profile(name));
            for (from, to, masks) in legal_transitions(class, facts.flavor) {
                let mut v = SimVerbs::new(SimConfig {
                    devices: vec![profile(name), profile(name)],
                    ..SimConfig::default()
                });
                let env = open_env(&mut v, 0, &facts).expect("setup");
                let dev = env.model.clone();
                let qp =
                    create_qp(&mut v, &env, qp_type_of(class), small_cap()).expect("create_qp");
                let qpn = v.qp_num(&qp).expect("qp_num");
                let mut model = QpModel::new(class);
                // SQE is entered only by the device (spec §1.1): its rows are not reachable here.
                let Some(path) = path_to(class, facts.flavor, from) else {
                    continue;
                };
                for (f, t) in path {
                    let m = masks_for(class, facts.flavor, f, t)
                        .expect("legal")
                        .required
                        | QpAttrMask::STATE;
                    let attr = base_attr(&dev, t, f, qpn, env.gid, env.port.lid);
                    model.apply_modify(&dev, &attr, m).expect("model walk");
                    v.modify_qp(&qp, &attr, m)
                        .unwrap_or_else(|e| panic!("{name} {class} walk {f}->{t}: {e}"));
                }
                let attr = base_attr(&dev, to, from, qpn, env.gid, env.port.lid);
                let exact = masks.required | QpAttrMask::STATE;
                let foreign = QpAttrMask::all_named() - masks.allowed() - QpAttrMask::ALT_PATH;
                if let Some(bit) = lowest_bit(foreign) {
                    let m = exact | bit;
                    assert_eq!(model.expect_modify(&dev, &attr, m), Err(errno::EINVAL));
                    let got = v.modify_qp(&qp, &attr, m).map_err(|e| e.kind().errno());
                    assert_eq!(
                        got,
                        Err(errno::EINVAL),
                        "{name} {class} {from}->{to} extra {bit}"
                    );
                }
                if let Some(bit) = lowest_bit(masks.required) {
                    let m = exact - bit;
                    let got = v.modify_qp(&qp, &attr, m).map_err(|e| e.kind().errno());
                    assert_eq!(
                        got,
                        Err(errno::EINVAL),
                        "{name} {class} {from}->{to} missing {bit}"
                    );
                }
                assert_eq!(model.expect_modify(&dev, &attr, exact), Ok(to));
                v.modify_qp(&qp, &attr, exact)
                    .unwrap_or_else(|e| panic!("{name} {class} {from}->{to} exact: {e}"));
                let (q, _) = v.query_qp(&qp, QpAttrMask::STATE).expect("query_qp");
                assert_eq!(q.qp_state, to, "{name} {class} {from}->{to}");
            }
        }
    }
}

/// The lowest set bit of `m`.
fn lowest_bit(m: QpAttrMask) -> Option<QpAttrMask> {
    (m.bits() != 0).then(|| QpAttrMask(1 << m.bits().trailing_zeros()))
}

/// A shortest legal path from RESET to `target` (breadth-first over the
/// table), or `None` when `target` cannot be reached by modify.
fn path_to(
    class: QpClass,
    flavor: TableFlavor,
    target: QpState,
) -> Option<Vec<(QpState, QpState)>> {
    let edges = legal_transitions(class, flavor);
    let mut prev: Vec<(QpState, Option<(QpState, QpState)>)> = vec![(QpState::Reset, None)];
    let mut i = 0;
    while i < prev.len() {
        let s = prev[i].0;
        for (f, t, _) in &edges {
            if *f == s && !prev.iter().any(|(x, _)| x == t) {
                prev.push((*t, Some((*f, *t))));
            }
        }
        i += 1;
    }
    if !prev.iter().any(|(x, _)| *x == target) {
        return None;
    }
    let mut path = Vec::new();
    let mut at = target;
    while let Some((_, Some(edge))) = prev.iter().find(|(x, _)| *x == at).copied() {
        path.push(edge);
        at = edge.0;
    }
    path.reverse();
    Some(path)
}
