//! A client and a server connecting over rdma_cm in the simulator and
//! exchanging messages (docs/rdma-cm.md).
//!
//! Both run in one simulated world: the server listens on device 1
//! (10.0.1.1:7471), the client resolves the address and the route from
//! device 0 and connects with private data; the server accepts. Each side
//! lets `rdma_create_qp` make its QP on the default PD with automatic CQs,
//! and the QPs reach RTS by the CM's automatic transitions. Then they
//! play ping-pong with SENDs, each checking what it receives, and
//! disconnect. Everything advances in virtual time; the run is
//! deterministic.
//!
//! ```text
//! cargo run -q -p backend-sim --example rdma_cm_pingpong [ROUNDS]
//! ```
#![allow(unsafe_code)] // post_send / post_recv are `unsafe fn` in the trait

use std::net::SocketAddr;

use backend_sim::{device_ipv4, CmChannelHandle, CmIdHandle, MrHandle, SimVerbs};
use verbs_api::*;

type Sim = SimVerbs;

/// The next event of `ch`, which must be `want`; acknowledged.
fn event(sim: &mut Sim, ch: &CmChannelHandle, want: CmEventType) -> Result<CmEvent<Sim>> {
    let ev = sim
        .rdma_get_cm_event(ch)?
        .unwrap_or_else(|| panic!("waited for {want}, nothing can come any more"));
    assert_eq!(ev.event, want, "unexpected event (status {})", ev.status);
    let copy = CmEvent {
        event: ev.event,
        id: ev.id,
        listen_id: ev.listen_id,
        status: ev.status,
        private_data: ev.private_data.clone(),
        conn: ev.conn.clone(),
        token: ev.token,
        ud: ev.ud,
        context: ev.context,
    };
    sim.rdma_ack_cm_event(ev)?;
    Ok(copy)
}

/// One side of the connection: its id, QP, CQs and two registered buffers
/// (bytes a posted request owns cannot be touched until it completes).
struct End {
    id: CmIdHandle,
    qp: <Sim as Verbs>::Qp,
    send_cq: <Sim as Verbs>::Cq,
    recv_cq: <Sim as Verbs>::Cq,
    tx: MrHandle,
    rx: MrHandle,
}

