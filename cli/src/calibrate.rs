//! The calibration table: each published perftest anchor (perf.md
//! "Anchors") beside the figure the simulator gives for the same workload
//! on the matching profile, in virtual time, measured the way perftest
//! measures it (issue #19). `verbsim calibrate` prints it and exits 1
//! when a ratio leaves [`BAND`]; CI runs it.
//!
//! * `*_lat` for WRITE and SEND are half a ping-pong round trip (perftest
//!   `ib_write_lat` polls the last byte of its buffer, `ib_send_lat` its
//!   receive CQ); READ latency is the full round trip of one READ, as
//!   `ib_read_lat` reports it.
//! * Message rates and bandwidth count completed requests over the virtual
//!   time of the run.

use verbs_api::{
    AccessFlags, AhAttr, CqInit, Gid, LinkLayer, Mtu, ProcessId, QpAttr, QpAttrMask, QpCap,
    QpInitAttrEx, QpState, QpType, RdmaInfo, RecvWr, SendFlags, SendWr, SimCommand, SimReply,
    Verbs, Wc, WcOpcode, WrOpcode,
};

use backend_sim::{CqHandle, DeviceProfile, MrHandle, QpHandle, SimConfig, SimVerbs};

/// Every ratio (simulated / published) must lie in this band.
pub(crate) const BAND: (f64, f64) = (0.75, 1.33);

/// One row of the table.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CalibrationRow {
    /// What is measured, as perftest names it.
    pub(crate) workload: &'static str,
    /// The device profile it runs on.
    pub(crate) profile: &'static str,
    /// The published figure.
    pub(crate) published: f64,
    /// Its unit (`us`, `Mmsg/s`, `Gb/s`).
    pub(crate) unit: &'static str,
    /// Where the figure comes from.
    pub(crate) source: &'static str,
    /// The simulated figure, in the same unit.
    pub(crate) simulated: f64,
    /// The 99th percentile of latency rows (`None` for rates).
    pub(crate) p99: Option<f64>,
}

impl CalibrationRow {
    /// simulated / published.
    pub(crate) fn ratio(&self) -> f64 {
        self.simulated / self.published
    }

    /// Whether the ratio lies in [`BAND`].
    pub(crate) fn in_band(&self) -> bool {
        let r = self.ratio();
        r >= BAND.0 && r <= BAND.1
    }
}

/// One side of a connected RC pair.
struct Side {
    cq: CqHandle,
    qp: QpHandle,
    mr: MrHandle,
    addr: u64,
    lkey: u32,
    rkey: u32,
}

