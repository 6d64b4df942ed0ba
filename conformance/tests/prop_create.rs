//! Property test of QP creation against the reference model
//! (`conformance::model::expect_create`): random creation attributes — caps
//! in and around the device limits, comp_mask / create_flags / send_ops_flags
//! bits, an SRQ or not — either succeed with every returned capability at
//! least the requested one, or fail with an errno the spec gives; and a
//! failure leaves nothing behind (the PD, CQ and SRQ can be destroyed at once).
//!
//! The case runner is generic over `V: Verbs`; the test instantiates it with
//! the simulator. A failing case prints itself as a `.verbs` script.

mod prop_common;

use backend_sim::{SimConfig, SimVerbs};
use conformance::model::{expect_create, CreateApi, CreateRequest, DeviceModel, DriverLimits};
use prop_common::*;
use proptest::prelude::*;
use std::fmt::Write as _;
use verbs_api::*;

/// A capability value relative to the device limit it is checked against.
#[derive(Clone, Copy, Debug)]
enum CapPick {
    /// A literal small value.
    Small(u32),
    /// The limit itself.
    AtMax,
    /// The limit plus one.
    OverMax,
    /// A value far above any limit.
    Huge,
}

impl CapPick {
    fn resolve(self, max: u32) -> u32 {
        match self {
            Self::Small(n) => n,
            Self::AtMax => max,
            Self::OverMax => max.saturating_add(1),
            Self::Huge => 1_000_000,
        }
    }
}

fn cap_pick(small: u32) -> impl Strategy<Value = CapPick> {
    prop_oneof![
        8 => (0..=small).prop_map(CapPick::Small),
        2 => Just(CapPick::AtMax),
        2 => Just(CapPick::OverMax),
        1 => Just(CapPick::Huge),
    ]
}

/// One creation case.
#[derive(Clone, Debug)]
struct CreateCase {
    seed: u64,
    profile: &'static str,
    api: CreateApi,
    qp_type: QpType,
    pd_bit: bool,
    unknown_comp_bit: Option<u8>,
    create_flags: Option<u32>,
    send_ops: Option<u64>,
    send_wr: CapPick,
    recv_wr: CapPick,
    send_sge: CapPick,
    recv_sge: CapPick,
    inline: CapPick,
    srq: bool,
    missing_cq: Option<bool>,
}

fn create_case() -> impl Strategy<Value = CreateCase> {
    let qp_type = prop_oneof![
        12 => prop::sample::select(vec![QpType::Rc, QpType::Uc, QpType::Ud]),
        1 => prop::sample::select(vec![0u32, 1, 5, 6, 7, 11, 66, 200]).prop_map(QpType::Unknown),
    ];
    let flags = prop_oneof![
        4 => (any::<u32>()).prop_map(|r| r & QpCreateFlags::all_named().bits()),
        1 => any::<u32>(),
    ];
    let ops = prop_oneof![
        4 => any::<u64>().prop_map(|r| r & SendOpsFlags::all_named().bits()),
        1 => Just(SendOpsFlags::SEND.bits()),
    ];
    (
        (
            0u64..4,
            prop::sample::select(PROFILES.to_vec()),
            prop_oneof![Just(CreateApi::Legacy), Just(CreateApi::Ex)],
            qp_type,
            prop::bool::weighted(0.92),
            prop::option::weighted(0.08, 7u8..32),
            prop::option::weighted(0.3, flags),
            prop::option::weighted(0.3, ops),
        ),
        (
            cap_pick(300),
            cap_pick(300),
            cap_pick(4),
            cap_pick(4),
            prop_oneof![
                2 => Just(CapPick::Small(0)),
                6 => (0u32..=256).prop_map(CapPick::Small),
                1 => Just(CapPick::Small(400)),
                1 => Just(CapPick::Small(401)),
                1 => Just(CapPick::Small(900)),
                1 => Just(CapPick::Huge),
            ],
            prop::bool::weighted(0.3),
            prop::option::weighted(0.05, any::<bool>()),
        ),
    )
        .prop_map(
            |(
                (seed, profile, api, qp_type, pd_bit, unknown_comp_bit, create_flags, send_ops),
                (send_wr, recv_wr, send_sge, recv_sge, inline, srq, missing_cq),
            )| CreateCase {
                seed,
                profile,
                api,
                qp_type,
                pd_bit,
                unknown_comp_bit,
                create_flags,
                send_ops,
                send_wr,
                recv_wr,
                send_sge,
                recv_sge,
                inline,
                srq,
                missing_cq,
            },
        )
}

