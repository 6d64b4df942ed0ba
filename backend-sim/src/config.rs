//! Simulator configuration: the seed, the devices and the driver quirks to model.

use crate::DeviceProfile;

/// Which driver's errno to return where the drivers disagree (data-path.md
/// §1.1–§1.2), e.g. `ibv_post_send` on a QP in INIT.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum ErrnoFlavor {
    /// The mlx5 user-space provider: `ENOMEM` for a send in RESET/INIT/RTR,
    /// for too many send SGEs and for too much inline data; work requests
    /// with an opcode the QP type cannot execute are accepted at post time.
    #[default]
    Mlx5,
    /// The IB spec as rxe implements it: `EINVAL` for all of the above.
    Spec,
}

/// What a DCT does with a request whose DC key is not its `dct_access_key`
/// (dc-and-mlx5dv.md §3.5: not confirmed from upstream code).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DcKeyViolation {
    /// The spec's recommendation: the DCT drops the request silently (no
    /// receive WQE consumed, no CQE, the DCT stays RTR, the violation is
    /// counted and traced); the DCI retries and completes the request with
    /// `IBV_WC_RETRY_EXC_ERR`.
    #[default]
    SilentDrop,
    /// The DCT answers with a remote-access NAK: the DCI completes the
    /// request with `IBV_WC_REM_ACCESS_ERR` at once.
    NakRemoteAccess,
}

/// What a CQ overrun does to the QP whose completion it loses (data-path.md
/// §6.3; docs/divergence.md, "CQ overrun"). Either way the entries already
/// written stay and poll, the lost completion and every later one to the CQ
/// are dropped, and the CQ's context gets `IBV_EVENT_CQ_ERR` once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CqOverrunQp {
    /// The QP whose completion was lost moves to ERR with
    /// `IBV_EVENT_QP_FATAL` (the IB specification's rule and rxe's
    /// responder; what the simulator's semantics digest prescribes).
    #[default]
    Error,
    /// The QP goes on (its queue stays as full as the lost completions left
    /// it), as google/rdma-unit-test's `CqOverflowTest` expects of NICs
    /// whose full CQ does not idle the QP. An rxe receive that cannot
    /// complete still moves its QP to ERR (`RESPST_ERR_CQ_OVERFLOW`).
    Continue,
}

/// Everything a [`crate::SimVerbs`] is built from.
///
/// Two worlds built from equal configurations and driven by the same verb
/// calls produce the same handles, numbers, keys and trace, byte for byte.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// The root seed; every random stream is derived from it (see [`crate::rng`]).
    pub seed: u64,
    /// The simulated devices, in `ibv_get_device_list` order.
    pub devices: Vec<DeviceProfile>,
    /// Which errno to use where drivers differ.
    pub errno_flavor: ErrnoFlavor,
    /// First QP number handed out on each device (cyclic, 24-bit, never 0/1,
    /// live numbers skipped; create-qp.md §7).
    pub qpn_start: u32,
    /// Whether simulated processes hold `CAP_NET_RAW` (RAW_PACKET QPs need it,
    /// otherwise `EPERM`).
    pub cap_net_raw: bool,
    /// Upper bound on the bytes all MRs of the world may own together; a
    /// registration past it fails with `ENOMEM` instead of exhausting the host.
    pub mr_bytes_max: u64,
    /// Opt-in strict memory ownership (default off): `ibv_dereg_mr` and
    /// writes through `mr_bytes_mut` are refused with `EFAULT` while a
    /// posted work request still names the MR, to find programs that rely
    /// on what hardware leaves undefined. Off, both are allowed as on
    /// hardware: the application's memory stays its own, and a request that
    /// later touches a deregistered key completes in error (LOC_PROT_ERR
    /// locally, REM_OP_ERR / REM_ACCESS_ERR at the peer).
    pub strict_mr_ownership: bool,
    /// Write the trace as Chrome trace-event JSON (Perfetto,
    /// `chrome://tracing`) to this file when the `SimVerbs` is dropped
    /// (`Trace::to_chrome_json`; `verbsim run --trace DIR` sets it per
    /// script). Needs `trace_enabled`. A file that cannot be written is
    /// reported on stderr. The only file the simulator ever writes.
    pub chrome_trace: Option<std::path::PathBuf>,
    /// Whether the trace records events (benchmarks may turn it off).
    pub trace_enabled: bool,
    /// At most this many trace events are kept; later ones are counted only.
    pub trace_events_max: usize,
    /// What a DCT does on a wrong DC key (a divergence knob, see
    /// `docs/dc-ooo.md`).
    pub dc_key_violation: DcKeyViolation,
    /// Reorder window of `MLX5DV_QP_CREATE_OOO_DP` QPs, in packets (0 and 1
    /// keep the order, at most 64): the packets of a multi-packet SEND or
    /// WRITE, and of a READ response, leave in a seeded random order within
    /// each run of this many packets.
    pub ooo_window: u32,
    /// What an XRC_TGT QP does with a `remote_srqn` naming no XRC SRQ of
    /// its domain (xrc.md §1.5, unconfirmed; see docs/xrc.md).
    pub xrc_unknown_srqn: crate::XrcUnknownSrqn,
    /// The connection manager's timing and limits (docs/rdma-cm.md).
    pub cm: crate::CmConfig,
    /// Memory-window behaviour the sources leave open (docs/divergence.md).
    pub mw: MwConfig,
    /// The errno of `mlx5dv_dci_stream_id_reset` on a stream that is not in
    /// error, or `None` to accept it. Unconfirmed in the sources read
    /// (docs/dc-ooo.md); rdma-core's test suite, which runs on ConnectX
    /// hardware, expects the reset of a good stream to fail. Default
    /// `Some(EINVAL)`.
    pub dci_reset_good_stream_errno: Option<i32>,
    /// What a CQ overrun does to the QP whose completion it loses (a
    /// divergence knob; default [`CqOverrunQp::Error`]).
    pub cq_overrun_qp: CqOverrunQp,
    /// The executor's shortcuts for the common case (default on): a post
    /// list's plain requests checked and transmitted in one pass, runs of
    /// in-order packets taken from the fabric without a turn of the event
    /// loop each, the common WRITE, READ response and atomic answer in one
    /// step, the fabric's clear route. Each does exactly what the general
    /// path does, event for event, so turning them off changes nothing but
    /// speed: the same calls give the same answers, memory and trace, byte
    /// for byte (tests run the benchmark workloads and the swarm both ways
    /// and compare). Off is for checking that claim, and for bisecting a
    /// suspected shortcut bug; it is not a behaviour switch.
    pub fast_paths: bool,
}

