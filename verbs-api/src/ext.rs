//! Values of the extended verbs (issue #13 item 4): `ibv_rereg_mr`,
//! `ibv_resize_cq`, `ibv_query_device_ex`, extended CQs (`ibv_create_cq_ex`
//! and the `ibv_start_poll` family), the `ibv_wr_*` post API, memory
//! windows, `ibv_query_qp_data_in_order`, `ibv_query_gid_ex` /
//! `ibv_query_gid_table` and ECE.

use crate::{AccessFlags, DeviceAttr, Gid, SendFlags, Sge, UdInfo, Verbs, WcFlags, WcOpcode};
use crate::{WcStatus, WrOpcode};

c_flags! {
    /// `enum ibv_rereg_mr_flags`: what `ibv_rereg_mr` changes.
    pub struct ReregMrFlags: u32, "IBV_REREG_MR_" {
        /// `IBV_REREG_MR_CHANGE_TRANSLATION`: a new buffer (address and length).
        const CHANGE_TRANSLATION = 1 << 0 => "CHANGE_TRANSLATION";
        /// `IBV_REREG_MR_CHANGE_PD`: another protection domain.
        const CHANGE_PD = 1 << 1 => "CHANGE_PD";
        /// `IBV_REREG_MR_CHANGE_ACCESS`: other access flags.
        const CHANGE_ACCESS = 1 << 2 => "CHANGE_ACCESS";
    }
}

/// The arguments of `ibv_rereg_mr(mr, flags, pd, addr, length, access)`.
///
/// The MR owns its bytes here, so `CHANGE_TRANSLATION` gives a `length`
/// and the backend allocates the new (zeroed, page-aligned) buffer, as
/// [`Verbs::reg_mr`] does; `addr` is the new buffer's, read back with
/// [`Verbs::mr_info`].
pub struct ReregMr<'a, V: Verbs + ?Sized> {
    /// `flags`.
    pub flags: ReregMrFlags,
    /// `pd`: the new PD (required with `CHANGE_PD`, ignored otherwise).
    pub pd: Option<&'a V::Pd>,
    /// `length` of the new buffer (required with `CHANGE_TRANSLATION`,
    /// ignored otherwise).
    pub length: usize,
    /// `access` (used with `CHANGE_ACCESS`).
    pub access: AccessFlags,
}

impl<V: Verbs + ?Sized> Default for ReregMr<'_, V> {
    fn default() -> Self {
        Self {
            flags: ReregMrFlags::empty(),
            pd: None,
            length: 0,
            access: AccessFlags::empty(),
        }
    }
}

// ------------------------------------------------------------- device_ex

/// `struct ibv_odp_caps`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct OdpCaps {
    /// `general_caps` (`IBV_ODP_SUPPORT` = 1, `IBV_ODP_SUPPORT_IMPLICIT` = 2).
    pub general_caps: u64,
    /// `per_transport_caps.rc_odp_caps`.
    pub rc_odp_caps: u32,
    /// `per_transport_caps.uc_odp_caps`.
    pub uc_odp_caps: u32,
    /// `per_transport_caps.ud_odp_caps`.
    pub ud_odp_caps: u32,
}

/// `struct ibv_tso_caps`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TsoCaps {
    /// `max_tso`.
    pub max_tso: u32,
    /// `supported_qpts` (bit per `ibv_qp_type`).
    pub supported_qpts: u32,
}

/// `struct ibv_rss_caps`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct RssCaps {
    /// `supported_qpts`.
    pub supported_qpts: u32,
    /// `max_rwq_indirection_tables`.
    pub max_rwq_indirection_tables: u32,
    /// `max_rwq_indirection_table_size`.
    pub max_rwq_indirection_table_size: u32,
    /// `rx_hash_fields_mask`.
    pub rx_hash_fields_mask: u64,
    /// `rx_hash_function`.
    pub rx_hash_function: u8,
}