/// The request the case describes on `dev`.
fn request(case: &CreateCase, dev: &DeviceModel) -> CreateRequest {
    let mut comp_mask = if case.pd_bit {
        QpInitAttrMask::PD
    } else {
        QpInitAttrMask::empty()
    };
    if let Some(bit) = case.unknown_comp_bit {
        comp_mask |= QpInitAttrMask(1 << bit);
    }
    let create_flags = QpCreateFlags(case.create_flags.unwrap_or(0));
    if case.create_flags.is_some() {
        comp_mask |= QpInitAttrMask::CREATE_FLAGS;
    }
    // send_ops_flags are asked for on mlx5 profiles only: the spec lists the
    // supported sets for mlx5 (create-qp.md §3.3), not for rxe.
    let mlx5 = matches!(dev.driver, DriverLimits::Mlx5 { .. });
    let send_ops = if mlx5 { case.send_ops } else { None };
    if send_ops.is_some() {
        comp_mask |= QpInitAttrMask::SEND_OPS_FLAGS;
    }
    CreateRequest {
        api: case.api,
        qp_type: case.qp_type,
        comp_mask,
        create_flags,
        send_ops_flags: SendOpsFlags(send_ops.unwrap_or(0)),
        cap: QpCap {
            max_send_wr: case.send_wr.resolve(dev.max_qp_wr),
            max_recv_wr: case.recv_wr.resolve(dev.max_qp_wr),
            max_send_sge: case.send_sge.resolve(dev.max_sge),
            max_recv_sge: case.recv_sge.resolve(dev.max_sge),
            max_inline_data: case.inline.resolve(0),
        },
        srq: case.srq,
        send_cq: case.missing_cq != Some(true),
        recv_cq: case.missing_cq != Some(false),
    }
}

/// The creation as a script line.
fn create_text(req: &CreateRequest) -> String {
    let cap = &req.cap;
    let cq = |present: bool| if present { "cq0" } else { "none" };
    let mut out = match req.api {
        CreateApi::Legacy => "let a = create_qp pd0".to_owned(),
        CreateApi::Ex => format!(
            "let a = create_qp_ex d0 pd=pd0 comp_mask={}",
            req.comp_mask.names()
        ),
    };
    let _ = write!(
        out,
        " qp_type={} send_cq={} recv_cq={} max_send_wr={} max_recv_wr={} max_send_sge={} max_recv_sge={} max_inline_data={}",
        qp_type_text(req.qp_type),
        cq(req.send_cq),
        cq(req.recv_cq),
        cap.max_send_wr,
        cap.max_recv_wr,
        cap.max_send_sge,
        cap.max_recv_sge,
        cap.max_inline_data
    );
    if req.srq {
        out.push_str(" srq=s0");
    }
    if req.api == CreateApi::Ex {
        if req.comp_mask.contains(QpInitAttrMask::CREATE_FLAGS) {
            let _ = write!(out, " create_flags={}", req.create_flags.names());
        }
        if req.comp_mask.contains(QpInitAttrMask::SEND_OPS_FLAGS) {
            let _ = write!(out, " send_ops_flags={}", req.send_ops_flags.names());
        }
    }
    out
}

