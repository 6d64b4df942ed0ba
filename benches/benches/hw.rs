//! The hardware benchmarks of `perf.md` ("Hardware targets"), on the
//! `backend-hw` backend, side by side with perftest.
//!
//! ```text
//! cargo bench -p verbsim-benches --features hw --bench hw [-- FILTER]
//! VERBS_TEST_DEVICE=mlx5_0 cargo bench -p verbsim-benches --features hw --bench hw
//! ```
//!
//! Loopback: two RC QPs on two contexts of the device named by
//! `VERBS_TEST_DEVICE` (default: the first device), or, when no device is
//! named and the machine has two, between the first two devices. Without a
//! device the binary prints one line, `SKIP hw benches: <reason>`, and
//! exits 0; a `VERBS_TEST_DEVICE` that names no present device is an error.
//!
//! | id | workload | compare with |
//! |---|---|---|
//! | `hw_write_lat` | RDMA WRITE WITH IMM ping-pong, 8 B, half round trip | `ib_write_lat -s 8` |
//! | `hw_send_lat` | SEND/RECV ping-pong, 8 B, half round trip | `ib_send_lat -s 8` |
//! | `hw_read_lat` | one signalled 8 B RDMA READ, post to completion | `ib_read_lat -s 8` |
//! | `hw_write_bw/{1,4}qp` | 64 KiB RDMA WRITE, 16 in flight per QP | `ib_write_bw -s 65536 -q {1,4}` |
//! | `hw_msg_rate/{1,32,128}` | 64 B RDMA WRITE, post lists of 1 / 32 / 128 | `ib_write_bw -s 64 [-l N]` |
//! | `hw_post_poll_overhead/{raw,hw}` | one signalled 64 B WRITE, post + poll to completion | itself: raw C calls vs `HwVerbs` |
//! | `hw_dc_vs_rc_fanout/{rc,dc}/N` | 64 B WRITE round-robin over N peers: N RC QPs vs 8 DCIs | prints the crossover N |
//!
//! Differences from perftest, on purpose: `ib_write_lat` detects arrival by
//! polling the target buffer; here the responder waits for the immediate's
//! receive completion (Rust cannot poll memory the NIC writes without a
//! data race), so `hw_write_lat` includes one receive CQE more.
//!
//! These benches never run in CI (no device there).

use std::hint::black_box;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use backend_hw::raw::RawWrite;
use backend_hw::{HwAh, HwCq, HwMr, HwQp, HwSrq, HwVerbs};
use criterion::{BenchmarkId, Criterion, Throughput};
use verbs_api::*;
use verbsim_benches::fixture::{connect_rc, rc_attr, Endpoint};

/// Completions polled per call.
const POLL: usize = 16;

// ------------------------------------------------------------------ set-up

/// Device indices (requester, responder), or the reason to skip.
fn select_devices(v: &mut HwVerbs) -> Result<(usize, usize), String> {
    let list = v.get_device_list().map_err(|e| e.message().to_string())?;
    if list.is_empty() {
        return Err("ibv_get_device_list found no RDMA device".into());
    }
    match std::env::var("VERBS_TEST_DEVICE") {
        Ok(name) if !name.is_empty() => match list.iter().position(|d| d.name == name) {
            Some(i) => Ok((i, i)),
            None => {
                let names: Vec<_> = list.iter().map(|d| d.name.as_str()).collect();
                eprintln!("VERBS_TEST_DEVICE={name} is not among the devices {names:?}");
                std::process::exit(2);
            }
        },
        _ => Ok((0, usize::from(list.len() >= 2))),
    }
}

/// Two endpoints, `n` RC QPs connected pairwise, one MR on each side.
struct Pair {
    a: Endpoint<HwVerbs>,
    b: Endpoint<HwVerbs>,
    qa: Vec<HwQp>,
    qb: Vec<HwQp>,
    ma: HwMr,
    mb: HwMr,
    ia: MrInfo,
    ib: MrInfo,
}

