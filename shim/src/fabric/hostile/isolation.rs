//! Isolation between processes: a foreign or forged handle, rdma_cm's
//! per-process device contexts and default PDs.

use super::*;

/// Goal: a process reaches only its own objects (and its forked child its
/// parent's); a foreign or forged handle is EINVAL and reveals nothing;
/// garbage, huge lengths and truncated frames disturb nobody else.
/// Method: a victim process makes a context, PD, CQ, MR, QP and device
/// memory and tells us their handles; this process, a family of its own,
/// uses each handle in the verbs that read, change or destroy; then sends
/// garbage; then the victim checks that everything it has is intact and
/// that a child it forks still uses its objects.
#[test]
fn a_foreign_handle_is_refused_and_reveals_nothing() {
    let fabric = Fabric::start("handles");
    let (mut victim_proc, mut out) = helper("victim", &fabric.socket);
    let (v, dm): (End, Option<DmHandle>) =
        postcard::from_bytes(&unhex(&expect(&mut out, "HANDLES "))).unwrap();
    let mut e = fabric.engine();
    let einval = |r: Result<(), Error>, what: &str| {
        let err = r.expect_err(what);
        assert_eq!(err.errno(), libc::EINVAL, "{what}: {err}");
        assert!(
            !err.to_string().contains(&format!("{:#x}", v.addr)),
            "{what} revealed the victim's address: {err}"
        );
    };
    einval(e.mr_info(&v.mr).map(drop), "mr_info of a foreign MR");
    einval(e.qp_num(&v.qp).map(drop), "qp_num of a foreign QP");
    einval(
        e.query_qp(&v.qp, QpAttrMask::STATE).map(drop),
        "query_qp of a foreign QP",
    );
    einval(
        e.query_device(&v.ctx).map(drop),
        "query_device of a foreign context",
    );
    einval(
        e.alloc_pd(&v.ctx).map(drop),
        "alloc_pd on a foreign context",
    );
    let mut wc = [Wc::default(); 4];
    einval(
        e.poll_cq(&v.cq, &mut wc).map(drop),
        "poll_cq of a foreign CQ",
    );
    if let Some(dm) = &dm {
        let mut peek = [0u8; 16];
        einval(e.memcpy_from_dm(dm, 0, &mut peek), "reading foreign DM");
        assert_ne!(&peek, SECRET);
        einval(e.memcpy_to_dm(dm, 0, &[0; 16]), "writing foreign DM");
    }
    // A QP of ours put into the victim's PD and CQs (two numbers rewritten
    // on the wire): refused.
    let own_ctx = e.open_device(0, ProcessId(0)).unwrap();
    let mut attr = QpInitAttrEx::<SimVerbs> {
        send_cq: Some(&v.cq),
        recv_cq: Some(&v.cq),
        cap: QpCap {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        qp_type: QpType::Rc,
        comp_mask: QpInitAttrMask::PD,
        pd: Some(&v.pd),
        ..QpInitAttrEx::default()
    };
    einval(
        e.create_qp_ex(&own_ctx, &mut attr).map(drop),
        "a QP in a foreign PD",
    );
    let mut hole = [0u8; 64];
    let a = hole.as_mut_ptr() as usize;
    einval(
        e.reg_mr_app(
            v.pd,
            a as u64,
            a,
            64,
            AccessFlags::LOCAL_WRITE,
            || unreachable!(),
        )
        .map(drop),
        "an MR in a foreign PD",
    );
    let sg = [Sge {
        addr: v.addr,
        length: 64,
        lkey: v.lkey,
    }];
    let wr = SendWr {
        wr_id: 7,
        sg_list: &sg,
        opcode: WrOpcode::Send,
        ..SendWr::default()
    };
    // SAFETY: the request is refused before anything is read.
    einval(
        unsafe { e.post_send(&v.qp, &[wr]) },
        "posting on a foreign QP",
    );
    einval(
        e.modify_qp(
            &v.qp,
            &QpAttr {
                qp_state: QpState::Error,
                ..QpAttr::default()
            },
            QpAttrMask::STATE,
        ),
        "modifying a foreign QP",
    );
    einval(e.dereg_mr(&v.mr), "deregistering a foreign MR");
    einval(e.destroy_qp(&v.qp), "destroying a foreign QP");
    einval(e.destroy_cq(&v.cq), "destroying a foreign CQ");
    einval(e.dealloc_pd(&v.pd), "freeing a foreign PD");
    einval(e.close_device(&v.ctx), "closing a foreign context");
    if let Some(dm) = &dm {
        einval(e.free_dm(dm), "freeing foreign DM");
    }
    // Forged handles: the neighbours of ours (what a salted (index,
    // generation) pair would let one guess) are refused the same way.
    let pd = e.alloc_pd(&own_ctx).unwrap();
    let forge = |index: u32, generation: u32| -> PdHandle {
        postcard::from_bytes(&postcard::to_allocvec(&(index, generation)).unwrap()).unwrap()
    };
    for forged in [
        forge(pd.index() + 1, pd.generation()),
        forge(v.pd.index(), v.pd.generation() ^ 1),
        forge(u32::MAX, 0),
    ] {
        einval(e.dealloc_pd(&forged), "a forged PD");
    }
    // Garbage: a huge length, a frame cut short, a frame that is no call,
    // a connection closed mid-greeting.
    for junk in [
        &b"\xff\xff\xff\x7fxxxxxxxx"[..],
        &b"\x40\x00\x00\x00\x01\x02"[..],
        &b"\x08\x00\x00\x00\xee\xee\xee\xee\xee\xee\xee\xee"[..],
        &b"\x01"[..],
    ] {
        let mut s = UnixStream::connect(&fabric.socket).unwrap();
        s.write_all(junk).unwrap();
        drop(s);
    }
    // Our own objects still work, and so do the victim's.
    assert!(e.query_device(&own_ctx).is_ok());
    let stdin = victim_proc.stdin.as_mut().unwrap();
    stdin.write_all(b"check\n").unwrap();
    assert_eq!(
        expect(&mut out, "CHILD "),
        "0",
        "the forked child reached its parent's objects"
    );
    assert_eq!(expect(&mut out, "INTACT "), "ok");
    assert!(victim_proc.wait().unwrap().success());
    let log = fabric.log();
    assert!(log.contains("refused a frame of 2147483647 bytes"), "{log}");
    assert!(
        log.contains("refused a first frame that is no greeting"),
        "{log}"
    );
}

/// Goal: rdma_cm's device context and default PD are each process's own,
/// as librdmacm opens the device in every process: another process on the
/// same device cannot reach them by handle, nor use an MR registered in
/// them by lkey. Method: a victim binds an rdma_cm id to device 0 and
/// registers an MR of 0xc3 bytes in the id's default PD; this process (a
/// family of its own) binds an id to the same device, checks that its
/// context and PD are others, uses the victim's handles, and SENDs from a
/// QP in its own CM PD naming the victim's lkey and address to a QP of its
/// own: the send fails with a protection error and no byte arrives.
#[test]
fn another_process_cannot_reach_rdma_cm_default_objects() {
    let fabric = Fabric::start("cm");
    let (mut victim_proc, mut out) = helper("cm_victim", &fabric.socket);
    let v: CmEnd = postcard::from_bytes(&unhex(&expect(&mut out, "CM "))).unwrap();
    let mut e = fabric.engine();
    let einval = |r: Result<(), Error>, what: &str| {
        let err = r.expect_err(what);
        assert_eq!(err.errno(), libc::EINVAL, "{what}: {err}");
    };
    let mut sbuf = vec![0u8; 4096];
    let me = cm_end(&mut e, &mut sbuf);
    assert_ne!(me.ctx, v.ctx, "the two processes share rdma_cm's context");
    assert_ne!(me.pd, v.pd, "the two processes share rdma_cm's default PD");
    einval(
        e.rdma_id_info(&v.id).map(drop),
        "rdma_id_info of a foreign id",
    );
    einval(
        e.query_device(&v.ctx).map(drop),
        "query_device of a foreign CM context",
    );
    einval(
        e.alloc_pd(&v.ctx).map(drop),
        "alloc_pd on a foreign CM context",
    );
    einval(e.mr_info(&v.mr).map(drop), "mr_info of a foreign MR");
    let mut hole = [0u8; 64];
    let a = hole.as_mut_ptr() as usize;
    einval(
        e.reg_mr_app(
            v.pd,
            a as u64,
            a,
            64,
            AccessFlags::LOCAL_WRITE,
            || unreachable!(),
        )
        .map(drop),
        "an MR in a foreign CM PD",
    );
    einval(e.dereg_mr(&v.mr), "deregistering a foreign MR");
    einval(e.dealloc_pd(&v.pd), "freeing a foreign CM PD");
    einval(e.close_device(&v.ctx), "closing a foreign CM context");
    // A QP in our own CM PD, connected to a QP of ours, sends naming the
    // victim's lkey and address.
    let cq = e
        .create_cq(
            &me.ctx,
            &CqInit {
                cqe: 16,
                ..CqInit::default()
            },
        )
        .unwrap();
    let mut attr = QpInitAttrEx::<SimVerbs> {
        send_cq: Some(&cq),
        recv_cq: Some(&cq),
        cap: QpCap {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        qp_type: QpType::Rc,
        comp_mask: QpInitAttrMask::PD,
        pd: Some(&me.pd),
        ..QpInitAttrEx::default()
    };
    let qp = e.create_qp_ex(&me.ctx, &mut attr).unwrap();
    let qpn = e.qp_num(&qp).unwrap();
    let lid = e.query_port(&me.ctx, 1).unwrap().lid;
    let mut rbuf = vec![0u8; 4096];
    let r = end(&mut e, 0, &mut rbuf);
    to_rts(&mut e, &qp, r.qpn, r.lid);
    to_rts(&mut e, &r.qp, qpn, lid);
    let rsg = [Sge {
        addr: r.addr,
        length: 4096,
        lkey: r.lkey,
    }];
    // SAFETY: `rbuf` outlives the receive (checked below, then dropped).
    unsafe {
        e.post_recv(
            &r.qp,
            &[RecvWr {
                wr_id: 2,
                sg_list: &rsg,
            }],
        )
    }
    .unwrap();
    let sg = [Sge {
        addr: v.addr,
        length: 64,
        lkey: v.lkey,
    }];
    let wr = SendWr {
        wr_id: 1,
        sg_list: &sg,
        opcode: WrOpcode::Send,
        send_flags: SendFlags::SIGNALED,
        ..SendWr::default()
    };
    // SAFETY: the request names memory of another process, which the
    // fabric never reads for us: the lkey is not in our QP's PD.
    unsafe { e.post_send(&qp, &[wr]) }.unwrap();
    let mut wc = [Wc::default(); 4];
    let t0 = Instant::now();
    let mut got = Vec::new();
    while got.is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(20), "no completion");
        let n = e.poll_cq(&cq, &mut wc).unwrap();
        got.extend(wc[..n].iter().filter(|w| w.wr_id == 1).copied());
    }
    assert_eq!(
        got[0].status,
        WcStatus::LocProtErr,
        "a SEND naming another process's lkey"
    );
    let n = e.poll_cq(&r.cq, &mut wc).unwrap();
    assert!(
        wc[..n].iter().all(|w| w.status != WcStatus::Success),
        "the receiver got a message"
    );
    assert!(
        rbuf.iter().all(|&b| b == 0),
        "the victim's bytes arrived in our buffer"
    );
    let stdin = victim_proc.stdin.as_mut().unwrap();
    stdin.write_all(b"check\n").unwrap();
    assert_eq!(expect(&mut out, "INTACT "), "ok");
    assert!(victim_proc.wait().unwrap().success());
}
