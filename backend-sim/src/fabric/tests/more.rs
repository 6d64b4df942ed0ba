//! The fabric's tests, continued: faults, reordering, timers and runs.

use super::*;

#[test]
fn timers_share_the_queue_with_deliveries() {
    // Goal: timers fire at their time, interleaved with packet arrivals in
    // (time, sequence) order, including a tie with a delivery.
    // Method: schedule timers before, at and after a packet's arrival and
    // record the order of everything popped.
    let (mut fabric, a, b) = pair_with(FabricConfig::with_seed(7), PortConfig::connectx6_hdr(1));
    let timer = |owner| TimerEvent {
        kind: TimerKind::AckTimeout,
        owner,
        generation: 0,
    };
    fabric
        .send(SimInstant::ZERO, send_only(a, b, 0, 64), &mut NoTrace)
        .unwrap();
    fabric.schedule_timer(SimInstant(504), timer(2)).unwrap();
    fabric.schedule_timer(SimInstant(100), timer(1)).unwrap();
    fabric.schedule_timer(SimInstant(900), timer(3)).unwrap();
    assert_eq!(fabric.next_event_time(), Some(SimInstant(100)));
    assert_eq!(fabric.pop_due(SimInstant(99), &mut NoTrace), None);
    let mut seen = Vec::new();
    fabric
        .run_until_idle(SimInstant::ZERO, 100, &mut NoTrace, |_, _, at, event| {
            seen.push(match event {
                FabricEvent::Timer(t) => format!("{at} timer{}", t.owner),
                FabricEvent::Delivered(p) => format!("{at} packet{}", p.psn),
            });
        })
        .unwrap();
    assert_eq!(
        seen,
        [
            "100ns timer1",
            "504ns packet0",
            "504ns timer2",
            "900ns timer3"
        ]
    );
}

#[test]
fn run_until_idle_stops_at_its_bound() {
    // Goal: an endless exchange is cut off with an error, not a hang.
    // Method: a handler that answers every delivery with a new packet back;
    // run with a bound of 50 events.
    let (mut fabric, a, b) = pair_with(FabricConfig::with_seed(8), PortConfig::connectx6_hdr(1));
    fabric
        .send(SimInstant::ZERO, send_only(a, b, 0, 64), &mut NoTrace)
        .unwrap();
    let result = fabric.run_until_idle(SimInstant::ZERO, 50, &mut NoTrace, |f, sink, at, event| {
        if let FabricEvent::Delivered(p) = event {
            let back = send_only(p.destination, p.source, p.psn.next().value(), 64);
            f.send(at, back, sink).unwrap();
        }
    });
    assert!(
        matches!(
            result,
            Err(FabricError::EventBoundHit { events_max: 50, .. })
        ),
        "{result:?}"
    );
}

#[test]
fn time_must_not_go_backwards() {
    // Goal: an input stamped before one already seen is refused.
    // Method: send at 1 000 ns, then try to send and to arm a timer at 10.
    let (mut fabric, a, b) = pair_with(FabricConfig::with_seed(9), PortConfig::connectx6_hdr(1));
    fabric
        .send(SimInstant(1_000), send_only(a, b, 0, 64), &mut NoTrace)
        .unwrap();
    let backwards = FabricError::TimeWentBackwards {
        now: SimInstant(10),
        latest: SimInstant(1_000),
    };
    assert_eq!(
        fabric.send(SimInstant(10), send_only(a, b, 1, 64), &mut NoTrace),
        Err(backwards.clone())
    );
    let timer = TimerEvent {
        kind: TimerKind::RnrRetry,
        owner: 0,
        generation: 0,
    };
    assert_eq!(fabric.schedule_timer(SimInstant(10), timer), Err(backwards));
}

