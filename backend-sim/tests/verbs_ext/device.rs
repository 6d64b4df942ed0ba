//! GID entries (`ibv_query_gid_ex`, `ibv_query_gid_table`) and ECE.

use super::*;

#[test]
fn gid_entries_and_table() {
    let (mut sim, a, _b) = pair(DeviceProfile::connectx7, None, WcExFlags::empty());
    let e = sim.query_gid_ex(&a.ctx, 1, 0, 0).unwrap();
    assert_eq!(e.gid, sim.query_gid(&a.ctx, 1, 0).unwrap());
    assert_eq!(
        (e.gid_index, e.port_num, e.gid_type),
        (0, 1, GidType::RoceV2)
    );
    assert_ne!(e.ndev_ifindex, 0);
    assert_eq!(
        sim.query_gid_ex(&a.ctx, 1, 5, 0).unwrap_err().errno(),
        errno::ENODATA
    );
    assert_eq!(
        sim.query_gid_ex(&a.ctx, 1, 999, 0).unwrap_err().errno(),
        errno::EINVAL
    );
    assert_eq!(
        sim.query_gid_ex(&a.ctx, 2, 0, 0).unwrap_err().errno(),
        errno::EINVAL
    );
    assert_eq!(
        sim.query_gid_ex(&a.ctx, 1, 0, 1).unwrap_err().errno(),
        errno::EINVAL
    );
    let t = sim.query_gid_table(&a.ctx, 16, 0).unwrap();
    assert_eq!(t.len(), 2);
    assert_eq!(t[1], sim.query_gid_ex(&a.ctx, 1, 1, 0).unwrap());
    assert_eq!(
        sim.query_gid_table(&a.ctx, 1, 0).unwrap_err().errno(),
        errno::EINVAL
    );

    let (mut sim, a, _b) = pair(DeviceProfile::connectx6, None, WcExFlags::empty());
    let e = sim.query_gid_ex(&a.ctx, 1, 0, 0).unwrap();
    assert_eq!((e.gid_type, e.ndev_ifindex), (GidType::Ib, 0));
}

#[test]
fn ece_on_mlx5_and_eopnotsupp_on_rxe() {
    let (mut sim, a, _b) = pair(DeviceProfile::connectx6, None, WcExFlags::empty());
    let e = sim.query_ece(&a.qp).unwrap();
    assert_eq!(e.vendor_id, 0x02c9);
    assert_eq!(e.options, backend_sim::MLX5_ECE_OPTIONS);
    let mut bad = Ece {
        vendor_id: 0x1234,
        ..e
    };
    assert_eq!(
        sim.set_ece(&a.qp, &mut bad).unwrap_err().errno(),
        errno::EINVAL
    );
    let mut bad = Ece { comp_mask: 1, ..e };
    assert_eq!(
        sim.set_ece(&a.qp, &mut bad).unwrap_err().errno(),
        errno::EINVAL
    );
    assert_eq!(sim.query_ece(&a.qp).unwrap(), e, "unchanged after errors");
    let mut want = Ece {
        options: 0xffff_0001,
        ..e
    };
    sim.set_ece(&a.qp, &mut want).unwrap();
    assert_eq!(want.options, 0x1, "only the supported bits are accepted");
    assert_eq!(sim.query_ece(&a.qp).unwrap().options, 0x1);

    let (mut sim, a, _b) = pair(DeviceProfile::rxe, None, WcExFlags::empty());
    assert_eq!(sim.query_ece(&a.qp).unwrap_err().errno(), errno::EOPNOTSUPP);
}
