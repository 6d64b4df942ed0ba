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