#[test]
fn addresses_resolve_and_bad_configurations_are_refused() {
    // Goal: LIDs and GIDs resolve to their port; duplicates and invalid
    // port settings are errors; a packet to a missing port is unroutable.
    // Method: build an IB device with two ports and a RoCE device, resolve
    // each address, then try the invalid cases.
    let mut fabric = Fabric::new(FabricConfig::with_seed(10));
    let ib = fabric
        .add_device(&[
            PortConfig::connectx6_hdr(0x10),
            PortConfig::connectx6_hdr(0x11),
        ])
        .unwrap();
    let roce = fabric.add_device(&[PortConfig::rxe_10gbe()]).unwrap();
    let gid = Gid::from_ipv4(std::net::Ipv4Addr::new(10, 0, 0, 2));
    let roce_port = PortRef {
        device: roce,
        port: 1,
    };
    fabric.add_gid(roce_port, gid).unwrap();
    assert_eq!(
        fabric.resolve(&Address::Lid(0x11)),
        Some(PortRef {
            device: ib,
            port: 2
        })
    );
    assert_eq!(fabric.resolve(&Address::Gid(gid)), Some(roce_port));
    assert_eq!(fabric.resolve(&Address::Lid(0x12)), None);
    assert_eq!(fabric.port_count(ib), Some(2));
    assert_eq!(
        fabric.port_config(roce_port).map(|c| c.link_layer),
        Some(LinkLayer::Ethernet)
    );

    assert_eq!(
        fabric.add_gid(roce_port, gid),
        Err(FabricError::DuplicateGid(gid))
    );
    assert_eq!(
        fabric.add_device(&[PortConfig::connectx6_hdr(0x10)]),
        Err(FabricError::DuplicateLid(0x10))
    );
    assert_eq!(
        fabric.add_device(&[
            PortConfig::connectx6_hdr(0x20),
            PortConfig::connectx6_hdr(0x20)
        ]),
        Err(FabricError::DuplicateLid(0x20))
    );
    assert!(matches!(
        fabric.add_device(&[PortConfig::connectx6_hdr(0)]),
        Err(FabricError::InvalidPortConfig(_))
    ));
    assert!(matches!(
        fabric.add_device(&[PortConfig::roce_v2(0)]),
        Err(FabricError::InvalidPortConfig(_))
    ));
    assert!(matches!(
        fabric.add_device(&[]),
        Err(FabricError::InvalidPortConfig(_))
    ));
    assert_eq!(
        fabric.device_count(),
        2,
        "failed additions leave nothing behind"
    );

    let a = Endpoint {
        qpn: 1,
        device: ib,
        port: 1,
    };
    let nowhere = Endpoint {
        qpn: 1,
        device: DeviceIndex(9),
        port: 1,
    };
    let outcome = fabric.send(SimInstant::ZERO, send_only(a, nowhere, 0, 8), &mut NoTrace);
    assert_eq!(outcome, Ok(SendOutcome::Dropped(DropReason::Unroutable)));
    let bad_source = fabric.send(SimInstant::ZERO, send_only(nowhere, a, 0, 8), &mut NoTrace);
    assert_eq!(
        bad_source,
        Err(FabricError::UnknownPort(nowhere.port_ref()))
    );
}

#[test]
fn events_are_small() {
    // Goal: what the queue stores stays small and Copy (perf.md: the event
    // queue holds small Copy events).
    // Method: assert sizes.
    assert!(size_of::<FabricEvent>() <= 48);
    assert!(size_of::<TimerEvent>() <= 12);
}