/// `struct ibv_packet_pacing_caps`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct PacketPacingCaps {
    /// `qp_rate_limit_min` (kbps).
    pub qp_rate_limit_min: u32,
    /// `qp_rate_limit_max` (kbps).
    pub qp_rate_limit_max: u32,
    /// `supported_qpts`.
    pub supported_qpts: u32,
}

/// `struct ibv_tm_caps` (tag matching).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TmCaps {
    /// `max_rndv_hdr_size`.
    pub max_rndv_hdr_size: u32,
    /// `max_num_tags`.
    pub max_num_tags: u32,
    /// `flags`.
    pub flags: u32,
    /// `max_ops`.
    pub max_ops: u32,
    /// `max_sge`.
    pub max_sge: u32,
}

/// `struct ibv_cq_moderation_caps`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct CqModerationCaps {
    /// `max_cq_count`.
    pub max_cq_count: u16,
    /// `max_cq_period` (µs).
    pub max_cq_period: u16,
}

/// `struct ibv_pci_atomic_caps`: per operation, a bit per supported size
/// (`IBV_PCI_ATOMIC_OPERATION_4/8/16_BYTE_SIZE_SUP` = 1, 2, 4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct PciAtomicCaps {
    /// `fetch_add`.
    pub fetch_add: u16,
    /// `compare_swap`.
    pub compare_swap: u16,
    /// `swap`.
    pub swap: u16,
}

/// `IBV_RAW_PACKET_CAP_CVLAN_STRIPPING`.
pub const RAW_PACKET_CAP_CVLAN_STRIPPING: u32 = 1 << 0;
/// `IBV_RAW_PACKET_CAP_SCATTER_FCS`.
pub const RAW_PACKET_CAP_SCATTER_FCS: u32 = 1 << 1;
/// `IBV_RAW_PACKET_CAP_IP_CSUM`.
pub const RAW_PACKET_CAP_IP_CSUM: u32 = 1 << 2;
/// `IBV_RAW_PACKET_CAP_DELAY_DROP`.
pub const RAW_PACKET_CAP_DELAY_DROP: u32 = 1 << 3;
/// `IBV_DEVICE_RAW_SCATTER_FCS` (a `device_cap_flags_ex` bit above 32).
pub const DEVICE_RAW_SCATTER_FCS: u64 = 1 << 34;
/// `IBV_DEVICE_PCI_WRITE_END_PADDING` (a `device_cap_flags_ex` bit above 32).
pub const DEVICE_PCI_WRITE_END_PADDING: u64 = 1 << 36;

/// `struct ibv_device_attr_ex` (from `ibv_query_device_ex`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct DeviceAttrEx {
    /// `orig_attr`: what `ibv_query_device` gives.
    pub orig_attr: DeviceAttr,
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `odp_caps`.
    pub odp_caps: OdpCaps,
    /// `completion_timestamp_mask`: the bits of a completion timestamp
    /// that are valid (0 = no timestamps).
    pub completion_timestamp_mask: u64,
    /// `hca_core_clock` in kHz (0 = no free-running clock).
    pub hca_core_clock: u64,
    /// `device_cap_flags_ex`: `device_cap_flags` plus the bits above 32.
    pub device_cap_flags_ex: u64,
    /// `tso_caps`.
    pub tso_caps: TsoCaps,
    /// `rss_caps`.
    pub rss_caps: RssCaps,
    /// `max_wq_type_rq`.
    pub max_wq_type_rq: u32,
    /// `packet_pacing_caps`.
    pub packet_pacing_caps: PacketPacingCaps,
    /// `raw_packet_caps` (`IBV_RAW_PACKET_CAP_*`).
    pub raw_packet_caps: u32,
    /// `tm_caps`.
    pub tm_caps: TmCaps,
    /// `cq_mod_caps`.
    pub cq_mod_caps: CqModerationCaps,
    /// `max_dm_size` (device memory; 0 = none).
    pub max_dm_size: u64,
    /// `pci_atomic_caps`.
    pub pci_atomic_caps: PciAtomicCaps,
    /// `xrc_odp_caps`.
    pub xrc_odp_caps: u32,
    /// `phys_port_cnt_ex`.
    pub phys_port_cnt_ex: u32,
}

