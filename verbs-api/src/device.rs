//! Devices, ports, GIDs and the backend's capability set.

c_enum! {
    /// `enum ibv_port_state`.
    pub enum PortState : "IBV_PORT_" {
        /// `IBV_PORT_NOP`.
        Nop = 0 => "NOP",
        /// `IBV_PORT_DOWN`.
        Down = 1 => "DOWN",
        /// `IBV_PORT_INIT`.
        Init = 2 => "INIT",
        /// `IBV_PORT_ARMED`.
        Armed = 3 => "ARMED",
        /// `IBV_PORT_ACTIVE`.
        Active = 4 => "ACTIVE",
        /// `IBV_PORT_ACTIVE_DEFER`.
        ActiveDefer = 5 => "ACTIVE_DEFER",
    }
}

c_enum! {
    /// `enum ibv_mtu`.
    pub enum Mtu : "IBV_MTU_" {
        /// 256 bytes.
        Mtu256 = 1 => "256",
        /// 512 bytes.
        Mtu512 = 2 => "512",
        /// 1024 bytes.
        Mtu1024 = 3 => "1024",
        /// 2048 bytes.
        Mtu2048 = 4 => "2048",
        /// 4096 bytes.
        Mtu4096 = 5 => "4096",
    }
}

impl Mtu {
    /// The MTU in bytes (`None` for an unknown value).
    pub fn bytes(self) -> Option<u32> {
        match self {
            Self::Mtu256 => Some(256),
            Self::Mtu512 => Some(512),
            Self::Mtu1024 => Some(1024),
            Self::Mtu2048 => Some(2048),
            Self::Mtu4096 => Some(4096),
            Self::Unknown(_) => None,
        }
    }
}

// c_enum! generates the enum, so its default variant is named here.
#[allow(clippy::derivable_impls)]
impl Default for Mtu {
    fn default() -> Self {
        Self::Unknown(0)
    }
}

c_enum! {
    /// `IBV_LINK_LAYER_*`.
    pub enum LinkLayer : "IBV_LINK_LAYER_" {
        /// `IBV_LINK_LAYER_UNSPECIFIED`.
        Unspecified = 0 => "UNSPECIFIED",
        /// `IBV_LINK_LAYER_INFINIBAND`.
        Infiniband = 1 => "INFINIBAND",
        /// `IBV_LINK_LAYER_ETHERNET` (RoCE).
        Ethernet = 2 => "ETHERNET",
    }
}

c_enum! {
    /// `enum ibv_atomic_cap`.
    pub enum AtomicCap : "IBV_ATOMIC_" {
        /// No atomics.
        None = 0 => "NONE",
        /// Atomic only within this HCA.
        Hca = 1 => "HCA",
        /// Atomic with respect to the CPU and other HCAs.
        Glob = 2 => "GLOB",
    }
}

