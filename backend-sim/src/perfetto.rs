//! The trace as a Chrome trace-event JSON file, which Perfetto
//! (ui.perfetto.dev) and `chrome://tracing` open (issue #17 item 1).
//!
//! One process per device (`dev0`, …) and one track (thread) per QP, on
//! virtual time (the format's microseconds carry nanosecond fractions).
//! A work request is a span from its post to its completion; packets sent,
//! delivered, dropped, duplicated, delayed and held, retransmissions, state
//! changes, completions, placements, async and rdma_cm events are instant
//! events with their fields as arguments. Pure: it returns the text, the
//! caller writes it (`SimConfig::chrome_trace`, `verbsim run --trace`).

use core::fmt::Write as _;
use std::collections::BTreeMap;

use crate::fabric::FabricTrace;
use crate::trace::{Trace, TraceEvent};

/// A JSON string literal.
fn js(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Trace-event timestamps are microseconds; virtual time is nanoseconds.
fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1_000, ns % 1_000)
}

/// Collects the events, then prints them as one JSON object.
struct Writer {
    events: Vec<String>,
    /// (device, qpn) → track name, for the metadata events.
    tracks: BTreeMap<(u32, u32), String>,
    /// Open spans: (device, qpn, wr_id) → post time.
    open: BTreeMap<(u32, u32, u64), (u64, String)>,
}

impl Writer {
    fn instant(&mut self, ns: u64, device: u32, qpn: u32, name: &str, args: &str) {
        self.tracks
            .entry((device, qpn))
            .or_insert_with(|| format!("qp {qpn:#x}"));
        self.events.push(format!(
            "{{\"ph\":\"i\",\"s\":\"t\",\"pid\":{},\"tid\":{qpn},\"ts\":{},\"name\":{},\"args\":{{{args}}}}}",
            device + 1,
            us(ns),
            js(name)
        ));
    }

    fn packet(&mut self, ns: u64, what: &str, p: &crate::fabric::Packet, extra: &str) {
        let args = format!(
            "\"opcode\":{},\"psn\":{},\"len\":{},\"offset\":{},\"to\":{}{extra}",
            js(&format!("{:?}", p.opcode)),
            p.psn.value(),
            p.payload_len,
            p.offset,
            js(&format!(
                "dev{} qp {:#x}",
                p.destination.device.0, p.destination.qpn
            )),
        );
        self.instant(
            ns,
            u32::from(p.source.device.0),
            p.source.qpn,
            &format!("packet {what}"),
            &args,
        );
    }
}