// ------------------------------------------------------------ extended CQ

c_flags! {
    /// `enum ibv_create_cq_wc_flags`: the fields an extended CQ reports.
    pub struct WcExFlags: u64, "IBV_WC_EX_WITH_" {
        /// `IBV_WC_EX_WITH_BYTE_LEN`.
        const BYTE_LEN = 1 << 0 => "BYTE_LEN";
        /// `IBV_WC_EX_WITH_IMM`.
        const IMM = 1 << 1 => "IMM";
        /// `IBV_WC_EX_WITH_QP_NUM`.
        const QP_NUM = 1 << 2 => "QP_NUM";
        /// `IBV_WC_EX_WITH_SRC_QP`.
        const SRC_QP = 1 << 3 => "SRC_QP";
        /// `IBV_WC_EX_WITH_SLID`.
        const SLID = 1 << 4 => "SLID";
        /// `IBV_WC_EX_WITH_SL`.
        const SL = 1 << 5 => "SL";
        /// `IBV_WC_EX_WITH_DLID_PATH_BITS`.
        const DLID_PATH_BITS = 1 << 6 => "DLID_PATH_BITS";
        /// `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP` (device clock ticks).
        const COMPLETION_TIMESTAMP = 1 << 7 => "COMPLETION_TIMESTAMP";
        /// `IBV_WC_EX_WITH_CVLAN`.
        const CVLAN = 1 << 8 => "CVLAN";
        /// `IBV_WC_EX_WITH_FLOW_TAG`.
        const FLOW_TAG = 1 << 9 => "FLOW_TAG";
        /// `IBV_WC_EX_WITH_TM_INFO`.
        const TM_INFO = 1 << 10 => "TM_INFO";
        /// `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK` (ns).
        const COMPLETION_TIMESTAMP_WALLCLOCK = 1 << 11 => "COMPLETION_TIMESTAMP_WALLCLOCK";
    }
}

impl WcExFlags {
    /// `IBV_WC_STANDARD_FLAGS`: the fields `ibv_wc` always has.
    pub const STANDARD: Self = Self(0x7f);
}

c_flags! {
    /// `enum ibv_cq_init_attr_mask`.
    pub struct CqInitAttrMask: u32, "IBV_CQ_INIT_ATTR_MASK_" {
        /// `IBV_CQ_INIT_ATTR_MASK_FLAGS`.
        const FLAGS = 1 << 0 => "FLAGS";
        /// `IBV_CQ_INIT_ATTR_MASK_PD`.
        const PD = 1 << 1 => "PD";
    }
}

c_flags! {
    /// `enum ibv_create_cq_attr_flags`.
    pub struct CreateCqAttrFlags: u32, "IBV_CREATE_CQ_ATTR_" {
        /// `IBV_CREATE_CQ_ATTR_SINGLE_THREADED`.
        const SINGLE_THREADED = 1 << 0 => "SINGLE_THREADED";
        /// `IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN`.
        const IGNORE_OVERRUN = 1 << 1 => "IGNORE_OVERRUN";
    }
}

/// `struct ibv_cq_init_attr_ex` (for `ibv_create_cq_ex`).
pub struct CqInitAttrEx<'a, V: Verbs + ?Sized> {
    /// `cqe`: minimum number of entries.
    pub cqe: u32,
    /// `cq_context`.
    pub cq_context: u64,
    /// `channel`.
    pub channel: Option<&'a V::CompChannel>,
    /// `comp_vector`.
    pub comp_vector: u32,
    /// `wc_flags`: the fields [`Verbs::poll_cq_ex`] reports.
    pub wc_flags: WcExFlags,
    /// `comp_mask`.
    pub comp_mask: CqInitAttrMask,
    /// `flags` (with `comp_mask` `FLAGS`).
    pub flags: CreateCqAttrFlags,
}

impl<V: Verbs + ?Sized> Default for CqInitAttrEx<'_, V> {
    fn default() -> Self {
        Self {
            cqe: 1,
            cq_context: 0,
            channel: None,
            comp_vector: 0,
            wc_flags: WcExFlags::empty(),
            comp_mask: CqInitAttrMask::empty(),
            flags: CreateCqAttrFlags::empty(),
        }
    }
}

