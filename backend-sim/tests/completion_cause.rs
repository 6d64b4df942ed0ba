//! A refused remote access says which check refused it: a bad rkey, an
//! access past the region's end and a region without the access flag all
//! complete as `REM_ACCESS_ERR`, and gave identical traces.
#![allow(missing_docs)]

use backend_sim::datapath::protection::AccessCause;
use backend_sim::{SimConfig, SimVerbs};
use verbs_api::*;

struct Side {
    cq: <SimVerbs as Verbs>::Cq,
    mr: <SimVerbs as Verbs>::Mr,
    qp: <SimVerbs as Verbs>::Qp,
    me: Endpoint,
}

fn side(v: &mut SimVerbs, device: usize, access: AccessFlags) -> Side {
    let ctx = v.open_device(device, ProcessId(device as u32)).unwrap();
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
    let mr = v
        .reg_mr(&pd, 4096, AccessFlags::LOCAL_WRITE | access)
        .unwrap();
    let cap = QpCap {
        max_send_wr: 8,
        max_recv_wr: 8,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let mut init = QpInitAttrEx::<SimVerbs> {
        qp_type: QpType::Rc,
        send_cq: Some(&cq),
        recv_cq: Some(&cq),
        cap,
        ..Default::default()
    };
    let qp = v.create_qp(&pd, &mut init).unwrap();
    let me = Endpoint::query(v, &ctx, &qp, 1).unwrap();
    Side { cq, mr, qp, me }
}

/// One RDMA WRITE of 64 bytes from a to b at `offset` in b's MR with
/// `rkey` (b's when `None`), b's MR registered with `access`: the
/// completion, its cause and the trace.
fn write_once(
    offset: u64,
    rkey: Option<u32>,
    access: AccessFlags,
) -> (Wc, Option<AccessCause>, String) {
    let mut v = SimVerbs::new(SimConfig::with_seed(5));
    let a = side(&mut v, 0, AccessFlags::empty());
    let b = side(&mut v, 1, access);
    let opts = ConnectOptions::default();
    connect_qp(&mut v, &a.qp, &a.me, &b.me, &opts).unwrap();
    connect_qp(&mut v, &b.qp, &b.me, &a.me, &opts).unwrap();
    let (src, dst) = (v.mr_info(&a.mr).unwrap(), v.mr_info(&b.mr).unwrap());
    let sge = [Sge {
        addr: src.addr,
        length: 64,
        lkey: src.lkey,
    }];
    let wr = SendWr::<SimVerbs> {
        wr_id: 9,
        sg_list: &sge,
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::SIGNALED,
        rdma: RdmaInfo {
            remote_addr: dst.addr + offset,
            rkey: rkey.unwrap_or(dst.rkey),
        },
        ..Default::default()
    };
    // SAFETY: the trait's contract: the MR outlives the request and is not
    // touched until its completion has been polled.
    let posted = unsafe { v.post_send(&a.qp, &[wr]) };
    posted.unwrap();
    let mut wc = [Wc::default(); 1];
    assert_eq!(v.poll_cq(&a.cq, &mut wc).unwrap(), 1);
    let cause = v.completion_cause(&a.cq, &wc[0]);
    let _ = &b.cq;
    (wc[0], cause, v.trace().render())
}

// Goal: three refusals with one status have three causes, in the trace's
// completion line and from `completion_cause`; a success has none; the
// same run twice gives the same trace (determinism). Method: one WRITE per
// case on a fresh two-device world.
#[test]
fn refused_writes_name_the_check_that_failed() {
    let rw = AccessFlags::REMOTE_WRITE;
    let cases = [
        (
            0,
            Some(0xdead_0000),
            rw,
            AccessCause::UnknownRkey,
            "bad rkey",
        ),
        (
            4096 - 8,
            None,
            rw,
            AccessCause::OutOfBounds,
            "out of bounds",
        ),
        (
            0,
            None,
            AccessFlags::REMOTE_READ,
            AccessCause::RegionAccess,
            "does not grant",
        ),
    ];
    let mut lines = Vec::new();
    for (offset, rkey, access, want, words) in cases {
        let (wc, cause, trace) = write_once(offset, rkey, access);
        assert_eq!(wc.status, WcStatus::RemAccessErr);
        assert_eq!(cause, Some(want));
        let line = trace
            .lines()
            .find(|l| l.contains("send completion wr_id=9"))
            .unwrap_or_else(|| panic!("{trace}"))
            .to_owned();
        assert!(line.contains("status=REM_ACCESS_ERR cause=\""), "{line}");
        assert!(line.contains(words), "{line}");
        assert_eq!(trace, write_once(offset, rkey, access).2, "deterministic");
        lines.push(line);
    }
    lines.dedup();
    assert_eq!(lines.len(), 3, "three different lines: {lines:?}");
    let (wc, cause, trace) = write_once(0, None, AccessFlags::REMOTE_WRITE);
    assert_eq!((wc.status, cause), (WcStatus::Success, None));
    assert!(!trace.contains("cause="), "{trace}");
}
