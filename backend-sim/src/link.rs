//! Choosing a device profile and a link speed by name, as `verbsim perf`
//! and `verbsim calibrate` take them on the command line
//! (`--device-profile cx6|cx7|rxe`, perftest's `-d mlx5_0`, `--link-speed
//! hdr100`). Both parse with [`core::str::FromStr`] so a command-line
//! parser (hand-written or clap's `value_parser`) needs one line each.
//!
//! A link speed changes what `ibv_query_port` reports (`active_width` and
//! `active_speed`, the encodings the mlx5 driver reports for that link,
//! Ethernet speeds included) and the rate the fabric serialises at; the
//! adapter model (PCIe, send engine) stays the profile's.

use core::fmt;
use core::str::FromStr;

use crate::profile::DeviceProfile;

/// A link speed: the port's width and lane speed, as `ibv_query_port`
/// encodes them (`active_width`: 1 = 1X, 2 = 4X, 16 = 2X; `active_speed`:
/// 1 SDR, 2 DDR, 4 QDR, 16 FDR, 32 EDR, 64 HDR, 128 NDR), or for
/// Soft-RoCE a netdev rate in Mb/s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkSpeed {
    /// `active_width` encoding.
    pub width: u8,
    /// `active_speed` encoding.
    pub speed: u32,
    /// The data rate in Mb/s after line coding.
    pub mbps: u64,
}

/// The named speeds: (names, width, speed, Mb/s). Rates follow
/// `PortConfig::ib_rate_mbps`; a RoCE port of the same rate reports the
/// same encodings (100 GbE as 4X EDR, 200 GbE as 4X HDR, 400 GbE as 4X
/// NDR, 25 GbE as 1X EDR, 50 GbE as 1X HDR).
const NAMED: &[(&[&str], u8, u32, u64)] = &[
    (&["ndr", "400", "400g", "ndr400"], 2, 128, 400_000),
    (&["ndr200", "hdr", "200", "200g"], 2, 64, 200_000),
    (&["hdr100", "edr", "100", "100g"], 2, 32, 100_000),
    (&["hdr50", "50", "50g"], 1, 64, 50_000),
    (&["fdr", "56", "56g"], 2, 16, 54_544),
    (&["edr25", "25", "25g"], 1, 32, 25_000),
    (&["qdr", "40", "40g"], 2, 4, 32_000),
    (&["10", "10g"], 1, 8, 10_000),
];

impl LinkSpeed {
    /// Every name [`FromStr`] accepts, for help texts and errors.
    pub const NAMES: &'static str =
        "ndr|400, hdr|ndr200|200, hdr100|edr|100, hdr50|50, fdr|56, edr25|25, qdr|40, 10";

    /// The data rate in Gb/s.
    pub fn gbps(&self) -> f64 {
        self.mbps as f64 / 1e3
    }
}

impl fmt::Display for LinkSpeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} Gb/s", self.mbps / 1_000)
    }
}

impl FromStr for LinkSpeed {
    type Err = String;

    /// A name (`hdr`, `hdr100`, `edr`, `ndr`, ...) or a rate in Gb/s
    /// (`100`, `200g`), case-insensitive. HDR100 and EDR are both
    /// 100 Gb/s (2X HDR and 4X EDR); the width and lane speed of the first
    /// name of each row are what `ibv_query_port` then reports.
    fn from_str(s: &str) -> Result<Self, String> {
        let key = s.trim().to_ascii_lowercase();
        let key = key.strip_suffix("gb/s").unwrap_or(&key).trim();
        for (names, width, speed, mbps) in NAMED {
            if names.contains(&key) {
                // HDR100 is 2X HDR, EDR is 4X EDR: same rate, different
                // encodings.
                let (width, speed) = match key {
                    "hdr100" => (16, 64),
                    "ndr200" => (16, 128),
                    _ => (*width, *speed),
                };
                return Ok(Self {
                    width,
                    speed,
                    mbps: *mbps,
                });
            }
        }
        Err(format!(
            "unknown link speed `{s}` (one of: {})",
            Self::NAMES
        ))
    }
}

