//! Device memory: `alloc_dm` / `free_dm` and the device's capacity, the
//! copy verbs' bounds and alignment, `reg_dm_mr`'s checks and the DM's use
//! count, and traffic from and into zero-based MRs on device memory.

use super::*;
use verbs_api::errno::{EBUSY, EFAULT, EINVAL, ENOMEM, EOPNOTSUPP};

const MAX_DM: u64 = 131_072;

fn attr(length: u64) -> AllocDmAttr {
    AllocDmAttr {
        length,
        ..AllocDmAttr::default()
    }
}

fn zb() -> AccessFlags {
    AccessFlags::ZERO_BASED | AccessFlags::LOCAL_WRITE
}

fn one_device(profile: fn() -> DeviceProfile) -> (SimVerbs, backend_sim::ContextHandle) {
    let mut sim = SimVerbs::new(SimConfig::for_profiles(3, vec![profile()]));
    let ctx = sim.open_device(0, ProcessId(0)).unwrap();
    (sim, ctx)
}

#[test]
fn max_dm_size_per_profile_and_rxe_has_no_device_memory() {
    // Goal: query_device_ex reports the profile's max_dm_size (mlx5: the
    // estimate, rxe: 0) and alloc_dm on rxe is EOPNOTSUPP, as a context
    // without the op is. Method: query and allocate on each profile.
    for (profile, max) in [
        (DeviceProfile::connectx6 as fn() -> DeviceProfile, MAX_DM),
        (DeviceProfile::connectx7, MAX_DM),
        (DeviceProfile::rxe, 0),
    ] {
        let (mut sim, ctx) = one_device(profile);
        assert_eq!(sim.query_device_ex(&ctx).unwrap().max_dm_size, max);
        if max == 0 {
            let e = sim.alloc_dm(&ctx, &attr(64)).unwrap_err();
            assert_eq!(e.errno(), EOPNOTSUPP);
        }
    }
}

#[test]
fn alloc_dm_checks_and_capacity_and_free_returns_it() {
    // Goal: comp_mask, length 0 and a length above max_dm_size are EINVAL;
    // the device's total is max_dm_size (ENOMEM past it); freeing gives the
    // bytes back; a DM keeps its context open; a freed handle is EINVAL.
    let (mut sim, ctx) = one_device(DeviceProfile::connectx6);
    let bad_mask = AllocDmAttr {
        length: 64,
        comp_mask: 1,
        ..AllocDmAttr::default()
    };
    assert_eq!(sim.alloc_dm(&ctx, &bad_mask).unwrap_err().errno(), EINVAL);
    assert_eq!(sim.alloc_dm(&ctx, &attr(0)).unwrap_err().errno(), EINVAL);
    assert_eq!(
        sim.alloc_dm(&ctx, &attr(MAX_DM + 1)).unwrap_err().errno(),
        EINVAL
    );
    let a = sim.alloc_dm(&ctx, &attr(MAX_DM / 2)).unwrap();
    let b = sim.alloc_dm(&ctx, &attr(MAX_DM / 2)).unwrap();
    assert_eq!(sim.alloc_dm(&ctx, &attr(4)).unwrap_err().errno(), ENOMEM);
    assert_eq!(sim.live_objects().dms, 2);
    assert_eq!(sim.close_device(&ctx).unwrap_err().errno(), EBUSY);
    sim.free_dm(&a).unwrap();
    assert_eq!(sim.free_dm(&a).unwrap_err().errno(), EINVAL);
    let c = sim.alloc_dm(&ctx, &attr(MAX_DM / 2)).unwrap();
    sim.free_dm(&b).unwrap();
    sim.free_dm(&c).unwrap();
    sim.close_device(&ctx).unwrap();
    assert!(sim.live_objects().is_empty(), "{}", sim.live_objects());
}

