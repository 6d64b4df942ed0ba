//! The C boundary: panics become failure values, and errors are logged
//! only when `VERBSIM_SHIM_LOG` asks for it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

/// What a C function returns when its body panicked.
pub(crate) trait Failure {
    /// The value that tells C the call failed.
    fn failure() -> Self;
}

impl Failure for () {
    fn failure() -> Self {}
}
impl Failure for i32 {
    /// libibverbs' verbs return a positive errno (and leave it in `errno`).
    fn failure() -> Self {
        set_errno(libc::EIO);
        libc::EIO
    }
}
impl Failure for bool {
    fn failure() -> Self {
        false
    }
}
impl Failure for u64 {
    fn failure() -> Self {
        0
    }
}
impl Failure for u16 {
    fn failure() -> Self {
        0
    }
}
impl Failure for i64 {
    fn failure() -> Self {
        set_errno(libc::EIO);
        -1
    }
}
impl Failure for u32 {
    fn failure() -> Self {
        0
    }
}
impl Failure for isize {
    fn failure() -> Self {
        -1
    }
}
impl<T> Failure for *mut T {
    fn failure() -> Self {
        set_errno(libc::EIO);
        core::ptr::null_mut()
    }
}
impl<T> Failure for *const T {
    fn failure() -> Self {
        set_errno(libc::EIO);
        core::ptr::null()
    }
}

/// Runs `f`; a panic is logged (always: it is a bug of verbsim's) and
/// becomes `R::failure()`.
pub(crate) fn catch<R: Failure>(verb: &str, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            eprintln!("verbsim shim: {verb}: internal error (please report): {what}");
            R::failure()
        }
    }
}

/// Sets the calling thread's `errno`.
pub(crate) fn set_errno(e: i32) {
    // SAFETY: __errno_location returns a valid pointer to this thread's
    // errno for the thread's whole life (glibc contract).
    unsafe { *libc::__errno_location() = e };
}

/// Whether `VERBSIM_SHIM_LOG` is set (to anything but `0`).
pub(crate) fn logging() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("VERBSIM_SHIM_LOG").is_some_and(|v| v != "0"))
}

/// Logs a failed verb when `VERBSIM_SHIM_LOG` is set: its name, errno and why.
pub(crate) fn log_err(verb: &str, errno: i32, why: &dyn core::fmt::Display) {
    if logging() {
        eprintln!(
            "verbsim shim: {verb}: errno {errno} ({}): {why}",
            errno_name(errno)
        );
    }
}

/// Logs a completion polled in error when `VERBSIM_SHIM_LOG` is set: its
/// request, status and, for a refused remote access, which check refused
/// it (a bad rkey, an access past the region's end, a missing access flag:
/// hardware reports all of them as the same status).
pub(crate) fn log_wc_error(
    verb: &str,
    wc: &verbs_api::Wc,
    cause: Option<backend_sim::datapath::protection::AccessCause>,
) {
    if logging() && wc.status != verbs_api::WcStatus::Success {
        match cause {
            Some(c) => eprintln!(
                "verbsim shim: {verb}: qp {:#x} wr_id {} completed with {}: {c}",
                wc.qp_num, wc.wr_id, wc.status
            ),
            None => eprintln!(
                "verbsim shim: {verb}: qp {:#x} wr_id {} completed with {}",
                wc.qp_num, wc.wr_id, wc.status
            ),
        }
    }
}

/// The symbolic name of common errnos, for the log.
pub(crate) fn errno_name(e: i32) -> &'static str {
    match e {
        libc::EINVAL => "EINVAL",
        libc::ENOMEM => "ENOMEM",
        libc::EBUSY => "EBUSY",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENOSYS => "ENOSYS",
        libc::EAGAIN => "EAGAIN",
        libc::ENOENT => "ENOENT",
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::EIO => "EIO",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        libc::ETIMEDOUT => "ETIMEDOUT",
        _ => "errno",
    }
}
