//! `mlx5dv_reserved_qpn_alloc` / `mlx5dv_reserved_qpn_dealloc` on the
//! simulator (world/reserved_qpn.rs): unique numbers no QP has or gets,
//! per-context ownership, `EINVAL` for numbers not held, `EOPNOTSUPP` on
//! rxe, release at context close, determinism.

use backend_sim::{ContextHandle, DeviceProfile, QpHandle, SimConfig, SimVerbs};
use verbs_api::*;

fn rc_qp(sim: &mut SimVerbs, ctx: &ContextHandle) -> (QpHandle, u32) {
    let pd = sim.alloc_pd(ctx).unwrap();
    let cq = sim
        .create_cq(
            ctx,
            &CqInit {
                cqe: 4,
                ..CqInit::default()
            },
        )
        .unwrap();
    let mut attr = QpInitAttrEx::<SimVerbs> {
        qp_type: QpType::Rc,
        send_cq: Some(&cq),
        recv_cq: Some(&cq),
        cap: QpCap {
            max_send_wr: 1,
            max_recv_wr: 1,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        ..QpInitAttrEx::default()
    };
    let qp = sim.create_qp(&pd, &mut attr).unwrap();
    let n = sim.qp_num(&qp).unwrap();
    (qp, n)
}

#[test]
fn numbers_are_unique_and_never_a_qps() {
    let mut sim = SimVerbs::new(SimConfig::default());
    let ctx = sim.open_device(0, ProcessId(1)).unwrap();
    let (_qp, live) = rc_qp(&mut sim, &ctx);
    let mut got: Vec<u32> = (0..1000)
        .map(|_| sim.mlx5dv_reserved_qpn_alloc(&ctx).unwrap())
        .collect();
    assert!(!got.contains(&live));
    assert!(got.iter().all(|&n| n > 1 && n <= 0xff_ffff));
    // QPs created while numbers are reserved never get one.
    for _ in 0..4 {
        let (_, n) = rc_qp(&mut sim, &ctx);
        assert!(!got.contains(&n), "QP got reserved number {n:#x}");
    }
    assert_eq!(sim.world().reserved_qpn_count(0), 1000);
    got.sort_unstable();
    got.dedup();
    assert_eq!(got.len(), 1000);
    for &n in &got {
        sim.mlx5dv_reserved_qpn_dealloc(&ctx, n).unwrap();
    }
    assert_eq!(sim.world().reserved_qpn_count(0), 0);
}

#[test]
fn dealloc_of_a_number_not_held_is_einval() {
    let mut sim = SimVerbs::new(SimConfig::default());
    let ctx = sim.open_device(0, ProcessId(1)).unwrap();
    let other = sim.open_device(0, ProcessId(2)).unwrap();
    let (_qp, live) = rc_qp(&mut sim, &ctx);
    let n = sim.mlx5dv_reserved_qpn_alloc(&ctx).unwrap();
    let errno = |r: Result<()>| r.unwrap_err().errno();
    assert_eq!(
        errno(sim.mlx5dv_reserved_qpn_dealloc(&ctx, n - 1)),
        errno::EINVAL
    );
    assert_eq!(
        errno(sim.mlx5dv_reserved_qpn_dealloc(&ctx, live)),
        errno::EINVAL
    );
    assert_eq!(
        errno(sim.mlx5dv_reserved_qpn_dealloc(&ctx, 0x00ab_cdef)),
        errno::EINVAL
    );
    // Another context of the same device does not hold it.
    assert_eq!(
        errno(sim.mlx5dv_reserved_qpn_dealloc(&other, n)),
        errno::EINVAL
    );
    sim.mlx5dv_reserved_qpn_dealloc(&ctx, n).unwrap();
    assert_eq!(
        errno(sim.mlx5dv_reserved_qpn_dealloc(&ctx, n)),
        errno::EINVAL
    );
}

#[test]
fn close_releases_and_rxe_is_eopnotsupp() {
    let config = SimConfig::with_devices(vec![DeviceProfile::connectx7(), DeviceProfile::rxe()]);
    let mut sim = SimVerbs::new(config);
    let ctx = sim.open_device(0, ProcessId(1)).unwrap();
    let a = sim.mlx5dv_reserved_qpn_alloc(&ctx).unwrap();
    let b = sim.mlx5dv_reserved_qpn_alloc(&ctx).unwrap();
    assert_ne!(a, b);
    sim.close_device(&ctx).unwrap();
    assert_eq!(sim.world().reserved_qpn_count(0), 0);
    let trace = sim.trace().render();
    assert!(
        trace.contains(&format!("dev0 qpn {a:#08x} reserved")),
        "{trace}"
    );
    assert!(
        trace.contains(&format!("dev0 qpn {b:#08x} released")),
        "{trace}"
    );

    let rxe = sim.open_device(1, ProcessId(1)).unwrap();
    let e = sim.mlx5dv_reserved_qpn_alloc(&rxe).unwrap_err();
    assert_eq!(e.errno(), errno::EOPNOTSUPP);
    assert!(!e.is_not_implemented());
    let e = sim.mlx5dv_reserved_qpn_dealloc(&rxe, a).unwrap_err();
    assert_eq!(e.errno(), errno::EOPNOTSUPP);
}

#[test]
fn deterministic() {
    let run = || {
        let mut sim = SimVerbs::new(SimConfig::with_seed(7));
        let ctx = sim.open_device(0, ProcessId(1)).unwrap();
        let v: Vec<u32> = (0..8)
            .map(|_| sim.mlx5dv_reserved_qpn_alloc(&ctx).unwrap())
            .collect();
        (v, sim.trace().render())
    };
    assert_eq!(run(), run());
}
