//! Device profiles: the capabilities and driver rules of the simulated HCAs.
//!
//! Values come from public `ibv_devinfo -v` dumps and driver headers; each
//! constructor cites its sources next to the numbers. A value no dump gives
//! is marked *estimate*.

use crate::adapter::AdapterModel;
use verbs_api::{
    AtomicCap, DciStreamsCaps, DeviceAttr, DeviceCapFlags, LinkLayer, Mtu, OooRecvWrsCaps,
    PortAttr, PortState, QpCreateFlags, TableFlavor, QPF_GRH_REQUIRED,
};

/// Which driver's creation, rounding and validation rules a device follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverModel {
    /// mlx5 (rdma-core `providers/mlx5` + kernel `mlx5_ib`).
    Mlx5,
    /// rxe, the soft-RoCE driver (kernel `drivers/infiniband/sw/rxe`).
    Rxe,
}

/// mlx5-specific limits the user-space provider reads from the kernel at
/// context creation (`mlx5_alloc_context`) and `mlx5dv_query_device` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mlx5Limits {
    /// `max_sq_desc_sz`: largest send WQE in bytes (`max_wqe_sz_sq`).
    pub max_sq_desc_sz: u32,
    /// `max_rq_desc_sz`: largest receive WQE in bytes (`max_wqe_sz_rq`).
    pub max_rq_desc_sz: u32,
    /// `max_send_wqebb`: most 64-byte send WQE basic blocks per SQ.
    pub max_send_wqebb: u32,
    /// `max_recv_wr`: most receive WQEs per RQ (`1 << log_max_qp_sz`).
    pub max_recv_wr: u32,
    /// `max_srq_recv_wr`: most WQEs per SRQ (`1 << log_max_srq_sz`).
    pub max_srq_recv_wr: u32,
    /// DC transport (DCI/DCT) supported.
    pub dc: bool,
    /// `dci_streams_caps` (0 = no DCI streams).
    pub dci_streams: DciStreamsCaps,
    /// `max_dc_rd_atom` (DC requester).
    pub max_dc_rd_atom: u64,
    /// `max_dc_init_rd_atom` (DC responder).
    pub max_dc_init_rd_atom: u64,
    /// `ooo_recv_wrs_caps`; all zero = no `MLX5DV_QP_CREATE_OOO_DP`.
    pub ooo_recv_wrs: OooRecvWrsCaps,
    /// The DMA MMO engine (`dma_mmo_sq` / `dma_mmo_qp` of the HCA caps)
    /// behind `mlx5dv_wr_memcpy`: without it the mlx5 provider refuses
    /// `MLX5DV_QP_EX_WITH_MEMCPY` at `mlx5dv_create_qp` with `EOPNOTSUPP`
    /// (rdma-core `providers/mlx5/verbs.c`, `qp_init_wr_memcpy`). No
    /// profile has it: the ConnectX-6 and -7 caps are not public
    /// (*unconfirmed*, docs/divergence.md), and the simulator does not
    /// execute DMA memcpy.
    pub dma_mmo: bool,
    /// `max_dm_size` of `ibv_query_device_ex`: bytes of device memory
    /// (MEMIC) `ibv_alloc_dm` may allocate, in total per device in the
    /// simulator. 0 = no device memory.
    pub max_dm_size: u64,
}