c_flags! {
    /// `enum ibv_device_cap_flags` (the subset the backends report).
    pub struct DeviceCapFlags: u64, "IBV_DEVICE_" {
        /// `IBV_DEVICE_RESIZE_MAX_WR`.
        const RESIZE_MAX_WR = 1 << 0 => "RESIZE_MAX_WR";
        /// `IBV_DEVICE_BAD_PKEY_CNTR`.
        const BAD_PKEY_CNTR = 1 << 1 => "BAD_PKEY_CNTR";
        /// `IBV_DEVICE_BAD_QKEY_CNTR`.
        const BAD_QKEY_CNTR = 1 << 2 => "BAD_QKEY_CNTR";
        /// `IBV_DEVICE_RAW_MULTI`.
        const RAW_MULTI = 1 << 3 => "RAW_MULTI";
        /// `IBV_DEVICE_AUTO_PATH_MIG`.
        const AUTO_PATH_MIG = 1 << 4 => "AUTO_PATH_MIG";
        /// `IBV_DEVICE_CHANGE_PHY_PORT`.
        const CHANGE_PHY_PORT = 1 << 5 => "CHANGE_PHY_PORT";
        /// `IBV_DEVICE_UD_AV_PORT_ENFORCE`.
        const UD_AV_PORT_ENFORCE = 1 << 6 => "UD_AV_PORT_ENFORCE";
        /// `IBV_DEVICE_CURR_QP_STATE_MOD`.
        const CURR_QP_STATE_MOD = 1 << 7 => "CURR_QP_STATE_MOD";
        /// `IBV_DEVICE_SHUTDOWN_PORT`.
        const SHUTDOWN_PORT = 1 << 8 => "SHUTDOWN_PORT";
        /// `IBV_DEVICE_INIT_TYPE`.
        const INIT_TYPE = 1 << 9 => "INIT_TYPE";
        /// `IBV_DEVICE_PORT_ACTIVE_EVENT`.
        const PORT_ACTIVE_EVENT = 1 << 10 => "PORT_ACTIVE_EVENT";
        /// `IBV_DEVICE_SYS_IMAGE_GUID`.
        const SYS_IMAGE_GUID = 1 << 11 => "SYS_IMAGE_GUID";
        /// `IBV_DEVICE_RC_RNR_NAK_GEN`.
        const RC_RNR_NAK_GEN = 1 << 12 => "RC_RNR_NAK_GEN";
        /// `IBV_DEVICE_SRQ_RESIZE`.
        const SRQ_RESIZE = 1 << 13 => "SRQ_RESIZE";
        /// `IBV_DEVICE_N_NOTIFY_CQ`.
        const N_NOTIFY_CQ = 1 << 14 => "N_NOTIFY_CQ";
        /// `IBV_DEVICE_MEM_WINDOW`.
        const MEM_WINDOW = 1 << 17 => "MEM_WINDOW";
        /// `IBV_DEVICE_UD_IP_CSUM`.
        const UD_IP_CSUM = 1 << 18 => "UD_IP_CSUM";
        /// `IBV_DEVICE_XRC`.
        const XRC = 1 << 20 => "XRC";
        /// `IBV_DEVICE_MEM_MGT_EXTENSIONS`.
        const MEM_MGT_EXTENSIONS = 1 << 21 => "MEM_MGT_EXTENSIONS";
        /// `IBV_DEVICE_MEM_WINDOW_TYPE_2A`.
        const MEM_WINDOW_TYPE_2A = 1 << 23 => "MEM_WINDOW_TYPE_2A";
        /// `IBV_DEVICE_MEM_WINDOW_TYPE_2B`.
        const MEM_WINDOW_TYPE_2B = 1 << 24 => "MEM_WINDOW_TYPE_2B";
        /// `IBV_DEVICE_RC_IP_CSUM`.
        const RC_IP_CSUM = 1 << 25 => "RC_IP_CSUM";
        /// `IBV_DEVICE_RAW_IP_CSUM`.
        const RAW_IP_CSUM = 1 << 26 => "RAW_IP_CSUM";
        /// `IBV_DEVICE_MANAGED_FLOW_STEERING`.
        const MANAGED_FLOW_STEERING = 1 << 29 => "MANAGED_FLOW_STEERING";
    }
}

/// One entry of `ibv_get_device_list`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct DeviceInfo {
    /// `ibv_get_device_name` (`"mlx5_0"`, `"rxe0"`, `"sim_cx6_0"`).
    pub name: String,
    /// `ibv_get_device_guid` (host byte order).
    pub guid: u64,
}