/// One completion read through the extended CQ API: what `ibv_next_poll`
/// makes current and the `ibv_wc_read_*` functions return.
///
/// `wr_id`, `status`, `opcode`, `vendor_err` and `wc_flags` are always
/// there; every other field is `Some` exactly when the CQ was created with
/// its `IBV_WC_EX_WITH_*` flag (reading it otherwise is undefined in C).
/// As with `ibv_wc`, `imm_data` means something only when `wc_flags` has
/// `WITH_IMM` or `WITH_INV`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct WcEx {
    /// `cq->wr_id`.
    pub wr_id: u64,
    /// `cq->status`.
    pub status: WcStatus,
    /// `ibv_wc_read_opcode`.
    pub opcode: WcOpcode,
    /// `ibv_wc_read_vendor_err`.
    pub vendor_err: u32,
    /// `ibv_wc_read_wc_flags`.
    pub wc_flags: WcFlags,
    /// `ibv_wc_read_byte_len` (`BYTE_LEN`).
    pub byte_len: Option<u32>,
    /// `ibv_wc_read_imm_data` / `ibv_wc_read_invalidated_rkey` (`IMM`).
    pub imm_data: Option<u32>,
    /// `ibv_wc_read_qp_num` (`QP_NUM`).
    pub qp_num: Option<u32>,
    /// `ibv_wc_read_src_qp` (`SRC_QP`).
    pub src_qp: Option<u32>,
    /// `ibv_wc_read_slid` (`SLID`).
    pub slid: Option<u16>,
    /// `ibv_wc_read_sl` (`SL`).
    pub sl: Option<u8>,
    /// `ibv_wc_read_dlid_path_bits` (`DLID_PATH_BITS`).
    pub dlid_path_bits: Option<u8>,
    /// `ibv_wc_read_completion_ts` in device clock ticks
    /// (`COMPLETION_TIMESTAMP`).
    pub completion_timestamp: Option<u64>,
    /// `ibv_wc_read_completion_wallclock_ns` (`COMPLETION_TIMESTAMP_WALLCLOCK`).
    pub completion_wallclock_ns: Option<u64>,
}

// ----------------------------------------------------------- ibv_advise_mr

c_enum! {
    /// `enum ibv_advise_mr_advice`: what `ibv_advise_mr` asks.
    pub enum AdviseMrAdvice : "IBV_ADVISE_MR_ADVICE_" {
        /// `IBV_ADVISE_MR_ADVICE_PREFETCH`: make the pages present, read-only.
        Prefetch = 0 => "PREFETCH",
        /// `IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE`: present and writable.
        PrefetchWrite = 1 => "PREFETCH_WRITE",
        /// `IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT`: map what the CPU has
        /// present, without faulting.
        PrefetchNoFault = 2 => "PREFETCH_NO_FAULT",
    }
}

/// `IBV_ADVISE_MR_FLAG_FLUSH`: return once the advice is carried out.
pub const ADVISE_MR_FLAG_FLUSH: u32 = 1;

// ----------------------------------------------------------- memory windows

c_enum! {
    /// `enum ibv_mw_type`.
    pub enum MwType : "IBV_MW_TYPE_" {
        /// `IBV_MW_TYPE_1`: bound with `ibv_bind_mw`.
        Type1 = 1 => "1",
        /// `IBV_MW_TYPE_2`: bound with a `BIND_MW` work request.
        Type2 = 2 => "2",
    }
}

/// `ibv_inc_rkey`: the next key with the same index bits (the low byte
/// incremented), as a bind gives a window.
pub fn inc_rkey(rkey: u32) -> u32 {
    (rkey & 0xffff_ff00) | (rkey.wrapping_add(1) & 0xff)
}

/// What an MW is (`struct ibv_mw` fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MwInfo {
    /// `rkey`: changes with every successful bind.
    pub rkey: u32,
    /// `type`.
    pub mw_type: MwType,
}

