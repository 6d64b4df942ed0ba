//! mlx5 direct verbs: `mlx5dv_create_qp` attributes and `mlx5dv_query_device`.

use crate::DcType;

c_flags! {
    /// `enum mlx5dv_qp_init_attr_mask`.
    pub struct Mlx5QpInitAttrMask: u64, "MLX5DV_QP_INIT_ATTR_MASK_" {
        /// `MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS`.
        const QP_CREATE_FLAGS = 1 << 0 => "QP_CREATE_FLAGS";
        /// `MLX5DV_QP_INIT_ATTR_MASK_DC`.
        const DC = 1 << 1 => "DC";
        /// `MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS`.
        const SEND_OPS_FLAGS = 1 << 2 => "SEND_OPS_FLAGS";
        /// `MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS`.
        const DCI_STREAMS = 1 << 3 => "DCI_STREAMS";
    }
}

c_flags! {
    /// `enum mlx5dv_qp_create_flags`.
    pub struct Mlx5QpCreateFlags: u32, "MLX5DV_QP_CREATE_" {
        /// `MLX5DV_QP_CREATE_TUNNEL_OFFLOADS`.
        const TUNNEL_OFFLOADS = 1 << 0 => "TUNNEL_OFFLOADS";
        /// `MLX5DV_QP_CREATE_TIR_ALLOW_SELF_LOOPBACK_UC`.
        const TIR_ALLOW_SELF_LOOPBACK_UC = 1 << 1 => "TIR_ALLOW_SELF_LOOPBACK_UC";
        /// `MLX5DV_QP_CREATE_TIR_ALLOW_SELF_LOOPBACK_MC`.
        const TIR_ALLOW_SELF_LOOPBACK_MC = 1 << 2 => "TIR_ALLOW_SELF_LOOPBACK_MC";
        /// `MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE`.
        const DISABLE_SCATTER_TO_CQE = 1 << 3 => "DISABLE_SCATTER_TO_CQE";
        /// `MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE`.
        const ALLOW_SCATTER_TO_CQE = 1 << 4 => "ALLOW_SCATTER_TO_CQE";
        /// `MLX5DV_QP_CREATE_PACKET_BASED_CREDIT_MODE`.
        const PACKET_BASED_CREDIT_MODE = 1 << 5 => "PACKET_BASED_CREDIT_MODE";
        /// `MLX5DV_QP_CREATE_SIG_PIPELINING`.
        const SIG_PIPELINING = 1 << 6 => "SIG_PIPELINING";
        /// `MLX5DV_QP_CREATE_OOO_DP` (upstream value; absent from rdma-core 44).
        const OOO_DP = 1 << 7 => "OOO_DP";
    }
}

c_flags! {
    /// `enum mlx5dv_qp_create_send_ops_flags`.
    pub struct Mlx5SendOpsFlags: u64, "MLX5DV_QP_EX_WITH_" {
        /// `MLX5DV_QP_EX_WITH_MR_INTERLEAVED`.
        const MR_INTERLEAVED = 1 << 0 => "MR_INTERLEAVED";
        /// `MLX5DV_QP_EX_WITH_MR_LIST`.
        const MR_LIST = 1 << 1 => "MR_LIST";
        /// `MLX5DV_QP_EX_WITH_MKEY_CONFIGURE`.
        const MKEY_CONFIGURE = 1 << 2 => "MKEY_CONFIGURE";
        /// `MLX5DV_QP_EX_WITH_RAW_WQE`.
        const RAW_WQE = 1 << 3 => "RAW_WQE";
        /// `MLX5DV_QP_EX_WITH_MEMCPY`.
        const MEMCPY = 1 << 4 => "MEMCPY";
    }
}

/// `struct mlx5dv_dci_streams`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct DciStreams {
    /// `log_num_concurent` (sic, upstream spelling).
    pub log_num_concurent: u8,
    /// `log_num_errored`.
    pub log_num_errored: u8,
}

/// `struct mlx5dv_dc_init_attr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct DcInitAttr {
    /// `dc_type`.
    pub dc_type: DcType,
    /// `dct_access_key` (DCT only).
    pub dct_access_key: u64,
    /// `dci_streams` (DCI only; valid with `MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS`).
    pub dci_streams: DciStreams,
}