/// `rdma_create_qp` with no PD and no CQs: librdmacm supplies them.
fn make_qp(sim: &mut Sim, id: CmIdHandle) -> Result<End> {
    let mut attr = QpInitAttrEx::<Sim> {
        qp_type: QpType::Rc,
        cap: QpCap {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        ..QpInitAttrEx::default()
    };
    let qp = sim.rdma_create_qp(&id, None, &mut attr)?;
    let info = sim.rdma_id_info(&id)?;
    let pd = info.pd.expect("the id's default PD");
    let tx = sim.reg_mr(&pd, 4096, AccessFlags::LOCAL_WRITE)?;
    let rx = sim.reg_mr(&pd, 4096, AccessFlags::LOCAL_WRITE)?;
    Ok(End {
        id,
        qp,
        send_cq: info.send_cq.expect("automatic send CQ"),
        recv_cq: info.recv_cq.expect("automatic receive CQ"),
        tx,
        rx,
    })
}

/// Posts a receive for up to 4 KiB into the side's receive buffer.
fn post_recv(sim: &mut Sim, e: &End, wr_id: u64) -> Result<()> {
    let m = sim.mr_info(&e.rx)?;
    let sge = [Sge {
        addr: m.addr,
        length: 4096,
        lkey: m.lkey,
    }];
    // SAFETY: the simulator owns the buffer; the MR outlives the request.
    unsafe {
        sim.post_recv(
            &e.qp,
            &[RecvWr {
                wr_id,
                sg_list: &sge,
            }],
        )
    }
}

/// Sends `msg` from the side's send buffer and waits for its completion.
fn send(sim: &mut Sim, e: &End, msg: &[u8], wr_id: u64) -> Result<()> {
    sim.mr_bytes_mut(&e.tx)?[..msg.len()].copy_from_slice(msg);
    let m = sim.mr_info(&e.tx)?;
    let sge = [Sge {
        addr: m.addr,
        length: msg.len() as u32,
        lkey: m.lkey,
    }];
    let wr = SendWr {
        wr_id,
        sg_list: &sge,
        opcode: WrOpcode::Send,
        send_flags: SendFlags::SIGNALED,
        ..SendWr::default()
    };
    // SAFETY: as above.
    unsafe { sim.post_send(&e.qp, &[wr])? };
    let mut wc = [Wc::default()];
    assert_eq!(sim.poll_cq(&e.send_cq, &mut wc)?, 1, "send completion");
    assert_eq!((wc[0].wr_id, wc[0].status), (wr_id, WcStatus::Success));
    Ok(())
}

/// Reaps one receive on `e` and returns the bytes that arrived.
fn receive(sim: &mut Sim, e: &End, wr_id: u64) -> Result<Vec<u8>> {
    let mut wc = [Wc::default()];
    assert_eq!(sim.poll_cq(&e.recv_cq, &mut wc)?, 1, "receive completion");
    assert_eq!((wc[0].wr_id, wc[0].status), (wr_id, WcStatus::Success));
    let len = wc[0].byte_len as usize;
    Ok(sim.mr_bytes(&e.rx)?[..len].to_vec())
}

fn main() -> Result<()> {
    let rounds: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3);
    let mut sim = SimVerbs::default();
    let server_addr = SocketAddr::from((device_ipv4(1), 7471));

    // Server: an event channel and a listening id on device 1.
    let sch = sim.rdma_create_event_channel()?;
    let listen = sim.rdma_create_id(&sch, 0, PortSpace::Tcp)?;
    sim.rdma_bind_addr(&listen, server_addr)?;
    sim.rdma_listen(&listen, 8)?;

    // Client: resolve the address and the route from device 0, make the QP, connect.
    let cch = sim.rdma_create_event_channel()?;
    let cid = sim.rdma_create_id(&cch, 0, PortSpace::Tcp)?;
    let src = SocketAddr::from((device_ipv4(0), 0));
    sim.rdma_resolve_addr(&cid, Some(src), server_addr, 2000)?;
    event(&mut sim, &cch, CmEventType::AddrResolved)?;
    sim.rdma_resolve_route(&cid, 2000)?;
    event(&mut sim, &cch, CmEventType::RouteResolved)?;
    let client = make_qp(&mut sim, cid)?;
    let hello = ConnParam {
        private_data: b"client v1".to_vec(),
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        ..ConnParam::default()
    };
    sim.rdma_connect(&cid, &hello)?;

    // Server: the request arrives on a new id; make its QP, pre-post a receive, accept.
    let req = event(&mut sim, &sch, CmEventType::ConnectRequest)?;
    assert_eq!(req.listen_id, Some(listen));
    assert_eq!(&req.private_data[..9], b"client v1");
    let server = make_qp(&mut sim, req.id)?;
    post_recv(&mut sim, &server, 100)?;
    let welcome = ConnParam {
        private_data: b"server v1".to_vec(),
        ..hello.clone()
    };
    sim.rdma_accept(&server.id, &welcome)?;
    let est = event(&mut sim, &cch, CmEventType::Established)?;
    assert_eq!(&est.private_data[..9], b"server v1");
    event(&mut sim, &sch, CmEventType::Established)?;
    println!(
        "connected at t={} ns: client qp {:#x} <-> server qp {:#x}",
        sim.now_ns(),
        sim.qp_num(&client.qp)?,
        sim.qp_num(&server.qp)?
    );

    // Ping-pong.
    for round in 0..rounds {
        let ping = format!("ping {round}");
        post_recv(&mut sim, &client, 200 + u64::from(round))?;
        send(&mut sim, &client, ping.as_bytes(), 1)?;
        let got = receive(&mut sim, &server, 100 + u64::from(round))?;
        assert_eq!(got, ping.as_bytes());
        post_recv(&mut sim, &server, 100 + u64::from(round) + 1)?;
        let pong = format!("pong {round}");
        send(&mut sim, &server, pong.as_bytes(), 2)?;
        let got = receive(&mut sim, &client, 200 + u64::from(round))?;
        assert_eq!(got, pong.as_bytes());
        println!(
            "round {round}: server got {:?}, client got {:?} (t={} ns)",
            String::from_utf8_lossy(ping.as_bytes()),
            String::from_utf8_lossy(pong.as_bytes()),
            sim.now_ns()
        );
    }

    // Disconnect, wait for timewait, release everything.
    sim.rdma_disconnect(&cid)?;
    event(&mut sim, &sch, CmEventType::Disconnected)?;
    event(&mut sim, &cch, CmEventType::Disconnected)?;
    sim.rdma_disconnect(&server.id)?;
    event(&mut sim, &cch, CmEventType::TimewaitExit)?;
    event(&mut sim, &sch, CmEventType::TimewaitExit)?;
    for end in [&client, &server] {
        // The QP first: it drops the receive still posted on the server.
        sim.rdma_destroy_qp(&end.id)?;
        sim.dereg_mr(&end.tx)?;
        sim.dereg_mr(&end.rx)?;
        sim.rdma_destroy_id(&end.id)?;
    }
    sim.rdma_destroy_id(&listen)?;
    sim.rdma_destroy_event_channel(&cch)?;
    sim.rdma_destroy_event_channel(&sch)?;
    println!(
        "{rounds} round trips, disconnected and released at t={} ns",
        sim.now_ns()
    );
    Ok(())
}