/// `struct ibv_alloc_dm_attr`: what `ibv_alloc_dm` asks for.
///
/// Device memory (DM) is a small memory on the adapter itself (mlx5
/// "MEMIC"), read and written by the host with `ibv_memcpy_to_dm` /
/// `ibv_memcpy_from_dm` and used by work requests through a zero-based
/// MR registered on it with `ibv_reg_dm_mr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct AllocDmAttr {
    /// `length`: bytes to allocate (1 ..= the device's `max_dm_size`).
    pub length: u64,
    /// `log_align_req`: log2 of the address alignment asked for.
    pub log_align_req: u32,
    /// `comp_mask`: must be 0 (no extension is defined).
    pub comp_mask: u32,
}

/// `struct ibv_mw_bind_info`.
pub struct MwBindInfo<'a, V: Verbs + ?Sized> {
    /// `mr`: the region the window opens (`None`: unbind a type 1 window).
    pub mr: Option<&'a V::Mr>,
    /// `addr`: where the window starts.
    pub addr: u64,
    /// `length` (0 with `mr == None`: unbind).
    pub length: u64,
    /// `mw_access_flags`: `REMOTE_READ`, `REMOTE_WRITE`, `REMOTE_ATOMIC`,
    /// `ZERO_BASED`.
    pub mw_access_flags: AccessFlags,
}

impl<V: Verbs + ?Sized> Clone for MwBindInfo<'_, V> {
    fn clone(&self) -> Self {
        Self {
            mr: self.mr,
            addr: self.addr,
            length: self.length,
            mw_access_flags: self.mw_access_flags,
        }
    }
}

/// `struct ibv_mw_bind` (for `ibv_bind_mw`, type 1 windows).
pub struct MwBind<'a, V: Verbs + ?Sized> {
    /// `wr_id` of the bind's completion.
    pub wr_id: u64,
    /// `send_flags` (`SIGNALED`, `FENCE`).
    pub send_flags: SendFlags,
    /// `bind_info`.
    pub bind_info: MwBindInfo<'a, V>,
}

// -------------------------------------------------------------- ibv_wr_*

/// The operation of one extended work request: the `ibv_wr_*` builder
/// that starts it.
pub enum WrOp<'a, V: Verbs + ?Sized> {
    /// `ibv_wr_send`.
    Send,
    /// `ibv_wr_send_imm(qp, imm_data)` (host order here).
    SendImm {
        /// `imm_data`.
        imm_data: u32,
    },
    /// `ibv_wr_send_inv(qp, invalidate_rkey)`.
    SendInv {
        /// `invalidate_rkey`.
        invalidate_rkey: u32,
    },
    /// `ibv_wr_rdma_write(qp, rkey, remote_addr)`.
    RdmaWrite {
        /// `rkey`.
        rkey: u32,
        /// `remote_addr`.
        remote_addr: u64,
    },
    /// `ibv_wr_rdma_write_imm(qp, rkey, remote_addr, imm_data)`.
    RdmaWriteImm {
        /// `rkey`.
        rkey: u32,
        /// `remote_addr`.
        remote_addr: u64,
        /// `imm_data` (host order).
        imm_data: u32,
    },
    /// `ibv_wr_rdma_read(qp, rkey, remote_addr)`.
    RdmaRead {
        /// `rkey`.
        rkey: u32,
        /// `remote_addr`.
        remote_addr: u64,
    },
    /// `ibv_wr_atomic_cmp_swp(qp, rkey, remote_addr, compare, swap)`.
    AtomicCmpSwp {
        /// `rkey`.
        rkey: u32,
        /// `remote_addr`.
        remote_addr: u64,
        /// `compare`.
        compare: u64,
        /// `swap`.
        swap: u64,
    },
    /// `ibv_wr_atomic_fetch_add(qp, rkey, remote_addr, add)`.
    AtomicFetchAdd {
        /// `rkey`.
        rkey: u32,
        /// `remote_addr`.
        remote_addr: u64,
        /// `add`.
        add: u64,
    },
    /// `ibv_wr_bind_mw(qp, mw, rkey, bind_info)` (type 2 windows).
    BindMw {
        /// `mw`.
        mw: &'a V::Mw,
        /// `rkey`: the window's new rkey (its index bits must stay the
        /// window's; `ibv_inc_rkey` gives the next one).
        rkey: u32,
        /// `bind_info`.
        bind_info: MwBindInfo<'a, V>,
    },
    /// `ibv_wr_local_inv(qp, invalidate_rkey)`.
    LocalInv {
        /// `invalidate_rkey`.
        invalidate_rkey: u32,
    },
}