fn open_pair(
    v: &mut HwVerbs,
    (da, db): (usize, usize),
    n: usize,
    depth: u32,
    mr_bytes: usize,
) -> Result<Pair> {
    let cqe = depth.saturating_mul(2).saturating_mul(n as u32).max(64);
    let a = Endpoint::open(v, da, cqe)?;
    let b = Endpoint::open(v, db, cqe)?;
    let cap = QpCap {
        max_send_wr: depth,
        max_recv_wr: depth,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let mut qa = Vec::with_capacity(n);
    let mut qb = Vec::with_capacity(n);
    for _ in 0..n {
        let x = a.create_rc_qp(v, cap)?;
        let y = b.create_rc_qp(v, cap)?;
        let (nx, ny) = (v.qp_num(&x)?, v.qp_num(&y)?);
        connect_rc(v, &x, &mut rc_attr(&a.limits, &a.path, &b.path, ny))?;
        connect_rc(v, &y, &mut rc_attr(&b.limits, &b.path, &a.path, nx))?;
        qa.push(x);
        qb.push(y);
    }
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let ma = v.reg_mr(&a.pd, mr_bytes, access)?;
    let mb = v.reg_mr(&b.pd, mr_bytes, access)?;
    let (ia, ib) = (v.mr_info(&ma)?, v.mr_info(&mb)?);
    Ok(Pair {
        a,
        b,
        qa,
        qb,
        ma,
        mb,
        ia,
        ib,
    })
}

/// Polls `cq` until `want` successful completions arrived (bounded by a
/// generous wall-clock limit so a lost completion cannot hang the bench).
fn reap(v: &mut HwVerbs, cq: &HwCq, want: usize, wc: &mut [Wc]) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = 0;
    while got < want {
        let n = v.poll_cq(cq, &mut wc[..POLL])?;
        for w in &wc[..n] {
            if w.status != WcStatus::Success {
                return Err(Error::new(
                    Verb::PollCq,
                    ErrorKind::Other(0),
                    format!("completion {} failed: {}", w.wr_id, w.status),
                ));
            }
        }
        got += n;
        if n == 0 && Instant::now() > deadline {
            return Err(Error::new(
                Verb::PollCq,
                ErrorKind::TimedOut,
                "no completion in 10 s",
            ));
        }
    }
    Ok(())
}

fn sge(info: &MrInfo, off: u64, len: u32) -> Sge {
    Sge {
        addr: info.addr + off,
        length: len,
        lkey: info.lkey,
    }
}

/// Posts one receive per buffer slot.
fn post_recv(v: &mut HwVerbs, qp: &HwQp, s: Sge) -> Result<()> {
    let sg = [s];
    // SAFETY: the MR outlives every receive (it is kept in the `Pair` until
    // the benchmark has reaped all completions); nobody reads or writes the
    // slot until its completion.
    unsafe {
        v.post_recv(
            qp,
            &[RecvWr {
                wr_id: 0,
                sg_list: &sg,
            }],
        )
    }
}

fn post_one(v: &mut HwVerbs, qp: &HwQp, wr: SendWr<'_, HwVerbs>) -> Result<()> {
    // SAFETY: every SGE and remote range named lies in a `Pair` MR, alive
    // until the benchmark has reaped the completion; the benches never touch
    // those bytes from Rust.
    unsafe { v.post_send(qp, &[wr]) }
}

// --------------------------------------------------------------- latencies

/// Ping-pong: `a` sends (or writes with immediate) 8 B, `b` answers; one
/// iteration is half a round trip.
fn pingpong(v: &mut HwVerbs, p: &Pair, opcode: WrOpcode, iters: u64) -> Result<Duration> {
    let mut wc = vec![Wc::default(); POLL];
    let (qa, qb) = (&p.qa[0], &p.qb[0]);
    post_recv(v, qa, sge(&p.ia, 4096, 8))?;
    post_recv(v, qb, sge(&p.ib, 4096, 8))?;
    let start = Instant::now();
    for _ in 0..iters {
        for (q, local, remote, rcq, scq, rq) in [
            (qa, &p.ia, &p.ib, &p.b.cq, &p.a.cq, qb),
            (qb, &p.ib, &p.ia, &p.a.cq, &p.b.cq, qa),
        ] {
            let sg = [sge(local, 0, 8)];
            post_one(
                v,
                q,
                SendWr {
                    sg_list: &sg,
                    opcode,
                    send_flags: SendFlags::SIGNALED,
                    rdma: RdmaInfo {
                        remote_addr: remote.addr,
                        rkey: remote.rkey,
                    },
                    ..SendWr::default()
                },
            )?;
            reap(v, rcq, 1, &mut wc)?; // the peer's receive
            post_recv(
                v,
                rq,
                sge(if std::ptr::eq(rq, qb) { &p.ib } else { &p.ia }, 4096, 8),
            )?;
            reap(v, scq, 1, &mut wc)?; // our send
        }
    }
    Ok(start.elapsed() / 2)
}