/// A mixed workload under every background fault, traced as text.
fn faulty_run(seed: u64) -> String {
    let mut config = FabricConfig::with_seed(seed);
    config.network = NetworkFaults {
        loss_ppm: 50_000,
        duplicate_ppm: 50_000,
        reorder_ppm: 100_000,
        reorder_window_packets: 4,
        latency_ns_min: 0,
        latency_ns_max: 300,
    };
    let (mut fabric, a, b) = pair_with(config, PortConfig::connectx6_hdr(1));
    fabric.install_rule(
        FaultRule::new(
            RuleScope::All,
            FaultAction::Drop,
            FaultWhen::RatePpm(20_000),
        )
        .unwrap(),
    );
    let mut trace = Vec::new();
    let mut now = SimInstant::ZERO;
    for psn in 0..300 {
        let (from, to) = if psn % 3 == 0 { (b, a) } else { (a, b) };
        fabric
            .send(now, send_only(from, to, psn, 64 * (psn % 5)), &mut trace)
            .unwrap();
        now += SimDuration::from_nanos(u64::from(psn % 7) * 10);
        while let Some(_event) = fabric.pop_due(now, &mut trace) {}
    }
    deliveries(&mut fabric, &mut trace);
    trace_text(&trace)
}

#[test]
fn same_seed_gives_byte_identical_trace() {
    // Goal: the trace is a pure function of the seed and the inputs.
    // Method: run a faulty mixed workload twice with one seed and compare
    // the text byte for byte; a different seed must give a different text.
    let first = faulty_run(1234);
    assert!(first.contains("dropped(loss)") && first.contains("duplicated"));
    assert!(first.contains("held(") && first.contains("delayed(+"));
    assert_eq!(first, faulty_run(1234));
    assert_ne!(first, faulty_run(1235));
}

#[test]
fn trace_text_is_stable() {
    // Goal: the trace format is fixed (it is snapshot material).
    // Method: a three-packet run with one dropped packet, compared with the
    // exact expected text.
    let (mut fabric, a, b) = pair_with(FabricConfig::with_seed(1), PortConfig::connectx6_hdr(1));
    fabric.install_rule(
        FaultRule::new(RuleScope::All, FaultAction::Drop, FaultWhen::Next(1)).unwrap(),
    );
    let mut trace = Vec::new();
    for psn in 0..2 {
        fabric
            .send(SimInstant::ZERO, send_only(a, b, psn, 64), &mut trace)
            .unwrap();
    }
    fabric
        .set_link(SimInstant(10), b.port_ref(), false, &mut trace)
        .unwrap();
    fabric
        .set_link(SimInstant(20), b.port_ref(), true, &mut trace)
        .unwrap();
    deliveries(&mut fabric, &mut trace);
    let expected = "\
0ns sent dev0:1/qp0x11 -> dev1:1/qp0x12 SEND_ONLY psn=0 len=64 off=0 cookie=0x0
0ns dropped(rule0) dev0:1/qp0x11 -> dev1:1/qp0x12 SEND_ONLY psn=0 len=64 off=0 cookie=0x0
0ns sent dev0:1/qp0x11 -> dev1:1/qp0x12 SEND_ONLY psn=1 len=64 off=0 cookie=0x1
10ns link dev1:1 down
20ns link dev1:1 up
508ns delivered dev0:1/qp0x11 -> dev1:1/qp0x12 SEND_ONLY psn=1 len=64 off=0 cookie=0x1
";
    assert_eq!(trace_text(&trace), expected);
}

#[test]
fn ties_across_ports_come_out_in_send_order() {
    // Goal: packets from different ports due at the same instant come out
    // in the order they were sent (the sequence number breaks the tie,
    // across the per-port FIFOs and the heap alike).
    // Method: a and b each send an equal packet at t=0, b first, plus a
    // timer at the same arrival instant armed last; expect b's, a's, timer.
    let (mut fabric, a, b) = pair_with(FabricConfig::with_seed(13), PortConfig::connectx6_hdr(1));
    fabric
        .send(SimInstant::ZERO, send_only(b, a, 7, 64), &mut NoTrace)
        .unwrap();
    fabric
        .send(SimInstant::ZERO, send_only(a, b, 8, 64), &mut NoTrace)
        .unwrap();
    let timer = TimerEvent {
        kind: TimerKind::CqModeration,
        owner: 9,
        generation: 1,
    };
    fabric.schedule_timer(SimInstant(504), timer).unwrap();
    let mut seen = Vec::new();
    while let Some((at, event)) = fabric.pop_due(SimInstant(504), &mut NoTrace) {
        seen.push((at.0, event));
    }
    let psn = |e: &FabricEvent| match e {
        FabricEvent::Delivered(p) => p.psn.value(),
        FabricEvent::Timer(t) => 1_000 + t.owner,
    };
    let order: Vec<(u64, u32)> = seen.iter().map(|(at, e)| (*at, psn(e))).collect();
    assert_eq!(order, [(504, 7), (504, 8), (504, 1_009)]);
}

