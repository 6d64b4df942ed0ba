//! The adapter model: what an HCA adds to the wire's timing.
//!
//! The fabric models links (serialisation at the port rate, propagation).
//! This model adds what happens inside the adapters and on their PCIe
//! links, so that simulated latencies and message rates are comparable
//! with what perftest reports on hardware (issue #19):
//!
//! ```text
//! post_send ──doorbell──▶ [WQE fetch] ─▶ send engine (per QP) ─▶ [payload DMA read] ─▶ port
//!   port ──wire──▶ receive pipeline ─▶ host memory write (data, CQE) ─▶ visible to a poller
//! ```
//!
//! * A `post_send` call rings one doorbell: the WQEs it posted become
//!   known to the adapter `doorbell_ns` later. A single inline WQE is
//!   written with the doorbell (BlueFlame); otherwise the adapter fetches
//!   the WQEs of the doorbell over PCIe (`wqe_fetch_ns`), and the QP's
//!   send engine waits for them.
//! * The send engine serves one WQE at a time per QP: `wqe_ns` per WQE and
//!   `packet_ns` per packet, or `msg_ns` plus the message's time on the
//!   wire when that is longer (a per-message cost that adds to the wire at
//!   mid sizes); each doorbell costs it `doorbell_gap_ns` (the fetch
//!   itself is pipelined). A non-inline payload is read by DMA
//!   (`payload_fetch_ns` of latency, then the device's DMA bandwidth,
//!   shared by its QPs); a packet leaves when all its bytes are read
//!   (store and forward at the sender).
//! * Every packet reaching a port goes through the receive pipeline and a
//!   host memory write before anything can see it (`rx_ns`, plus its
//!   payload at `rx_mbps`: store and forward at the receiver), which is
//!   where data placement, ACK generation and completions happen.
//! * A READ responder reads the data from host memory before answering
//!   (`responder_read_ns`) and serves READs one at a time,
//!   each for `read_msg_ns` plus its responses' time on the wire.
//! * With a host CPU in the set-up (`Setup`, `--cpu-mhz`), a device's
//!   posting thread makes one `ibv_post_send` at a time, `post_ns` each;
//!   switch hops and a PCIe switch are folded into `wire_ns` and the PCIe
//!   latencies (`Setup::apply`).
//! * Each WQE gets a seeded jitter (exponential, mean `jitter_mean_ns`,
//!   capped at 16 times the mean) from its own RNG stream, so latency
//!   percentiles have a tail and runs stay reproducible.
//!
//! The constants of each profile are fitted to published perftest figures
//! (perf.md "Anchors"); `verbsim calibrate` prints each anchor beside the
//! simulated figure. Where a constant is a fit rather than a measurement,
//! its doc says so. [`AdapterModel::NONE`] turns the model off (the wire
//! alone, as before issue #19).

/// Timing of one adapter model (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdapterModel {
    /// Doorbell (MMIO write) until the adapter acts on it.
    pub doorbell_ns: u64,
    /// PCIe read of the WQEs of a doorbell (not for one inline WQE, which
    /// BlueFlame writes with the doorbell): latency before the QP's send
    /// engine can start on them; fetches of successive doorbells overlap.
    pub wqe_fetch_ns: u64,
    /// Send engine time per WQE, per QP.
    pub wqe_ns: u64,
    /// Send engine time per packet, per QP (software devices).
    pub packet_ns: u64,
    /// Send engine time per doorbell, per QP: the doorbell's WQE fetch is
    /// pipelined (its latency is `wqe_fetch_ns`), this is what each
    /// doorbell costs the engine's throughput.
    pub doorbell_gap_ns: u64,
    /// Per-message cost that adds to the message's time on the wire (the
    /// send engine holds a message for `msg_ns` plus its serialisation at
    /// the port's rate, when that is longer than `wqe_ns`): what keeps one
    /// QP below line rate at mid sizes.
    pub msg_ns: u64,
    /// A READ responder's per-request cost, added to its responses' time
    /// on the wire (the device's responder serves one READ at a time).
    pub read_msg_ns: u64,
    /// Host memory write bandwidth of the receiver in Mb/s (0 =
    /// unlimited): a packet's payload is written to memory after the whole
    /// packet arrived (store and forward), so its effect is visible
    /// `payload / rx_mbps` after its last bit.
    pub rx_mbps: u64,
    /// Extra latency of reading a non-inline payload by DMA.
    pub payload_fetch_ns: u64,
    /// DMA read bandwidth of the device in Mb/s (0 = unlimited): payloads
    /// of all its QPs share it.
    pub dma_mbps: u64,
    /// Receive pipeline plus host memory write: from a packet's arrival at
    /// the port until its effect (data, ACK processing, a completion) is
    /// visible.
    pub rx_ns: u64,
    /// A READ responder's host memory read before the first response.
    pub responder_read_ns: u64,
    /// Mean of the seeded per-WQE jitter (0 = none).
    pub jitter_mean_ns: u64,
    /// Wire propagation (cable and PHYs) when the model is on; the fabric's
    /// default (500 ns) stands for the whole path when it is off.
    pub wire_ns: u64,
    /// CPU time of one `ibv_post_send` call on the host (0 = not
    /// modelled, the fitted anchors' hosts): a QP's calls follow each
    /// other at least this far apart. Set by `Setup` (`--cpu-mhz`); the
    /// posting delay itself is in `doorbell_ns`.
    pub post_ns: u64,
    /// Link rate override in Mb/s for devices whose port attributes do not
    /// give it (rxe reports 1X SDR whatever the netdev is); 0 = from the
    /// port's width and speed.
    pub wire_mbps: u64,
}