#[test]
fn copies_check_bounds_first_then_alignment_and_change_nothing() {
    // Goal: memcpy_to_dm / memcpy_from_dm: past the end is EFAULT (even
    // when also unaligned), an unaligned offset or length is EINVAL, and a
    // refused copy leaves the DM and the host buffer as they were.
    let (mut sim, ctx) = one_device(DeviceProfile::connectx6);
    let dm = sim.alloc_dm(&ctx, &attr(64)).unwrap();
    let fresh = sim.alloc_dm(&ctx, &attr(64)).unwrap();
    let mut zero = [0xeeu8; 64];
    sim.memcpy_from_dm(&fresh, 0, &mut zero).unwrap();
    assert_eq!(zero, [0u8; 64], "a new DM is zeroed");
    sim.memcpy_to_dm(&dm, 0, &[0x11; 64]).unwrap();
    for (offset, len, errno) in [
        (60, 8, EFAULT),
        (61, 4, EFAULT), // past the end and unaligned: the bound wins
        (64, 4, EFAULT),
        (u64::MAX - 3, 4, EFAULT),
        (2, 4, EINVAL),
        (4, 3, EINVAL),
    ] {
        let e = sim.memcpy_to_dm(&dm, offset, &vec![0x22; len]).unwrap_err();
        assert_eq!((offset, len, e.errno()), (offset, len, errno));
        let mut host = vec![0x33u8; len];
        let e = sim.memcpy_from_dm(&dm, offset, &mut host).unwrap_err();
        assert_eq!((offset, len, e.errno()), (offset, len, errno));
        assert!(host.iter().all(|&b| b == 0x33), "host untouched");
    }
    let mut back = [0u8; 64];
    sim.memcpy_from_dm(&dm, 0, &mut back).unwrap();
    assert_eq!(back, [0x11; 64]);
    sim.memcpy_to_dm(&dm, 8, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    let mut mid = [0u8; 12];
    sim.memcpy_from_dm(&dm, 4, &mut mid).unwrap();
    assert_eq!(mid, [0x11, 0x11, 0x11, 0x11, 1, 2, 3, 4, 5, 6, 7, 8]);
}

#[test]
fn reg_dm_mr_checks_and_the_use_count_blocks_free() {
    // Goal: reg_dm_mr refuses missing ZERO_BASED, access bits outside the
    // provider's set, REMOTE_WRITE without LOCAL_WRITE, a range outside
    // the DM and a PD of another context (all EINVAL); a good MR is
    // zero-based, makes free_dm EBUSY until it is deregistered, and cannot
    // be re-registered (EINVAL).
    let mut sim = SimVerbs::new(SimConfig::for_profiles(
        3,
        vec![DeviceProfile::connectx6(), DeviceProfile::connectx6()],
    ));
    let ctx = sim.open_device(0, ProcessId(0)).unwrap();
    let other = sim.open_device(1, ProcessId(0)).unwrap();
    let pd = sim.alloc_pd(&ctx).unwrap();
    let other_pd = sim.alloc_pd(&other).unwrap();
    let dm = sim.alloc_dm(&ctx, &attr(100)).unwrap();
    let bad = [
        (0, 100, AccessFlags::LOCAL_WRITE),
        (0, 100, zb() | AccessFlags::MW_BIND),
        (0, 100, AccessFlags::ZERO_BASED | AccessFlags::REMOTE_WRITE),
        (0, 104, zb()),
        (4, 100, zb()),
        (101, 0, zb()),
        (u64::MAX, 4, zb()),
    ];
    for (offset, len, access) in bad {
        let e = sim.reg_dm_mr(&pd, &dm, offset, len, access).unwrap_err();
        assert_eq!(
            e.errno(),
            EINVAL,
            "offset {offset} length {len} access {access}"
        );
    }
    let e = sim.reg_dm_mr(&other_pd, &dm, 0, 4, zb()).unwrap_err();
    assert_eq!(e.errno(), EINVAL);
    assert_eq!(sim.live_objects().mrs, 0, "nothing registered on error");
    sim.free_dm(&dm).unwrap();
    let dm = sim.alloc_dm(&ctx, &attr(100)).unwrap();
    let mr = sim.reg_dm_mr(&pd, &dm, 4, 96, zb()).unwrap();
    let empty = sim.reg_dm_mr(&pd, &dm, 100, 0, zb()).unwrap();
    let info = sim.mr_info(&mr).unwrap();
    assert_eq!((info.addr, info.length), (0, 96));
    assert_eq!(sim.free_dm(&dm).unwrap_err().errno(), EBUSY);
    let args = ReregMr::<SimVerbs> {
        flags: ReregMrFlags::CHANGE_ACCESS,
        pd: None,
        length: 0,
        access: AccessFlags::LOCAL_WRITE,
    };
    assert_eq!(sim.rereg_mr(&mr, &args).unwrap_err().errno(), EINVAL);
    sim.dereg_mr(&mr).unwrap();
    assert_eq!(sim.free_dm(&dm).unwrap_err().errno(), EBUSY);
    sim.dereg_mr(&empty).unwrap();
    sim.free_dm(&dm).unwrap();
}

#[test]
fn send_from_device_memory_and_rdma_write_into_it() {
    // Goal: a DM MR works on the data path both ways. Method: A copies a
    // pattern into its DM and SENDs from a DM MR (SGE address 0 = the MR's
    // start, i.e. DM offset 8) into B's ordinary MR; then A RDMA WRITEs
    // into B's DM MR (remote address = offset 4 in the MR, zero-based) and
    // B reads the bytes back with memcpy_from_dm.
    let (mut sim, a, b) = pair(DeviceProfile::connectx6, None, WcExFlags::empty());
    let a_dm = sim.alloc_dm(&a.ctx, &attr(64)).unwrap();
    let pattern: Vec<u8> = (1..=32).collect();
    sim.memcpy_to_dm(&a_dm, 8, &pattern).unwrap();
    let a_mr = sim.reg_dm_mr(&a.pd, &a_dm, 8, 32, zb()).unwrap();
    let a_info = sim.mr_info(&a_mr).unwrap();
    let b_mr = sim.reg_mr(&b.pd, 64, rw()).unwrap();
    let b_info = sim.mr_info(&b_mr).unwrap();

    let rs = [Sge {
        addr: b_info.addr,
        length: 64,
        lkey: b_info.lkey,
    }];
    recv(
        &mut sim,
        &b.qp,
        &[RecvWr {
            wr_id: 7,
            sg_list: &rs,
        }],
    )
    .unwrap();
    let ss = [Sge {
        addr: 0,
        length: 32,
        lkey: a_info.lkey,
    }];
    let wr = SendWr::<SimVerbs> {
        wr_id: 1,
        sg_list: &ss,
        opcode: WrOpcode::Send,
        send_flags: SendFlags::SIGNALED,
        ..SendWr::default()
    };
    send(&mut sim, &a.qp, &[wr]).unwrap();
    sim.sim_control(SimCommand::RunUntilIdle).unwrap();
    let wcs = poll_ex(&mut sim, &a.cq);
    assert_eq!((wcs.len(), wcs[0].status), (1, WcStatus::Success));
    let wcs = poll_ex(&mut sim, &b.cq);
    assert_eq!((wcs[0].wr_id, wcs[0].status), (7, WcStatus::Success));
    assert_eq!(&sim.mr_bytes(&b_mr).unwrap()[..32], &pattern[..]);

    let b_dm = sim.alloc_dm(&b.ctx, &attr(64)).unwrap();
    let access = zb() | AccessFlags::REMOTE_WRITE;
    let target = sim.reg_dm_mr(&b.pd, &b_dm, 16, 48, access).unwrap();
    let t_info = sim.mr_info(&target).unwrap();
    let ws = [Sge {
        addr: 4,
        length: 16,
        lkey: a_info.lkey,
    }];
    let wr = SendWr::<SimVerbs> {
        wr_id: 2,
        sg_list: &ws,
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::SIGNALED,
        rdma: RdmaInfo {
            remote_addr: 4,
            rkey: t_info.rkey,
        },
        ..SendWr::default()
    };
    send(&mut sim, &a.qp, &[wr]).unwrap();
    sim.sim_control(SimCommand::RunUntilIdle).unwrap();
    let wcs = poll_ex(&mut sim, &a.cq);
    assert_eq!((wcs[0].wr_id, wcs[0].status), (2, WcStatus::Success));
    let mut back = [0u8; 24];
    sim.memcpy_from_dm(&b_dm, 16, &mut back).unwrap();
    assert_eq!(&back[..4], &[0; 4], "bytes before the remote address");
    assert_eq!(&back[4..20], &pattern[4..20]);
    assert_eq!(&back[20..], &[0; 4], "bytes after the write");

    // Past the MR's end (zero-based: 48 bytes) the responder refuses.
    let wr = SendWr::<SimVerbs> {
        wr_id: 3,
        sg_list: &ws,
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::SIGNALED,
        rdma: RdmaInfo {
            remote_addr: 40,
            rkey: t_info.rkey,
        },
        ..SendWr::default()
    };
    send(&mut sim, &a.qp, &[wr]).unwrap();
    sim.sim_control(SimCommand::RunUntilIdle).unwrap();
    let wcs = poll_ex(&mut sim, &a.cq);
    assert_eq!((wcs[0].wr_id, wcs[0].status), (3, WcStatus::RemAccessErr));
}