/// A [`FaultRule`] behind a rule that does not report
/// [`FabricRule::fixed_rate`]: the fabric asks it about every packet.
struct Opaque(FaultRule);

impl FabricRule for Opaque {
    fn on_packet(&mut self, packet: &Packet, rng: &mut SimRng) -> Verdict {
        self.0.on_packet(packet, rng)
    }
    fn is_spent(&self) -> bool {
        self.0.is_spent()
    }
    fn rate_ppm(&self, packet: &Packet) -> Option<u32> {
        self.0.rate_ppm(packet)
    }
    fn fire(&mut self) -> Verdict {
        self.0.fire()
    }
}

/// The trace of 3 000 packets both ways between `a` and `b` under scoped
/// rate rules and a `Next` rule, installed as themselves or behind
/// [`Opaque`].
fn scoped_rules_run(opaque: bool) -> String {
    let (mut fabric, a, b) = pair_with(FabricConfig::with_seed(99), PortConfig::connectx6_hdr(1));
    let rules = [
        (
            RuleScope::From {
                device: a.device,
                qpn: a.qpn,
            },
            FaultAction::Drop,
            FaultWhen::RatePpm(30_000),
        ),
        (
            RuleScope::To {
                device: a.device,
                qpn: a.qpn,
            },
            FaultAction::Duplicate,
            FaultWhen::RatePpm(40_000),
        ),
        (RuleScope::All, FaultAction::Drop, FaultWhen::Next(5)),
        (
            RuleScope::All,
            FaultAction::DelayNs(700),
            FaultWhen::RatePpm(50_000),
        ),
        (
            RuleScope::From {
                device: b.device,
                qpn: b.qpn,
            },
            FaultAction::Reorder(3),
            FaultWhen::RatePpm(20_000),
        ),
    ];
    for (scope, action, when) in rules {
        let rule = FaultRule::new(scope, action, when).unwrap();
        if opaque {
            fabric.install_rule(Opaque(rule));
        } else {
            fabric.install_rule(rule);
        }
    }
    let mut trace = Vec::new();
    let mut now = SimInstant::ZERO;
    for psn in 0..3_000 {
        let (from, to) = if psn % 4 == 1 { (b, a) } else { (a, b) };
        fabric
            .send(now, send_only(from, to, psn, 64), &mut trace)
            .unwrap();
        now += SimDuration::from_nanos(40);
        while let Some(_event) = fabric.pop_due(now, &mut trace) {}
    }
    deliveries(&mut fabric, &mut trace);
    trace_text(&trace)
}

#[test]
fn fixed_rate_rules_decide_as_if_asked_per_packet() {
    // Goal: the fabric's shortcut for fixed-rate rules (scope tested by the
    // fabric, no call for a packet out of scope) decides exactly what
    // asking each rule about each packet decides: same verdicts, same
    // shared draws, same trace.
    // Method: scoped rate rules of every action and a Next rule between
    // them, over traffic in both directions, installed as `FaultRule`s
    // (which report `fixed_rate`) and behind a wrapper that does not;
    // the two traces must be byte-identical, and every action must have
    // fired.
    let fast = scoped_rules_run(false);
    for seen in ["dropped(rule", "duplicated", "delayed(+", "held("] {
        assert!(fast.contains(seen), "{seen} missing from the run");
    }
    assert_eq!(fast, scoped_rules_run(true));
}