impl Default for DcInitAttr {
    fn default() -> Self {
        Self {
            dc_type: DcType::Dci,
            dct_access_key: 0,
            dci_streams: DciStreams::default(),
        }
    }
}

/// `struct mlx5dv_qp_init_attr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Mlx5QpInitAttr {
    /// `comp_mask`.
    pub comp_mask: Mlx5QpInitAttrMask,
    /// `create_flags`.
    pub create_flags: Mlx5QpCreateFlags,
    /// `dc_init_attr`.
    pub dc_init_attr: DcInitAttr,
    /// `send_ops_flags`.
    pub send_ops_flags: Mlx5SendOpsFlags,
}

c_flags! {
    /// `enum mlx5dv_context_comp_mask` (the bits this crate reads).
    pub struct Mlx5ContextMask: u64, "MLX5DV_CONTEXT_MASK_" {
        /// `MLX5DV_CONTEXT_MASK_CQE_COMPRESION`.
        const CQE_COMPRESION = 1 << 0 => "CQE_COMPRESION";
        /// `MLX5DV_CONTEXT_MASK_SWP`.
        const SWP = 1 << 1 => "SWP";
        /// `MLX5DV_CONTEXT_MASK_STRIDING_RQ`.
        const STRIDING_RQ = 1 << 2 => "STRIDING_RQ";
        /// `MLX5DV_CONTEXT_MASK_TUNNEL_OFFLOADS`.
        const TUNNEL_OFFLOADS = 1 << 3 => "TUNNEL_OFFLOADS";
        /// `MLX5DV_CONTEXT_MASK_DYN_BFREGS`.
        const DYN_BFREGS = 1 << 4 => "DYN_BFREGS";
        /// `MLX5DV_CONTEXT_MASK_CLOCK_INFO_UPDATE`.
        const CLOCK_INFO_UPDATE = 1 << 5 => "CLOCK_INFO_UPDATE";
        /// `MLX5DV_CONTEXT_MASK_FLOW_ACTION_FLAGS`.
        const FLOW_ACTION_FLAGS = 1 << 6 => "FLOW_ACTION_FLAGS";
        /// `MLX5DV_CONTEXT_MASK_DC_ODP_CAPS`.
        const DC_ODP_CAPS = 1 << 7 => "DC_ODP_CAPS";
        /// `MLX5DV_CONTEXT_MASK_HCA_CORE_CLOCK`.
        const HCA_CORE_CLOCK = 1 << 8 => "HCA_CORE_CLOCK";
        /// `MLX5DV_CONTEXT_MASK_NUM_LAG_PORTS`.
        const NUM_LAG_PORTS = 1 << 9 => "NUM_LAG_PORTS";
        /// `MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD`.
        const SIGNATURE_OFFLOAD = 1 << 10 => "SIGNATURE_OFFLOAD";
        /// `MLX5DV_CONTEXT_MASK_DCI_STREAMS`.
        const DCI_STREAMS = 1 << 11 => "DCI_STREAMS";
        /// `MLX5DV_CONTEXT_MASK_WR_MEMCPY_LENGTH`.
        const WR_MEMCPY_LENGTH = 1 << 12 => "WR_MEMCPY_LENGTH";
        /// `MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD`.
        const CRYPTO_OFFLOAD = 1 << 13 => "CRYPTO_OFFLOAD";
        /// `MLX5DV_CONTEXT_MASK_MAX_DC_RD_ATOM`.
        const MAX_DC_RD_ATOM = 1 << 14 => "MAX_DC_RD_ATOM";
        /// `MLX5DV_CONTEXT_MASK_REG_C0`.
        const REG_C0 = 1 << 15 => "REG_C0";
        /// `MLX5DV_CONTEXT_MASK_OOO_RECV_WRS`.
        const OOO_RECV_WRS = 1 << 16 => "OOO_RECV_WRS";
    }
}