/// One simulated HCA model: what `ibv_query_device` / `ibv_query_port` /
/// `mlx5dv_query_device` report and which driver rules apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceProfile {
    /// Short profile name: `cx6`, `cx7`, `rxe`.
    pub name: String,
    /// Driver rules to follow.
    pub driver: DriverModel,
    /// `ibv_query_device` (node GUIDs are filled in per device instance).
    pub attr: DeviceAttr,
    /// `ibv_query_port`, the same for every port (LIDs filled in per instance).
    pub port: PortAttr,
    /// mlx5 limits (`None` for rxe).
    pub mlx5: Option<Mlx5Limits>,
    /// `max_inline_data` limit of the provider (rxe: 512; mlx5 derives it
    /// from `max_sq_desc_sz` and reports no fixed limit).
    pub max_inline_data: u32,
    /// XRC QP types and XRC SRQs supported.
    pub xrc: bool,
    /// On-demand paging (`IBV_ACCESS_ON_DEMAND`) accepted.
    pub odp: bool,
    /// The device claims `IB_DEVICE_FLUSH_GLOBAL`, `IB_DEVICE_FLUSH_PERSISTENT`
    /// and `IB_DEVICE_ATOMIC_WRITE`: `IBV_WR_FLUSH`, `IBV_WR_ATOMIC_WRITE`
    /// and the `IBV_ACCESS_FLUSH_*` MR flags. rxe sets all three
    /// (`drivers/infiniband/sw/rxe/rxe_param.h` of the profile's kernel,
    /// 6.17; since 6.2, on 64-bit builds); the mlx5 kernel driver sets none
    /// of them.
    pub flush_and_atomic_write: bool,
    /// `IBV_QP_RATE_LIMIT` upper bound in kbps; 0 = no packet pacing (a
    /// non-zero rate is then `EINVAL`).
    pub rate_limit_max_kbps: u32,
    /// `ibv_qp_create_flags` the device supports (others: `EOPNOTSUPP`).
    pub create_flags: QpCreateFlags,
    /// Which transition table `ibv_modify_qp` follows.
    pub table_flavor: TableFlavor,
    /// Timing of the adapter (doorbells, WQE processing, DMA, receive
    /// pipeline, jitter) on top of the wire's: see [`AdapterModel`].
    pub adapter: AdapterModel,
}

/// `IB_PORT_CM_SUP` in `port_cap_flags`: the port runs a connection manager.
const PORT_CM_SUP: u32 = 1 << 16;