fn read_lat(v: &mut HwVerbs, p: &Pair, iters: u64) -> Result<Duration> {
    let mut wc = vec![Wc::default(); POLL];
    let sg = [sge(&p.ia, 0, 8)];
    let start = Instant::now();
    for _ in 0..iters {
        post_one(
            v,
            &p.qa[0],
            SendWr {
                sg_list: &sg,
                opcode: WrOpcode::RdmaRead,
                send_flags: SendFlags::SIGNALED,
                rdma: RdmaInfo {
                    remote_addr: p.ib.addr,
                    rkey: p.ib.rkey,
                },
                ..SendWr::default()
            },
        )?;
        reap(v, &p.a.cq, 1, &mut wc)?;
    }
    Ok(start.elapsed())
}

// ----------------------------------------------------- rates and bandwidth

/// `iters` RDMA WRITEs of `len` bytes spread round-robin over the pair's
/// QPs, in post lists of `list` (the last one signalled), keeping at most
/// `depth` requests in flight per QP.
fn write_stream(
    v: &mut HwVerbs,
    p: &Pair,
    len: u32,
    list: usize,
    depth: usize,
    iters: u64,
) -> Result<Duration> {
    let mut wc = vec![Wc::default(); POLL];
    let nq = p.qa.len();
    let per_qp_lists = (depth / list).max(1);
    let mut in_flight = vec![0usize; nq];
    let sg = [sge(&p.ia, 0, len)];
    let lists = iters.div_ceil(list as u64);
    let start = Instant::now();
    for k in 0..lists {
        let q = (k as usize) % nq;
        while in_flight[q] >= per_qp_lists {
            let n = v.poll_cq(&p.a.cq, &mut wc)?;
            for w in &wc[..n] {
                if w.status != WcStatus::Success {
                    return Err(Error::new(
                        Verb::PollCq,
                        ErrorKind::Other(0),
                        format!("{}", w.status),
                    ));
                }
                in_flight[w.wr_id as usize] -= 1;
            }
        }
        let wrs: Vec<SendWr<'_, HwVerbs>> = (0..list)
            .map(|i| SendWr {
                wr_id: q as u64,
                sg_list: &sg,
                opcode: WrOpcode::RdmaWrite,
                send_flags: if i + 1 == list {
                    SendFlags::SIGNALED
                } else {
                    SendFlags::empty()
                },
                rdma: RdmaInfo {
                    remote_addr: p.ib.addr + (i as u64 % 16) * u64::from(len),
                    rkey: p.ib.rkey,
                },
                ..SendWr::default()
            })
            .collect();
        // SAFETY: every SGE and remote range lies in the pair's MRs, kept
        // alive until the drain below; the source is only read, the target
        // never read by Rust.
        unsafe { v.post_send(&p.qa[q], &wrs)? };
        in_flight[q] += 1;
    }
    let left: usize = in_flight.iter().sum();
    reap(v, &p.a.cq, left, &mut wc)?;
    Ok(start.elapsed())
}

// ------------------------------------------------------ post/poll overhead

fn post_poll_hw(v: &mut HwVerbs, p: &Pair, iters: u64) -> Result<Duration> {
    let mut wc = vec![Wc::default(); 1];
    let sg = [sge(&p.ia, 0, 64)];
    let start = Instant::now();
    for _ in 0..iters {
        post_one(
            v,
            &p.qa[0],
            SendWr {
                sg_list: &sg,
                opcode: WrOpcode::RdmaWrite,
                send_flags: SendFlags::SIGNALED,
                rdma: RdmaInfo {
                    remote_addr: p.ib.addr,
                    rkey: p.ib.rkey,
                },
                ..SendWr::default()
            },
        )?;
        while v.poll_cq(&p.a.cq, &mut wc)? == 0 {}
    }
    Ok(start.elapsed())
}

fn post_poll_raw(raw: &mut RawWrite, iters: u64) -> Result<Duration> {
    let start = Instant::now();
    for _ in 0..iters {
        // SAFETY: the pair's MRs outlive `raw` (which keeps the handles),
        // and each completion is reaped before the next post.
        unsafe { raw.post()? };
        loop {
            let n = raw.poll()?;
            if n > 0 {
                black_box(raw.all_ok(n));
                break;
            }
        }
    }
    Ok(start.elapsed())
}