c_flags! {
    /// `enum mlx5dv_context_flags` (the bits this crate reads).
    pub struct Mlx5ContextFlags: u64, "MLX5DV_CONTEXT_FLAGS_" {
        /// `MLX5DV_CONTEXT_FLAGS_CQE_V1`.
        const CQE_V1 = 1 << 0 => "CQE_V1";
        /// `MLX5DV_CONTEXT_FLAGS_MPW_ALLOWED`.
        const MPW_ALLOWED = 1 << 2 => "MPW_ALLOWED";
        /// `MLX5DV_CONTEXT_FLAGS_ENHANCED_MPW`.
        const ENHANCED_MPW = 1 << 3 => "ENHANCED_MPW";
        /// `MLX5DV_CONTEXT_FLAGS_CQE_128B_COMP`.
        const CQE_128B_COMP = 1 << 4 => "CQE_128B_COMP";
        /// `MLX5DV_CONTEXT_FLAGS_CQE_128B_PAD`.
        const CQE_128B_PAD = 1 << 5 => "CQE_128B_PAD";
        /// `MLX5DV_CONTEXT_FLAGS_PACKET_BASED_CREDIT_MODE`.
        const PACKET_BASED_CREDIT_MODE = 1 << 6 => "PACKET_BASED_CREDIT_MODE";
        /// `MLX5DV_CONTEXT_FLAGS_REAL_TIME_TS`.
        const REAL_TIME_TS = 1 << 7 => "REAL_TIME_TS";
    }
}

/// `mlx5dv_dci_streams_caps`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct DciStreamsCaps {
    /// `max_log_num_concurent`.
    pub max_log_num_concurent: u8,
    /// `max_log_num_errored`.
    pub max_log_num_errored: u8,
}

/// `mlx5dv_ooo_recv_wrs_caps`: per-type limits of outstanding receive WRs
/// on an OOO QP (0 = OOO not supported for that type).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct OooRecvWrsCaps {
    /// `max_rc`.
    pub max_rc: u32,
    /// `max_xrc`.
    pub max_xrc: u32,
    /// `max_dct`.
    pub max_dct: u32,
    /// `max_ud`.
    pub max_ud: u32,
    /// `max_uc`.
    pub max_uc: u32,
}

/// `struct mlx5dv_context` (the fields this crate models).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Mlx5Context {
    /// `version`.
    pub version: u8,
    /// `flags`.
    pub flags: Mlx5ContextFlags,
    /// `comp_mask`: on input the fields wanted, on output those filled.
    pub comp_mask: Mlx5ContextMask,
    /// `dc_odp_caps`.
    pub dc_odp_caps: u32,
    /// `dci_streams_caps`.
    pub dci_streams_caps: DciStreamsCaps,
    /// `max_dc_rd_atom`.
    pub max_dc_rd_atom: u64,
    /// `max_dc_init_rd_atom`.
    pub max_dc_init_rd_atom: u64,
    /// `ooo_recv_wrs_caps`.
    pub ooo_recv_wrs_caps: OooRecvWrsCaps,
}

/// `struct mlx5dv_clock_info`: what `mlx5dv_ts_to_ns` needs to turn a
/// device timestamp (free-running `hca_core_clock` ticks, as
/// `ibv_wc_read_completion_ts` reads them) into nanoseconds:
/// `nsec + ((ts - last_cycles) & mask) * mult >> shift` for a timestamp
/// after `last_cycles`, `frac` carrying the sub-nanosecond remainder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ClockInfo {
    /// `nsec`: the time in nanoseconds at `last_cycles`.
    pub nsec: u64,
    /// `last_cycles`: the device clock when `nsec` was taken.
    pub last_cycles: u64,
    /// `frac`: fractional nanoseconds, in units of `2^-shift`.
    pub frac: u64,
    /// `mult`: nanoseconds per tick, times `2^shift`.
    pub mult: u32,
    /// `shift`.
    pub shift: u32,
    /// `mask`: the valid bits of the free-running counter.
    pub mask: u64,
}

impl ClockInfo {
    /// `mlx5dv_ts_to_ns`: the nanoseconds of device timestamp `ts`, with
    /// the same arithmetic as the inline function in `mlx5dv.h` (a
    /// timestamp more than half the counter's range after `last_cycles`
    /// counts as before it).
    pub fn ts_to_ns(&self, ts: u64) -> u64 {
        let delta = ts.wrapping_sub(self.last_cycles) & self.mask;
        if delta > self.mask / 2 {
            let back = self.last_cycles.wrapping_sub(ts) & self.mask;
            self.nsec.wrapping_sub(
                back.wrapping_mul(u64::from(self.mult))
                    .wrapping_sub(self.frac)
                    >> self.shift,
            )
        } else {
            self.nsec.wrapping_add(
                delta
                    .wrapping_mul(u64::from(self.mult))
                    .wrapping_add(self.frac)
                    >> self.shift,
            )
        }
    }
}