impl<V: Verbs + ?Sized> WrOp<'_, V> {
    /// The `ibv_wr_opcode` this builder produces.
    pub fn opcode(&self) -> WrOpcode {
        match self {
            Self::Send => WrOpcode::Send,
            Self::SendImm { .. } => WrOpcode::SendWithImm,
            Self::SendInv { .. } => WrOpcode::SendWithInv,
            Self::RdmaWrite { .. } => WrOpcode::RdmaWrite,
            Self::RdmaWriteImm { .. } => WrOpcode::RdmaWriteWithImm,
            Self::RdmaRead { .. } => WrOpcode::RdmaRead,
            Self::AtomicCmpSwp { .. } => WrOpcode::AtomicCmpAndSwp,
            Self::AtomicFetchAdd { .. } => WrOpcode::AtomicFetchAndAdd,
            Self::BindMw { .. } => WrOpcode::BindMw,
            Self::LocalInv { .. } => WrOpcode::LocalInv,
        }
    }

    /// The `IBV_QP_EX_WITH_*` bit the QP needs in its `send_ops_flags`.
    pub fn send_op_flag(&self) -> crate::SendOpsFlags {
        use crate::SendOpsFlags as S;
        match self {
            Self::Send => S::SEND,
            Self::SendImm { .. } => S::SEND_WITH_IMM,
            Self::SendInv { .. } => S::SEND_WITH_INV,
            Self::RdmaWrite { .. } => S::RDMA_WRITE,
            Self::RdmaWriteImm { .. } => S::RDMA_WRITE_WITH_IMM,
            Self::RdmaRead { .. } => S::RDMA_READ,
            Self::AtomicCmpSwp { .. } => S::ATOMIC_CMP_AND_SWP,
            Self::AtomicFetchAdd { .. } => S::ATOMIC_FETCH_AND_ADD,
            Self::BindMw { .. } => S::BIND_MW,
            Self::LocalInv { .. } => S::LOCAL_INV,
        }
    }
}

/// The data of one extended work request: `ibv_wr_set_sge`,
/// `ibv_wr_set_sge_list` or `ibv_wr_set_inline_data(_list)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WrData<'a> {
    /// No data setter called (BIND_MW, LOCAL_INV, or a zero-length message).
    #[default]
    None,
    /// `ibv_wr_set_sge(qp, lkey, addr, length)`.
    Sge(Sge),
    /// `ibv_wr_set_sge_list(qp, num_sge, sg_list)`.
    SgeList(&'a [Sge]),
    /// `ibv_wr_set_inline_data_list(qp, num_buf, buf_list)`: each entry's
    /// `addr`/`length` name bytes copied at post time (`lkey` unused; on
    /// the simulator the bytes must lie in memory it registered).
    InlineList(&'a [Sge]),
}

/// One work request of an `ibv_wr_start` … `ibv_wr_complete` batch: the
/// `qpx->wr_id` and `qpx->wr_flags` set before the builder, the builder,
/// and the setters called after it.
pub struct WrEx<'a, V: Verbs + ?Sized> {
    /// `qpx->wr_id`.
    pub wr_id: u64,
    /// `qpx->wr_flags` (`SIGNALED`, `FENCE`, `SOLICITED`; `INLINE` is
    /// implied by [`WrData::InlineList`]).
    pub wr_flags: SendFlags,
    /// The builder.
    pub op: WrOp<'a, V>,
    /// The data setter.
    pub data: WrData<'a>,
    /// `ibv_wr_set_ud_addr(qp, ah, remote_qpn, remote_qkey)` (UD QPs).
    pub ud: Option<UdInfo<'a, V>>,
    /// `ibv_wr_set_xrc_srqn(qp, remote_srqn)` (XRC_SEND QPs).
    pub xrc_srqn: Option<u32>,
    /// The request came as a raw mlx5 WQE (`mlx5dv_wr_raw_wqe`), decoded
    /// into `op`, `wr_flags` and `data` by whoever read its segments: the
    /// QP's `send_ops_flags` do not limit it (the provider copies the WQE
    /// as it is), and its successful completion reports
    /// [`WcOpcode::Driver2`] (`IBV_WC_DRIVER2`). Only its own
    /// `IBV_SEND_SIGNALED` (the WQE's `MLX5_WQE_CTRL_CQ_UPDATE`) asks for
    /// a completion: the QP's `sq_sig_all` is libmlx5's default for the
    /// WQEs it builds and does not apply to a raw one.
    pub raw_wqe: bool,
}

