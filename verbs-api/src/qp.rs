//! Queue pairs: types, states, attributes, masks, creation attributes.

use crate::{Gid, Mtu, Verbs};

c_enum! {
    /// `enum ibv_qp_type`.
    pub enum QpType : "IBV_QPT_" {
        /// `IBV_QPT_RC`: reliable connected.
        Rc = 2 => "RC",
        /// `IBV_QPT_UC`: unreliable connected.
        Uc = 3 => "UC",
        /// `IBV_QPT_UD`: unreliable datagram.
        Ud = 4 => "UD",
        /// `IBV_QPT_RAW_PACKET`.
        RawPacket = 8 => "RAW_PACKET",
        /// `IBV_QPT_XRC_SEND` (kernel `XRC_INI`).
        XrcSend = 9 => "XRC_SEND",
        /// `IBV_QPT_XRC_RECV` (kernel `XRC_TGT`).
        XrcRecv = 10 => "XRC_RECV",
        /// `IBV_QPT_DRIVER` (mlx5 DCI/DCT through `mlx5dv_create_qp`).
        Driver = 0xff => "DRIVER",
    }
}

impl QpType {
    /// Parses also the kernel names `XRC_INI`/`XRC_TGT` and `DCI`/`DCT` (both `DRIVER`).
    pub fn from_name_loose(s: &str) -> Option<Self> {
        match s.trim().to_ascii_uppercase().as_str() {
            "XRC_INI" => Some(Self::XrcSend),
            "XRC_TGT" => Some(Self::XrcRecv),
            "DCI" | "DCT" => Some(Self::Driver),
            _ => Self::from_name(s),
        }
    }
}

c_enum! {
    /// `enum ibv_qp_state`.
    pub enum QpState : "IBV_QPS_" {
        /// `IBV_QPS_RESET`.
        Reset = 0 => "RESET",
        /// `IBV_QPS_INIT`.
        Init = 1 => "INIT",
        /// `IBV_QPS_RTR`: ready to receive.
        ReadyToReceive = 2 => "RTR",
        /// `IBV_QPS_RTS`: ready to send.
        ReadyToSend = 3 => "RTS",
        /// `IBV_QPS_SQD`: send queue drain.
        SendQueueDrain = 4 => "SQD",
        /// `IBV_QPS_SQE`: send queue error (UD/UC only, entered by the device).
        SendQueueError = 5 => "SQE",
        /// `IBV_QPS_ERR`.
        Error = 6 => "ERR",
        /// `IBV_QPS_UNKNOWN`: state of a QP opened with `ibv_open_qp`.
        UnknownState = 7 => "UNKNOWN",
    }
}

// c_enum! generates the enum, so its default variant is named here.
#[allow(clippy::derivable_impls)]
impl Default for QpState {
    fn default() -> Self {
        Self::Reset
    }
}