impl DeviceProfile {
    /// A ConnectX-6 (MT28908, PCI id 0x101b = 4123) on InfiniBand.
    ///
    /// Sources:
    /// * `ibv_devinfo -vv` of a ConnectX-6, fw 20.37.1700, vendor_part_id
    ///   4123 (a UCX bug-report template found in the public code index,
    ///   hosting repository not identified), and the shorter dump in
    ///   openucx/ucx issue #8229 (fw 20.29.1016, vendor_part_id 4123):
    ///   max_qp 131072 (262144 in #8229), max_qp_wr 32768, max_sge 30,
    ///   max_cq 16777216, max_cqe 4194303, max_mr 16777216, max_pd 8388608,
    ///   max_qp_rd_atom 16, max_res_rd_atom 2097152, max_qp_init_rd_atom 16,
    ///   atomic_cap ATOMIC_HCA, max_mw 16777216, max_mcast_grp 2097152,
    ///   max_mcast_qp_attach 240, max_total_mcast_qp_attach 503316480,
    ///   max_ah 2147483647, max_srq 8388608, max_srq_wr 32767,
    ///   max_srq_sge 31, max_pkeys 128, local_ca_ack_delay 16,
    ///   device_cap_flags 0x21361c36, page_size_cap 0xfffffffffffff000,
    ///   max_mr_size 0xffffffffffffffff, ODP supported; port: max_mtu and
    ///   active_mtu 4096, pkey_tbl_len 128, gid_tbl_len 8, max_msg_sz
    ///   0x40000000, port_cap_flags 0xa259e848, max_vl_num 4 (3),
    ///   subnet_timeout 18, active_width 4X (2), active_speed 64 (HDR
    ///   lane), link layer InfiniBand; packet pacing min/max 0 kbps.
    /// * mlx5 limits: `max_rq_desc_sz` 512 follows from max_srq_sge 31 and
    ///   max_sge 30 through the kernel's `mlx5_ib_query_device` formulas
    ///   (max_rq_sg = max_wqe_sz_rq / 16, max_srq_sge = max_rq_sg − 1);
    ///   `max_send_wqebb` and `max_recv_wr` are `1 << log_max_qp_sz` =
    ///   max_qp_wr; `max_srq_recv_wr` = max_srq_wr + 1. `max_sq_desc_sz`
    ///   1024 is an *estimate* (the kernel clamps it to 512 before deriving
    ///   max_sge, so the dump cannot show it; perftest's MAX_INLINE of 912
    ///   fits a 1024-byte WQE).
    /// * DC values (`dci_streams` 4/4, `max_dc_[init_]rd_atom` 16) are
    ///   *estimates*; create flags: BLOCK_SELF_MCAST_LB, SCATTER_FCS,
    ///   CVLAN_STRIPPING, SOURCE_QPN, PCI_WRITE_END_PADDING (the last is in
    ///   the dump's device_cap_flags_ex; the others are *estimates* from the
    ///   mlx5 kernel's `process_create_flags`).
    pub fn connectx6() -> Self {
        let attr = DeviceAttr {
            fw_ver: "20.37.1700".to_owned(),
            node_guid: 0,
            sys_image_guid: 0,
            max_mr_size: u64::MAX,
            page_size_cap: 0xffff_ffff_ffff_f000,
            vendor_id: 0x02c9,
            vendor_part_id: 4123,
            hw_ver: 0,
            max_qp: 131_072,
            max_qp_wr: 32_768,
            device_cap_flags: DeviceCapFlags(0x2136_1c36),
            max_sge: 30,
            max_sge_rd: 30,
            max_cq: 16_777_216,
            max_cqe: 4_194_303,
            max_mr: 16_777_216,
            max_pd: 8_388_608,
            max_qp_rd_atom: 16,
            max_ee_rd_atom: 0,
            max_res_rd_atom: 2_097_152,
            max_qp_init_rd_atom: 16,
            max_ee_init_rd_atom: 0,
            atomic_cap: AtomicCap::Hca,
            max_ee: 0,
            max_rdd: 0,
            max_mw: 16_777_216,
            max_raw_ipv6_qp: 0,
            max_raw_ethy_qp: 0,
            max_mcast_grp: 2_097_152,
            max_mcast_qp_attach: 240,
            max_total_mcast_qp_attach: 503_316_480,
            max_ah: 2_147_483_647,
            max_fmr: 0,
            max_map_per_fmr: 0,
            max_srq: 8_388_608,
            max_srq_wr: 32_767,
            max_srq_sge: 31,
            max_pkeys: 128,
            local_ca_ack_delay: 16,
            phys_port_cnt: 1,
        };
        let port = PortAttr {
            state: PortState::Active,
            max_mtu: Mtu::Mtu4096,
            active_mtu: Mtu::Mtu4096,
            gid_tbl_len: 8,
            port_cap_flags: 0xa259_e848,
            max_msg_sz: 0x4000_0000,
            bad_pkey_cntr: 0,
            qkey_viol_cntr: 0,
            pkey_tbl_len: 128,
            lid: 0,
            sm_lid: 1,
            lmc: 0,
            max_vl_num: 3,
            sm_sl: 0,
            subnet_timeout: 18,
            init_type_reply: 0,
            active_width: 2,
            active_speed: 64,
            phys_state: 5,
            link_layer: LinkLayer::Infiniband,
            flags: 0,
        };
        Self {
            name: "cx6".to_owned(),
            driver: DriverModel::Mlx5,
            attr,
            port,
            mlx5: Some(Mlx5Limits {
                max_sq_desc_sz: 1024,
                max_rq_desc_sz: 512,
                max_send_wqebb: 32_768,
                max_recv_wr: 32_768,
                max_srq_recv_wr: 32_768,
                dc: true,
                dci_streams: DciStreamsCaps {
                    max_log_num_concurent: 4,
                    max_log_num_errored: 4,
                },
                max_dc_rd_atom: 16,
                max_dc_init_rd_atom: 16,
                ooo_recv_wrs: OooRecvWrsCaps::default(),
                dma_mmo: false,
                // *estimate*: no public ConnectX-6/7 dump of the MEMIC
                // size was found; 128 KiB (docs/divergence.md).
                max_dm_size: 131_072,
            }),
            // mlx5 has no fixed inline limit: the WQE size bounds it.
            max_inline_data: u32::MAX,
            xrc: true,
            odp: true,
            flush_and_atomic_write: false,
            rate_limit_max_kbps: 0,
            create_flags: QpCreateFlags::BLOCK_SELF_MCAST_LB
                | QpCreateFlags::SCATTER_FCS
                | QpCreateFlags::CVLAN_STRIPPING
                | QpCreateFlags::SOURCE_QPN
                | QpCreateFlags::PCI_WRITE_END_PADDING,
            table_flavor: TableFlavor::Mlx5,
            adapter: AdapterModel::CONNECTX6,
        }
    }

