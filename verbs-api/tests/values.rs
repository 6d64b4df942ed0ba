//! Value-type tests: C names and numbers round-trip, flags parse and print,
//! errno classification is total and stable, errors say what failed.

use proptest::prelude::*;
use verbs_api::*;

// Goal: every known enum value survives name and raw round trips.
// Method: iterate VALUES of each C enum and convert both ways.
#[test]
fn enums_round_trip_through_name_and_raw() {
    fn check<T: Copy + PartialEq + core::fmt::Debug>(
        values: &[T],
        name: impl Fn(T) -> &'static str,
        from_name: impl Fn(&str) -> Option<T>,
        raw: impl Fn(T) -> u32,
        from_raw: impl Fn(u32) -> T,
    ) {
        for &v in values {
            assert_eq!(from_name(name(v)), Some(v), "{v:?} by name");
            assert_eq!(from_raw(raw(v)), v, "{v:?} by raw");
        }
    }
    check(
        QpState::VALUES,
        QpState::name,
        QpState::from_name,
        QpState::to_raw,
        QpState::from_raw,
    );
    check(
        QpType::VALUES,
        QpType::name,
        QpType::from_name,
        QpType::to_raw,
        QpType::from_raw,
    );
    check(
        WcStatus::VALUES,
        WcStatus::name,
        WcStatus::from_name,
        WcStatus::to_raw,
        WcStatus::from_raw,
    );
    check(
        WcOpcode::VALUES,
        WcOpcode::name,
        WcOpcode::from_name,
        WcOpcode::to_raw,
        WcOpcode::from_raw,
    );
    check(
        WrOpcode::VALUES,
        WrOpcode::name,
        WrOpcode::from_name,
        WrOpcode::to_raw,
        WrOpcode::from_raw,
    );
    check(
        Mtu::VALUES,
        Mtu::name,
        Mtu::from_name,
        Mtu::to_raw,
        Mtu::from_raw,
    );
    check(
        AsyncEventType::VALUES,
        AsyncEventType::name,
        AsyncEventType::from_name,
        AsyncEventType::to_raw,
        AsyncEventType::from_raw,
    );
    check(
        CmEventType::VALUES,
        CmEventType::name,
        CmEventType::from_name,
        CmEventType::to_raw,
        CmEventType::from_raw,
    );
}

// Goal: the numeric values are the C header's (a wrong number breaks the
// hardware backend's conversions silently). Method: spot-check against
// libibverbs/verbs.h values restated in spec/.
#[test]
fn enum_values_match_the_c_headers() {
    assert_eq!(QpType::Rc.to_raw(), 2);
    assert_eq!(QpType::XrcSend.to_raw(), 9);
    assert_eq!(QpType::XrcRecv.to_raw(), 10);
    assert_eq!(QpType::Driver.to_raw(), 0xff);
    assert_eq!(QpState::Error.to_raw(), 6);
    assert_eq!(WcStatus::WrFlushErr.to_raw(), 5);
    assert_eq!(WcStatus::RnrRetryExcErr.to_raw(), 13);
    assert_eq!(WcOpcode::RecvRdmaWithImm.to_raw(), 129);
    assert_eq!(QpAttrMask::DEST_QPN.bits(), 1 << 20);
    assert_eq!(QpAttrMask::RATE_LIMIT.bits(), 1 << 25);
    assert_eq!(AccessFlags::RELAXED_ORDERING.bits(), 1 << 20);
    assert_eq!(Mlx5QpCreateFlags::OOO_DP.bits(), 1 << 7);
    assert_eq!(PortSpace::Tcp.to_raw(), 0x106);
}

// Goal: an unknown raw value is kept as data, never a panic.
// Method: convert values outside each table.
#[test]
fn unknown_values_are_data() {
    assert_eq!(QpState::from_raw(99), QpState::Unknown(99));
    assert_eq!(WcStatus::from_raw(1000).to_string(), "UNKNOWN(1000)");
    assert_eq!(QpState::from_name("NOT_A_STATE"), None);
}

// Goal: names parse with or without the C prefix, in any case.
// Method: parse a few spellings.
#[test]
fn names_parse_with_or_without_prefix() {
    assert_eq!(
        QpState::from_name("IBV_QPS_RTS"),
        Some(QpState::ReadyToSend)
    );
    assert_eq!(QpState::from_name("rts"), Some(QpState::ReadyToSend));
    assert_eq!(
        AccessFlags::from_names("IBV_ACCESS_LOCAL_WRITE|remote_read"),
        Some(AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ)
    );
    assert_eq!(AccessFlags::from_names("LOCAL_WRITE|NOPE"), None);
    assert_eq!(
        QpAttrMask::from_names("0x3"),
        Some(QpAttrMask::STATE | QpAttrMask::CUR_STATE)
    );
    assert_eq!(QpType::from_name_loose("XRC_TGT"), Some(QpType::XrcRecv));
}