c_flags! {
    /// `enum ibv_qp_attr_mask`.
    pub struct QpAttrMask: u32, "IBV_QP_" {
        /// `IBV_QP_STATE`.
        const STATE = 1 << 0 => "STATE";
        /// `IBV_QP_CUR_STATE`.
        const CUR_STATE = 1 << 1 => "CUR_STATE";
        /// `IBV_QP_EN_SQD_ASYNC_NOTIFY`.
        const EN_SQD_ASYNC_NOTIFY = 1 << 2 => "EN_SQD_ASYNC_NOTIFY";
        /// `IBV_QP_ACCESS_FLAGS`.
        const ACCESS_FLAGS = 1 << 3 => "ACCESS_FLAGS";
        /// `IBV_QP_PKEY_INDEX`.
        const PKEY_INDEX = 1 << 4 => "PKEY_INDEX";
        /// `IBV_QP_PORT`.
        const PORT = 1 << 5 => "PORT";
        /// `IBV_QP_QKEY`.
        const QKEY = 1 << 6 => "QKEY";
        /// `IBV_QP_AV`.
        const AV = 1 << 7 => "AV";
        /// `IBV_QP_PATH_MTU`.
        const PATH_MTU = 1 << 8 => "PATH_MTU";
        /// `IBV_QP_TIMEOUT`.
        const TIMEOUT = 1 << 9 => "TIMEOUT";
        /// `IBV_QP_RETRY_CNT`.
        const RETRY_CNT = 1 << 10 => "RETRY_CNT";
        /// `IBV_QP_RNR_RETRY`.
        const RNR_RETRY = 1 << 11 => "RNR_RETRY";
        /// `IBV_QP_RQ_PSN`.
        const RQ_PSN = 1 << 12 => "RQ_PSN";
        /// `IBV_QP_MAX_QP_RD_ATOMIC`.
        const MAX_QP_RD_ATOMIC = 1 << 13 => "MAX_QP_RD_ATOMIC";
        /// `IBV_QP_ALT_PATH`.
        const ALT_PATH = 1 << 14 => "ALT_PATH";
        /// `IBV_QP_MIN_RNR_TIMER`.
        const MIN_RNR_TIMER = 1 << 15 => "MIN_RNR_TIMER";
        /// `IBV_QP_SQ_PSN`.
        const SQ_PSN = 1 << 16 => "SQ_PSN";
        /// `IBV_QP_MAX_DEST_RD_ATOMIC`.
        const MAX_DEST_RD_ATOMIC = 1 << 17 => "MAX_DEST_RD_ATOMIC";
        /// `IBV_QP_PATH_MIG_STATE`.
        const PATH_MIG_STATE = 1 << 18 => "PATH_MIG_STATE";
        /// `IBV_QP_CAP`.
        const CAP = 1 << 19 => "CAP";
        /// `IBV_QP_DEST_QPN`.
        const DEST_QPN = 1 << 20 => "DEST_QPN";
        /// `IBV_QP_RATE_LIMIT`.
        const RATE_LIMIT = 1 << 25 => "RATE_LIMIT";
    }
}

impl QpAttrMask {
    /// Kernel `IB_QP_ATTR_STANDARD_BITS` (bits 0..=20).
    pub const STANDARD_BITS: Self = Self((1 << 21) - 1);
}

c_flags! {
    /// `enum ibv_access_flags` (MR access and QP `qp_access_flags`).
    pub struct AccessFlags: u32, "IBV_ACCESS_" {
        /// `IBV_ACCESS_LOCAL_WRITE`.
        const LOCAL_WRITE = 1 << 0 => "LOCAL_WRITE";
        /// `IBV_ACCESS_REMOTE_WRITE`.
        const REMOTE_WRITE = 1 << 1 => "REMOTE_WRITE";
        /// `IBV_ACCESS_REMOTE_READ`.
        const REMOTE_READ = 1 << 2 => "REMOTE_READ";
        /// `IBV_ACCESS_REMOTE_ATOMIC`.
        const REMOTE_ATOMIC = 1 << 3 => "REMOTE_ATOMIC";
        /// `IBV_ACCESS_MW_BIND`.
        const MW_BIND = 1 << 4 => "MW_BIND";
        /// `IBV_ACCESS_ZERO_BASED`.
        const ZERO_BASED = 1 << 5 => "ZERO_BASED";
        /// `IBV_ACCESS_ON_DEMAND`.
        const ON_DEMAND = 1 << 6 => "ON_DEMAND";
        /// `IBV_ACCESS_HUGETLB`.
        const HUGETLB = 1 << 7 => "HUGETLB";
        /// `IBV_ACCESS_FLUSH_GLOBAL`.
        const FLUSH_GLOBAL = 1 << 8 => "FLUSH_GLOBAL";
        /// `IBV_ACCESS_FLUSH_PERSISTENT`.
        const FLUSH_PERSISTENT = 1 << 9 => "FLUSH_PERSISTENT";
        /// `IBV_ACCESS_RELAXED_ORDERING` (first "optional" flag).
        const RELAXED_ORDERING = 1 << 20 => "RELAXED_ORDERING";
    }
}

c_enum! {
    /// `enum ibv_mig_state`.
    pub enum PathMigState : "IBV_MIG_" {
        /// `IBV_MIG_MIGRATED`.
        Migrated = 0 => "MIGRATED",
        /// `IBV_MIG_REARM`.
        Rearm = 1 => "REARM",
        /// `IBV_MIG_ARMED`.
        Armed = 2 => "ARMED",
    }
}

