//! RC timers and retry counters (data-path §5.2; qp-state-machine §5.2).

use verbs_api::WcStatus;

/// The RNR NAK timer encoding in microseconds, indexed by the 5-bit code
/// (qp-state-machine §5.2, K-IBH `enum ib_rnr_timeout`): code 0 is the
/// longest (655.36 ms), codes 1..=31 grow from 0.01 ms to 491.52 ms.
pub const RNR_TIMER_US: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, //
    160, 240, 320, 480, 640, 960, 1_280, 1_920, //
    2_560, 3_840, 5_120, 7_680, 10_240, 15_360, 20_480, 30_720, //
    40_960, 61_440, 81_920, 122_880, 163_840, 245_760, 327_680, 491_520,
];

/// The local ACK timeout of `timeout` (5 bits): 4.096 µs × 2^timeout, in
/// nanoseconds; `None` for 0, which means "never time out" (data-path
/// §5.2, qp-state-machine §5.2, rxe `rxe_qp_from_attr`).
///
/// Bits above the 5-bit field are ignored, as mlx5's field write does;
/// `ibv_modify_qp` validation rejects values above 31 before this runs.
pub const fn ack_timeout_ns(timeout: u8) -> Option<u64> {
    let t = timeout & 0x1f;
    if t == 0 {
        None
    } else {
        Some(4_096u64 << t)
    }
}

/// The RNR wait of `code` (5 bits) in nanoseconds (table above); bits
/// above the field are ignored.
///
/// # Divergence from hardware
///
/// rxe's microsecond table has a typo for code 25 (61410 µs instead of
/// 61440); the simulator uses the IBTA value in both flavours.
pub const fn rnr_timer_ns(code: u8) -> u64 {
    RNR_TIMER_US[(code & 0x1f) as usize] as u64 * 1_000
}

/// What the requester does after a timeout or a NAK.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RetryVerdict {
    /// Retransmit from the oldest unacknowledged PSN after `delay_ns`
    /// (0 after a timeout: the timeout already elapsed).
    Retry {
        /// How long to wait before retransmitting.
        delay_ns: u64,
    },
    /// Give up: complete the WR with this status and move the QP to ERR
    /// (`RETRY_EXC_ERR` or `RNR_RETRY_EXC_ERR`, §4.2 rows 9, 15).
    Exhausted(WcStatus),
}

/// The value of `rnr_retry` that means "retry forever" (data-path §5.2).
pub const RNR_RETRY_INFINITE: u8 = 7;

/// The requester's two retry counters (data-path §5.2, §10.5, §10.6).
///
/// * `retry_cnt` (0..=7): retransmissions allowed after ACK timeouts and
///   PSN-sequence-error NAKs before `RETRY_EXC_ERR`. 7 is a count.
/// * `rnr_retry` (0..=7): retries allowed after RNR NAKs before
///   `RNR_RETRY_EXC_ERR`; 7 means infinite.
///
/// Both counters are reloaded when the responder acknowledges new work
/// ([`RetryCounters::on_progress`]), so the limits apply to consecutive
/// failures of the same request. The counters are independent: an RNR NAK
/// does not consume `retry_cnt`, and a timeout does not consume `rnr_retry`.
///
/// # Divergence from hardware
///
/// rxe treats `retry_cnt == 7` as infinite (a quirk); the simulator
/// follows the IB spec (7 retransmissions) in both flavours.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RetryCounters {
    retry_cnt: u8,
    rnr_retry: u8,
    retry_left: u8,
    rnr_left: u8,
}

impl RetryCounters {
    /// Counters for a QP's `retry_cnt` and `rnr_retry` (3-bit fields; higher
    /// bits are ignored).
    pub const fn new(retry_cnt: u8, rnr_retry: u8) -> Self {
        let retry_cnt = retry_cnt & 7;
        let rnr_retry = rnr_retry & 7;
        Self {
            retry_cnt,
            rnr_retry,
            retry_left: retry_cnt,
            rnr_left: rnr_retry,
        }
    }

    /// The ACK timer expired (or a PSN sequence-error NAK arrived): retry
    /// while retransmissions are left, else `RETRY_EXC_ERR`.
    pub fn on_timeout(&mut self) -> RetryVerdict {
        if self.retry_left == 0 {
            return RetryVerdict::Exhausted(WcStatus::RetryExcErr);
        }
        self.retry_left -= 1;
        RetryVerdict::Retry { delay_ns: 0 }
    }

    /// An RNR NAK carrying the responder's timer `code` arrived: wait
    /// [`rnr_timer_ns`]`(code)` and retry while RNR retries are left (always
    /// with `rnr_retry == 7`), else `RNR_RETRY_EXC_ERR`.
    pub fn on_rnr_nak(&mut self, code: u8) -> RetryVerdict {
        if self.rnr_retry != RNR_RETRY_INFINITE {
            if self.rnr_left == 0 {
                return RetryVerdict::Exhausted(WcStatus::RnrRetryExcErr);
            }
            self.rnr_left -= 1;
        } else {
            // Retry for ever; the count only tells a stall (`rnr_stalled`).
            self.rnr_left = self.rnr_left.saturating_sub(1);
        }
        RetryVerdict::Retry {
            delay_ns: rnr_timer_ns(code),
        }
    }

