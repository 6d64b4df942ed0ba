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
    let mut zero = Ece { vendor_id: 0, ..e };
    assert_eq!(
        sim.set_ece(&a.qp, &mut zero).unwrap_err().errno(),
        errno::EOPNOTSUPP,
        "libibverbs refuses vendor 0"
    );
    let mut want = Ece {
        options: 0xffff_0001,
        ..e
    };
    sim.set_ece(&a.qp, &mut want).unwrap();
    assert_eq!(
        want.options, 0xffff_0001,
        "the caller's struct is not rewritten"
    );
    assert_eq!(sim.query_ece(&a.qp).unwrap().options, 0, "0 until a modify");
    let attr = QpAttr {
        qp_state: QpState::Error,
        ..QpAttr::default()
    };
    sim.modify_qp(&a.qp, &attr, QpAttrMask::STATE).unwrap();
    assert_eq!(
        sim.query_ece(&a.qp).unwrap().options,
        0x1,
        "only the supported bits are accepted"
    );

    let (mut sim, a, _b) = pair(DeviceProfile::rxe, None, WcExFlags::empty());
    assert_eq!(sim.query_ece(&a.qp).unwrap_err().errno(), errno::EOPNOTSUPP);
}

#[test]
fn clock_reads_virtual_time_and_converts_completion_timestamps() {
    // Goal: `ibv_query_rt_values_ex` reads the mlx5 core clock from virtual
    // time, and `mlx5dv_get_clock_info` + `mlx5dv_ts_to_ns` turn a
    // completion's timestamp back into the virtual time it completed at
    // (to the 6.4 ns tick); rxe has neither.
    let (mut sim, a, b) = pair(
        DeviceProfile::connectx6,
        Some(ALL_OPS),
        WcExFlags::COMPLETION_TIMESTAMP,
    );
    let before = sim.query_rt_values_ex(&a.ctx).unwrap();
    let mr_a = sim.reg_mr(&a.pd, 64, rw()).unwrap();
    let ia = sim.mr_info(&mr_a).unwrap();
    let mr_b = sim.reg_mr(&b.pd, 64, rw()).unwrap();
    let ib = sim.mr_info(&mr_b).unwrap();
    let mut w = WrEx::new(
        1,
        WrOp::RdmaWrite {
            rkey: ib.rkey,
            remote_addr: ib.addr,
        },
    );
    w.wr_flags = SendFlags::SIGNALED;
    w.data = WrData::Sge(Sge {
        addr: ia.addr,
        length: 64,
        lkey: ia.lkey,
    });
    post_batch(&mut sim, &a.qp, &[w]).unwrap();
    let got = poll_ex(&mut sim, &a.cq);
    assert_eq!(got.len(), 1);
    let done_ns = sim.now_ns();
    assert!(done_ns > 0, "the WRITE took virtual time");
    let ts = got[0].completion_timestamp.expect("asked for");
    let after = sim.query_rt_values_ex(&a.ctx).unwrap();
    assert!(
        before < ts && ts <= after,
        "clock {before} .. {after}, completion at {ts}"
    );
    assert_eq!(after, sim.now_ns() * 156_250 / 1_000_000);
    let info = sim.mlx5dv_get_clock_info(&a.ctx).unwrap();
    assert_eq!(info.last_cycles, after);
    assert_eq!(info.mask, (1 << 63) - 1);
    let ns = info.ts_to_ns(ts);
    assert!(
        ns <= done_ns && done_ns - ns < 7,
        "completion at {done_ns} ns, converted {ns} ns"
    );

    let (mut rxe, r, _) = pair(DeviceProfile::rxe, None, WcExFlags::empty());
    let e = rxe.query_rt_values_ex(&r.ctx).unwrap_err();
    assert_eq!(e.errno(), errno::EOPNOTSUPP);
    assert_eq!(
        rxe.mlx5dv_get_clock_info(&r.ctx).unwrap_err().errno(),
        errno::EOPNOTSUPP
    );
}