/// The memory-window choices no source settles (docs/divergence.md,
/// "Memory windows"); the defaults are the simulator's reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MwConfig {
    /// The errno of `ibv_dereg_mr` on an MR with windows bound to it (the
    /// man page only says it fails; rxe's kernel code returns `EINVAL`).
    /// Default `EBUSY`.
    pub dereg_bound_errno: i32,
    /// Whether a type 2 window is usable only through the QP that bound it
    /// (type 2B, what mlx5 reports) or through any QP of its PD (2A).
    /// Default `true` (2B).
    pub type2_qp_bound: bool,
    /// The completion status of a LOCAL_INV naming no window or MR it may
    /// invalidate (rxe: `LOC_QP_OP_ERR`; mlx5 unconfirmed). Default
    /// `LOC_QP_OP_ERR`.
    pub local_inv_error: verbs_api::WcStatus,
}

impl Default for MwConfig {
    fn default() -> Self {
        Self {
            dereg_bound_errno: verbs_api::errno::EBUSY,
            type2_qp_bound: true,
            local_inv_error: verbs_api::WcStatus::LocQpOpErr,
        }
    }
}

impl Default for SimConfig {
    /// Seed 0, two ConnectX-6-like devices, mlx5 errnos.
    fn default() -> Self {
        Self {
            seed: 0,
            devices: vec![DeviceProfile::connectx6(), DeviceProfile::connectx6()],
            errno_flavor: ErrnoFlavor::Mlx5,
            qpn_start: 0x100,
            cap_net_raw: false,
            mr_bytes_max: 16 << 30,
            strict_mr_ownership: false,
            chrome_trace: None,
            trace_enabled: true,
            trace_events_max: 1 << 20,
            dc_key_violation: DcKeyViolation::SilentDrop,
            ooo_window: 8,
            dci_reset_good_stream_errno: Some(verbs_api::errno::EINVAL),
            cq_overrun_qp: CqOverrunQp::Error,
            xrc_unknown_srqn: crate::XrcUnknownSrqn::InvalidRequest,
            cm: crate::CmConfig::default(),
            mw: MwConfig::default(),
            fast_paths: true,
        }
    }
}

