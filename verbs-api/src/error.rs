//! One error type for every verb: which verb failed, an errno-level kind, the
//! raw errno, a message saying what was wrong, and (for posts) the index of
//! the first work request that was not posted.
//!
//! Backends agree on [`ErrorKind`]s; the conformance suite compares kinds, so
//! a test written against the simulator means the same thing on hardware.

use core::fmt;
use std::sync::OnceLock;

use crate::transitions::ModifyRefusal;

/// Linux errno values used by the verbs API (x86-64 / generic numbering).
///
/// verbs-api depends on no C library, so the numbers the API needs are
/// spelled out here; `name`/`from_name` convert for the script format.
pub mod errno {
    /// Operation not permitted.
    pub const EPERM: i32 = 1;
    /// No such file or directory (also: no such object).
    pub const ENOENT: i32 = 2;
    /// Interrupted system call.
    pub const EINTR: i32 = 4;
    /// I/O error.
    pub const EIO: i32 = 5;
    /// No such device or address.
    pub const ENXIO: i32 = 6;
    /// Bad file descriptor.
    pub const EBADF: i32 = 9;
    /// Try again / would block.
    pub const EAGAIN: i32 = 11;
    /// Out of memory (also: a queue is full at post time).
    pub const ENOMEM: i32 = 12;
    /// Permission denied.
    pub const EACCES: i32 = 13;
    /// Bad address.
    pub const EFAULT: i32 = 14;
    /// Device or resource busy.
    pub const EBUSY: i32 = 16;
    /// File exists.
    pub const EEXIST: i32 = 17;
    /// No such device.
    pub const ENODEV: i32 = 19;
    /// Invalid argument.
    pub const EINVAL: i32 = 22;
    /// Too many open files / objects.
    pub const EMFILE: i32 = 24;
    /// Out of range.
    pub const ERANGE: i32 = 34;
    /// Function not implemented.
    pub const ENOSYS: i32 = 38;
    /// No data available.
    pub const ENODATA: i32 = 61;
    /// Protocol error.
    pub const EPROTO: i32 = 71;
    /// Message too long.
    pub const EMSGSIZE: i32 = 90;
    /// Protocol not supported.
    pub const EPROTONOSUPPORT: i32 = 93;
    /// Operation not supported.
    pub const EOPNOTSUPP: i32 = 95;
    /// Address family not supported.
    pub const EAFNOSUPPORT: i32 = 97;
    /// Address already in use.
    pub const EADDRINUSE: i32 = 98;
    /// Cannot assign requested address.
    pub const EADDRNOTAVAIL: i32 = 99;
    /// Network is unreachable.
    pub const ENETUNREACH: i32 = 101;
    /// Connection reset by peer.
    pub const ECONNRESET: i32 = 104;
    /// Transport endpoint is already connected.
    pub const EISCONN: i32 = 106;
    /// Transport endpoint is not connected.
    pub const ENOTCONN: i32 = 107;
    /// Connection timed out.
    pub const ETIMEDOUT: i32 = 110;
    /// Connection refused.
    pub const ECONNREFUSED: i32 = 111;
    /// No route to host.
    pub const EHOSTUNREACH: i32 = 113;
    /// Operation already in progress.
    pub const EALREADY: i32 = 114;
    /// Operation now in progress.
    pub const EINPROGRESS: i32 = 115;

    const NAMES: &[(&str, i32)] = &[
        ("EPERM", EPERM),
        ("ENOENT", ENOENT),
        ("EINTR", EINTR),
        ("EIO", EIO),
        ("ENXIO", ENXIO),
        ("EBADF", EBADF),
        ("EAGAIN", EAGAIN),
        ("ENOMEM", ENOMEM),
        ("EACCES", EACCES),
        ("EFAULT", EFAULT),
        ("EBUSY", EBUSY),
        ("EEXIST", EEXIST),
        ("ENODEV", ENODEV),
        ("EINVAL", EINVAL),
        ("EMFILE", EMFILE),
        ("ERANGE", ERANGE),
        ("ENOSYS", ENOSYS),
        ("ENODATA", ENODATA),
        ("EPROTO", EPROTO),
        ("EMSGSIZE", EMSGSIZE),
        ("EPROTONOSUPPORT", EPROTONOSUPPORT),
        ("EOPNOTSUPP", EOPNOTSUPP),
        ("EAFNOSUPPORT", EAFNOSUPPORT),
        ("EADDRINUSE", EADDRINUSE),
        ("EADDRNOTAVAIL", EADDRNOTAVAIL),
        ("ENETUNREACH", ENETUNREACH),
        ("ECONNRESET", ECONNRESET),
        ("EISCONN", EISCONN),
        ("ENOTCONN", ENOTCONN),
        ("ETIMEDOUT", ETIMEDOUT),
        ("ECONNREFUSED", ECONNREFUSED),
        ("EHOSTUNREACH", EHOSTUNREACH),
        ("EALREADY", EALREADY),
        ("EINPROGRESS", EINPROGRESS),
    ];

