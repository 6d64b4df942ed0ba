//! MRs, CQs, SRQs, XRC domains and async events.

use crate::{AccessFlags, Verbs};

/// What an MR is (`ibv_mr` fields): where it is and its keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MrInfo {
    /// `addr`: the virtual address of the first byte (on the simulator, an
    /// address in the owning process's simulated address space).
    pub addr: u64,
    /// `length`.
    pub length: u64,
    /// `lkey`.
    pub lkey: u32,
    /// `rkey`.
    pub rkey: u32,
    /// The access flags it was registered with.
    pub access: AccessFlags,
}

/// Arguments of `ibv_create_cq`.
pub struct CqInit<'a, V: Verbs + ?Sized> {
    /// `cqe`: minimum number of entries.
    pub cqe: u32,
    /// `cq_context`.
    pub cq_context: u64,
    /// `channel`.
    pub channel: Option<&'a V::CompChannel>,
    /// `comp_vector`.
    pub comp_vector: u32,
}

impl<V: Verbs + ?Sized> Default for CqInit<'_, V> {
    fn default() -> Self {
        Self {
            cqe: 1,
            cq_context: 0,
            channel: None,
            comp_vector: 0,
        }
    }
}

/// What a CQ is after creation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct CqInfo {
    /// `cqe`: the actual number of entries (≥ requested).
    pub cqe: u32,
    /// `cq_context`.
    pub cq_context: u64,
}

c_flags! {
    /// `enum ibv_srq_attr_mask`.
    pub struct SrqAttrMask: u32, "IBV_SRQ_" {
        /// `IBV_SRQ_MAX_WR` (resize).
        const MAX_WR = 1 << 0 => "MAX_WR";
        /// `IBV_SRQ_LIMIT` (arm the limit event).
        const LIMIT = 1 << 1 => "LIMIT";
    }
}

/// `struct ibv_srq_attr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SrqAttr {
    /// `max_wr`.
    pub max_wr: u32,
    /// `max_sge`.
    pub max_sge: u32,
    /// `srq_limit`.
    pub srq_limit: u32,
}

c_enum! {
    /// `enum ibv_srq_type`.
    pub enum SrqType : "IBV_SRQT_" {
        /// `IBV_SRQT_BASIC`.
        Basic = 0 => "BASIC",
        /// `IBV_SRQT_XRC`.
        Xrc = 1 => "XRC",
        /// `IBV_SRQT_TM` (tag matching).
        Tm = 2 => "TM",
    }
}

// c_enum! generates the enum, so its default variant is named here.
#[allow(clippy::derivable_impls)]
impl Default for SrqType {
    fn default() -> Self {
        Self::Basic
    }
}

c_flags! {
    /// `enum ibv_srq_init_attr_mask`.
    pub struct SrqInitAttrMask: u32, "IBV_SRQ_INIT_ATTR_" {
        /// `IBV_SRQ_INIT_ATTR_TYPE`.
        const TYPE = 1 << 0 => "TYPE";
        /// `IBV_SRQ_INIT_ATTR_PD`.
        const PD = 1 << 1 => "PD";
        /// `IBV_SRQ_INIT_ATTR_XRCD`.
        const XRCD = 1 << 2 => "XRCD";
        /// `IBV_SRQ_INIT_ATTR_CQ`.
        const CQ = 1 << 3 => "CQ";
        /// `IBV_SRQ_INIT_ATTR_TM`.
        const TM = 1 << 4 => "TM";
    }
}

/// `struct ibv_srq_init_attr_ex`. `attr` is written back with the actual
/// values on success.
pub struct SrqInitAttrEx<'a, V: Verbs + ?Sized> {
    /// `srq_context`.
    pub srq_context: u64,
    /// `attr` (requested; actual written back).
    pub attr: SrqAttr,
    /// `comp_mask`.
    pub comp_mask: SrqInitAttrMask,
    /// `srq_type`.
    pub srq_type: SrqType,
    /// `pd`.
    pub pd: Option<&'a V::Pd>,
    /// `xrcd`.
    pub xrcd: Option<&'a V::Xrcd>,
    /// `cq`.
    pub cq: Option<&'a V::Cq>,
}