impl Trace {
    /// The trace as Chrome trace-event JSON (see the module documentation).
    pub fn to_chrome_json(&self) -> String {
        let mut w = Writer {
            events: Vec::new(),
            tracks: BTreeMap::new(),
            open: BTreeMap::new(),
        };
        for r in self.records() {
            let t = r.time_ns;
            match r.event {
                TraceEvent::QpCreated {
                    device,
                    qpn,
                    qp_type,
                } => {
                    w.tracks
                        .insert((device, qpn), format!("qp {qpn:#x} ({qp_type})"));
                    w.instant(
                        t,
                        device,
                        qpn,
                        "created",
                        &format!("\"type\":{}", js(&qp_type.to_string())),
                    );
                }
                TraceEvent::QpState {
                    device,
                    qpn,
                    from,
                    to,
                } => w.instant(
                    t,
                    device,
                    qpn,
                    &format!("{from} -> {to}"),
                    &format!(
                        "\"from\":{},\"to\":{}",
                        js(&from.to_string()),
                        js(&to.to_string())
                    ),
                ),
                TraceEvent::QpDestroyed { device, qpn } => {
                    w.instant(t, device, qpn, "destroyed", "")
                }
                TraceEvent::Posted {
                    device,
                    qpn,
                    wr_id,
                    recv,
                } => {
                    let name = if recv { "receive" } else { "request" };
                    w.open.insert((device, qpn, wr_id), (t, name.to_owned()));
                }
                TraceEvent::Completion {
                    device,
                    qpn,
                    wr_id,
                    status,
                    recv,
                    cause,
                } => {
                    let mut args = format!(
                        "\"wr_id\":{wr_id},\"status\":{},\"recv\":{recv}",
                        js(&status.to_string())
                    );
                    if let Some(c) = cause {
                        args.push_str(&format!(",\"cause\":{}", js(c.describe())));
                    }
                    if let Some((start, name)) = w.open.remove(&(device, qpn, wr_id)) {
                        w.tracks
                            .entry((device, qpn))
                            .or_insert_with(|| format!("qp {qpn:#x}"));
                        w.events.push(format!(
                            "{{\"ph\":\"X\",\"pid\":{},\"tid\":{qpn},\"ts\":{},\"dur\":{},\"name\":{},\"args\":{{{args}}}}}",
                            device + 1,
                            us(start),
                            us(t.saturating_sub(start)),
                            js(&format!("{name} wr_id={wr_id}"))
                        ));
                    }
                    w.instant(t, device, qpn, &format!("completion {status}"), &args);
                }
                TraceEvent::Placement {
                    device,
                    qpn,
                    offset,
                    len,
                } => w.instant(
                    t,
                    device,
                    qpn,
                    "placed",
                    &format!("\"offset\":{offset},\"len\":{len}"),
                ),
                TraceEvent::Retransmit {
                    device,
                    qpn,
                    psn,
                    cause,
                } => w.instant(
                    t,
                    device,
                    qpn,
                    "retransmit",
                    &format!("\"psn\":{psn},\"cause\":{}", js(cause)),
                ),
                TraceEvent::Packet(p) => match p {
                    FabricTrace::Sent { packet, .. } => w.packet(t, "sent", &packet, ""),
                    FabricTrace::Delivered { packet, .. } => w.packet(t, "delivered", &packet, ""),
                    FabricTrace::Dropped { packet, reason, .. } => {
                        w.packet(
                            t,
                            "dropped",
                            &packet,
                            &format!(",\"reason\":{}", js(&format!("{reason:?}"))),
                        );
                    }
                    FabricTrace::Duplicated { packet, .. } => {
                        w.packet(t, "duplicated", &packet, "")
                    }
                    FabricTrace::Delayed { packet, extra, .. } => {
                        w.packet(
                            t,
                            "delayed",
                            &packet,
                            &format!(",\"extra_ns\":{}", extra.as_nanos()),
                        );
                    }
                    FabricTrace::Held {
                        packet, overtakers, ..
                    } => {
                        w.packet(t, "held", &packet, &format!(",\"overtakers\":{overtakers}"));
                    }
                    FabricTrace::Released { packet, .. } => w.packet(t, "released", &packet, ""),
                    other => {
                        let text = other.to_string();
                        w.events.push(format!(
                            "{{\"ph\":\"i\",\"s\":\"g\",\"pid\":0,\"tid\":0,\"ts\":{},\"name\":{}}}",
                            us(t),
                            js(&text)
                        ));
                    }
                },
                other => {
                    // Events without a QP track (CQ overrun, async, CM,
                    // discards, stalls): a global instant with their text.
                    w.events.push(format!(
                        "{{\"ph\":\"i\",\"s\":\"g\",\"pid\":0,\"tid\":0,\"ts\":{},\"name\":{}}}",
                        us(t),
                        js(&other.to_string())
                    ));
                }
            }
        }
        // Requests still outstanding at the end: spans to the last instant.
        let end = self.records().last().map_or(0, |r| r.time_ns);
        for ((device, qpn, wr_id), (start, name)) in core::mem::take(&mut w.open) {
            w.events.push(format!(
                "{{\"ph\":\"X\",\"pid\":{},\"tid\":{qpn},\"ts\":{},\"dur\":{},\"name\":{},\"args\":{{\"outstanding\":true}}}}",
                device + 1,
                us(start),
                us(end.saturating_sub(start)),
                js(&format!("{name} wr_id={wr_id} (outstanding)"))
            ));
        }
        let mut meta = vec![
            "{\"ph\":\"M\",\"pid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"fabric and world\"}}".to_owned(),
        ];
        let devices: std::collections::BTreeSet<u32> = w.tracks.keys().map(|(d, _)| *d).collect();
        for d in devices {
            meta.push(format!(
                "{{\"ph\":\"M\",\"pid\":{},\"name\":\"process_name\",\"args\":{{\"name\":\"dev{d}\"}}}}",
                d + 1
            ));
        }
        for ((d, qpn), name) in &w.tracks {
            meta.push(format!(
                "{{\"ph\":\"M\",\"pid\":{},\"tid\":{qpn},\"name\":\"thread_name\",\"args\":{{\"name\":{}}}}}",
                d + 1,
                js(name)
            ));
        }
        let mut out = String::from("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
        let all: Vec<String> = meta.into_iter().chain(w.events).collect();
        out.push_str(&all.join(",\n"));
        out.push_str("\n]}\n");
        out
    }
}