    /// The symbolic name of an errno value (`"EINVAL"`), if known.
    pub fn name(errno: i32) -> Option<&'static str> {
        NAMES.iter().find(|(_, v)| *v == errno).map(|(n, _)| *n)
    }

    /// The errno value of a symbolic name (`"EINVAL"` or `"einval"`).
    pub fn from_name(name: &str) -> Option<i32> {
        NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.trim()))
            .map(|(_, v)| *v)
    }
}

/// What class of failure a verb reported: an errno-level classification
/// shared by every backend.
///
/// Several errnos may map to one kind (`EOPNOTSUPP` and `ENOSYS` are both
/// [`ErrorKind::Unsupported`]); [`ErrorKind::errno`] gives the canonical one.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum ErrorKind {
    /// `EINVAL`: an argument, attribute or combination is invalid.
    InvalidArgument,
    /// `EINVAL` from `ibv_modify_qp`: the transition is not in the table.
    InvalidTransition {
        /// The QP's current state.
        from: crate::QpState,
        /// The requested state.
        to: crate::QpState,
    },
    /// `EINVAL` from `ibv_modify_qp`: the attribute mask is wrong for the transition.
    InvalidAttrMask {
        /// Required bits that were not given.
        missing: crate::QpAttrMask,
        /// Given bits that are neither required nor optional.
        extra: crate::QpAttrMask,
    },
    /// `ENOMEM`: out of resources (also: a work queue is full at post time).
    OutOfResources,
    /// `EOPNOTSUPP` / `ENOSYS`: the device or the backend does not support it.
    Unsupported,
    /// `EPERM` / `EACCES`.
    PermissionDenied,
    /// `EBUSY`: the object is still in use.
    Busy,
    /// `ENOENT`: no such object.
    NotFound,
    /// `ENODEV` / `ENXIO`: no such device (or no RDMA subsystem at all).
    NoDevice,
    /// `EEXIST`.
    AlreadyExists,
    /// `EAGAIN`: nothing available now, or try again.
    WouldBlock,
    /// `EBADF`: not an open file descriptor.
    BadFileDescriptor,
    /// `ETIMEDOUT`.
    TimedOut,
    /// `ECONNREFUSED`.
    ConnectionRefused,
    /// `EHOSTUNREACH` / `ENETUNREACH`.
    Unreachable,
    /// `EADDRINUSE`.
    AddressInUse,
    /// `EADDRNOTAVAIL`.
    AddressNotAvailable,
    /// `EISCONN` / `EALREADY` / `EINPROGRESS`: the operation was already done or started.
    AlreadyInProgress,
    /// `ENOTCONN`.
    NotConnected,
    /// A caller contract the hardware does not check (undefined behaviour
    /// there) but the simulator detects, e.g. deregistering an MR that a
    /// posted work request still names. Canonical errno `EFAULT`.
    ApiMisuse,
    /// Any other errno.
    Other(i32),
}