// ------------------------------------------------------------- DC fan-out

/// DCIs used by the DC arm (perf.md: "RC (N QPs) vs DC (8 DCIs)").
const DCIS: usize = 8;
const DC_KEY: u64 = 0x0dc0_ffee;

/// The DC arm: 8 DCIs on `a`, `n` DCTs (sharing one SRQ) on `b`.
struct DcFan {
    dcis: Vec<HwQp>,
    dcts: Vec<u32>,
    _dct_qps: Vec<HwQp>,
    ah: HwAh,
    _srq: HwSrq,
}

fn open_dc_fan(v: &mut HwVerbs, p: &Pair, n: usize) -> Result<DcFan> {
    let mut srq_attr = SrqAttr {
        max_wr: 64,
        max_sge: 1,
        srq_limit: 0,
    };
    let srq = v.create_srq(&p.b.pd, &mut srq_attr)?;
    let mut dct_qps = Vec::with_capacity(n);
    let mut dcts = Vec::with_capacity(n);
    let path_mtu = p.a.path.active_mtu;
    for _ in 0..n {
        let mut attr = QpInitAttrEx::<'_, HwVerbs> {
            send_cq: Some(&p.b.cq),
            recv_cq: Some(&p.b.cq),
            srq: Some(&srq),
            qp_type: QpType::Driver,
            comp_mask: QpInitAttrMask::PD,
            pd: Some(&p.b.pd),
            ..QpInitAttrEx::default()
        };
        let m = Mlx5QpInitAttr {
            comp_mask: Mlx5QpInitAttrMask::DC,
            dc_init_attr: DcInitAttr {
                dc_type: DcType::Dct,
                dct_access_key: DC_KEY,
                ..DcInitAttr::default()
            },
            ..Mlx5QpInitAttr::default()
        };
        let dct = v.mlx5dv_create_qp(&p.b.ctx, &mut attr, &m)?;
        let mut qa = QpAttr {
            qp_state: QpState::Init,
            pkey_index: 0,
            port_num: 1,
            qp_access_flags: AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ,
            ..QpAttr::default()
        };
        v.modify_qp(
            &dct,
            &qa,
            QpAttrMask::STATE
                | QpAttrMask::PKEY_INDEX
                | QpAttrMask::PORT
                | QpAttrMask::ACCESS_FLAGS,
        )?;
        qa.qp_state = QpState::ReadyToReceive;
        qa.path_mtu = path_mtu;
        qa.min_rnr_timer = 12;
        qa.ah_attr = p.a.path.ah_attr();
        v.modify_qp(
            &dct,
            &qa,
            QpAttrMask::STATE | QpAttrMask::PATH_MTU | QpAttrMask::AV | QpAttrMask::MIN_RNR_TIMER,
        )?;
        dcts.push(v.qp_num(&dct)?);
        dct_qps.push(dct);
    }
    let mut dcis = Vec::with_capacity(DCIS);
    for _ in 0..DCIS {
        let mut attr = QpInitAttrEx::<'_, HwVerbs> {
            send_cq: Some(&p.a.cq),
            recv_cq: Some(&p.a.cq),
            qp_type: QpType::Driver,
            cap: QpCap {
                max_send_wr: 64,
                max_send_sge: 1,
                ..QpCap::default()
            },
            comp_mask: QpInitAttrMask::PD | QpInitAttrMask::SEND_OPS_FLAGS,
            pd: Some(&p.a.pd),
            send_ops_flags: SendOpsFlags::RDMA_WRITE,
            ..QpInitAttrEx::default()
        };
        let m = Mlx5QpInitAttr {
            comp_mask: Mlx5QpInitAttrMask::DC,
            dc_init_attr: DcInitAttr {
                dc_type: DcType::Dci,
                ..DcInitAttr::default()
            },
            ..Mlx5QpInitAttr::default()
        };
        let dci = v.mlx5dv_create_qp(&p.a.ctx, &mut attr, &m)?;
        let mut qa = QpAttr {
            qp_state: QpState::Init,
            pkey_index: 0,
            port_num: 1,
            ..QpAttr::default()
        };
        v.modify_qp(
            &dci,
            &qa,
            QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT,
        )?;
        qa.qp_state = QpState::ReadyToReceive;
        qa.path_mtu = path_mtu;
        v.modify_qp(&dci, &qa, QpAttrMask::STATE | QpAttrMask::PATH_MTU)?;
        qa.qp_state = QpState::ReadyToSend;
        qa.timeout = 14;
        qa.retry_cnt = 7;
        qa.rnr_retry = 7;
        qa.max_rd_atomic = 1;
        v.modify_qp(
            &dci,
            &qa,
            QpAttrMask::STATE
                | QpAttrMask::TIMEOUT
                | QpAttrMask::RETRY_CNT
                | QpAttrMask::RNR_RETRY
                | QpAttrMask::SQ_PSN
                | QpAttrMask::MAX_QP_RD_ATOMIC,
        )?;
        dcis.push(dci);
    }
    let ah = v.create_ah(&p.a.pd, &p.b.path.ah_attr())?;
    Ok(DcFan {
        dcis,
        dcts,
        _dct_qps: dct_qps,
        ah,
        _srq: srq,
    })
}