/// Two devices of `profile`, an RC QP on each, connected; `mr_bytes` each.
fn rc_pair(
    profile: &DeviceProfile,
    seed: u64,
    mr_bytes: usize,
    depth: u32,
) -> (SimVerbs, Side, Side) {
    let mut v = SimVerbs::new(SimConfig {
        seed,
        ..SimConfig::with_devices(vec![profile.clone(), profile.clone()])
    });
    let mut sides = Vec::new();
    let mut paths = Vec::new();
    for dev in 0..2 {
        let ctx = v.open_device(dev, ProcessId(dev as u32)).expect("open");
        let pd = v.alloc_pd(&ctx).expect("pd");
        let cq = v
            .create_cq(
                &ctx,
                &CqInit {
                    cqe: 4 * depth + 16,
                    ..CqInit::default()
                },
            )
            .expect("cq");
        let access = AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_ATOMIC;
        let mr = v.reg_mr(&pd, mr_bytes, access).expect("mr");
        let info = v.mr_info(&mr).expect("mr info");
        let mut init = QpInitAttrEx::<SimVerbs> {
            qp_type: QpType::Rc,
            send_cq: Some(&cq),
            recv_cq: Some(&cq),
            cap: QpCap {
                max_send_wr: depth,
                max_recv_wr: depth,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 64,
            },
            ..QpInitAttrEx::default()
        };
        let qp = v.create_qp(&pd, &mut init).expect("qp");
        let port = v.query_port(&ctx, 1).expect("port");
        let gid: Option<Gid> =
            (port.link_layer == LinkLayer::Ethernet).then(|| v.query_gid(&ctx, 1, 0).expect("gid"));
        paths.push((v.qp_num(&qp).expect("qpn"), port.lid, gid, port.active_mtu));
        sides.push(Side {
            cq,
            qp,
            mr,
            addr: info.addr,
            lkey: info.lkey,
            rkey: info.rkey,
        });
    }
    for (me, peer) in [(0usize, 1usize), (1, 0)] {
        let (dest_qpn, lid, gid, mtu) = paths[peer];
        let mut ah = AhAttr {
            dlid: lid,
            port_num: 1,
            ..AhAttr::default()
        };
        if let Some(g) = gid {
            ah.is_global = true;
            ah.grh.dgid = g;
            ah.grh.hop_limit = 64;
        }
        let qp = &sides[me].qp;
        let mut a = QpAttr {
            qp_state: QpState::Init,
            port_num: 1,
            qp_access_flags: AccessFlags::REMOTE_WRITE
                | AccessFlags::REMOTE_READ
                | AccessFlags::REMOTE_ATOMIC,
            ..QpAttr::default()
        };
        v.modify_qp(
            qp,
            &a,
            QpAttrMask::STATE
                | QpAttrMask::PKEY_INDEX
                | QpAttrMask::PORT
                | QpAttrMask::ACCESS_FLAGS,
        )
        .expect("init");
        a.qp_state = QpState::ReadyToReceive;
        a.path_mtu = mtu.min(Mtu::Mtu4096);
        a.dest_qp_num = dest_qpn;
        a.rq_psn = 0;
        a.max_dest_rd_atomic = 16;
        a.min_rnr_timer = 1;
        a.ah_attr = ah;
        v.modify_qp(
            qp,
            &a,
            QpAttrMask::STATE
                | QpAttrMask::AV
                | QpAttrMask::PATH_MTU
                | QpAttrMask::DEST_QPN
                | QpAttrMask::RQ_PSN
                | QpAttrMask::MAX_DEST_RD_ATOMIC
                | QpAttrMask::MIN_RNR_TIMER,
        )
        .expect("rtr");
        a.qp_state = QpState::ReadyToSend;
        a.sq_psn = 0;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.max_rd_atomic = 16;
        v.modify_qp(
            qp,
            &a,
            QpAttrMask::STATE
                | QpAttrMask::TIMEOUT
                | QpAttrMask::RETRY_CNT
                | QpAttrMask::RNR_RETRY
                | QpAttrMask::SQ_PSN
                | QpAttrMask::MAX_QP_RD_ATOMIC,
        )
        .expect("rts");
    }
    let b = sides.pop().expect("two sides");
    let a = sides.pop().expect("two sides");
    (v, a, b)
}

fn now(v: &mut SimVerbs) -> u64 {
    match v.sim_control(SimCommand::Now) {
        Ok(SimReply::TimeNs(t)) => t,
        _ => 0,
    }
}