/// `struct ibv_device_attr` (from `ibv_query_device`), plus the few
/// `ibv_device_attr_ex` fields the backends report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct DeviceAttr {
    /// `fw_ver`.
    pub fw_ver: String,
    /// `node_guid`.
    pub node_guid: u64,
    /// `sys_image_guid`.
    pub sys_image_guid: u64,
    /// `max_mr_size`.
    pub max_mr_size: u64,
    /// `page_size_cap`.
    pub page_size_cap: u64,
    /// `vendor_id`.
    pub vendor_id: u32,
    /// `vendor_part_id`.
    pub vendor_part_id: u32,
    /// `hw_ver`.
    pub hw_ver: u32,
    /// `max_qp`.
    pub max_qp: u32,
    /// `max_qp_wr`.
    pub max_qp_wr: u32,
    /// `device_cap_flags`.
    pub device_cap_flags: DeviceCapFlags,
    /// `max_sge`.
    pub max_sge: u32,
    /// `max_sge_rd`.
    pub max_sge_rd: u32,
    /// `max_cq`.
    pub max_cq: u32,
    /// `max_cqe`.
    pub max_cqe: u32,
    /// `max_mr`.
    pub max_mr: u32,
    /// `max_pd`.
    pub max_pd: u32,
    /// `max_qp_rd_atom` (responder resources per QP).
    pub max_qp_rd_atom: u32,
    /// `max_ee_rd_atom`.
    pub max_ee_rd_atom: u32,
    /// `max_res_rd_atom`.
    pub max_res_rd_atom: u32,
    /// `max_qp_init_rd_atom` (initiator depth per QP).
    pub max_qp_init_rd_atom: u32,
    /// `max_ee_init_rd_atom`.
    pub max_ee_init_rd_atom: u32,
    /// `atomic_cap`.
    pub atomic_cap: AtomicCap,
    /// `max_ee`.
    pub max_ee: u32,
    /// `max_rdd`.
    pub max_rdd: u32,
    /// `max_mw`.
    pub max_mw: u32,
    /// `max_raw_ipv6_qp`.
    pub max_raw_ipv6_qp: u32,
    /// `max_raw_ethy_qp`.
    pub max_raw_ethy_qp: u32,
    /// `max_mcast_grp`.
    pub max_mcast_grp: u32,
    /// `max_mcast_qp_attach`.
    pub max_mcast_qp_attach: u32,
    /// `max_total_mcast_qp_attach`.
    pub max_total_mcast_qp_attach: u32,
    /// `max_ah`.
    pub max_ah: u32,
    /// `max_fmr`.
    pub max_fmr: u32,
    /// `max_map_per_fmr`.
    pub max_map_per_fmr: u32,
    /// `max_srq`.
    pub max_srq: u32,
    /// `max_srq_wr`.
    pub max_srq_wr: u32,
    /// `max_srq_sge`.
    pub max_srq_sge: u32,
    /// `max_pkeys`.
    pub max_pkeys: u16,
    /// `local_ca_ack_delay`.
    pub local_ca_ack_delay: u8,
    /// `phys_port_cnt`.
    pub phys_port_cnt: u8,
}

// c_enum! generates the enum, so its default variant is named here.
#[allow(clippy::derivable_impls)]
impl Default for AtomicCap {
    fn default() -> Self {
        Self::None
    }
}

/// `struct ibv_port_attr` (from `ibv_query_port`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct PortAttr {
    /// `state`.
    pub state: PortState,
    /// `max_mtu`.
    pub max_mtu: Mtu,
    /// `active_mtu`.
    pub active_mtu: Mtu,
    /// `gid_tbl_len`.
    pub gid_tbl_len: i32,
    /// `port_cap_flags`.
    pub port_cap_flags: u32,
    /// `max_msg_sz`.
    pub max_msg_sz: u32,
    /// `bad_pkey_cntr`.
    pub bad_pkey_cntr: u32,
    /// `qkey_viol_cntr`.
    pub qkey_viol_cntr: u32,
    /// `pkey_tbl_len`.
    pub pkey_tbl_len: u16,
    /// `lid`.
    pub lid: u16,
    /// `sm_lid`.
    pub sm_lid: u16,
    /// `lmc`.
    pub lmc: u8,
    /// `max_vl_num`.
    pub max_vl_num: u8,
    /// `sm_sl`.
    pub sm_sl: u8,
    /// `subnet_timeout`.
    pub subnet_timeout: u8,
    /// `init_type_reply`.
    pub init_type_reply: u8,
    /// `active_width` (IB encoding: 1=1x, 2=4x, 4=8x, 8=12x, 16=2x).
    pub active_width: u8,
    /// `active_speed` (IB encoding).
    pub active_speed: u32,
    /// `phys_state`.
    pub phys_state: u8,
    /// `link_layer`.
    pub link_layer: LinkLayer,
    /// `flags` (`IBV_QPF_GRH_REQUIRED` = 1 on RoCE).
    pub flags: u8,
}

// c_enum! generates the enum, so its default variant is named here.
#[allow(clippy::derivable_impls)]
impl Default for PortState {
    fn default() -> Self {
        Self::Nop
    }
}