impl ErrorKind {
    /// The canonical errno of this kind.
    pub fn errno(self) -> i32 {
        use errno::*;
        match self {
            Self::InvalidArgument
            | Self::InvalidTransition { .. }
            | Self::InvalidAttrMask { .. } => EINVAL,
            Self::OutOfResources => ENOMEM,
            Self::Unsupported => EOPNOTSUPP,
            Self::PermissionDenied => EPERM,
            Self::Busy => EBUSY,
            Self::NotFound => ENOENT,
            Self::NoDevice => ENODEV,
            Self::AlreadyExists => EEXIST,
            Self::WouldBlock => EAGAIN,
            Self::BadFileDescriptor => EBADF,
            Self::TimedOut => ETIMEDOUT,
            Self::ConnectionRefused => ECONNREFUSED,
            Self::Unreachable => EHOSTUNREACH,
            Self::AddressInUse => EADDRINUSE,
            Self::AddressNotAvailable => EADDRNOTAVAIL,
            Self::AlreadyInProgress => EALREADY,
            Self::NotConnected => ENOTCONN,
            Self::ApiMisuse => EFAULT,
            Self::Other(e) => e,
        }
    }

    /// Classifies a raw errno (promoting `EOPNOTSUPP`/`ENOSYS` to
    /// [`ErrorKind::Unsupported`], `EACCES` to `PermissionDenied`, …).
    pub fn from_errno(e: i32) -> Self {
        use errno::*;
        match e {
            EINVAL => Self::InvalidArgument,
            ENOMEM => Self::OutOfResources,
            EOPNOTSUPP | ENOSYS | EPROTONOSUPPORT | EAFNOSUPPORT => Self::Unsupported,
            EPERM | EACCES => Self::PermissionDenied,
            EBUSY => Self::Busy,
            ENOENT => Self::NotFound,
            ENODEV | ENXIO => Self::NoDevice,
            EEXIST => Self::AlreadyExists,
            EAGAIN => Self::WouldBlock,
            EBADF => Self::BadFileDescriptor,
            ETIMEDOUT => Self::TimedOut,
            ECONNREFUSED => Self::ConnectionRefused,
            EHOSTUNREACH | ENETUNREACH => Self::Unreachable,
            EADDRINUSE => Self::AddressInUse,
            EADDRNOTAVAIL => Self::AddressNotAvailable,
            EISCONN | EALREADY | EINPROGRESS => Self::AlreadyInProgress,
            ENOTCONN => Self::NotConnected,
            EFAULT => Self::ApiMisuse,
            other => Self::Other(other),
        }
    }

    /// `true` when two kinds mean the same errno class (diagnosed `EINVAL`
    /// kinds match plain [`ErrorKind::InvalidArgument`]).
    pub fn same_class(self, other: Self) -> bool {
        Self::from_errno(self.errno()) == Self::from_errno(other.errno())
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = self.errno();
        let name = errno::name(e).unwrap_or("E?");
        match self {
            Self::InvalidTransition { from, to } => {
                write!(f, "{name}: invalid transition {from} -> {to}")
            }
            Self::InvalidAttrMask { missing, extra } => {
                write!(
                    f,
                    "{name}: wrong attribute mask (missing: {missing}; extra: {extra})"
                )
            }
            Self::Other(e) => write!(f, "errno {e}"),
            _ => f.write_str(name),
        }
    }
}