impl AdapterModel {
    /// No adapter: departures at the doorbell, arrivals when the last bit
    /// has crossed the wire (the model before issue #19).
    pub const NONE: Self = Self {
        doorbell_ns: 0,
        wqe_fetch_ns: 0,
        wqe_ns: 0,
        packet_ns: 0,
        doorbell_gap_ns: 0,
        msg_ns: 0,
        read_msg_ns: 0,
        rx_mbps: 0,
        payload_fetch_ns: 0,
        dma_mbps: 0,
        rx_ns: 0,
        responder_read_ns: 0,
        jitter_mean_ns: 0,
        wire_ns: 0,
        post_ns: 0,
        wire_mbps: 0,
    };

    /// A ConnectX-6/ConnectX-7-class adapter on PCIe Gen4 x16.
    ///
    /// Fitted to published perftest figures (docs/calibration.md, fitted
    /// anchors; the held-out points there were not used):
    /// * `wqe_ns` 131: one QP reaches ~7.5 M msg/s with post lists of 128
    ///   (linux-rdma/perftest issue 273: 1/7.5 M = 133 ns a WQE).
    /// * `doorbell_gap_ns` 52: one QP without post lists, 64 B
    ///   `ib_write_bw` on a ConnectX-6 HDR host, 5.48 M msg/s (182.5 ns =
    ///   WQE + doorbell; calibration.md source A). The 2.6 M msg/s of
    ///   perftest issue 132 is a slower host's post rate: a held-out miss.
    /// * `wqe_fetch_ns` 254: latency only (pipelined), the difference of
    ///   non-inline and inline WRITE latency (issue 131) less
    ///   `payload_fetch_ns`.
    /// * `msg_ns` 0: fitted to 4 KiB `ib_write_bw` on the same host,
    ///   156.6 Gb/s: 209 ns a message = 165 ns on the wire + the 52 ns
    ///   of its doorbell (source A), which leaves nothing for `msg_ns` on
    ///   this host; the engine's hold of a message for its time on the
    ///   wire is what makes the doorbell add to the wire instead of
    ///   overlapping it.
    /// * `read_msg_ns` 100: an *estimate* (no published READ curve of one
    ///   QP with its WRITE curve on the same host was found).
    /// * `rx_mbps` 220 000: the receiver's PCIe write, as `dma_mbps` (an
    ///   *estimate*).
    /// * `doorbell_ns` 100: an MMIO write reaching the device (an
    ///   *estimate*; it only shifts latencies, which the next fit absorbs).
    /// * `rx_ns` 650: inline RDMA WRITE latency 0.93 µs one way (perftest
    ///   issue 131) = doorbell + WQE + wire + `rx_ns`.
    /// * `payload_fetch_ns` 135: non-inline WRITE latency 1.32 µs (issue 131)
    ///   = the inline figure + `wqe_fetch_ns` + `payload_fetch_ns`.
    /// * `responder_read_ns` 250: READ latency 1.91 µs (issue 131) for the
    ///   round trip.
    /// * `dma_mbps` 220 000: PCIe Gen4 x16 after protocol overhead (an
    ///   *estimate*; it leaves a 200 Gb/s port the bottleneck).
    /// * `wire_ns` 50: a 2 m back-to-back cable and two PHYs (an
    ///   *estimate*).
    /// * `jitter_mean_ns` 15: an *estimate* giving t_99 − t_min of a few
    ///   tens of ns, as perftest latency reports on an idle host show.
    pub const CONNECTX6: Self = Self {
        doorbell_ns: 100,
        wqe_fetch_ns: 254,
        wqe_ns: 131,
        packet_ns: 0,
        doorbell_gap_ns: 52,
        msg_ns: 0,
        read_msg_ns: 100,
        rx_mbps: 220_000,
        payload_fetch_ns: 135,
        dma_mbps: 220_000,
        rx_ns: 650,
        responder_read_ns: 250,
        jitter_mean_ns: 15,
        wire_ns: 50,
        post_ns: 0,
        wire_mbps: 0,
    };