/// A device profile chosen by name: a profile's short name (`cx6`, `cx7`,
/// `rxe`, as [`DeviceProfile::by_name`]) or a device name as perftest's
/// `-d` gives it (`mlx5_0`, `rxe0`; see [`ProfileChoice::from_device_name`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileChoice {
    /// The profile, with the link speed applied when one was given.
    pub profile: DeviceProfile,
}

impl ProfileChoice {
    /// The profile perftest's `-d NAME` stands for. The simulator's own
    /// device names (`sim_cx6_0`, `sim_cx7_1`, `sim_rxe_0`) name their
    /// profile; a hardware name is taken by its driver: `mlx5_N` is a
    /// ConnectX-6 (`cx6`, the profile nearest the mlx5 NICs of the
    /// published figures), `rxe*` / `rocep*rxe` Soft-RoCE. `None` for any
    /// other name.
    pub fn from_device_name(name: &str) -> Option<Self> {
        let n = name.trim().to_ascii_lowercase();
        let profile = if let Some(rest) = n.strip_prefix("sim_") {
            DeviceProfile::by_name(rest.split('_').next().unwrap_or(""))?
        } else if n.starts_with("mlx5") {
            DeviceProfile::connectx6()
        } else if n.starts_with("rxe") || n.ends_with("rxe") {
            DeviceProfile::rxe()
        } else {
            return None;
        };
        Some(Self { profile })
    }

    /// This profile with its ports at `speed`, or an error naming what the
    /// profile allows.
    ///
    /// * cx6 (ConnectX-6, InfiniBand): 200 Gb/s and below (HDR, HDR100 /
    ///   EDR, ...); not NDR.
    /// * cx7 (ConnectX-7, RoCE): up to 400 Gb/s.
    /// * rxe: the netdev's rate, up to 100 Gb/s; the port keeps reporting
    ///   1X SDR as rxe does, the fabric runs at `speed`.
    pub fn with_link_speed(mut self, speed: LinkSpeed) -> Result<Self, String> {
        let p = &mut self.profile;
        let max = match p.name.as_str() {
            "cx6" => 200_000,
            "cx7" => 400_000,
            _ => 100_000,
        };
        if speed.mbps > max {
            return Err(format!(
                "--link-speed {speed}: profile {} supports up to {} Gb/s",
                p.name,
                max / 1_000
            ));
        }
        if p.adapter.wire_mbps != 0 {
            // rxe: the port attributes do not follow the netdev.
            p.adapter.wire_mbps = speed.mbps;
        } else {
            p.port.active_width = speed.width;
            p.port.active_speed = speed.speed;
        }
        Ok(self)
    }

    /// The data rate of the profile's ports in Mb/s.
    pub fn link_mbps(&self) -> u64 {
        link_mbps(&self.profile)
    }
}

/// The set-up around the adapters: what lies between two NICs (switch
/// hops) and between a NIC and its program (a PCIe switch, the host CPU's
/// clock), as `verbsim perf` and `verbsim calibrate` take it on the
/// command line (`--switch-hops`, `--pcie-switch`, `--cpu-mhz`).
///
/// [`Setup::DEFAULT`] is the set-up of the fitted anchors (two adapters
/// back to back, each directly on its CPU's root port, the CPU at its
/// full clock) and changes nothing. Every other set-up is folded into the
/// profile's [`AdapterModel`](crate::AdapterModel) by [`Setup::apply`];
/// the constants it uses are cited on each (docs/calibration.md, "The
/// set-up").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setup {
    /// InfiniBand or Ethernet switches a packet crosses one way (0: back
    /// to back).
    pub switch_hops: u32,
    /// Latency of one hop in ns (port to port, cut-through).
    pub switch_ns: u64,
    /// Whether each NIC sits behind a PCIe switch (as in GPU servers)
    /// rather than on a CPU root port.
    pub pcie_switch: bool,
    /// The host CPU's clock in MHz while the test runs; 0 = the anchors'
    /// host (nothing added).
    pub cpu_mhz: u64,
}