/// Every verb of the API, named after its C function.
///
/// `Display` prints the C name (`ibv_modify_qp`), so an error message always
/// says which call failed.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // each variant is documented by its C name below
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Verb {
    GetDeviceList,
    OpenDevice,
    CloseDevice,
    QueryDevice,
    QueryDeviceEx,
    QueryPort,
    QueryGid,
    QueryPkey,
    AllocPd,
    DeallocPd,
    CreateCompChannel,
    DestroyCompChannel,
    CreateCq,
    DestroyCq,
    ReqNotifyCq,
    GetCqEvent,
    AckCqEvents,
    PollCq,
    RegMr,
    DeregMr,
    MrBytes,
    CreateSrq,
    CreateSrqEx,
    ModifySrq,
    QuerySrq,
    DestroySrq,
    GetSrqNum,
    PostSrqRecv,
    CreateQp,
    CreateQpEx,
    ModifyQp,
    QueryQp,
    DestroyQp,
    OpenQp,
    PostSend,
    PostRecv,
    CreateAh,
    DestroyAh,
    AttachMcast,
    DetachMcast,
    GetAsyncEvent,
    AckAsyncEvent,
    OpenXrcd,
    CloseXrcd,
    OpenXrcDomain,
    CloseXrcDomain,
    CreateXrcSrq,
    CreateXrcRcvQp,
    ModifyXrcRcvQp,
    QueryXrcRcvQp,
    RegXrcRcvQp,
    UnregXrcRcvQp,
    Mlx5dvQueryDevice,
    Mlx5dvCreateQp,
    Mlx5dvDciStreamIdReset,
    Mlx5dvReservedQpnAlloc,
    Mlx5dvReservedQpnDealloc,
    /// `mlx5dv_get_clock_info`.
    Mlx5dvGetClockInfo,
    /// `ibv_advise_mr`.
    AdviseMr,
    /// `ibv_query_rt_values_ex`.
    QueryRtValuesEx,
    RdmaCreateEventChannel,
    RdmaDestroyEventChannel,
    RdmaCreateId,
    RdmaDestroyId,
    RdmaBindAddr,
    RdmaResolveAddr,
    RdmaResolveRoute,
    RdmaListen,
    RdmaConnect,
    RdmaAccept,
    RdmaReject,
    RdmaDisconnect,
    RdmaGetCmEvent,
    RdmaAckCmEvent,
    RdmaCreateQp,
    RdmaCreateQpEx,
    RdmaDestroyQp,
    RdmaInitQpAttr,
    /// `rdma_set_option`.
    RdmaSetOption,
    RdmaGetLocalAddr,
    RdmaGetPeerAddr,
    RdmaEstablish,
    RdmaJoinMulticast,
    RdmaJoinMulticastEx,
    RdmaLeaveMulticast,
    /// `rdma_migrate_id`.
    RdmaMigrateId,
    /// `rdma_notify`.
    RdmaNotify,
    /// `rdma_reject_ece`.
    RdmaRejectEce,
    SimControl,
    ReregMr,
    ResizeCq,
    CreateCqEx,
    PollCqEx,
    PostWr,
    QueryQpDataInOrder,
    AllocMw,
    DeallocMw,
    BindMw,
    QueryGidEx,
    QueryGidTable,
    QueryEce,
    SetEce,
    /// `ibv_alloc_dm`.
    AllocDm,
    /// `ibv_free_dm`.
    FreeDm,
    /// `ibv_memcpy_to_dm`.
    MemcpyToDm,
    /// `ibv_memcpy_from_dm`.
    MemcpyFromDm,
    /// `ibv_reg_dm_mr`.
    RegDmMr,
    /// Reading `struct ibv_mw`'s `rkey` and `type` (no C function: the
    /// fields of a window `ibv_alloc_mw` returned).
    MwInfo,
}