impl<V: Verbs + ?Sized> Default for SrqInitAttrEx<'_, V> {
    fn default() -> Self {
        Self {
            srq_context: 0,
            attr: SrqAttr::default(),
            comp_mask: SrqInitAttrMask::empty(),
            srq_type: SrqType::Basic,
            pd: None,
            xrcd: None,
            cq: None,
        }
    }
}

c_flags! {
    /// `comp_mask` of `struct ibv_xrcd_init_attr`.
    pub struct XrcdInitAttrMask: u32, "IBV_XRCD_INIT_ATTR_" {
        /// `IBV_XRCD_INIT_ATTR_FD`.
        const FD = 1 << 0 => "FD";
        /// `IBV_XRCD_INIT_ATTR_OFLAGS`.
        const OFLAGS = 1 << 1 => "OFLAGS";
        /// `IBV_XRCD_INIT_ATTR_RESERVED` (first unknown bit).
        const RESERVED = 1 << 2 => "RESERVED";
    }
}

c_flags! {
    /// The `open(2)` flags XRC domains use.
    pub struct OpenFlags: u32, "O_" {
        /// `O_CREAT`.
        const CREAT = 0o100 => "CREAT";
        /// `O_EXCL`.
        const EXCL = 0o200 => "EXCL";
    }
}

/// A file that names a shared XRC domain.
///
/// In C this is an open file descriptor whose inode identifies the domain.
/// Here it is a backend-neutral file identity: processes that pass the same
/// `XrcdFile` share the domain. The hardware backend maps it to a real file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum XrcdFile {
    /// `fd == -1`: a private domain.
    None,
    /// An open file with this identity (stands for its inode).
    Inode(u64),
    /// A descriptor that is not open (for testing `EBADF`).
    BadDescriptor,
}

/// `struct ibv_xrcd_init_attr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct XrcdInitAttr {
    /// `comp_mask`.
    pub comp_mask: XrcdInitAttrMask,
    /// `fd`.
    pub fd: XrcdFile,
    /// `oflags`.
    pub oflags: OpenFlags,
}

// c_enum! generates the enum, so its default variant is named here.
#[allow(clippy::derivable_impls)]
impl Default for XrcdInitAttr {
    fn default() -> Self {
        Self {
            comp_mask: XrcdInitAttrMask::FD | XrcdInitAttrMask::OFLAGS,
            fd: XrcdFile::None,
            oflags: OpenFlags::CREAT,
        }
    }
}

