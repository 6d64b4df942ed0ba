//! `MLX5DV_QP_EX_WITH_MEMCPY` at `mlx5dv_create_qp`: after the per-type
//! check (dc-and-mlx5dv.md §1.4) the mlx5 provider needs the PD in the
//! generic attributes (`EINVAL`) and the device's DMA MMO engine
//! (`EOPNOTSUPP`), as rdma-core's `qp_init_wr_memcpy` does. A profile
//! without the engine (every built-in one) refuses the flag and creates
//! nothing; one that claims it creates the QP.

use backend_sim::{DeviceProfile, SimConfig, SimVerbs};
use verbs_api::*;

fn world(dma_mmo: bool) -> SimVerbs {
    let mut p = DeviceProfile::connectx6();
    if let Some(m) = p.mlx5.as_mut() {
        m.dma_mmo = dma_mmo;
    }
    SimVerbs::new(SimConfig::with_devices(vec![p]))
}

/// Creates an RC QP through `mlx5dv_create_qp` asking for `ops`.
fn create(v: &mut SimVerbs, with_pd_mask: bool, ops: Mlx5SendOpsFlags) -> Result<()> {
    let ctx = v.open_device(0, ProcessId(0))?;
    let pd = v.alloc_pd(&ctx)?;
    let cq = v.create_cq(
        &ctx,
        &CqInit {
            cqe: 16,
            ..CqInit::default()
        },
    )?;
    let mut attr = QpInitAttrEx::<SimVerbs> {
        qp_type: QpType::Rc,
        comp_mask: if with_pd_mask {
            QpInitAttrMask::PD
        } else {
            QpInitAttrMask::empty()
        },
        pd: Some(&pd),
        send_cq: Some(&cq),
        recv_cq: Some(&cq),
        cap: QpCap {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        ..QpInitAttrEx::default()
    };
    let dv = Mlx5QpInitAttr {
        comp_mask: Mlx5QpInitAttrMask::SEND_OPS_FLAGS,
        send_ops_flags: ops,
        ..Mlx5QpInitAttr::default()
    };
    let before = v.live_objects();
    match v.mlx5dv_create_qp(&ctx, &mut attr, &dv) {
        Ok(qp) => {
            v.destroy_qp(&qp)?;
            Ok(())
        }
        Err(e) => {
            assert_eq!(
                v.live_objects(),
                before,
                "a refused create left an object behind"
            );
            Err(e)
        }
    }
}

#[test]
fn memcpy_needs_the_dma_mmo_engine() {
    let mut v = world(false);
    let e = create(&mut v, true, Mlx5SendOpsFlags::MEMCPY).unwrap_err();
    assert_eq!(e.errno(), errno::EOPNOTSUPP, "{e}");
    assert!(e.to_string().contains("DMA MMO"), "{e}");
    // The other mlx5dv ops an RC QP may ask for are not affected.
    create(&mut v, true, Mlx5SendOpsFlags::RAW_WQE).expect("RAW_WQE on RC");
}

#[test]
fn memcpy_on_a_device_with_the_engine() {
    let mut v = world(true);
    create(&mut v, true, Mlx5SendOpsFlags::MEMCPY).expect("MEMCPY with dma_mmo");
    let e = create(&mut v, false, Mlx5SendOpsFlags::MEMCPY).unwrap_err();
    assert_eq!(e.errno(), errno::EINVAL, "{e}");
}