/// `iters` signalled-every-16th 64 B WRITEs round-robin over the DCTs,
/// the DCIs taken round-robin too.
fn dc_stream(v: &mut HwVerbs, p: &Pair, f: &DcFan, iters: u64) -> Result<Duration> {
    let mut wc = vec![Wc::default(); POLL];
    let sg = [sge(&p.ia, 0, 64)];
    let mut in_flight = [0usize; DCIS];
    let start = Instant::now();
    for k in 0..iters {
        let d = (k as usize) % DCIS;
        let signaled = k % 16 == 15 || k + 1 == iters;
        while in_flight[d] >= 3 {
            let n = v.poll_cq(&p.a.cq, &mut wc)?;
            for w in &wc[..n] {
                in_flight[w.wr_id as usize] -= 1;
            }
        }
        let t = (k as usize) % f.dcts.len();
        let wr = SendWr {
            wr_id: d as u64,
            sg_list: &sg,
            opcode: WrOpcode::RdmaWrite,
            send_flags: if signaled {
                SendFlags::SIGNALED
            } else {
                SendFlags::empty()
            },
            rdma: RdmaInfo {
                remote_addr: p.ib.addr,
                rkey: p.ib.rkey,
            },
            dc: Some(DcInfo {
                ah: &f.ah,
                remote_dctn: f.dcts[t],
                remote_dc_key: DC_KEY,
                stream_id: 0,
            }),
            ..SendWr::default()
        };
        post_one(v, &f.dcis[d], wr)?;
        if signaled {
            in_flight[d] += 1;
        }
    }
    let left: usize = in_flight.iter().sum();
    reap(v, &p.a.cq, left, &mut wc)?;
    Ok(start.elapsed())
}

/// Measured rates (ops/s) of the fan-out arms, for the crossover line.
static FANOUT: Mutex<Vec<(&'static str, usize, f64)>> = Mutex::new(Vec::new());

fn fanout_sizes() -> Vec<usize> {
    let max: usize = std::env::var("VERBS_HW_FANOUT_MAX")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4096);
    [1, 8, 64, 512, 4096]
        .into_iter()
        .filter(|&n| n <= max)
        .collect()
}

fn print_crossover() {
    let rates = FANOUT.lock().unwrap_or_else(|e| e.into_inner());
    let rate = |arm: &str, n: usize| rates.iter().find(|r| r.0 == arm && r.1 == n).map(|r| r.2);
    let mut line = String::from("hw_dc_vs_rc_fanout: no crossover measured (DC slower at every N)");
    for n in fanout_sizes() {
        if let (Some(rc), Some(dc)) = (rate("rc", n), rate("dc", n)) {
            eprintln!("hw_dc_vs_rc_fanout N={n}: rc {rc:.0} WR/s, dc {dc:.0} WR/s");
            if dc >= rc {
                line = format!(
                    "hw_dc_vs_rc_fanout: crossover N = {n} (first N where 8 DCIs match N RC QPs)"
                );
                break;
            }
        }
    }
    println!("{line}");
}

// ----------------------------------------------------------------- driver

fn skip(id: &str, e: &dyn std::fmt::Display) {
    eprintln!("SKIP {id}: {e}");
}