impl Setup {
    /// Port-to-port latency of one switch hop, cut-through (it does not
    /// grow with the packet): 150 ns, the bound given for NVIDIA's
    /// Quantum-2 switch ASIC (port to port below 150 ns; router-switch.com,
    /// "NVIDIA Quantum-2 QM9700 vs Spectrum-4 SN5400"). An upper bound;
    /// the HDR and EDR switches' own figures were not found in the public
    /// record searched.
    pub const SWITCH_HOP_NS: u64 = 150;
    /// One crossing of a PCIe Gen4 switch, cut-through, x16 to x16:
    /// Broadcom PEX88000, 105 ns between two x16 ports (Linley Group,
    /// "Broadcom Ships PCIe Gen4 Switches", 2019-09-24). A posted write
    /// (doorbell, data and CQE writes) crosses it once, a read (WQE
    /// fetch, payload fetch, a READ responder's memory read) twice.
    pub const PCIE_SWITCH_NS: u64 = 105;
    /// CPU cycles one unbatched `ibv_post_send` costs perftest's loop (the
    /// call, the WQE, the doorbell's MMIO write and its share of polling):
    /// fitted to the anchor "F 64 B", 2.59 M msg/s of one QP on a host at
    /// 1500 MHz (386 ns = 579 cycles).
    pub const POST_CYCLES: u64 = 579;
    /// The clock the fitted anchors' hosts are taken to run at (their
    /// posting cost is inside `doorbell_ns`): a server CPU at its full
    /// clock, 3393 MHz as the host of anchor F reports its maximum.
    pub const REF_MHZ: u64 = 3393;
    /// The anchors' set-up: back to back, no PCIe switch, a CPU at full
    /// clock.
    pub const DEFAULT: Self = Self {
        switch_hops: 0,
        switch_ns: Self::SWITCH_HOP_NS,
        pcie_switch: false,
        cpu_mhz: 0,
    };
    /// Most switch hops `--switch-hops` takes (a large fat tree's longest
    /// path is 5 or 6).
    pub const MAX_HOPS: u32 = 16;

    /// Whether this is [`Self::DEFAULT`] (nothing added).
    pub fn is_default(&self) -> bool {
        self.switch_hops == 0 && !self.pcie_switch && self.cpu_mhz == 0
    }

    /// CPU time of one unbatched post at `mhz` in ns.
    pub fn post_ns_at(mhz: u64) -> u64 {
        (Self::POST_CYCLES * 1_000).div_ceil(mhz.max(1))
    }

    /// `adapter` with this set-up folded in:
    ///
    /// * each switch hop adds [`Self::SWITCH_HOP_NS`] (`switch_ns`) to
    ///   every packet's way (`wire_ns`);
    /// * a PCIe switch adds [`Self::PCIE_SWITCH_NS`] to the doorbell and
    ///   to the receiver's memory write (`rx_ns`), twice to the WQE fetch,
    ///   the payload fetch and a READ responder's memory read;
    /// * a CPU at `cpu_mhz` posts in [`Self::POST_CYCLES`] cycles: the
    ///   doorbell comes later by the difference from the anchors' host at
    ///   [`Self::REF_MHZ`], and one QP's `ibv_post_send` calls are at
    ///   least a post apart (`post_ns`, overlapping the adapter's own
    ///   work). Wire, DMA rates and the engine's times stay.
    ///
    /// Errors: a profile without an adapter model, a PCIe switch on a
    /// software device (no PCIe), a clock outside 500–6000 MHz.
    pub fn apply(&self, adapter: crate::AdapterModel) -> Result<crate::AdapterModel, String> {
        if self.is_default() {
            return Ok(adapter);
        }
        if adapter.is_none() {
            return Err("the set-up options need the adapter model (this profile has none)".into());
        }
        if self.switch_hops > Self::MAX_HOPS {
            return Err(format!(
                "--switch-hops {}: at most {}",
                self.switch_hops,
                Self::MAX_HOPS
            ));
        }
        let mut a = adapter;
        a.wire_ns += u64::from(self.switch_hops) * self.switch_ns;
        if self.pcie_switch {
            if a.wire_mbps != 0 {
                return Err(
                    "--pcie-switch: a software device (rxe) has no PCIe link to put a switch on"
                        .into(),
                );
            }
            let x = Self::PCIE_SWITCH_NS;
            a.doorbell_ns += x;
            a.rx_ns += x;
            a.wqe_fetch_ns += 2 * x;
            a.payload_fetch_ns += 2 * x;
            a.responder_read_ns += 2 * x;
        }
        if self.cpu_mhz != 0 {
            check_mhz(self.cpu_mhz)?;
            let post = Self::post_ns_at(self.cpu_mhz);
            let reference = Self::post_ns_at(Self::REF_MHZ);
            a.doorbell_ns = (a.doorbell_ns + post).saturating_sub(reference);
            a.post_ns = post;
        }
        Ok(a)
    }
}