// c_enum! generates the enum, so its default variant is named here.
#[allow(clippy::derivable_impls)]
impl Default for PathMigState {
    fn default() -> Self {
        Self::Migrated
    }
}

/// `struct ibv_global_route` (the GRH part of an address vector).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct GlobalRoute {
    /// `dgid`.
    pub dgid: Gid,
    /// `flow_label`.
    pub flow_label: u32,
    /// `sgid_index`.
    pub sgid_index: u8,
    /// `hop_limit`.
    pub hop_limit: u8,
    /// `traffic_class`.
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr`: an address vector (for `IBV_QP_AV`, `ibv_create_ah`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct AhAttr {
    /// `grh` (valid when `is_global`).
    pub grh: GlobalRoute,
    /// `dlid`.
    pub dlid: u16,
    /// `sl`.
    pub sl: u8,
    /// `src_path_bits`.
    pub src_path_bits: u8,
    /// `static_rate`.
    pub static_rate: u8,
    /// `is_global`.
    pub is_global: bool,
    /// `port_num`.
    pub port_num: u8,
}

/// `struct ibv_qp_cap`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct QpCap {
    /// `max_send_wr`.
    pub max_send_wr: u32,
    /// `max_recv_wr`.
    pub max_recv_wr: u32,
    /// `max_send_sge`.
    pub max_send_sge: u32,
    /// `max_recv_sge`.
    pub max_recv_sge: u32,
    /// `max_inline_data`.
    pub max_inline_data: u32,
}

/// `struct ibv_qp_attr`: attributes for `ibv_modify_qp` / `ibv_query_qp`.
///
/// Which fields are read is decided by the [`QpAttrMask`] passed beside it,
/// exactly as in C.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct QpAttr {
    /// `qp_state`.
    pub qp_state: QpState,
    /// `cur_qp_state`.
    pub cur_qp_state: QpState,
    /// `path_mtu`.
    pub path_mtu: Mtu,
    /// `path_mig_state`.
    pub path_mig_state: PathMigState,
    /// `qkey`.
    pub qkey: u32,
    /// `rq_psn`.
    pub rq_psn: u32,
    /// `sq_psn`.
    pub sq_psn: u32,
    /// `dest_qp_num`.
    pub dest_qp_num: u32,
    /// `qp_access_flags`.
    pub qp_access_flags: AccessFlags,
    /// `cap`.
    pub cap: QpCap,
    /// `ah_attr`.
    pub ah_attr: AhAttr,
    /// `alt_ah_attr`.
    pub alt_ah_attr: AhAttr,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `alt_pkey_index`.
    pub alt_pkey_index: u16,
    /// `en_sqd_async_notify`.
    pub en_sqd_async_notify: u8,
    /// `sq_draining` (query only).
    pub sq_draining: u8,
    /// `max_rd_atomic`.
    pub max_rd_atomic: u8,
    /// `max_dest_rd_atomic`.
    pub max_dest_rd_atomic: u8,
    /// `min_rnr_timer`.
    pub min_rnr_timer: u8,
    /// `port_num`.
    pub port_num: u8,
    /// `timeout`.
    pub timeout: u8,
    /// `retry_cnt`.
    pub retry_cnt: u8,
    /// `rnr_retry`.
    pub rnr_retry: u8,
    /// `alt_port_num`.
    pub alt_port_num: u8,
    /// `alt_timeout`.
    pub alt_timeout: u8,
    /// `rate_limit`.
    pub rate_limit: u32,
}

c_flags! {
    /// `enum ibv_qp_init_attr_mask` (`comp_mask` of `ibv_qp_init_attr_ex`).
    pub struct QpInitAttrMask: u32, "IBV_QP_INIT_ATTR_" {
        /// `IBV_QP_INIT_ATTR_PD`.
        const PD = 1 << 0 => "PD";
        /// `IBV_QP_INIT_ATTR_XRCD`.
        const XRCD = 1 << 1 => "XRCD";
        /// `IBV_QP_INIT_ATTR_CREATE_FLAGS`.
        const CREATE_FLAGS = 1 << 2 => "CREATE_FLAGS";
        /// `IBV_QP_INIT_ATTR_MAX_TSO_HEADER`.
        const MAX_TSO_HEADER = 1 << 3 => "MAX_TSO_HEADER";
        /// `IBV_QP_INIT_ATTR_IND_TABLE`.
        const IND_TABLE = 1 << 4 => "IND_TABLE";
        /// `IBV_QP_INIT_ATTR_RX_HASH`.
        const RX_HASH = 1 << 5 => "RX_HASH";
        /// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
        const SEND_OPS_FLAGS = 1 << 6 => "SEND_OPS_FLAGS";
    }
}

c_flags! {
    /// `enum ibv_qp_create_flags`.
    pub struct QpCreateFlags: u32, "IBV_QP_CREATE_" {
        /// `IBV_QP_CREATE_BLOCK_SELF_MCAST_LB`.
        const BLOCK_SELF_MCAST_LB = 1 << 1 => "BLOCK_SELF_MCAST_LB";
        /// `IBV_QP_CREATE_SCATTER_FCS`.
        const SCATTER_FCS = 1 << 8 => "SCATTER_FCS";
        /// `IBV_QP_CREATE_CVLAN_STRIPPING`.
        const CVLAN_STRIPPING = 1 << 9 => "CVLAN_STRIPPING";
        /// `IBV_QP_CREATE_SOURCE_QPN`.
        const SOURCE_QPN = 1 << 10 => "SOURCE_QPN";
        /// `IBV_QP_CREATE_PCI_WRITE_END_PADDING`.
        const PCI_WRITE_END_PADDING = 1 << 11 => "PCI_WRITE_END_PADDING";
    }
}

c_flags! {
    /// `enum ibv_qp_create_send_ops_flags`.
    pub struct SendOpsFlags: u64, "IBV_QP_EX_WITH_" {
        /// `IBV_QP_EX_WITH_RDMA_WRITE`.
        const RDMA_WRITE = 1 << 0 => "RDMA_WRITE";
        /// `IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM`.
        const RDMA_WRITE_WITH_IMM = 1 << 1 => "RDMA_WRITE_WITH_IMM";
        /// `IBV_QP_EX_WITH_SEND`.
        const SEND = 1 << 2 => "SEND";
        /// `IBV_QP_EX_WITH_SEND_WITH_IMM`.
        const SEND_WITH_IMM = 1 << 3 => "SEND_WITH_IMM";
        /// `IBV_QP_EX_WITH_RDMA_READ`.
        const RDMA_READ = 1 << 4 => "RDMA_READ";
        /// `IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP`.
        const ATOMIC_CMP_AND_SWP = 1 << 5 => "ATOMIC_CMP_AND_SWP";
        /// `IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD`.
        const ATOMIC_FETCH_AND_ADD = 1 << 6 => "ATOMIC_FETCH_AND_ADD";
        /// `IBV_QP_EX_WITH_LOCAL_INV`.
        const LOCAL_INV = 1 << 7 => "LOCAL_INV";
        /// `IBV_QP_EX_WITH_BIND_MW`.
        const BIND_MW = 1 << 8 => "BIND_MW";
        /// `IBV_QP_EX_WITH_SEND_WITH_INV`.
        const SEND_WITH_INV = 1 << 9 => "SEND_WITH_INV";
        /// `IBV_QP_EX_WITH_TSO`.
        const TSO = 1 << 10 => "TSO";
        /// `IBV_QP_EX_WITH_FLUSH`.
        const FLUSH = 1 << 11 => "FLUSH";
        /// `IBV_QP_EX_WITH_ATOMIC_WRITE`.
        const ATOMIC_WRITE = 1 << 12 => "ATOMIC_WRITE";
    }
}

/// `struct ibv_qp_init_attr_ex`: every field, with handles borrowed from the
/// backend `V`.
///
/// `cap` is written back with the actual capabilities on success, as
/// `ibv_create_qp_ex` does. The RSS fields (`rwq_ind_tbl`, `rx_hash_conf`)
/// are represented by `comp_mask` bits only: no backend models RSS, and both
/// refuse those bits.
pub struct QpInitAttrEx<'a, V: Verbs + ?Sized> {
    /// `qp_context`: an opaque user value, returned by query.
    pub qp_context: u64,
    /// `send_cq`.
    pub send_cq: Option<&'a V::Cq>,
    /// `recv_cq`.
    pub recv_cq: Option<&'a V::Cq>,
    /// `srq`.
    pub srq: Option<&'a V::Srq>,
    /// `cap` (requested; actual values written back on success).
    pub cap: QpCap,
    /// `qp_type`.
    pub qp_type: QpType,
    /// `sq_sig_all`.
    pub sq_sig_all: bool,
    /// `comp_mask`.
    pub comp_mask: QpInitAttrMask,
    /// `pd` (valid with `IBV_QP_INIT_ATTR_PD`).
    pub pd: Option<&'a V::Pd>,
    /// `xrcd` (valid with `IBV_QP_INIT_ATTR_XRCD`).
    pub xrcd: Option<&'a V::Xrcd>,
    /// `create_flags` (valid with `IBV_QP_INIT_ATTR_CREATE_FLAGS`).
    pub create_flags: QpCreateFlags,
    /// `max_tso_header` (valid with `IBV_QP_INIT_ATTR_MAX_TSO_HEADER`).
    pub max_tso_header: u16,
    /// `source_qpn` (with `IBV_QP_CREATE_SOURCE_QPN`).
    pub source_qpn: u32,
    /// `send_ops_flags` (valid with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`).
    pub send_ops_flags: SendOpsFlags,
}