fn bench_all(c: &mut Criterion, v: &mut HwVerbs, devs: (usize, usize)) {
    // Latencies.
    match open_pair(v, devs, 1, 64, 1 << 16) {
        Ok(p) => {
            c.bench_function("hw_write_lat", |b| {
                b.iter_custom(|n| {
                    pingpong(v, &p, WrOpcode::RdmaWriteWithImm, n).expect("hw_write_lat")
                })
            });
            c.bench_function("hw_send_lat", |b| {
                b.iter_custom(|n| pingpong(v, &p, WrOpcode::Send, n).expect("hw_send_lat"))
            });
            c.bench_function("hw_read_lat", |b| {
                b.iter_custom(|n| read_lat(v, &p, n).expect("hw_read_lat"))
            });
            let mut g = c.benchmark_group("hw_post_poll_overhead");
            g.bench_function("hw", |b| {
                b.iter_custom(|n| post_poll_hw(v, &p, n).expect("hw"))
            });
            match RawWrite::new(v, &p.qa[0], &p.a.cq, &p.ma, 64, p.ib.addr, p.ib.rkey) {
                Ok(mut raw) => {
                    g.bench_function("raw", |b| {
                        b.iter_custom(|n| post_poll_raw(&mut raw, n).expect("raw"))
                    });
                }
                Err(e) => skip("hw_post_poll_overhead/raw", &e),
            }
            g.finish();
            let _ = (&p.mb, &p.b.cq);
        }
        Err(e) => skip("hw_*_lat", &e),
    }
    // Bandwidth, 64 KiB, 1 and 4 QPs.
    let mut g = c.benchmark_group("hw_write_bw");
    g.throughput(Throughput::Bytes(65536));
    for nq in [1usize, 4] {
        match open_pair(v, devs, nq, 64, 16 * 65536) {
            Ok(p) => {
                g.bench_with_input(
                    BenchmarkId::from_parameter(format!("{nq}qp")),
                    &nq,
                    |b, _| {
                        b.iter_custom(|n| {
                            write_stream(v, &p, 65536, 1, 16, n).expect("hw_write_bw")
                        })
                    },
                );
            }
            Err(e) => skip("hw_write_bw", &e),
        }
    }
    g.finish();
    // Message rate, 64 B, unbatched and post lists of 32 / 128.
    let mut g = c.benchmark_group("hw_msg_rate");
    g.throughput(Throughput::Elements(1));
    match open_pair(v, devs, 1, 512, 1 << 16) {
        Ok(p) => {
            for list in [1usize, 32, 128] {
                g.bench_with_input(BenchmarkId::from_parameter(list), &list, |b, &l| {
                    b.iter_custom(|n| write_stream(v, &p, 64, l, 512, n).expect("hw_msg_rate"))
                });
            }
        }
        Err(e) => skip("hw_msg_rate", &e),
    }
    g.finish();
    // DC vs RC fan-out.
    let mut g = c.benchmark_group("hw_dc_vs_rc_fanout");
    g.throughput(Throughput::Elements(1));
    for n in fanout_sizes() {
        match open_pair(v, devs, n, 16, 1 << 16) {
            Ok(p) => {
                g.bench_with_input(BenchmarkId::new("rc", n), &n, |b, _| {
                    b.iter_custom(|k| {
                        let t = write_stream(v, &p, 64, 1, 16, k).expect("rc fan-out");
                        FANOUT.lock().unwrap_or_else(|e| e.into_inner()).push((
                            "rc",
                            n,
                            k as f64 / t.as_secs_f64(),
                        ));
                        t
                    })
                });
                match open_dc_fan(v, &p, n) {
                    Ok(f) => {
                        g.bench_with_input(BenchmarkId::new("dc", n), &n, |b, _| {
                            b.iter_custom(|k| {
                                let t = dc_stream(v, &p, &f, k).expect("dc fan-out");
                                FANOUT.lock().unwrap_or_else(|e| e.into_inner()).push((
                                    "dc",
                                    n,
                                    k as f64 / t.as_secs_f64(),
                                ));
                                t
                            })
                        });
                    }
                    Err(e) => skip(&format!("hw_dc_vs_rc_fanout/dc/{n}"), &e),
                }
            }
            Err(e) => skip(&format!("hw_dc_vs_rc_fanout/rc/{n}"), &e),
        }
    }
    g.finish();
    print_crossover();
}

fn main() {
    let mut v = HwVerbs::unprobed();
    let devs = match select_devices(&mut v) {
        Ok(d) => d,
        Err(reason) => {
            println!("SKIP hw benches: {reason}");
            return;
        }
    };
    let mut c = Criterion::default().configure_from_args();
    bench_all(&mut c, &mut v, devs);
    c.final_summary();
}