/// Runs one case on `v` and compares it with the model.
///
/// # Errors
/// A message with the case as a `.verbs` script when the backend and the model disagree.
fn run_create_case<V: Verbs>(v: &mut V, case: &CreateCase) -> Result<(), String> {
    let facts = sim_facts(&profile(case.profile));
    let env = open_env(v, 0, &facts).map_err(|m| format!("setup: {m}"))?;
    let req = request(case, &env.model);
    let want = expect_create(&env.model, &req);
    let mut script = ScriptText::new(
        "shrunk prop_create case: QP creation compared with conformance::model",
        &[case.profile, case.profile],
        case.seed,
    );
    script.env(0);
    let srq = if case.srq {
        script.push("let s0 = create_srq pd0 max_wr=16 max_sge=1");
        let mut a = SrqAttr {
            max_wr: 16,
            max_sge: 1,
            srq_limit: 0,
        };
        Some(
            v.create_srq(&env.pd, &mut a)
                .map_err(|e| format!("setup create_srq: {e}"))?,
        )
    } else {
        None
    };
    let mut attr = QpInitAttrEx::<V> {
        qp_type: req.qp_type,
        send_cq: req.send_cq.then_some(&env.cq),
        recv_cq: req.recv_cq.then_some(&env.cq),
        srq: srq.as_ref(),
        cap: req.cap,
        comp_mask: req.comp_mask,
        pd: Some(&env.pd),
        create_flags: req.create_flags,
        send_ops_flags: req.send_ops_flags,
        source_qpn: 0x200,
        ..QpInitAttrEx::default()
    };
    let first = if want.ok_allowed {
        Ok(())
    } else {
        Err(want.errnos[0])
    };
    script.push(format!("{}{}", create_text(&req), expect_suffix(first)));
    let result = match req.api {
        CreateApi::Legacy => v.create_qp(&env.pd, &mut attr),
        CreateApi::Ex => v.create_qp_ex(&env.ctx, &mut attr),
    };
    let actual_cap = attr.cap;
    let got = errno_of(&result)?;
    // Print the expectation the backend met when the model allows several.
    let shown = if want.accepts(got) {
        got
    } else {
        want.errnos.first().map_or(Ok(()), |e| Err(*e))
    };
    script.replace_last(format!("{}{}", create_text(&req), expect_suffix(shown)));
    let fail = |script: &ScriptText, msg: String| -> Result<(), String> {
        Err(failure(
            script,
            format!("{msg}\nmodel reasons: {:?}", want.reasons),
        ))
    };
    if !want.accepts(got) {
        let allowed: Vec<String> = want.errnos.iter().map(|e| show(Err(*e))).collect();
        return fail(
            &script,
            format!(
                "{} on {}: backend {}, model allows {}{}",
                qp_type_text(req.qp_type),
                case.profile,
                show(got),
                if want.ok_allowed {
                    "success"
                } else {
                    "no success"
                },
                if allowed.is_empty() {
                    String::new()
                } else {
                    format!(" or {}", allowed.join("/"))
                }
            ),
        );
    }
    if let Ok(qp) = &result {
        // create-qp.md §4.1: every returned capability is at least the request.
        // Receive caps are ignored with an SRQ (§4.1). A queue asked for with 0
        // work requests does not exist on mlx5 (§4.2 step 4: "max_send_wr == 0:
        // no SQ (and max_inline_data is not recomputed); max_recv_wr == 0: no
        // RQ"), so its SGE and inline sizes are not held to the request.
        let c = &req.cap;
        let has_sq = c.max_send_wr > 0;
        let has_rq = c.max_recv_wr > 0 && !req.srq;
        let mut short = Vec::new();
        for (name, asked, got, checked) in [
            ("max_send_wr", c.max_send_wr, actual_cap.max_send_wr, true),
            (
                "max_send_sge",
                c.max_send_sge,
                actual_cap.max_send_sge,
                has_sq,
            ),
            (
                "max_inline_data",
                c.max_inline_data,
                actual_cap.max_inline_data,
                has_sq,
            ),
            (
                "max_recv_wr",
                c.max_recv_wr,
                actual_cap.max_recv_wr,
                !req.srq,
            ),
            (
                "max_recv_sge",
                c.max_recv_sge,
                actual_cap.max_recv_sge,
                has_rq,
            ),
        ] {
            if checked && got < asked {
                short.push(format!("{name} {got} < {asked}"));
                script.push(format!("assert a.cap.{name} >= {asked}"));
            }
        }
        if !short.is_empty() {
            return fail(
                &script,
                format!("returned caps below the request: {}", short.join(", ")),
            );
        }
        // create-qp.md §1: a new QP is in RESET and has the requested type.
        let (q, info) = v
            .query_qp(qp, QpAttrMask::all_named())
            .map_err(|e| format!("query_qp: {e}"))?;
        script.push("let q = query_qp a");
        script.push("assert q.qp_state == RESET");
        if q.qp_state != QpState::Reset || info.qp_type != req.qp_type {
            return fail(
                &script,
                format!("new QP: state {} type {}", q.qp_state, info.qp_type),
            );
        }
        script.push("destroy_qp a");
        v.destroy_qp(qp).map_err(|e| format!("destroy_qp: {e}"))?;
    }
    // Nothing left behind: the parents can be destroyed right away.
    if let Some(s) = &srq {
        script.push("destroy_srq s0");
        if let Err(e) = v.destroy_srq(s) {
            return fail(&script, format!("destroy_srq after the case: {e}"));
        }
    }
    script.push("destroy_cq cq0");
    script.push("dealloc_pd pd0");
    if let Err(m) = close_env(v, &env) {
        return fail(&script, m);
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn create_qp_matches_model(case in create_case()) {
        // Goal: creation either succeeds with caps >= requested or fails with the spec's errno,
        // and a failure leaves no half-created QP holding the PD, CQ or SRQ.
        // Method: random requests around each profile's limits, compared with
        // conformance::model::expect_create; then destroy the parents immediately.
        let mut v = SimVerbs::new(SimConfig {
            seed: case.seed,
            devices: vec![profile(case.profile), profile(case.profile)],
            ..SimConfig::default()
        });
        let r = catch_panics(|| run_create_case(&mut v, &case));
        prop_assert!(r.is_ok(), "seed {}: {}", case.seed, r.unwrap_err());
    }
}