    /// A ConnectX-7 on PCIe Gen5 x16: the ConnectX-6 figures with the DMA
    /// bandwidth fitted to 348.6 Gb/s of 64 KiB `ib_write_bw` on a 400 Gb/s
    /// port (~87 % of line rate, perf.md "Anchors"): the PCIe link, not
    /// the port, is the bottleneck.
    pub const CONNECTX7: Self = Self {
        dma_mbps: 352_000,
        rx_mbps: 352_000,
        ..Self::CONNECTX6
    };

    /// Soft-RoCE (rxe) on a 10 GbE netdev: the CPU does the adapter's work
    /// per packet. `packet_ns` is fitted to ~4.9 Gb/s of `ib_send_bw`
    /// (perf.md "Anchors") at rxe's 1024-byte MTU (1024 × 8 / 4.9 Gb/s ≈
    /// 1.67 µs a packet); the other constants are *estimates* of a kernel
    /// software path (a system call per post, softirq receive).
    pub const RXE: Self = Self {
        doorbell_ns: 1_000,
        wqe_fetch_ns: 0,
        wqe_ns: 500,
        packet_ns: 1_670,
        doorbell_gap_ns: 0,
        msg_ns: 0,
        read_msg_ns: 0,
        rx_mbps: 0,
        payload_fetch_ns: 0,
        dma_mbps: 0,
        rx_ns: 2_000,
        responder_read_ns: 500,
        jitter_mean_ns: 200,
        wire_ns: 50,
        post_ns: 0,
        wire_mbps: 10_000,
    };

    /// Whether the model adds anything (the fast path skips it otherwise).
    pub fn is_none(&self) -> bool {
        *self == Self::NONE
    }

    /// Nanoseconds the DMA engine needs for `bytes` (0 when unlimited).
    pub fn dma_ns(&self, bytes: u64) -> u64 {
        if self.dma_mbps == 0 {
            0
        } else {
            (bytes.saturating_mul(8_000)).div_ceil(self.dma_mbps)
        }
    }

    /// A jitter sample from a uniform `u64`: exponential with mean
    /// `jitter_mean_ns`, capped at 16 means. Integer arithmetic only, so
    /// the same draw gives the same delay on every host.
    pub fn jitter_ns(&self, draw: u64) -> u64 {
        if self.jitter_mean_ns == 0 {
            return 0;
        }
        // -ln(u) for u uniform in (0, 1], by the count of leading halvings
        // plus a linear remainder: a geometric-exponential staircase with
        // mean close to 1.
        let u = draw | 1;
        let halvings = u64::from(u.leading_zeros());
        // The mantissa x = u·2^h / 2^64 lies in [1/2, 1): -ln(x) runs from 0
        // to ln 2, taken as linear in 1 - x (1024·(1 - x) is in 0..=512).
        let frac = (u << halvings) >> 1; // in [2^62, 2^63)
        let rem = (1u64 << 63).saturating_sub(frac) >> 53;
        let ln_ish = halvings * 693 + rem * 693 / 512; // thousandths of -ln(u)
        (self.jitter_mean_ns * ln_ish / 1000).min(self.jitter_mean_ns * 16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_is_bounded_and_has_a_mean_near_the_configured_one() {
        // Goal: the tail is real but bounded, and the average is what the
        // profile says within 25 %. Method: a deterministic draw sequence.
        let m = AdapterModel::CONNECTX6;
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut sum = 0u64;
        let mut max = 0u64;
        let n = 100_000u64;
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let j = m.jitter_ns(x);
            assert!(j <= 16 * m.jitter_mean_ns);
            sum += j;
            max = max.max(j);
        }
        let mean = sum / n;
        assert!(
            mean * 4 >= m.jitter_mean_ns * 3 && mean * 4 <= m.jitter_mean_ns * 5,
            "mean {mean}"
        );
        assert!(max > 3 * m.jitter_mean_ns, "a tail: max {max}");
    }

    #[test]
    fn dma_time_follows_the_bandwidth() {
        let m = AdapterModel::CONNECTX7;
        // 64 KiB at 352 Gb/s ≈ 1.49 µs.
        assert_eq!(m.dma_ns(65_536), 1_490);
        assert_eq!(AdapterModel::NONE.dma_ns(1 << 20), 0);
    }
}