impl<'a, V: Verbs + ?Sized> WrEx<'a, V> {
    /// A request with `op`, no flags, no data, no addressing.
    pub fn new(wr_id: u64, op: WrOp<'a, V>) -> Self {
        Self {
            wr_id,
            wr_flags: SendFlags::empty(),
            op,
            data: WrData::None,
            ud: None,
            xrc_srqn: None,
            raw_wqe: false,
        }
    }
}

// ------------------------------------------------------- data in order

c_flags! {
    /// `enum ibv_query_qp_data_in_order_flags`.
    pub struct DataInOrderFlags: u32, "IBV_QUERY_QP_DATA_IN_ORDER_" {
        /// `IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS`: return the capability
        /// bits instead of 0/1.
        const RETURN_CAPS = 1 << 0 => "RETURN_CAPS";
    }
}

c_flags! {
    /// `enum ibv_query_qp_data_in_order_caps`: the answer.
    ///
    /// Without `RETURN_CAPS` the C function returns 1 or 0; here that is
    /// `WHOLE_MSG` (whose value is 1) or empty.
    pub struct DataInOrderCaps: u32, "IBV_QUERY_QP_DATA_IN_ORDER_" {
        /// `IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG`: a whole message's data
        /// is written in order.
        const WHOLE_MSG = 1 << 0 => "WHOLE_MSG";
        /// `IBV_QUERY_QP_DATA_IN_ORDER_ALIGNED_128_BYTES`: in order in
        /// aligned 128-byte pieces.
        const ALIGNED_128_BYTES = 1 << 1 => "ALIGNED_128_BYTES";
    }
}

// ------------------------------------------------------------ GID entries

c_enum! {
    /// `enum ibv_gid_type`.
    pub enum GidType : "IBV_GID_TYPE_" {
        /// `IBV_GID_TYPE_IB`.
        Ib = 0 => "IB",
        /// `IBV_GID_TYPE_ROCE_V1`.
        RoceV1 = 1 => "ROCE_V1",
        /// `IBV_GID_TYPE_ROCE_V2`.
        RoceV2 = 2 => "ROCE_V2",
    }
}

// c_enum! generates the enum, so its default variant is named here.
#[allow(clippy::derivable_impls)]
impl Default for GidType {
    fn default() -> Self {
        Self::Ib
    }
}

/// `struct ibv_gid_entry`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct GidEntry {
    /// `gid`.
    pub gid: Gid,
    /// `gid_index`.
    pub gid_index: u32,
    /// `port_num`.
    pub port_num: u32,
    /// `gid_type`.
    pub gid_type: GidType,
    /// `ndev_ifindex`: the network device of a RoCE GID (0 on InfiniBand).
    pub ndev_ifindex: u32,
}

/// `struct ibv_ece`: Enhanced Connection Establishment options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Ece {
    /// `vendor_id` (IEEE OUI; mlx5: 0x02c9).
    pub vendor_id: u32,
    /// `options`: provider-specific bits.
    pub options: u32,
    /// `comp_mask` (must be 0).
    pub comp_mask: u32,
}