    /// An ACK (or READ/atomic response) acknowledged at least one new PSN:
    /// reload both counters.
    pub fn on_progress(&mut self) {
        self.retry_left = self.retry_cnt;
        self.rnr_left = self.rnr_retry;
    }

    /// Retransmissions left before `RETRY_EXC_ERR`.
    pub const fn retries_left(&self) -> u8 {
        self.retry_left
    }

    /// With `rnr_retry == 7` (retry for ever): seven RNR NAKs came in a row
    /// without progress. Hardware goes on retrying; the simulator parks
    /// the requester until a receive is posted or a QP changes, instead of
    /// spinning through timer events (issue #20 item 3).
    pub const fn rnr_stalled(&self) -> bool {
        self.rnr_retry == RNR_RETRY_INFINITE && self.rnr_left == 0
    }

    /// RNR retries left (with `rnr_retry == 7`: RNR NAKs left before the
    /// simulator calls it a stall).
    pub const fn rnr_retries_left(&self) -> u8 {
        self.rnr_left
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_timeout_encoding_section_5_2() {
        // Goal: timeout 0 = infinite; n = 4.096 µs × 2^n.
        // Method: spot values computed by hand: 1 → 8.192 µs, 14 → 67.108864 ms,
        // 31 → 4.096 µs × 2^31 = 8796.093022208 s.
        assert_eq!(ack_timeout_ns(0), None);
        assert_eq!(ack_timeout_ns(1), Some(8_192));
        assert_eq!(ack_timeout_ns(14), Some(67_108_864));
        assert_eq!(ack_timeout_ns(31), Some(8_796_093_022_208));
    }

    #[test]
    fn rnr_timer_table_qp_state_machine_5_2() {
        // Goal: the K-IBH ib_rnr_timeout table: every code, in ms as printed in
        // qp-state-machine.md §5.2.
        // Method: the table transcribed in hundredths of ms, compared in ns.
        let hundredths_ms: [u64; 32] = [
            65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768,
            1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
        ];
        for (code, h) in hundredths_ms.iter().enumerate() {
            assert_eq!(rnr_timer_ns(code as u8), h * 10_000, "code {code}");
        }
        assert_eq!(rnr_timer_ns(0), 655_360_000);
        assert_eq!(rnr_timer_ns(1), 10_000);
        assert_eq!(rnr_timer_ns(25), 61_440_000, "IBTA value, not rxe's typo");
    }

    #[test]
    fn retry_cnt_counts_retransmissions_rows_15() {
        // Goal: §5.2/§4.2 row 15: retry_cnt retransmissions, then RETRY_EXC_ERR;
        // 0 fails on the first timeout; 7 is a count (IB), not infinite.
        // Method: count timeouts until exhaustion for 0, 2 and 7.
        for n in [0u8, 2, 7] {
            let mut c = RetryCounters::new(n, 0);
            for _ in 0..n {
                assert_eq!(c.on_timeout(), RetryVerdict::Retry { delay_ns: 0 });
            }
            assert_eq!(
                c.on_timeout(),
                RetryVerdict::Exhausted(WcStatus::RetryExcErr),
                "retry_cnt {n}"
            );
        }
    }

    #[test]
    fn rnr_retry_counts_and_7_is_infinite_row_9() {
        // Goal: §4.2 row 9: rnr_retry retries then RNR_RETRY_EXC_ERR; 7 retries
        // forever (GUT-RC SendRnrInfiniteRetries); the wait is the NAK's timer.
        // Method: rnr_retry 1 with timer code 14 (1.28 ms); rnr_retry 7 for 1000 NAKs.
        let mut c = RetryCounters::new(7, 1);
        assert_eq!(
            c.on_rnr_nak(14),
            RetryVerdict::Retry {
                delay_ns: 1_280_000
            }
        );
        assert_eq!(
            c.on_rnr_nak(14),
            RetryVerdict::Exhausted(WcStatus::RnrRetryExcErr)
        );
        let mut forever = RetryCounters::new(0, 7);
        for i in 0..1000 {
            assert!(matches!(
                forever.on_rnr_nak(1),
                RetryVerdict::Retry { delay_ns: 10_000 }
            ));
            assert_eq!(forever.rnr_stalled(), i >= 6, "after {} NAKs", i + 1);
        }
        forever.on_progress();
        assert!(!forever.rnr_stalled());
    }

    #[test]
    fn progress_reloads_and_counters_are_independent() {
        // Goal: an acknowledgement of new work reloads both counters; RNR NAKs
        // do not consume retry_cnt and timeouts do not consume rnr_retry.
        // Method: interleave events on retry_cnt 1 / rnr_retry 1.
        let mut c = RetryCounters::new(1, 1);
        assert!(matches!(c.on_timeout(), RetryVerdict::Retry { .. }));
        assert!(matches!(c.on_rnr_nak(0), RetryVerdict::Retry { .. }));
        assert_eq!((c.retries_left(), c.rnr_retries_left()), (0, 0));
        c.on_progress();
        assert_eq!((c.retries_left(), c.rnr_retries_left()), (1, 1));
        assert!(matches!(c.on_timeout(), RetryVerdict::Retry { .. }));
        assert_eq!(c.rnr_retries_left(), 1);
    }
}
