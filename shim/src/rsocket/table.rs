//! The live rsockets, by descriptor number.

use core::ffi::c_int;

/// Whether `fd` names a live rsocket.
pub(crate) fn is_rsocket(_fd: c_int) -> bool {
    false
}

/// An rsocket's readiness for `events`, or `None` if `fd` is not one.
pub(crate) fn revents(_fd: c_int, _events: i16) -> Option<i16> {
    None
}