// c_enum! generates the enum, so its default variant is named here.
#[allow(clippy::derivable_impls)]
impl Default for LinkLayer {
    fn default() -> Self {
        Self::Unspecified
    }
}

/// `IBV_QPF_GRH_REQUIRED`: address handles on this port need a GRH (RoCE).
pub const QPF_GRH_REQUIRED: u8 = 1;

/// `union ibv_gid`: 16 bytes, network order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// `subnet_prefix` (first 8 bytes, big endian).
    pub fn subnet_prefix(&self) -> u64 {
        u64::from_be_bytes(self.0[..8].try_into().unwrap_or([0; 8]))
    }
    /// `interface_id` (last 8 bytes, big endian).
    pub fn interface_id(&self) -> u64 {
        u64::from_be_bytes(self.0[8..].try_into().unwrap_or([0; 8]))
    }
    /// Builds a GID from subnet prefix and interface id.
    pub fn from_parts(subnet_prefix: u64, interface_id: u64) -> Self {
        let mut g = [0u8; 16];
        g[..8].copy_from_slice(&subnet_prefix.to_be_bytes());
        g[8..].copy_from_slice(&interface_id.to_be_bytes());
        Self(g)
    }
    /// The IPv4-mapped GID (`::ffff:a.b.c.d`) RoCE v2 uses for an IPv4 address.
    pub fn from_ipv4(addr: std::net::Ipv4Addr) -> Self {
        Self(addr.to_ipv6_mapped().octets())
    }
}

impl core::fmt::Display for Gid {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (i, c) in self.0.chunks(2).enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{:02x}{:02x}", c[0], c[1])?;
        }
        Ok(())
    }
}

/// A simulated (or real) process that owns device contexts.
///
/// The legacy XRC receive-QP registrations are counted per process and XRC
/// domains are shared between processes through a file; the simulator models
/// several processes in one world. The hardware backend treats each id as a
/// separate group of contexts in this one OS process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ProcessId(pub u32);

c_flags! {
    /// What a backend (and its first device) can do; scripts name these in
    /// `#! requires:` and are skipped, visibly, when one is missing.
    pub struct Capabilities: u64, "CAP_" {
        /// RC QPs.
        const RC = 1 << 0 => "rc";
        /// UC QPs.
        const UC = 1 << 1 => "uc";
        /// UD QPs.
        const UD = 1 << 2 => "ud";
        /// Shared receive queues.
        const SRQ = 1 << 3 => "srq";
        /// Modern XRC (XRCD, XRC SRQ, XRC_INI/XRC_TGT, `ibv_open_qp`).
        const XRC = 1 << 4 => "xrc";
        /// The legacy OFED XRC receive-QP API.
        const LEGACY_XRC = 1 << 5 => "legacy_xrc";
        /// mlx5 Dynamically Connected transport (DCI/DCT).
        const DC = 1 << 6 => "dc";
        /// mlx5 DCI streams.
        const DCI_STREAMS = 1 << 7 => "dci_streams";
        /// mlx5 out-of-order data placement (`MLX5DV_QP_CREATE_OOO_DP`).
        const OOO_DP = 1 << 8 => "ooo_dp";
        /// RDMA atomics.
        const ATOMICS = 1 << 9 => "atomics";
        /// librdmacm.
        const RDMA_CM = 1 << 10 => "rdma_cm";
        /// Several processes in one backend (XRC sharing, legacy registration).
        const MULTI_PROCESS = 1 << 11 => "multi_process";
        /// `sim_control`: virtual time, fault injection, traces (simulator only).
        const SIM = 1 << 12 => "sim";
        /// mlx5 direct verbs (`mlx5dv_*`).
        const MLX5DV = 1 << 13 => "mlx5dv";
        /// Multicast attach/detach.
        const MCAST = 1 << 14 => "mcast";
        /// Data path (post/poll) implemented.
        const DATA_PATH = 1 << 15 => "data_path";
        /// At least two devices (or ports) to connect.
        const TWO_DEVICES = 1 << 16 => "two_devices";
    }
}

c_enum! {
    /// Which backend implements the trait.
    pub enum BackendKind : "" {
        /// The deterministic simulator.
        Sim = 1 => "sim",
        /// Real hardware through libibverbs.
        Hw = 2 => "hw",
    }
}