fn post(v: &mut SimVerbs, qp: &QpHandle, wrs: &[SendWr<'_, SimVerbs>]) {
    // SAFETY: the MRs named stay registered for the whole run and the
    // simulator owns their bytes.
    let r = unsafe { v.post_send(qp, wrs) };
    r.expect("post_send");
}

fn recv(v: &mut SimVerbs, qp: &QpHandle, sg: &[verbs_api::Sge], wr_id: u64) {
    // SAFETY: as for `post`.
    let r = unsafe { v.post_recv(qp, &[RecvWr { wr_id, sg_list: sg }]) };
    r.expect("post_recv");
}

/// Polls until at least `n` completions arrived (virtual time runs
/// forward); returns how many it took.
fn reap(v: &mut SimVerbs, cq: &CqHandle, n: usize) -> usize {
    let mut wc = [Wc::default(); 64];
    let mut got = 0;
    let mut idle = 0;
    while got < n && idle < 1_000 {
        let k = v.poll_cq(cq, &mut wc).expect("poll_cq");
        for w in &wc[..k] {
            assert_eq!(w.status, verbs_api::WcStatus::Success, "{w:?}");
        }
        got += k;
        idle = if k == 0 { idle + 1 } else { 0 };
    }
    got
}

/// Steps virtual time until byte `at` of `mr` becomes `want` (a poller
/// on memory, as `ib_write_lat`), `step_ns` at a time, for at most 10 s of
/// virtual time.
fn spin_until(v: &mut SimVerbs, mr: &MrHandle, at: usize, want: u8, step_ns: u64) {
    let steps = 10_000_000_000 / step_ns.max(1);
    for _ in 0..steps {
        if v.mr_bytes(mr).expect("bytes")[at] == want {
            return;
        }
        let _ = v.sim_control(SimCommand::AdvanceNs(step_ns));
    }
    panic!("the WRITE never landed within 10 s of virtual time");
}

/// (typical, p99) in µs of samples in ns.
fn percentiles(mut samples: Vec<u64>) -> (f64, f64) {
    samples.sort_unstable();
    let typical = samples[samples.len() / 2];
    let p99 = samples[(samples.len() * 99 / 100).min(samples.len() - 1)];
    (typical as f64 / 1_000.0, p99 as f64 / 1_000.0)
}

/// `ib_write_lat`: half the ping-pong round trip of `size`-byte WRITEs
/// (inline when `inline` and the size allows), each side polling the last
/// byte of its buffer; `iters` samples in ns.
pub(crate) fn write_lat_samples(
    profile: &DeviceProfile,
    seed: u64,
    size: u32,
    iters: u32,
    inline: bool,
) -> Vec<u64> {
    let size = size.max(1);
    let buf = (size as usize).max(64) * 2 + 4096;
    let (mut v, a, b) = rc_pair(profile, seed, buf, 16);
    let flags = if inline && size <= 64 {
        SendFlags::INLINE
    } else {
        SendFlags::empty()
    };
    let land = buf / 2;
    let last = land + size as usize - 1;
    let mut samples = Vec::with_capacity(iters as usize);
    for i in 0..iters {
        let val = (i % 250 + 1) as u8;
        let mut rtt = 0;
        for (from, to) in [(&a, &b), (&b, &a)] {
            let t0 = now(&mut v);
            v.mr_bytes_mut(&from.mr).expect("bytes")[..size as usize].fill(val);
            let sg = [verbs_api::Sge {
                addr: from.addr,
                length: size,
                lkey: from.lkey,
            }];
            let signaled = if i % 16 == 15 {
                SendFlags::SIGNALED
            } else {
                SendFlags::empty()
            };
            post(
                &mut v,
                &from.qp,
                &[SendWr {
                    wr_id: u64::from(i),
                    sg_list: &sg,
                    opcode: WrOpcode::RdmaWrite,
                    send_flags: flags | signaled,
                    rdma: RdmaInfo {
                        remote_addr: to.addr + land as u64,
                        rkey: to.rkey,
                    },
                    ..SendWr::default()
                }],
            );
            // The peer polls the last byte the WRITE lands on.
            let mr = to.mr;
            v.mr_bytes_mut(&mr).expect("bytes")[last] = 0;
            // 5 ns resolution for small messages; coarser (0.1 % of a
            // byte per ns) for large ones, which take that much longer.
            spin_until(&mut v, &mr, last, val, (u64::from(size) / 1_000).max(5));
            rtt += now(&mut v) - t0;
            if signaled.contains(SendFlags::SIGNALED) {
                reap(&mut v, &from.cq, 1);
            }
        }
        samples.push(rtt / 2);
    }
    samples
}

fn write_lat(profile: &DeviceProfile, inline: bool) -> (f64, f64) {
    percentiles(write_lat_samples(profile, 1, 2, 200, inline))
}

/// `ib_send_lat`: half the ping-pong round trip of `size`-byte SENDs
/// (inline up to 64 bytes), each side polling its receive CQ; ns.
pub(crate) fn send_lat_samples(
    profile: &DeviceProfile,
    seed: u64,
    size: u32,
    iters: u32,
) -> Vec<u64> {
    let size = size.max(1);
    let buf = (size as usize) * 2 + 4096;
    let (mut v, a, b) = rc_pair(profile, seed, buf, 16);
    let flags = if size <= 64 {
        SendFlags::INLINE | SendFlags::SIGNALED
    } else {
        SendFlags::SIGNALED
    };
    let rsge = |s: &Side| {
        [verbs_api::Sge {
            addr: s.addr + (buf / 2) as u64,
            length: size,
            lkey: s.lkey,
        }]
    };
    for side in [&a, &b] {
        recv(&mut v, &side.qp, &rsge(side), 0);
    }
    let mut samples = Vec::with_capacity(iters as usize);
    for i in 0..iters {
        let t0 = now(&mut v);
        for (from, to) in [(&a, &b), (&b, &a)] {
            let sg = [verbs_api::Sge {
                addr: from.addr,
                length: size,
                lkey: from.lkey,
            }];
            post(
                &mut v,
                &from.qp,
                &[SendWr {
                    wr_id: u64::from(i),
                    sg_list: &sg,
                    opcode: WrOpcode::Send,
                    send_flags: flags,
                    ..SendWr::default()
                }],
            );
            // The peer's receive completion (its CQ also gets the send's).
            reap_recv(&mut v, &to.cq);
            recv(&mut v, &to.qp, &rsge(to), 0);
        }
        samples.push((now(&mut v) - t0) / 2);
        reap_sends(&mut v, &a.cq);
        reap_sends(&mut v, &b.cq);
    }
    samples
}

fn send_lat(profile: &DeviceProfile) -> (f64, f64) {
    percentiles(send_lat_samples(profile, 2, 2, 200))
}

/// Polls `cq` until a receive completion arrives.
fn reap_recv(v: &mut SimVerbs, cq: &CqHandle) {
    let mut wc = [Wc::default(); 1];
    for _ in 0..10_000 {
        if v.poll_cq(cq, &mut wc).expect("poll") == 1
            && matches!(wc[0].opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm)
        {
            return;
        }
    }
    panic!("no receive completion");
}

/// Takes the send completions already there (no waiting).
fn reap_sends(v: &mut SimVerbs, cq: &CqHandle) {
    let _ = v.sim_control(SimCommand::RunUntilIdle);
    let mut wc = [Wc::default(); 16];
    while v.poll_cq(cq, &mut wc).expect("poll") > 0 {}
}

/// `ib_read_lat`: the round trip of one `size`-byte READ; ns.
pub(crate) fn read_lat_samples(
    profile: &DeviceProfile,
    seed: u64,
    size: u32,
    iters: u32,
) -> Vec<u64> {
    let size = size.max(1);
    let (mut v, a, b) = rc_pair(profile, seed, (size as usize).max(4096), 16);
    let mut samples = Vec::with_capacity(iters as usize);
    for i in 0..iters {
        let sg = [verbs_api::Sge {
            addr: a.addr,
            length: size,
            lkey: a.lkey,
        }];
        let t0 = now(&mut v);
        post(
            &mut v,
            &a.qp,
            &[SendWr {
                wr_id: u64::from(i),
                sg_list: &sg,
                opcode: WrOpcode::RdmaRead,
                send_flags: SendFlags::SIGNALED,
                rdma: RdmaInfo {
                    remote_addr: b.addr,
                    rkey: b.rkey,
                },
                ..SendWr::default()
            }],
        );
        reap(&mut v, &a.cq, 1);
        samples.push(now(&mut v) - t0);
    }
    samples
}

fn read_lat(profile: &DeviceProfile) -> (f64, f64) {
    percentiles(read_lat_samples(profile, 3, 2, 200))
}

/// `ib_write_bw -s size [-l list]`: requests per second (or bits per
/// second) of one QP, `window` requests in flight.
fn write_rate(profile: &DeviceProfile, size: u32, list: u32, total: u32) -> (f64, f64) {
    let window = 128.max(2 * list);
    let (mut v, a, b) = rc_pair(profile, 4, (size as usize).max(4096) * 2, window + 16);
    let t0 = now(&mut v);
    let sg = [verbs_api::Sge {
        addr: a.addr,
        length: size,
        lkey: a.lkey,
    }];
    let mut posted = 0;
    let mut done = 0;
    while done < total {
        while posted < total && posted - done + list <= window {
            let wrs: Vec<SendWr<'_, SimVerbs>> = (0..list)
                .map(|k| SendWr {
                    wr_id: u64::from(posted + k),
                    sg_list: &sg,
                    opcode: WrOpcode::RdmaWrite,
                    send_flags: if k + 1 == list {
                        SendFlags::SIGNALED
                    } else {
                        SendFlags::empty()
                    },
                    rdma: RdmaInfo {
                        remote_addr: b.addr,
                        rkey: b.rkey,
                    },
                    ..SendWr::default()
                })
                .collect();
            post(&mut v, &a.qp, &wrs);
            posted += list;
        }
        done += reap(&mut v, &a.cq, 1) as u32 * list;
    }
    let secs = (now(&mut v) - t0) as f64 / 1e9;
    let msgs = f64::from(total) / secs;
    (msgs / 1e6, msgs * f64::from(size) * 8.0 / 1e9)
}

/// `ib_send_bw -s size` on rxe: receives posted ahead, Gb/s.
fn send_bw(profile: &DeviceProfile, size: u32, total: u32) -> f64 {
    let depth = 64;
    let (mut v, a, b) = rc_pair(profile, 5, size as usize * 2, depth + 8);
    let rsg = [verbs_api::Sge {
        addr: b.addr,
        length: size,
        lkey: b.lkey,
    }];
    for i in 0..depth {
        recv(&mut v, &b.qp, &rsg, u64::from(i));
    }
    let sg = [verbs_api::Sge {
        addr: a.addr,
        length: size,
        lkey: a.lkey,
    }];
    let t0 = now(&mut v);
    let mut posted = 0u32;
    let mut done = 0u32;
    let mut wc = [Wc::default(); 64];
    while done < total {
        while posted < total && posted - done < depth / 2 {
            post(
                &mut v,
                &a.qp,
                &[SendWr {
                    wr_id: u64::from(posted),
                    sg_list: &sg,
                    opcode: WrOpcode::Send,
                    send_flags: SendFlags::SIGNALED,
                    ..SendWr::default()
                }],
            );
            posted += 1;
        }
        let k = v.poll_cq(&b.cq, &mut wc).expect("poll");
        for w in &wc[..k] {
            assert_eq!(w.status, verbs_api::WcStatus::Success);
            recv(&mut v, &b.qp, &rsg, w.wr_id);
        }
        done += k as u32;
        let _ = v.poll_cq(&a.cq, &mut wc);
    }
    let secs = (now(&mut v) - t0) as f64 / 1e9;
    f64::from(total) * f64::from(size) * 8.0 / secs / 1e9
}

/// The whole table (a few hundred ms of wall time in release builds).
pub(crate) fn calibration_table() -> Vec<CalibrationRow> {
    let cx6 = DeviceProfile::connectx6();
    let cx7 = DeviceProfile::connectx7();
    let rxe = DeviceProfile::rxe();
    let mut rows = Vec::new();
    let mut lat = |workload, published, source, (t, p99): (f64, f64)| {
        rows.push(CalibrationRow {
            workload,
            profile: "cx6",
            published,
            unit: "us",
            source,
            simulated: t,
            p99: Some(p99),
        });
    };
    lat(
        "ib_write_lat -s 2 (inline)",
        0.93,
        "linux-rdma/perftest issue 131",
        write_lat(&cx6, true),
    );
    lat(
        "ib_write_lat -s 2 -I 0",
        1.32,
        "linux-rdma/perftest issue 131",
        write_lat(&cx6, false),
    );
    lat(
        "ib_send_lat -s 2 (inline)",
        0.82,
        "ConnectX-4 EDR back to back, 0.81-0.83",
        send_lat(&cx6),
    );
    lat(
        "ib_read_lat -s 2",
        1.91,
        "linux-rdma/perftest issue 131",
        read_lat(&cx6),
    );
    let (unbatched, _) = write_rate(&cx6, 64, 1, 20_000);
    let (batched, _) = write_rate(&cx6, 64, 128, 51_200);
    let (_, bw) = write_rate(&cx7, 65_536, 16, 4_000);
    let rate = |workload, profile, published, unit, source, simulated| CalibrationRow {
        workload,
        profile,
        published,
        unit,
        source,
        simulated,
        p99: None,
    };
    rows.push(rate(
        "ib_write_bw -s 64 (one QP, no post list)",
        "cx6",
        2.6,
        "Mmsg/s",
        "linux-rdma/perftest issue 132",
        unbatched,
    ));
    rows.push(rate(
        "ib_write_bw -s 64 -l 128",
        "cx6",
        7.5,
        "Mmsg/s",
        "linux-rdma/perftest issue 273",
        batched,
    ));
    rows.push(rate(
        "ib_write_bw -s 65536 (one QP)",
        "cx7",
        348.6,
        "Gb/s",
        "ConnectX-7, 400 Gb/s port (perf.md anchors)",
        bw,
    ));
    rows.push(rate(
        "ib_send_bw -s 65536 (Soft-RoCE, 10 GbE)",
        "rxe",
        4.9,
        "Gb/s",
        "Soft-RoCE on 10 GbE (perf.md anchors)",
        send_bw(&rxe, 65_536, 400),
    ));
    rows
}

/// The table as text, one row a line, with a verdict column.
pub(crate) fn render(rows: &[CalibrationRow]) -> String {
    use core::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<42} {:<4} {:>10} {:>10} {:>9} {:>6}  {:<6} source",
        "workload", "prof", "published", "simulated", "p99", "ratio", "band"
    );
    for r in rows {
        let p99 = r.p99.map_or_else(|| "-".to_owned(), |p| format!("{p:.2}"));
        let _ = writeln!(
            s,
            "{:<42} {:<4} {:>7.2} {:<2} {:>7.2} {:<2} {:>9} {:>6.2}  {:<6} {}",
            r.workload,
            r.profile,
            r.published,
            short(r.unit),
            r.simulated,
            short(r.unit),
            p99,
            r.ratio(),
            if r.in_band() { "ok" } else { "MISS" },
            r.source
        );
    }
    s
}

fn short(unit: &str) -> &str {
    match unit {
        "Mmsg/s" => "M",
        "Gb/s" => "G",
        u => u,
    }
}

/// The command line of `verbsim calibrate` (no options).
#[derive(Debug, clap::Args)]
#[command(
    about = "The adapter model against published perftest figures",
    after_help = "Prints each anchor's published and simulated figure and their ratio \
                  (docs/calibration.md). Exit status: 0 when every ratio is within the \
                  band, 1 otherwise, 2 on a usage error."
)]
pub(crate) struct CalibrateArgs {}

/// `verbsim calibrate`: prints the table; exit 0 when every ratio is in
/// the band, 1 otherwise, 2 on a usage error.
pub(crate) fn main(_args: CalibrateArgs) -> std::process::ExitCode {
    let rows = calibration_table();
    crate::out::out!("{}", render(&rows));
    let misses = rows.iter().filter(|r| !r.in_band()).count();
    crate::out::outln!(
        "{} of {} anchors within {:.2}-{:.2}",
        rows.len() - misses,
        rows.len(),
        BAND.0,
        BAND.1
    );
    if misses == 0 {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::from(1)
    }
}