impl Verb {
    /// The C function this verb mirrors (`"ibv_modify_qp"`).
    pub fn c_name(self) -> &'static str {
        match self {
            Self::GetDeviceList => "ibv_get_device_list",
            Self::OpenDevice => "ibv_open_device",
            Self::CloseDevice => "ibv_close_device",
            Self::QueryDevice => "ibv_query_device",
            Self::QueryDeviceEx => "ibv_query_device_ex",
            Self::QueryPort => "ibv_query_port",
            Self::QueryGid => "ibv_query_gid",
            Self::QueryPkey => "ibv_query_pkey",
            Self::AllocPd => "ibv_alloc_pd",
            Self::DeallocPd => "ibv_dealloc_pd",
            Self::CreateCompChannel => "ibv_create_comp_channel",
            Self::DestroyCompChannel => "ibv_destroy_comp_channel",
            Self::CreateCq => "ibv_create_cq",
            Self::DestroyCq => "ibv_destroy_cq",
            Self::ReqNotifyCq => "ibv_req_notify_cq",
            Self::GetCqEvent => "ibv_get_cq_event",
            Self::AckCqEvents => "ibv_ack_cq_events",
            Self::PollCq => "ibv_poll_cq",
            Self::RegMr => "ibv_reg_mr",
            Self::DeregMr => "ibv_dereg_mr",
            Self::MrBytes => "mr_bytes (MR buffer access)",
            Self::CreateSrq => "ibv_create_srq",
            Self::CreateSrqEx => "ibv_create_srq_ex",
            Self::ModifySrq => "ibv_modify_srq",
            Self::QuerySrq => "ibv_query_srq",
            Self::DestroySrq => "ibv_destroy_srq",
            Self::GetSrqNum => "ibv_get_srq_num",
            Self::PostSrqRecv => "ibv_post_srq_recv",
            Self::CreateQp => "ibv_create_qp",
            Self::CreateQpEx => "ibv_create_qp_ex",
            Self::ModifyQp => "ibv_modify_qp",
            Self::QueryQp => "ibv_query_qp",
            Self::DestroyQp => "ibv_destroy_qp",
            Self::OpenQp => "ibv_open_qp",
            Self::PostSend => "ibv_post_send",
            Self::PostRecv => "ibv_post_recv",
            Self::CreateAh => "ibv_create_ah",
            Self::DestroyAh => "ibv_destroy_ah",
            Self::AttachMcast => "ibv_attach_mcast",
            Self::DetachMcast => "ibv_detach_mcast",
            Self::GetAsyncEvent => "ibv_get_async_event",
            Self::AckAsyncEvent => "ibv_ack_async_event",
            Self::OpenXrcd => "ibv_open_xrcd",
            Self::CloseXrcd => "ibv_close_xrcd",
            Self::OpenXrcDomain => "ibv_open_xrc_domain",
            Self::CloseXrcDomain => "ibv_close_xrc_domain",
            Self::CreateXrcSrq => "ibv_create_xrc_srq",
            Self::CreateXrcRcvQp => "ibv_create_xrc_rcv_qp",
            Self::ModifyXrcRcvQp => "ibv_modify_xrc_rcv_qp",
            Self::QueryXrcRcvQp => "ibv_query_xrc_rcv_qp",
            Self::RegXrcRcvQp => "ibv_reg_xrc_rcv_qp",
            Self::UnregXrcRcvQp => "ibv_unreg_xrc_rcv_qp",
            Self::Mlx5dvQueryDevice => "mlx5dv_query_device",
            Self::Mlx5dvCreateQp => "mlx5dv_create_qp",
            Self::Mlx5dvDciStreamIdReset => "mlx5dv_dci_stream_id_reset",
            Self::Mlx5dvReservedQpnAlloc => "mlx5dv_reserved_qpn_alloc",
            Self::Mlx5dvReservedQpnDealloc => "mlx5dv_reserved_qpn_dealloc",
            Self::Mlx5dvGetClockInfo => "mlx5dv_get_clock_info",
            Self::AdviseMr => "ibv_advise_mr",
            Self::QueryRtValuesEx => "ibv_query_rt_values_ex",
            Self::RdmaCreateEventChannel => "rdma_create_event_channel",
            Self::RdmaDestroyEventChannel => "rdma_destroy_event_channel",
            Self::RdmaCreateId => "rdma_create_id",
            Self::RdmaDestroyId => "rdma_destroy_id",
            Self::RdmaBindAddr => "rdma_bind_addr",
            Self::RdmaResolveAddr => "rdma_resolve_addr",
            Self::RdmaResolveRoute => "rdma_resolve_route",
            Self::RdmaListen => "rdma_listen",
            Self::RdmaConnect => "rdma_connect",
            Self::RdmaAccept => "rdma_accept",
            Self::RdmaReject => "rdma_reject",
            Self::RdmaDisconnect => "rdma_disconnect",
            Self::RdmaGetCmEvent => "rdma_get_cm_event",
            Self::RdmaAckCmEvent => "rdma_ack_cm_event",
            Self::RdmaCreateQp => "rdma_create_qp",
            Self::RdmaCreateQpEx => "rdma_create_qp_ex",
            Self::RdmaDestroyQp => "rdma_destroy_qp",
            Self::RdmaInitQpAttr => "rdma_init_qp_attr",
            Self::RdmaSetOption => "rdma_set_option",
            Self::RdmaGetLocalAddr => "rdma_get_local_addr",
            Self::RdmaGetPeerAddr => "rdma_get_peer_addr",
            Self::RdmaEstablish => "rdma_establish",
            Self::RdmaJoinMulticast => "rdma_join_multicast",
            Self::RdmaJoinMulticastEx => "rdma_join_multicast_ex",
            Self::RdmaLeaveMulticast => "rdma_leave_multicast",
            Self::RdmaMigrateId => "rdma_migrate_id",
            Self::RdmaNotify => "rdma_notify",
            Self::RdmaRejectEce => "rdma_reject_ece",
            Self::SimControl => "sim_control (simulator only)",
            Self::ReregMr => "ibv_rereg_mr",
            Self::ResizeCq => "ibv_resize_cq",
            Self::CreateCqEx => "ibv_create_cq_ex",
            Self::PollCqEx => "ibv_start_poll",
            Self::PostWr => "ibv_wr_complete",
            Self::QueryQpDataInOrder => "ibv_query_qp_data_in_order",
            Self::AllocMw => "ibv_alloc_mw",
            Self::MwInfo => "ibv_mw (its rkey and type fields)",
            Self::DeallocMw => "ibv_dealloc_mw",
            Self::BindMw => "ibv_bind_mw",
            Self::QueryGidEx => "ibv_query_gid_ex",
            Self::QueryGidTable => "ibv_query_gid_table",
            Self::QueryEce => "ibv_query_ece",
            Self::SetEce => "ibv_set_ece",
            Self::AllocDm => "ibv_alloc_dm",
            Self::FreeDm => "ibv_free_dm",
            Self::MemcpyToDm => "ibv_memcpy_to_dm",
            Self::MemcpyFromDm => "ibv_memcpy_from_dm",
            Self::RegDmMr => "ibv_reg_dm_mr",
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.c_name())
    }
}