c_enum! {
    /// `enum ibv_event_type`.
    pub enum AsyncEventType : "IBV_EVENT_" {
        /// `IBV_EVENT_CQ_ERR`.
        CqErr = 0 => "CQ_ERR",
        /// `IBV_EVENT_QP_FATAL`.
        QpFatal = 1 => "QP_FATAL",
        /// `IBV_EVENT_QP_REQ_ERR`.
        QpReqErr = 2 => "QP_REQ_ERR",
        /// `IBV_EVENT_QP_ACCESS_ERR`.
        QpAccessErr = 3 => "QP_ACCESS_ERR",
        /// `IBV_EVENT_COMM_EST`.
        CommEst = 4 => "COMM_EST",
        /// `IBV_EVENT_SQ_DRAINED`.
        SqDrained = 5 => "SQ_DRAINED",
        /// `IBV_EVENT_PATH_MIG`.
        PathMig = 6 => "PATH_MIG",
        /// `IBV_EVENT_PATH_MIG_ERR`.
        PathMigErr = 7 => "PATH_MIG_ERR",
        /// `IBV_EVENT_DEVICE_FATAL`.
        DeviceFatal = 8 => "DEVICE_FATAL",
        /// `IBV_EVENT_PORT_ACTIVE`.
        PortActive = 9 => "PORT_ACTIVE",
        /// `IBV_EVENT_PORT_ERR`.
        PortErr = 10 => "PORT_ERR",
        /// `IBV_EVENT_LID_CHANGE`.
        LidChange = 11 => "LID_CHANGE",
        /// `IBV_EVENT_PKEY_CHANGE`.
        PkeyChange = 12 => "PKEY_CHANGE",
        /// `IBV_EVENT_SM_CHANGE`.
        SmChange = 13 => "SM_CHANGE",
        /// `IBV_EVENT_SRQ_ERR`.
        SrqErr = 14 => "SRQ_ERR",
        /// `IBV_EVENT_SRQ_LIMIT_REACHED`.
        SrqLimitReached = 15 => "SRQ_LIMIT_REACHED",
        /// `IBV_EVENT_QP_LAST_WQE_REACHED`.
        QpLastWqeReached = 16 => "QP_LAST_WQE_REACHED",
        /// `IBV_EVENT_CLIENT_REREGISTER`.
        ClientReregister = 17 => "CLIENT_REREGISTER",
        /// `IBV_EVENT_GID_CHANGE`.
        GidChange = 18 => "GID_CHANGE",
        /// `IBV_EVENT_WQ_FATAL`.
        WqFatal = 19 => "WQ_FATAL",
    }
}

/// `event.element` of `struct ibv_async_event`.
pub enum AsyncElement<V: Verbs + ?Sized> {
    /// A QP (by handle, when the caller has one).
    Qp(V::Qp),
    /// A QP known only by number (legacy XRC receive QPs, `IBV_XRC_QP_EVENT_FLAG`).
    QpNum(u32),
    /// A CQ.
    Cq(V::Cq),
    /// An SRQ.
    Srq(V::Srq),
    /// A port number.
    Port(u8),
    /// The device.
    Device,
}

impl<V: Verbs + ?Sized> Clone for AsyncElement<V> {
    fn clone(&self) -> Self {
        match self {
            Self::Qp(q) => Self::Qp(q.clone()),
            Self::QpNum(n) => Self::QpNum(*n),
            Self::Cq(c) => Self::Cq(c.clone()),
            Self::Srq(s) => Self::Srq(s.clone()),
            Self::Port(p) => Self::Port(*p),
            Self::Device => Self::Device,
        }
    }
}

impl<V: Verbs + ?Sized> core::fmt::Debug for AsyncElement<V> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Qp(q) => write!(f, "Qp({q:?})"),
            Self::QpNum(n) => write!(f, "QpNum({n:#x})"),
            Self::Cq(c) => write!(f, "Cq({c:?})"),
            Self::Srq(s) => write!(f, "Srq({s:?})"),
            Self::Port(p) => write!(f, "Port({p})"),
            Self::Device => f.write_str("Device"),
        }
    }
}

/// `struct ibv_async_event`.
pub struct AsyncEvent<V: Verbs + ?Sized> {
    /// `event_type`.
    pub event_type: AsyncEventType,
    /// `element`.
    pub element: AsyncElement<V>,
    /// Which delivery this is, as the backend identifies it (the simulator
    /// numbers its events; 0 where a backend cannot tell events apart).
    /// A backend that identifies events refuses a second
    /// `ibv_ack_async_event` of the same one with `EINVAL`.
    pub token: u64,
}

impl<V: Verbs + ?Sized> Clone for AsyncEvent<V> {
    fn clone(&self) -> Self {
        Self {
            event_type: self.event_type,
            token: self.token,
            element: self.element.clone(),
        }
    }
}

impl<V: Verbs + ?Sized> core::fmt::Debug for AsyncEvent<V> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "AsyncEvent({} on {:?})", self.event_type, self.element)
    }
}
