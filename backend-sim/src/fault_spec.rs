//! The fault specification of `verbsim exec --faults` and of the drop-in
//! library's `VERBSIM_FAULTS`: comma-separated rules, each a fault and its
//! rate in packets per million.
//!
//! ```text
//! drop=PPM,dup=PPM,reorder=PPM,delay=PPM:NS
//! ```
//!
//! One parser for both, so the command refuses (exit 2) exactly what the
//! library would have to ignore.

use verbs_api::FaultAction;

/// Reads `drop=PPM,dup=PPM,reorder=PPM,delay=PPM:NS` (empty items are
/// skipped): each rule's action and rate in packets per million.
///
/// # Errors
/// The first item that is not one of those forms, or whose rate is above
/// 1 000 000, with what was wrong.
///
/// ```
/// use backend_sim::fault_spec::parse_fault_spec;
/// use verbs_api::FaultAction;
/// assert_eq!(
///     parse_fault_spec("drop=1000,delay=50:2000").unwrap(),
///     vec![(FaultAction::Drop, 1000), (FaultAction::DelayNs(2000), 50)]
/// );
/// assert!(parse_fault_spec("bogus").is_err());
/// ```
pub fn parse_fault_spec(spec: &str) -> Result<Vec<(FaultAction, u32)>, String> {
    let mut out = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        out.push(parse_item(item).map_err(|why| {
            format!("cannot read `{item}`: {why} (drop=PPM, dup=PPM, reorder=PPM, delay=PPM:NS)")
        })?);
    }
    Ok(out)
}

/// One `name=PPM[:NS]`.
fn parse_item(item: &str) -> Result<(FaultAction, u32), String> {
    let (name, value) = item.split_once('=').ok_or_else(|| "no `=`".to_owned())?;
    let (ppm, arg) = match value.split_once(':') {
        Some((p, a)) => (p, Some(a)),
        None => (value, None),
    };
    let ppm: u32 = ppm
        .trim()
        .parse()
        .map_err(|_| format!("`{ppm}` is not a rate in packets per million"))?;
    if ppm > 1_000_000 {
        return Err(format!("the rate {ppm} is above 1000000 per million"));
    }
    let action = match (name.trim(), arg) {
        ("drop", None) => FaultAction::Drop,
        ("dup", None) => FaultAction::Duplicate,
        ("reorder", None) => FaultAction::Reorder(1),
        ("delay", Some(ns)) => FaultAction::DelayNs(
            ns.trim()
                .parse()
                .map_err(|_| format!("`{ns}` is not a delay in nanoseconds"))?,
        ),
        ("delay", None) => return Err("delay needs PPM:NS".to_owned()),
        ("drop" | "dup" | "reorder", Some(_)) => return Err(format!("{name} takes a rate only")),
        (other, _) => return Err(format!("unknown fault `{other}`")),
    };
    Ok((action, ppm))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: every documented form reads, every malformed item is an error
    // naming it. Method: table.
    #[test]
    fn fault_specs_parse_and_reject() {
        assert_eq!(
            parse_fault_spec(" drop=1000, dup=5,reorder=7,delay=50:2000,").unwrap(),
            vec![
                (FaultAction::Drop, 1000),
                (FaultAction::Duplicate, 5),
                (FaultAction::Reorder(1), 7),
                (FaultAction::DelayNs(2000), 50)
            ]
        );
        assert_eq!(parse_fault_spec("").unwrap(), vec![]);
        for bad in [
            "bogus",
            "drop",
            "drop=x",
            "drop=2000000",
            "delay=5",
            "delay=5:x",
            "drop=5:3",
            "flip=5",
        ] {
            let e = parse_fault_spec(bad).unwrap_err();
            assert!(e.contains(bad.split(',').next().unwrap()), "{bad}: {e}");
        }
    }
}