/// The error of every verb.
///
/// Carries the verb, the [`ErrorKind`], the raw errno the backend saw (the
/// simulator reports the errno the modelled driver would return), a message
/// saying what was wrong, and for `post_*` verbs the index of the first work
/// request that was not posted (`bad_wr`).
///
/// The message of a modify refused by the transition table
/// ([`Error::modify_refused`]) is kept as structured data and formatted only
/// when shown, so such an error is built without allocating.
#[derive(Clone)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(into = "ErrorWire", from = "ErrorWire")
)]
pub struct Error {
    verb: Verb,
    kind: ErrorKind,
    errno: i32,
    message: Message,
    bad_wr: Option<usize>,
}

/// An [`Error`] on a wire: its message as text.
#[cfg(feature = "serde")]
#[derive(serde::Serialize, serde::Deserialize)]
struct ErrorWire {
    verb: Verb,
    kind: ErrorKind,
    errno: i32,
    message: String,
    bad_wr: Option<usize>,
}

#[cfg(feature = "serde")]
impl From<Error> for ErrorWire {
    fn from(e: Error) -> Self {
        Self {
            verb: e.verb,
            kind: e.kind,
            errno: e.errno,
            message: e.message().to_owned(),
            bad_wr: e.bad_wr,
        }
    }
}

#[cfg(feature = "serde")]
impl From<ErrorWire> for Error {
    fn from(w: ErrorWire) -> Self {
        Self {
            verb: w.verb,
            kind: w.kind,
            errno: w.errno,
            message: Message::Text(w.message),
            bad_wr: w.bad_wr,
        }
    }
}

/// The message of an [`Error`]: text, or data formatted on demand.
#[derive(Clone)]
enum Message {
    /// Text built by the caller.
    Text(String),
    /// A refused `ibv_modify_qp`, formatted by its `Display`; the text is
    /// built once, on the first [`Error::message`] call.
    Refusal(ModifyRefusal, OnceLock<Box<str>>),
}