impl SimConfig {
    /// The divergence knobs [`SimConfig::set_option`] takes by name (a
    /// script's `#! sim:` header), each with the values it accepts.
    pub const OPTIONS: &'static [(&'static str, &'static [&'static str])] = &[
        ("cq_overrun", &["error", "continue"]),
        ("dc_key_violation", &["silent_drop", "nak"]),
        ("errno_flavor", &["mlx5", "spec"]),
    ];

    /// Sets one divergence knob by name, as a script's `#! sim:` header
    /// names it (`cq_overrun=continue`): [`SimConfig::OPTIONS`] lists the
    /// names and values. An unknown name or value is an error naming what
    /// is known, and changes nothing.
    pub fn set_option(&mut self, name: &str, value: &str) -> Result<(), String> {
        let known = Self::OPTIONS
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::OPTIONS.iter().map(|(n, _)| *n).collect();
                format!(
                    "unknown simulator option `{name}` (known: {})",
                    names.join(" ")
                )
            })?;
        match (name, value) {
            ("cq_overrun", "error") => self.cq_overrun_qp = CqOverrunQp::Error,
            ("cq_overrun", "continue") => self.cq_overrun_qp = CqOverrunQp::Continue,
            ("dc_key_violation", "silent_drop") => {
                self.dc_key_violation = DcKeyViolation::SilentDrop;
            }
            ("dc_key_violation", "nak") => {
                self.dc_key_violation = DcKeyViolation::NakRemoteAccess;
            }
            ("errno_flavor", "mlx5") => self.errno_flavor = ErrnoFlavor::Mlx5,
            ("errno_flavor", "spec") => self.errno_flavor = ErrnoFlavor::Spec,
            _ => {
                return Err(format!(
                    "simulator option `{name}` takes one of {} (got `{value}`)",
                    known.1.join(" ")
                ))
            }
        }
        Ok(())
    }

    /// The environment variable [`SimConfig::from_env`] reads the seed from
    /// (the same one `verbsim run --seed` and the script runner honour).
    pub const SEED_ENV: &'static str = "VERBS_SIM_SEED";

    /// The default configuration with the seed from `VERBS_SIM_SEED` when
    /// it is set (decimal or `0x` hex), else 0: what a user's `#[test]`
    /// builds so that `VERBS_SIM_SEED=<n> cargo test` replays the run a
    /// failure reported. An unparsable value is refused with a panic that
    /// names it rather than silently running seed 0.
    pub fn from_env() -> Self {
        Self::with_seed(Self::seed_from_env().unwrap_or(0))
    }

    /// The seed `VERBS_SIM_SEED` gives, if it is set.
    ///
    /// # Panics
    /// When it is set to something that is not a 64-bit number.
    pub fn seed_from_env() -> Option<u64> {
        let raw = std::env::var(Self::SEED_ENV).ok()?;
        let t = raw.trim();
        let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => t.parse().ok(),
        };
        match parsed {
            Some(seed) => Some(seed),
            None => panic!(
                "{}={raw:?} is not a seed (a decimal or 0x-hex u64)",
                Self::SEED_ENV
            ),
        }
    }

    /// The default configuration with another seed.
    pub fn with_seed(seed: u64) -> Self {
        Self {
            seed,
            ..Self::default()
        }
    }

    /// `seed` and these devices, with the errno flavour their driver
    /// implies: [`ErrnoFlavor::Spec`] (rxe's errnos) when every device is
    /// an rxe profile, [`ErrnoFlavor::Mlx5`] otherwise. This is what the
    /// script runners use for `#! devices:`.
    pub fn for_profiles(seed: u64, devices: Vec<DeviceProfile>) -> Self {
        let all_rxe =
            !devices.is_empty() && devices.iter().all(|d| d.driver == crate::DriverModel::Rxe);
        Self {
            seed,
            errno_flavor: if all_rxe {
                ErrnoFlavor::Spec
            } else {
                ErrnoFlavor::Mlx5
            },
            devices,
            ..Self::default()
        }
    }

    /// The default configuration with these devices.
    pub fn with_devices(devices: Vec<DeviceProfile>) -> Self {
        Self {
            devices,
            ..Self::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_option_takes_every_listed_value_and_refuses_the_rest() {
        // Goal: every name and value OPTIONS lists is accepted and moves
        // its field; an unknown name or value is refused and changes
        // nothing.
        let mut c = SimConfig::default();
        c.set_option("cq_overrun", "continue").unwrap();
        assert_eq!(c.cq_overrun_qp, CqOverrunQp::Continue);
        c.set_option("cq_overrun", "error").unwrap();
        assert_eq!(c.cq_overrun_qp, CqOverrunQp::Error);
        c.set_option("dc_key_violation", "nak").unwrap();
        assert_eq!(c.dc_key_violation, DcKeyViolation::NakRemoteAccess);
        c.set_option("errno_flavor", "spec").unwrap();
        assert_eq!(c.errno_flavor, ErrnoFlavor::Spec);
        for (name, values) in SimConfig::OPTIONS {
            for v in *values {
                assert!(c.set_option(name, v).is_ok(), "{name}={v}");
            }
        }
        let before = format!("{c:?}");
        let e = c.set_option("cq_overrun", "ignore").unwrap_err();
        assert!(e.contains("error continue"), "{e}");
        let e = c.set_option("cq_overun", "error").unwrap_err();
        assert!(e.contains("unknown simulator option `cq_overun`"), "{e}");
        assert_eq!(format!("{c:?}"), before);
    }
}