impl Default for Setup {
    fn default() -> Self {
        Self::DEFAULT
    }
}

fn check_mhz(mhz: u64) -> Result<(), String> {
    if (500..=6_000).contains(&mhz) {
        Ok(())
    } else {
        Err(format!(
            "--cpu-mhz {mhz}: a CPU clock between 500 and 6000 MHz"
        ))
    }
}

/// `--cpu-mhz`: a clock in MHz (`1500`, `1500mhz`) or GHz (`1.5ghz`),
/// 500 to 6000 MHz.
pub fn parse_cpu_mhz(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let mhz = if let Some(g) = t.strip_suffix("ghz") {
        g.trim()
            .parse::<f64>()
            .ok()
            .filter(|g| g.is_finite() && *g > 0.0)
            .map(|g| (g * 1_000.0).round() as u64)
    } else {
        t.strip_suffix("mhz")
            .unwrap_or(&t)
            .trim()
            .parse::<u64>()
            .ok()
    };
    let mhz = mhz.ok_or_else(|| {
        format!("--cpu-mhz `{s}`: not a clock (give MHz, e.g. 1500, or GHz, e.g. 1.5GHz)")
    })?;
    check_mhz(mhz)?;
    Ok(mhz)
}

/// `--switch-hops`: 0 to [`Setup::MAX_HOPS`].
pub fn parse_switch_hops(s: &str) -> Result<u32, String> {
    let n = s
        .trim()
        .parse::<u32>()
        .map_err(|_| format!("--switch-hops `{s}`: not a number of hops"))?;
    if n > Setup::MAX_HOPS {
        return Err(format!("--switch-hops {n}: at most {}", Setup::MAX_HOPS));
    }
    Ok(n)
}

impl ProfileChoice {
    /// This profile in `setup` ([`Setup::apply`] on its adapter model).
    pub fn with_setup(mut self, setup: &Setup) -> Result<Self, String> {
        self.profile.adapter = setup.apply(self.profile.adapter)?;
        Ok(self)
    }
}

/// The data rate of `profile`'s ports in Mb/s: the adapter model's
/// override, else the port's width and speed (100 Gb/s when they encode
/// no known rate).
pub fn link_mbps(profile: &DeviceProfile) -> u64 {
    match profile.adapter.wire_mbps {
        0 => crate::fabric::PortConfig::ib_rate_mbps(
            profile.port.active_width,
            profile.port.active_speed,
        )
        .unwrap_or(100_000),
        r => r,
    }
}

impl FromStr for ProfileChoice {
    type Err = String;