impl Error {
    /// An error of `kind` with its canonical errno.
    pub fn new(verb: Verb, kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            verb,
            kind,
            errno: kind.errno(),
            message: Message::Text(message.into()),
            bad_wr: None,
        }
    }

    /// An error from a raw errno (classified with [`ErrorKind::from_errno`]).
    pub fn from_errno(verb: Verb, errno: i32, message: impl Into<String>) -> Self {
        Self {
            verb,
            kind: ErrorKind::from_errno(errno),
            errno,
            message: Message::Text(message.into()),
            bad_wr: None,
        }
    }

    /// Shorthand for an `EINVAL` [`ErrorKind::InvalidArgument`].
    pub fn invalid(verb: Verb, message: impl Into<String>) -> Self {
        Self::new(verb, ErrorKind::InvalidArgument, message)
    }

    /// A modify the transition table refused: kind `refusal.kind` with its
    /// canonical errno, and `refusal`'s `Display` as the message. Nothing is
    /// formatted or allocated until the message is asked for.
    #[inline]
    pub fn modify_refused(verb: Verb, refusal: ModifyRefusal) -> Self {
        Self {
            verb,
            kind: refusal.kind,
            errno: refusal.kind.errno(),
            message: Message::Refusal(refusal, OnceLock::new()),
            bad_wr: None,
        }
    }

    /// A verb the backend does not implement (yet): [`ErrorKind::Unsupported`]
    /// with errno `ENOSYS`, distinguishable from a device's `EOPNOTSUPP`
    /// through [`Error::is_not_implemented`].
    pub fn not_implemented(verb: Verb, backend: &str) -> Self {
        Self {
            verb,
            kind: ErrorKind::Unsupported,
            errno: errno::ENOSYS,
            message: Message::Text(format!(
                "{verb} is not implemented by the {backend} backend"
            )),
            bad_wr: None,
        }
    }

    /// Overrides the raw errno (for backends that model a driver whose errno
    /// differs from the kind's canonical one, e.g. mlx5's `ENOMEM` for a post
    /// in a state that refuses sends).
    #[must_use]
    pub fn with_errno(mut self, errno: i32) -> Self {
        self.errno = errno;
        self
    }

    /// Sets the index of the first work request that was not posted.
    #[must_use]
    pub fn with_bad_wr(mut self, index: usize) -> Self {
        self.bad_wr = Some(index);
        self
    }

    /// The verb that failed.
    pub fn verb(&self) -> Verb {
        self.verb
    }

    /// The errno class.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The raw errno the call returned (or would have, in the simulator).
    pub fn errno(&self) -> i32 {
        self.errno
    }

    /// What was wrong, in words.
    ///
    /// For an [`Error::modify_refused`] error the text is formatted on the
    /// first call and kept.
    pub fn message(&self) -> &str {
        match &self.message {
            Message::Text(text) => text,
            Message::Refusal(refusal, text) => {
                text.get_or_init(|| refusal.to_string().into_boxed_str())
            }
        }
    }

    /// The structured details of an [`Error::modify_refused`] error; `None`
    /// for every other error.
    pub fn refusal(&self) -> Option<&ModifyRefusal> {
        match &self.message {
            Message::Refusal(refusal, _) => Some(refusal),
            Message::Text(_) => None,
        }
    }

    /// For `post_send`/`post_recv`/`post_srq_recv`: index of the first work
    /// request that was not posted (C's `*bad_wr`). Requests before it were posted.
    pub fn bad_wr(&self) -> Option<usize> {
        self.bad_wr
    }

    /// `true` for [`Error::not_implemented`] errors: the backend lacks the
    /// verb, which says nothing about the device.
    pub fn is_not_implemented(&self) -> bool {
        self.kind == ErrorKind::Unsupported && self.errno == errno::ENOSYS
    }
}

/// Two errors are equal when the verb, kind, errno, `bad_wr` and message
/// text are, however the message is stored.
impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        self.verb == other.verb
            && self.kind == other.kind
            && self.errno == other.errno
            && self.bad_wr == other.bad_wr
            && match (&self.message, &other.message) {
                (Message::Refusal(a, _), Message::Refusal(b, _)) if a == b => true,
                _ => self.message() == other.message(),
            }
    }
}

impl Eq for Error {}

/// As a derived `Debug` with the message as a string field.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("verb", &self.verb)
            .field("kind", &self.kind)
            .field("errno", &self.errno)
            .field("message", &self.message())
            .field("bad_wr", &self.bad_wr)
            .finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = errno::name(self.errno).unwrap_or("E?");
        write!(f, "{} failed: {} (errno {})", self.verb, name, self.errno)?;
        match self.kind {
            ErrorKind::InvalidTransition { .. } | ErrorKind::InvalidAttrMask { .. } => {
                write!(f, " [{}]", self.kind)?
            }
            _ => {}
        }
        match &self.message {
            Message::Text(text) if !text.is_empty() => write!(f, ": {text}")?,
            Message::Text(_) => {}
            Message::Refusal(refusal, text) => match text.get() {
                Some(text) => write!(f, ": {text}")?,
                None => write!(f, ": {refusal}")?,
            },
        }
        if let Some(i) = self.bad_wr {
            write!(f, " (bad_wr = work request #{i})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// The result of every verb.
pub type Result<T, E = Error> = core::result::Result<T, E>;