proptest! {
    // Goal: any bit pattern prints and parses back to itself.
    // Method: random u32 masks through names()/from_names().
    #[test]
    fn qp_attr_mask_names_round_trip(bits in any::<u32>()) {
        let m = QpAttrMask(bits);
        prop_assert_eq!(QpAttrMask::from_names(&m.names()), Some(m));
    }

    // Goal: send flags and access flags round-trip too (different widths).
    #[test]
    fn access_and_send_flags_round_trip(a in any::<u32>(), s in any::<u32>()) {
        prop_assert_eq!(AccessFlags::from_names(&AccessFlags(a).names()), Some(AccessFlags(a)));
        prop_assert_eq!(SendFlags::from_names(&SendFlags(s).names()), Some(SendFlags(s)));
    }

    // Goal: errno classification is consistent: a kind's canonical errno
    // classifies back to the same kind.
    #[test]
    fn errno_kind_round_trip(e in 0i32..200) {
        let k = ErrorKind::from_errno(e);
        prop_assert_eq!(ErrorKind::from_errno(k.errno()), k);
    }
}

// Goal: errno names convert both ways for every name the scripts use.
#[test]
fn errno_names() {
    for name in [
        "EINVAL",
        "ENOMEM",
        "EBUSY",
        "EOPNOTSUPP",
        "EEXIST",
        "EAGAIN",
        "ENOENT",
        "EPERM",
        "ENOSYS",
    ] {
        let v = errno::from_name(name).unwrap();
        assert_eq!(errno::name(v), Some(name));
    }
    assert_eq!(ErrorKind::from_errno(errno::ENOSYS), ErrorKind::Unsupported);
    assert_eq!(
        ErrorKind::from_errno(errno::EACCES),
        ErrorKind::PermissionDenied
    );
}

// Goal: an error names the C verb, the errno and what was wrong, and the
// diagnosed EINVAL kinds match plain EINVAL expectations.
#[test]
fn error_display_names_verb_errno_and_cause() {
    let e = Error::new(
        Verb::ModifyQp,
        ErrorKind::InvalidAttrMask {
            missing: QpAttrMask::TIMEOUT,
            extra: QpAttrMask::empty(),
        },
        "RTR->RTS for RC",
    );
    let s = e.to_string();
    assert!(
        s.starts_with("ibv_modify_qp failed: EINVAL (errno 22)"),
        "{s}"
    );
    assert!(s.contains("missing: TIMEOUT"), "{s}");
    assert!(s.contains("RTR->RTS for RC"), "{s}");
    assert!(e.kind().same_class(ErrorKind::InvalidArgument));
    assert!(!e.kind().same_class(ErrorKind::Busy));

    let p = Error::from_errno(Verb::PostSend, errno::ENOMEM, "send queue full").with_bad_wr(3);
    assert_eq!(p.bad_wr(), Some(3));
    assert!(p.to_string().contains("bad_wr = work request #3"));
    assert_eq!(p.kind(), ErrorKind::OutOfResources);
}

// Goal: "not implemented" is distinguishable from a device's EOPNOTSUPP.
#[test]
fn not_implemented_is_distinguishable() {
    let n = Error::not_implemented(Verb::OpenXrcd, "sim");
    assert!(n.is_not_implemented());
    assert_eq!(n.kind(), ErrorKind::Unsupported);
    let d = Error::from_errno(Verb::OpenXrcd, errno::EOPNOTSUPP, "device lacks XRC");
    assert!(!d.is_not_implemented());
    assert!(n.to_string().contains("ibv_open_xrcd"));
}

// Goal: GIDs print as 8 groups and split into prefix/interface id.
#[test]
fn gid_parts() {
    let g = Gid::from_parts(0xfe80_0000_0000_0000, 0x0002_c903_0000_0001);
    assert_eq!(g.subnet_prefix(), 0xfe80_0000_0000_0000);
    assert_eq!(g.interface_id(), 0x0002_c903_0000_0001);
    assert_eq!(g.to_string(), "fe80:0000:0000:0000:0002:c903:0000:0001");
    let v4 = Gid::from_ipv4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    assert_eq!(&v4.0[10..], &[0xff, 0xff, 10, 0, 0, 1]);
}