    /// A ConnectX-7 (MT2910, PCI id 0x1021 = 4129) on RoCE: the ConnectX-6
    /// profile plus out-of-order data placement.
    ///
    /// Sources: `ibv_devinfo` of ConnectX-7 NICs in deepseek-ai/DeepEP issue
    /// #38 (fw 28.42.1000, vendor_part_id 4129, link layer Ethernet, max and
    /// active MTU 4096). No public `-v` dump was found, so every device
    /// limit is the ConnectX-6 value (*estimate*). RoCE: port flags
    /// `IBV_QPF_GRH_REQUIRED`, gid_tbl_len 255 (*estimate*: the mlx5 RoCE
    /// GID table size), pkey_tbl_len 1 (*estimate*), no LID. OOO receive-WR
    /// caps follow dc-and-mlx5dv.md §4 (`max_rc`/`max_ud`/`max_uc` = half
    /// of `max_recv_wr`, `max_xrc`/`max_dct` = `max_recv_wr`).
    pub fn connectx7() -> Self {
        let mut p = Self::connectx6();
        p.name = "cx7".to_owned();
        p.attr.fw_ver = "28.42.1000".to_owned();
        p.attr.vendor_part_id = 4129;
        p.port.link_layer = LinkLayer::Ethernet;
        p.port.flags = QPF_GRH_REQUIRED;
        p.port.gid_tbl_len = 255;
        p.port.pkey_tbl_len = 1;
        p.port.sm_lid = 0;
        p.port.active_speed = 128;
        p.adapter = AdapterModel::CONNECTX7;
        if let Some(m) = p.mlx5.as_mut() {
            m.ooo_recv_wrs = OooRecvWrsCaps {
                max_rc: m.max_recv_wr / 2,
                max_xrc: m.max_recv_wr,
                max_dct: m.max_recv_wr,
                max_ud: m.max_recv_wr / 2,
                max_uc: m.max_recv_wr / 2,
            };
        }
        p
    }