impl<V: Verbs + ?Sized> Default for QpInitAttrEx<'_, V> {
    fn default() -> Self {
        Self {
            qp_context: 0,
            send_cq: None,
            recv_cq: None,
            srq: None,
            cap: QpCap::default(),
            qp_type: QpType::Rc,
            sq_sig_all: false,
            comp_mask: QpInitAttrMask::empty(),
            pd: None,
            xrcd: None,
            create_flags: QpCreateFlags::empty(),
            max_tso_header: 0,
            source_qpn: 0,
            send_ops_flags: SendOpsFlags::empty(),
        }
    }
}

impl<V: Verbs + ?Sized> core::fmt::Debug for QpInitAttrEx<'_, V> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("QpInitAttrEx")
            .field("qp_context", &self.qp_context)
            .field("send_cq", &self.send_cq)
            .field("recv_cq", &self.recv_cq)
            .field("srq", &self.srq)
            .field("cap", &self.cap)
            .field("qp_type", &self.qp_type)
            .field("sq_sig_all", &self.sq_sig_all)
            .field("comp_mask", &self.comp_mask)
            .field("pd", &self.pd)
            .field("xrcd", &self.xrcd)
            .field("create_flags", &self.create_flags)
            .field("max_tso_header", &self.max_tso_header)
            .field("source_qpn", &self.source_qpn)
            .field("send_ops_flags", &self.send_ops_flags)
            .finish()
    }
}

