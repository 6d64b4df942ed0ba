//! Turning C failures into [`verbs_api::Error`]s.

use verbs_api::errno::{self, ENODEV, ENOSYS};
use verbs_api::{Error, ErrorKind, Verb};

/// The error of a verb that failed with `errno`, with a message saying
/// which C call failed and, for the common errnos, what it usually means.
pub(crate) fn c_error(verb: Verb, errno: i32, what: &str) -> Error {
    let name = errno::name(errno).unwrap_or("E?");
    let hint = match errno {
        errno::EINVAL => ": the driver or the kernel rejected an argument",
        errno::ENOMEM => ": out of memory or of device resources",
        errno::EOPNOTSUPP => ": the device or provider does not support it",
        errno::EBUSY => ": the object is still in use",
        errno::EPERM | errno::EACCES => ": not permitted (memlock limit or missing capability?)",
        _ => "",
    };
    Error::from_errno(verb, errno, format!("{what} failed: {name}{hint}"))
}

/// The error for an `ibv_get_device_list` that failed (`errno`) or found no
/// device (`errno == 0`): always [`ErrorKind::NoDevice`], keeping the raw
/// errno, with a message naming the cause.
pub(crate) fn no_device_error(errno: i32) -> Error {
    let message = match errno {
        0 => "ibv_get_device_list found no RDMA device on this machine (is a driver such as mlx5_ib loaded?)"
            .to_string(),
        ENOSYS => "ibv_get_device_list failed: ENOSYS: the kernel has no RDMA subsystem (no ib_uverbs); \
                   no RDMA device on this machine"
            .to_string(),
        ENODEV => "ibv_get_device_list failed: ENODEV: no RDMA device on this machine".to_string(),
        errno::EPERM | errno::EACCES => format!(
            "ibv_get_device_list failed: {}: no permission to open /dev/infiniband/uverbs*",
            errno::name(errno).unwrap_or("E?")
        ),
        e => format!("ibv_get_device_list failed: {} (errno {e})", errno::name(e).unwrap_or("E?")),
    };
    let e = Error::new(Verb::GetDeviceList, ErrorKind::NoDevice, message);
    if errno == 0 {
        e
    } else {
        e.with_errno(errno)
    }
}

/// The error for using a handle whose object was already destroyed.
pub(crate) fn stale(verb: Verb, what: &str) -> Error {
    Error::invalid(
        verb,
        format!("the {what} handle refers to an object that was already destroyed"),
    )
}

/// The error for a handle from another `HwVerbs` instance.
pub(crate) fn foreign(verb: Verb, what: &str) -> Error {
    Error::invalid(
        verb,
        format!("the {what} handle belongs to another HwVerbs instance"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enosys_names_the_missing_subsystem() {
        let e = no_device_error(ENOSYS);
        assert_eq!(e.kind(), ErrorKind::NoDevice);
        assert_eq!(e.errno(), ENOSYS);
        assert_eq!(e.verb(), Verb::GetDeviceList);
        assert!(e.message().contains("no RDMA subsystem"), "{e}");
        assert!(
            e.to_string()
                .starts_with("ibv_get_device_list failed: ENOSYS"),
            "{e}"
        );
    }

    #[test]
    fn empty_list_is_no_device() {
        let e = no_device_error(0);
        assert_eq!(e.kind(), ErrorKind::NoDevice);
        assert!(e.message().contains("found no RDMA device"));
    }

    #[test]
    fn errno_mapping_keeps_the_raw_errno_and_classifies_it() {
        for (errno, kind) in [
            (errno::EINVAL, ErrorKind::InvalidArgument),
            (errno::ENOMEM, ErrorKind::OutOfResources),
            (errno::EOPNOTSUPP, ErrorKind::Unsupported),
            (errno::EBUSY, ErrorKind::Busy),
            (errno::EPERM, ErrorKind::PermissionDenied),
            (errno::ENOENT, ErrorKind::NotFound),
            (1234, ErrorKind::Other(1234)),
        ] {
            let e = c_error(Verb::CreateQp, errno, "ibv_create_qp");
            assert_eq!(e.kind(), kind, "errno {errno}");
            assert_eq!(e.errno(), errno);
            assert!(e.message().starts_with("ibv_create_qp failed"), "{e}");
        }
    }
}