    /// `cx6`, `cx7`, `rxe` (and the long forms `by_name` takes), or a
    /// device name as [`Self::from_device_name`] maps it.
    fn from_str(s: &str) -> Result<Self, String> {
        DeviceProfile::by_name(s)
            .map(|profile| Self { profile })
            .or_else(|| Self::from_device_name(s))
            .ok_or_else(|| {
                format!("unknown device profile `{s}` (cx6, cx7, rxe, or a device name such as mlx5_0 or rxe0)")
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use verbs_api::LinkLayer;

    #[test]
    fn link_speeds_parse_to_their_rates_and_encodings() {
        // Goal: every documented name gives its rate and the encodings
        // ibv_query_port reports; junk is refused with the list.
        let hdr: LinkSpeed = "HDR".parse().unwrap();
        assert_eq!((hdr.width, hdr.speed, hdr.mbps), (2, 64, 200_000));
        let hdr100: LinkSpeed = "hdr100".parse().unwrap();
        assert_eq!((hdr100.width, hdr100.speed, hdr100.mbps), (16, 64, 100_000));
        let edr: LinkSpeed = "edr".parse().unwrap();
        assert_eq!((edr.width, edr.speed, edr.mbps), (2, 32, 100_000));
        assert_eq!("100".parse::<LinkSpeed>().unwrap().mbps, 100_000);
        assert_eq!("400g".parse::<LinkSpeed>().unwrap().mbps, 400_000);
        assert_eq!("25 Gb/s".parse::<LinkSpeed>().unwrap().mbps, 25_000);
        for s in [
            "ndr", "hdr", "hdr100", "edr", "hdr50", "fdr", "edr25", "qdr", "10",
        ] {
            let l: LinkSpeed = s.parse().unwrap();
            // The encodings give back the rate.
            assert_eq!(
                crate::fabric::PortConfig::ib_rate_mbps(l.width, l.speed),
                Some(l.mbps),
                "{s}"
            );
        }
        let err = "xdr".parse::<LinkSpeed>().unwrap_err();
        assert!(
            err.contains("unknown link speed `xdr`") && err.contains("hdr100"),
            "{err}"
        );
    }

    #[test]
    fn the_default_setup_changes_nothing_and_each_term_acts_where_documented() {
        // Goal: the anchors' set-up leaves every constant as it is; a
        // switch hop adds exactly its latency to the way and nothing
        // else; a PCIe switch adds one crossing to posted writes and two
        // to reads; a slower CPU moves the doorbell and the post rate but
        // not the wire, the DMA or the engine's per-WQE time.
        let base = crate::AdapterModel::CONNECTX6;
        assert_eq!(Setup::DEFAULT.apply(base).unwrap(), base);

        let hops = Setup {
            switch_hops: 2,
            ..Setup::DEFAULT
        }
        .apply(base)
        .unwrap();
        assert_eq!(hops.wire_ns, base.wire_ns + 2 * Setup::SWITCH_HOP_NS);
        assert_eq!(
            crate::AdapterModel {
                wire_ns: base.wire_ns,
                ..hops
            },
            base
        );

        let x = Setup::PCIE_SWITCH_NS;
        let pcie = Setup {
            pcie_switch: true,
            ..Setup::DEFAULT
        }
        .apply(base)
        .unwrap();
        assert_eq!(pcie.doorbell_ns, base.doorbell_ns + x);
        assert_eq!(pcie.rx_ns, base.rx_ns + x);
        assert_eq!(pcie.wqe_fetch_ns, base.wqe_fetch_ns + 2 * x);
        assert_eq!(pcie.payload_fetch_ns, base.payload_fetch_ns + 2 * x);
        assert_eq!(pcie.responder_read_ns, base.responder_read_ns + 2 * x);
        assert_eq!((pcie.wire_ns, pcie.dma_mbps), (base.wire_ns, base.dma_mbps));

        let slow = Setup {
            cpu_mhz: 1_500,
            ..Setup::DEFAULT
        }
        .apply(base)
        .unwrap();
        // 579 cycles: 386 ns at 1.5 GHz against 171 at 3393 MHz.
        assert_eq!(Setup::post_ns_at(1_500), 386);
        assert_eq!(Setup::post_ns_at(Setup::REF_MHZ), 171);
        assert_eq!(slow.doorbell_ns, base.doorbell_ns + 386 - 171);
        assert_eq!(slow.post_ns, 386);
        assert_eq!(
            crate::AdapterModel {
                doorbell_ns: base.doorbell_ns,
                post_ns: 0,
                ..slow
            },
            base,
            "wire, DMA and engine times stay"
        );
        // At the reference clock the posting delay is the anchors'.
        let full = Setup {
            cpu_mhz: Setup::REF_MHZ,
            ..Setup::DEFAULT
        }
        .apply(base)
        .unwrap();
        assert_eq!((full.doorbell_ns, full.post_ns), (base.doorbell_ns, 171));
    }

    #[test]
    fn setup_values_are_checked() {
        // Goal: bad set-up values are refused with what was wrong, and a
        // PCIe switch on a software device is refused.
        assert_eq!(parse_cpu_mhz("1500").unwrap(), 1_500);
        assert_eq!(parse_cpu_mhz("1.5GHz").unwrap(), 1_500);
        assert_eq!(parse_cpu_mhz("3393 MHz").unwrap(), 3_393);
        let e = parse_cpu_mhz("fast").unwrap_err();
        assert!(e.contains("not a clock"), "{e}");
        let e = parse_cpu_mhz("100").unwrap_err();
        assert!(e.contains("between 500 and 6000"), "{e}");
        assert_eq!(parse_switch_hops("3").unwrap(), 3);
        let e = parse_switch_hops("17").unwrap_err();
        assert!(e.contains("at most 16"), "{e}");
        assert!(parse_switch_hops("-1")
            .unwrap_err()
            .contains("not a number"));
        let rxe = "rxe".parse::<ProfileChoice>().unwrap();
        let e = rxe
            .clone()
            .with_setup(&Setup {
                pcie_switch: true,
                ..Setup::DEFAULT
            })
            .unwrap_err();
        assert!(e.contains("no PCIe link"), "{e}");
        // Hops work on rxe (a switched Ethernet).
        let r = rxe
            .with_setup(&Setup {
                switch_hops: 1,
                ..Setup::DEFAULT
            })
            .unwrap();
        assert_eq!(
            r.profile.adapter.wire_ns,
            crate::AdapterModel::RXE.wire_ns + Setup::SWITCH_HOP_NS
        );
        let none = Setup {
            switch_hops: 1,
            ..Setup::DEFAULT
        }
        .apply(crate::AdapterModel::NONE)
        .unwrap_err();
        assert!(none.contains("adapter model"), "{none}");
    }

    #[test]
    fn profiles_by_name_and_device_name_with_a_link_speed() {
        // Goal: --device-profile and -d pick the documented profile, a
        // link speed changes the port's rate within what the profile
        // allows and is refused past it.
        let cx7: ProfileChoice = "cx7".parse().unwrap();
        assert_eq!(cx7.profile.name, "cx7");
        assert_eq!(cx7.link_mbps(), 400_000);
        let mlx: ProfileChoice = "mlx5_0".parse().unwrap();
        assert_eq!(mlx.profile.name, "cx6");
        assert_eq!(
            "sim_cx7_1".parse::<ProfileChoice>().unwrap().profile.name,
            "cx7"
        );
        assert_eq!("rxe0".parse::<ProfileChoice>().unwrap().profile.name, "rxe");
        assert!("bnxt_re0"
            .parse::<ProfileChoice>()
            .unwrap_err()
            .contains("unknown device profile"));

        let edr = mlx.clone().with_link_speed("edr".parse().unwrap()).unwrap();
        assert_eq!(edr.link_mbps(), 100_000);
        assert_eq!(
            (edr.profile.port.active_width, edr.profile.port.active_speed),
            (2, 32)
        );
        let err = mlx.with_link_speed("ndr".parse().unwrap()).unwrap_err();
        assert!(err.contains("up to 200 Gb/s"), "{err}");
        let rxe25 = "rxe"
            .parse::<ProfileChoice>()
            .unwrap()
            .with_link_speed("25".parse().unwrap())
            .unwrap();
        assert_eq!(rxe25.link_mbps(), 25_000);
        // rxe keeps reporting 1X SDR, as the driver does.
        assert_eq!(rxe25.profile.port.active_width, 1);
        assert_eq!(rxe25.profile.port.link_layer, LinkLayer::Ethernet);
    }
}