    /// The soft-RoCE driver rxe of one kernel: Linux 6.17.
    ///
    /// Every value is that kernel's (docs/divergence.md, "Device profiles"):
    /// `drivers/infiniband/sw/rxe/rxe_param.h` and `rxe.c`
    /// (`rxe_init_device_param`, `rxe_init_port_param`) of the 6.17 tree.
    /// With `DEFAULT_MAX_VALUE` = 2^20: `max_qp_wr`, `max_cq`, `max_pd`,
    /// `max_srq_wr` 2^20; `max_qp` 2^20 − 16 (QP indices from 16);
    /// `max_srq` 2^20 − 0x20001; `max_mr` 2^19 − 1 and `max_mw`
    /// 2^20 − 2^19 − 1 (MR indices up to 2^19, windows above);
    /// `max_ah` 2^15 − 1; `max_sge`/`max_sge_rd` 32, `max_srq_sge` 27;
    /// `max_cqe` 2^15 − 1; `max_qp_rd_atom`/`max_qp_init_rd_atom` 128,
    /// `max_res_rd_atom` 0x3f000; multicast 8192 groups, 56 QPs a group,
    /// 0x70000 attachments; `max_pkeys` 64; `local_ca_ack_delay` 15;
    /// `atomic_cap` HCA; vendor id 0xffffff (IBTA A3.3.1, set since 5.9);
    /// device capability flags as listed in `RXE_DEVICE_CAP_FLAGS`, with
    /// memory windows (type 1 and 2B), FLUSH (global, persistent) and
    /// ATOMIC_WRITE (64-bit builds); inline data up to 512 bytes (the
    /// largest WQE's 32 SGEs of 16 bytes). Port: GID table 1024, P_Key
    /// table 1, largest message 2^31, `IB_PORT_CM_SUP`, width 1X, speed 1,
    /// max MTU 4096. The active MTU 1024 and the physical state LinkUp are
    /// *estimates* of a running 1500-byte Ethernet netdev (rxe derives both
    /// from the netdev).
    pub fn rxe() -> Self {
        let attr = DeviceAttr {
            fw_ver: "0.0.0".to_owned(),
            node_guid: 0,
            sys_image_guid: 0,
            max_mr_size: u64::MAX,
            page_size_cap: 0xffff_f000,
            vendor_id: 0xff_ffff,
            vendor_part_id: 0,
            hw_ver: 0,
            max_qp: (1 << 20) - 16,
            max_qp_wr: 1 << 20,
            device_cap_flags: DeviceCapFlags::BAD_PKEY_CNTR
                | DeviceCapFlags::BAD_QKEY_CNTR
                | DeviceCapFlags::AUTO_PATH_MIG
                | DeviceCapFlags::CHANGE_PHY_PORT
                | DeviceCapFlags::UD_AV_PORT_ENFORCE
                | DeviceCapFlags::PORT_ACTIVE_EVENT
                | DeviceCapFlags::SYS_IMAGE_GUID
                | DeviceCapFlags::RC_RNR_NAK_GEN
                | DeviceCapFlags::SRQ_RESIZE
                | DeviceCapFlags::MEM_MGT_EXTENSIONS
                | DeviceCapFlags::MEM_WINDOW
                | DeviceCapFlags::MEM_WINDOW_TYPE_2B,
            max_sge: 32,
            max_sge_rd: 32,
            max_cq: 1 << 20,
            max_cqe: (1 << 15) - 1,
            max_mr: (1 << 19) - 1,
            max_pd: 1 << 20,
            max_qp_rd_atom: 128,
            max_ee_rd_atom: 0,
            max_res_rd_atom: 0x3_f000,
            max_qp_init_rd_atom: 128,
            max_ee_init_rd_atom: 0,
            atomic_cap: AtomicCap::Hca,
            max_ee: 0,
            max_rdd: 0,
            max_mw: (1 << 20) - (1 << 19) - 1,
            max_raw_ipv6_qp: 0,
            max_raw_ethy_qp: 0,
            max_mcast_grp: 8192,
            max_mcast_qp_attach: 56,
            max_total_mcast_qp_attach: 0x7_0000,
            max_ah: (1 << 15) - 1,
            max_fmr: 0,
            max_map_per_fmr: 0,
            max_srq: (1 << 20) - 0x2_0001,
            max_srq_wr: 1 << 20,
            max_srq_sge: 27,
            max_pkeys: 64,
            local_ca_ack_delay: 15,
            phys_port_cnt: 1,
        };
        let port = PortAttr {
            state: PortState::Active,
            max_mtu: Mtu::Mtu4096,
            active_mtu: Mtu::Mtu1024,
            gid_tbl_len: 1024,
            port_cap_flags: PORT_CM_SUP,
            max_msg_sz: 1 << 31,
            bad_pkey_cntr: 0,
            qkey_viol_cntr: 0,
            pkey_tbl_len: 1,
            lid: 0,
            sm_lid: 0,
            lmc: 0,
            max_vl_num: 1,
            sm_sl: 0,
            subnet_timeout: 0,
            init_type_reply: 0,
            active_width: 1,
            active_speed: 1,
            phys_state: 5,
            link_layer: LinkLayer::Ethernet,
            flags: QPF_GRH_REQUIRED,
        };
        Self {
            name: "rxe".to_owned(),
            driver: DriverModel::Rxe,
            attr,
            port,
            mlx5: None,
            max_inline_data: 512,
            xrc: false,
            odp: false,
            flush_and_atomic_write: true,
            rate_limit_max_kbps: 0,
            create_flags: QpCreateFlags::empty(),
            table_flavor: TableFlavor::Kernel,
            adapter: AdapterModel::RXE,
        }
    }

    /// A profile by short name: `"cx6"`, `"cx7"` or `"rxe"` (case-insensitive).
    pub fn by_name(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "cx6" | "connectx6" | "connectx-6" => Some(Self::connectx6()),
            "cx7" | "connectx7" | "connectx-7" => Some(Self::connectx7()),
            "rxe" => Some(Self::rxe()),
            _ => None,
        }
    }

    /// The short profile name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `true` when the ports need a GRH in every address vector (RoCE).
    pub fn grh_required(&self) -> bool {
        self.port.link_layer == LinkLayer::Ethernet || self.port.flags & QPF_GRH_REQUIRED != 0
    }
}
