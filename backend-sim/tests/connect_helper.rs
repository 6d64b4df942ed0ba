//! `verbs_api::connect_qp` (issue #20 item 8): the Rust twin of the
//! script's `connect`, on InfiniBand and RoCE profiles, RC/UC/UD, and its
//! refusals.
#![allow(missing_docs, unsafe_code)]

use backend_sim::{DeviceProfile, SimConfig, SimVerbs};
use verbs_api::*;

fn qp(
    v: &mut SimVerbs,
    dev: usize,
    t: QpType,
) -> (
    <SimVerbs as Verbs>::Context,
    <SimVerbs as Verbs>::Qp,
    <SimVerbs as Verbs>::Cq,
) {
    let ctx = v.open_device(dev, ProcessId(dev as u32)).unwrap();
    let pd = v.alloc_pd(&ctx).unwrap();
    let cq = v
        .create_cq(
            &ctx,
            &CqInit {
                cqe: 16,
                ..Default::default()
            },
        )
        .unwrap();
    let cap = QpCap {
        max_send_wr: 4,
        max_recv_wr: 4,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let mut init = QpInitAttrEx::<SimVerbs> {
        qp_type: t,
        send_cq: Some(&cq),
        recv_cq: Some(&cq),
        cap,
        ..Default::default()
    };
    (ctx, v.create_qp(&pd, &mut init).unwrap(), cq)
}

fn state(v: &mut SimVerbs, q: &<SimVerbs as Verbs>::Qp) -> QpState {
    v.query_qp(q, QpAttrMask::STATE).unwrap().0.qp_state
}

#[test]
fn connects_rc_uc_ud_on_infiniband_and_roce() {
    for profile in [DeviceProfile::connectx6(), DeviceProfile::connectx7()] {
        for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
            let mut v = SimVerbs::new(SimConfig::with_devices(vec![
                profile.clone(),
                profile.clone(),
            ]));
            let (ca, a, _) = qp(&mut v, 0, t);
            let (cb, b, _) = qp(&mut v, 1, t);
            let ea = Endpoint::query(&mut v, &ca, &a, 1).unwrap();
            let eb = Endpoint {
                psn: 0x123,
                ..Endpoint::query(&mut v, &cb, &b, 1).unwrap()
            };
            assert_eq!(
                ea.gid.is_some(),
                profile.name == "cx7",
                "RoCE carries a GID"
            );
            let o = ConnectOptions::default();
            connect_qp(&mut v, &a, &ea, &eb, &o).unwrap();
            connect_qp(&mut v, &b, &eb, &ea, &o).unwrap();
            assert_eq!(
                state(&mut v, &a),
                QpState::ReadyToSend,
                "{} {t}",
                profile.name
            );
            assert_eq!(
                state(&mut v, &b),
                QpState::ReadyToSend,
                "{} {t}",
                profile.name
            );
            if t == QpType::Rc {
                let (attr, _) = v
                    .query_qp(&a, QpAttrMask::RQ_PSN | QpAttrMask::RNR_RETRY)
                    .unwrap();
                assert_eq!(attr.rq_psn, 0x123, "the peer's PSN");
                assert_eq!(attr.rnr_retry, 6, "finite by default");
            }
        }
    }
}

#[test]
fn refuses_other_types_and_mismatched_sides() {
    let mut v = SimVerbs::default();
    let (ca, a, _) = qp(&mut v, 0, QpType::Rc);
    let (cb, b, _) = qp(&mut v, 1, QpType::Uc);
    let ea = Endpoint::query(&mut v, &ca, &a, 1).unwrap();
    let eb = Endpoint::query(&mut v, &cb, &b, 1).unwrap();
    let e = connect_qp(&mut v, &a, &ea, &eb, &ConnectOptions::default()).unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL);
    assert_eq!(state(&mut v, &a), QpState::Reset, "nothing changed");
    let x = Endpoint {
        qp_type: QpType::XrcSend,
        ..ea
    };
    let e = connect_qp(&mut v, &a, &x, &eb, &ConnectOptions::default()).unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL);
    // From a state other than RESET the first modify fails, as in C.
    connect_qp(
        &mut v,
        &a,
        &ea,
        &Endpoint {
            qp_type: QpType::Rc,
            ..eb
        },
        &ConnectOptions::default(),
    )
    .unwrap();
    assert!(connect_qp(
        &mut v,
        &a,
        &ea,
        &Endpoint {
            qp_type: QpType::Rc,
            ..eb
        },
        &ConnectOptions::default()
    )
    .is_err());
}