/// What `ibv_query_qp` returns in its `init_attr` argument: the creation
/// attributes (with the actual capabilities).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct QpInitInfo {
    /// `qp_type`.
    pub qp_type: QpType,
    /// `cap` (actual).
    pub cap: QpCap,
    /// `sq_sig_all`.
    pub sq_sig_all: bool,
    /// `qp_context`.
    pub qp_context: u64,
    /// Whether the QP receives from an SRQ.
    pub has_srq: bool,
}

// c_enum! generates the enum, so its default variant is named here.
#[allow(clippy::derivable_impls)]
impl Default for QpType {
    fn default() -> Self {
        Self::Rc
    }
}

/// `struct ibv_qp_open_attr` for `ibv_open_qp` (share an XRC_TGT QP).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct QpOpenAttr {
    /// `qp_num`: the TGT QP to open.
    pub qp_num: u32,
    /// `qp_type` (must be `XRC_RECV`).
    pub qp_type: QpType,
    /// `qp_context`.
    pub qp_context: u64,
}

c_enum! {
    /// mlx5 DC role of a `IBV_QPT_DRIVER` QP (`enum mlx5dv_dc_type`).
    pub enum DcType : "MLX5DV_DCTYPE_" {
        /// `MLX5DV_DCTYPE_DCT`: DC target.
        Dct = 1 => "DCT",
        /// `MLX5DV_DCTYPE_DCI`: DC initiator.
        Dci = 2 => "DCI",
    }
}
