//! Work requests and work completions.

use crate::Verbs;

/// `struct ibv_sge`: a raw scatter/gather entry, exactly as on hardware.
///
/// `addr` is a virtual address inside a registered MR (or an offset for a
/// zero-based MR); bad keys and out-of-range addresses are expressible and
/// produce the protection errors the spec gives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Sge {
    /// `addr`.
    pub addr: u64,
    /// `length`.
    pub length: u32,
    /// `lkey`.
    pub lkey: u32,
}

c_enum! {
    /// `enum ibv_wr_opcode`.
    pub enum WrOpcode : "IBV_WR_" {
        /// `IBV_WR_RDMA_WRITE`.
        RdmaWrite = 0 => "RDMA_WRITE",
        /// `IBV_WR_RDMA_WRITE_WITH_IMM`.
        RdmaWriteWithImm = 1 => "RDMA_WRITE_WITH_IMM",
        /// `IBV_WR_SEND`.
        Send = 2 => "SEND",
        /// `IBV_WR_SEND_WITH_IMM`.
        SendWithImm = 3 => "SEND_WITH_IMM",
        /// `IBV_WR_RDMA_READ`.
        RdmaRead = 4 => "RDMA_READ",
        /// `IBV_WR_ATOMIC_CMP_AND_SWP`.
        AtomicCmpAndSwp = 5 => "ATOMIC_CMP_AND_SWP",
        /// `IBV_WR_ATOMIC_FETCH_AND_ADD`.
        AtomicFetchAndAdd = 6 => "ATOMIC_FETCH_AND_ADD",
        /// `IBV_WR_LOCAL_INV`.
        LocalInv = 7 => "LOCAL_INV",
        /// `IBV_WR_BIND_MW`.
        BindMw = 8 => "BIND_MW",
        /// `IBV_WR_SEND_WITH_INV`.
        SendWithInv = 9 => "SEND_WITH_INV",
        /// `IBV_WR_TSO`.
        Tso = 10 => "TSO",
        /// `IBV_WR_DRIVER1`.
        Driver1 = 11 => "DRIVER1",
        /// `IBV_WR_FLUSH`.
        Flush = 14 => "FLUSH",
        /// `IBV_WR_ATOMIC_WRITE`.
        AtomicWrite = 15 => "ATOMIC_WRITE",
    }
}

// c_enum! generates the enum, so its default variant is named here.
#[allow(clippy::derivable_impls)]
impl Default for WrOpcode {
    fn default() -> Self {
        Self::Send
    }
}

c_flags! {
    /// `enum ibv_send_flags`.
    pub struct SendFlags: u32, "IBV_SEND_" {
        /// `IBV_SEND_FENCE`.
        const FENCE = 1 << 0 => "FENCE";
        /// `IBV_SEND_SIGNALED`.
        const SIGNALED = 1 << 1 => "SIGNALED";
        /// `IBV_SEND_SOLICITED`.
        const SOLICITED = 1 << 2 => "SOLICITED";
        /// `IBV_SEND_INLINE`.
        const INLINE = 1 << 3 => "INLINE";
        /// `IBV_SEND_IP_CSUM`.
        const IP_CSUM = 1 << 4 => "IP_CSUM";
    }
}

/// `wr.rdma` of `ibv_send_wr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct RdmaInfo {
    /// `remote_addr`.
    pub remote_addr: u64,
    /// `rkey`.
    pub rkey: u32,
}

/// `wr.atomic` of `ibv_send_wr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct AtomicInfo {
    /// `remote_addr` (8-byte aligned).
    pub remote_addr: u64,
    /// `compare_add`: the compare value (CMP_AND_SWP) or the addend (FETCH_AND_ADD).
    pub compare_add: u64,
    /// `swap`.
    pub swap: u64,
    /// `rkey`.
    pub rkey: u32,
}

/// The flush parameters of an `IBV_WR_FLUSH` request (`ibv_wr_flush(qp,
/// rkey, remote_addr, len, type, level)`; the kernel's `wr.flush`). The
/// rkey and remote address are `wr.rdma`'s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct FlushInfo {
    /// `len`: bytes from `remote_addr` (ignored when `level` is
    /// [`FlushInfo::LEVEL_MR`]).
    pub len: u64,
    /// `type`: [`FlushInfo::GLOBAL`] and/or [`FlushInfo::PERSISTENT`]
    /// (`IBV_FLUSH_GLOBAL` = 1, `IBV_FLUSH_PERSISTENT` = 2).
    pub flush_type: u8,
    /// `level`: [`FlushInfo::LEVEL_RANGE`] (`IBV_FLUSH_RANGE` = 0) or
    /// [`FlushInfo::LEVEL_MR`] (`IBV_FLUSH_MR` = 1).
    pub level: u8,
}

impl FlushInfo {
    /// `IBV_FLUSH_GLOBAL`: placement type "global visibility".
    pub const GLOBAL: u8 = 1;
    /// `IBV_FLUSH_PERSISTENT`: placement type "persistence".
    pub const PERSISTENT: u8 = 2;
    /// `IBV_FLUSH_RANGE`: flush `[remote_addr, remote_addr + len)`.
    pub const LEVEL_RANGE: u8 = 0;
    /// `IBV_FLUSH_MR`: flush the whole MR the rkey names.
    pub const LEVEL_MR: u8 = 1;
}

/// `wr.ud` of `ibv_send_wr`.
pub struct UdInfo<'a, V: Verbs + ?Sized> {
    /// `ah`.
    pub ah: &'a V::Ah,
    /// `remote_qpn`.
    pub remote_qpn: u32,
    /// `remote_qkey` (a value with the high bit set means "use the QP's own Q_Key").
    pub remote_qkey: u32,
}

/// DC addressing of one work request on a DCI (`mlx5dv_wr_set_dc_addr_stream`).
pub struct DcInfo<'a, V: Verbs + ?Sized> {
    /// `ah`: the destination address vector.
    pub ah: &'a V::Ah,
    /// `remote_dctn`: the DCT number.
    pub remote_dctn: u32,
    /// `remote_dc_key`: must match the DCT's access key.
    pub remote_dc_key: u64,
    /// `stream_id`: selects stream `stream_id mod 2^log_num_concurent`
    /// (any id; without DCI streams every id is the one stream).
    pub stream_id: u16,
}

/// `struct ibv_send_wr` (one element; a post takes a slice of them, the
/// slice order standing for C's `next` chain).
pub struct SendWr<'a, V: Verbs + ?Sized> {
    /// `wr_id`.
    pub wr_id: u64,
    /// `sg_list` / `num_sge`.
    pub sg_list: &'a [Sge],
    /// `opcode`.
    pub opcode: WrOpcode,
    /// `send_flags`.
    pub send_flags: SendFlags,
    /// `imm_data` (host order here; the wire carries it big endian) or
    /// `invalidate_rkey` for `SEND_WITH_INV`.
    pub imm_data: u32,
    /// `wr.rdma`.
    pub rdma: RdmaInfo,
    /// `wr.atomic`.
    pub atomic: AtomicInfo,
    /// `wr.ud` (UD QPs).
    pub ud: Option<UdInfo<'a, V>>,
    /// `qp_type.xrc.remote_srqn` (XRC_SEND QPs).
    pub remote_srqn: u32,
    /// DC addressing (mlx5 DCI QPs).
    pub dc: Option<DcInfo<'a, V>>,
    /// `IBV_WR_FLUSH` parameters (type, level, length).
    pub flush: FlushInfo,
}

impl<V: Verbs + ?Sized> Default for SendWr<'_, V> {
    fn default() -> Self {
        Self {
            wr_id: 0,
            sg_list: &[],
            opcode: WrOpcode::Send,
            send_flags: SendFlags::empty(),
            imm_data: 0,
            rdma: RdmaInfo::default(),
            atomic: AtomicInfo::default(),
            ud: None,
            remote_srqn: 0,
            dc: None,
            flush: FlushInfo::default(),
        }
    }
}

impl<V: Verbs + ?Sized> core::fmt::Debug for SendWr<'_, V> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SendWr")
            .field("wr_id", &self.wr_id)
            .field("sg_list", &self.sg_list)
            .field("opcode", &self.opcode)
            .field("send_flags", &self.send_flags)
            .field("imm_data", &self.imm_data)
            .field("rdma", &self.rdma)
            .field("atomic", &self.atomic)
            .field(
                "ud",
                &self
                    .ud
                    .as_ref()
                    .map(|u| (u.ah, u.remote_qpn, u.remote_qkey)),
            )
            .field("remote_srqn", &self.remote_srqn)
            .field(
                "dc",
                &self
                    .dc
                    .as_ref()
                    .map(|d| (d.ah, d.remote_dctn, d.remote_dc_key, d.stream_id)),
            )
            .finish()
    }
}

/// `struct ibv_recv_wr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvWr<'a> {
    /// `wr_id`.
    pub wr_id: u64,
    /// `sg_list` / `num_sge`.
    pub sg_list: &'a [Sge],
}

c_enum! {
    /// `enum ibv_wc_status`.
    pub enum WcStatus : "IBV_WC_" {
        /// `IBV_WC_SUCCESS`.
        Success = 0 => "SUCCESS",
        /// `IBV_WC_LOC_LEN_ERR`.
        LocLenErr = 1 => "LOC_LEN_ERR",
        /// `IBV_WC_LOC_QP_OP_ERR`.
        LocQpOpErr = 2 => "LOC_QP_OP_ERR",
        /// `IBV_WC_LOC_EEC_OP_ERR`.
        LocEecOpErr = 3 => "LOC_EEC_OP_ERR",
        /// `IBV_WC_LOC_PROT_ERR`.
        LocProtErr = 4 => "LOC_PROT_ERR",
        /// `IBV_WC_WR_FLUSH_ERR`.
        WrFlushErr = 5 => "WR_FLUSH_ERR",
        /// `IBV_WC_MW_BIND_ERR`.
        MwBindErr = 6 => "MW_BIND_ERR",
        /// `IBV_WC_BAD_RESP_ERR`.
        BadRespErr = 7 => "BAD_RESP_ERR",
        /// `IBV_WC_LOC_ACCESS_ERR`.
        LocAccessErr = 8 => "LOC_ACCESS_ERR",
        /// `IBV_WC_REM_INV_REQ_ERR`.
        RemInvReqErr = 9 => "REM_INV_REQ_ERR",
        /// `IBV_WC_REM_ACCESS_ERR`.
        RemAccessErr = 10 => "REM_ACCESS_ERR",
        /// `IBV_WC_REM_OP_ERR`.
        RemOpErr = 11 => "REM_OP_ERR",
        /// `IBV_WC_RETRY_EXC_ERR`.
        RetryExcErr = 12 => "RETRY_EXC_ERR",
        /// `IBV_WC_RNR_RETRY_EXC_ERR`.
        RnrRetryExcErr = 13 => "RNR_RETRY_EXC_ERR",
        /// `IBV_WC_LOC_RDD_VIOL_ERR`.
        LocRddViolErr = 14 => "LOC_RDD_VIOL_ERR",
        /// `IBV_WC_REM_INV_RD_REQ_ERR`.
        RemInvRdReqErr = 15 => "REM_INV_RD_REQ_ERR",
        /// `IBV_WC_REM_ABORT_ERR`.
        RemAbortErr = 16 => "REM_ABORT_ERR",
        /// `IBV_WC_INV_EECN_ERR`.
        InvEecnErr = 17 => "INV_EECN_ERR",
        /// `IBV_WC_INV_EEC_STATE_ERR`.
        InvEecStateErr = 18 => "INV_EEC_STATE_ERR",
        /// `IBV_WC_FATAL_ERR`.
        FatalErr = 19 => "FATAL_ERR",
        /// `IBV_WC_RESP_TIMEOUT_ERR`.
        RespTimeoutErr = 20 => "RESP_TIMEOUT_ERR",
        /// `IBV_WC_GENERAL_ERR`.
        GeneralErr = 21 => "GENERAL_ERR",
        /// `IBV_WC_TM_ERR`.
        TmErr = 22 => "TM_ERR",
        /// `IBV_WC_TM_RNDV_INCOMPLETE`.
        TmRndvIncomplete = 23 => "TM_RNDV_INCOMPLETE",
    }
}

// c_enum! generates the enum, so its default variant is named here.
#[allow(clippy::derivable_impls)]
impl Default for WcStatus {
    fn default() -> Self {
        Self::Success
    }
}

c_enum! {
    /// `enum ibv_wc_opcode`.
    pub enum WcOpcode : "IBV_WC_" {
        /// `IBV_WC_SEND`.
        Send = 0 => "SEND",
        /// `IBV_WC_RDMA_WRITE`.
        RdmaWrite = 1 => "RDMA_WRITE",
        /// `IBV_WC_RDMA_READ`.
        RdmaRead = 2 => "RDMA_READ",
        /// `IBV_WC_COMP_SWAP`.
        CompSwap = 3 => "COMP_SWAP",
        /// `IBV_WC_FETCH_ADD`.
        FetchAdd = 4 => "FETCH_ADD",
        /// `IBV_WC_BIND_MW`.
        BindMw = 5 => "BIND_MW",
        /// `IBV_WC_LOCAL_INV`.
        LocalInv = 6 => "LOCAL_INV",
        /// `IBV_WC_TSO`.
        Tso = 7 => "TSO",
        /// `IBV_WC_FLUSH`.
        Flush = 8 => "FLUSH",
        /// `IBV_WC_ATOMIC_WRITE`.
        AtomicWrite = 9 => "ATOMIC_WRITE",
        /// `IBV_WC_RECV`.
        Recv = 128 => "RECV",
        /// `IBV_WC_RECV_RDMA_WITH_IMM`.
        RecvRdmaWithImm = 129 => "RECV_RDMA_WITH_IMM",
        /// `IBV_WC_DRIVER2` (mlx5's `MLX5DV_WC_RAW_WQE`): the completion
        /// of a WQE posted raw with `mlx5dv_wr_raw_wqe`.
        Driver2 = 136 => "DRIVER2",
    }
}

// c_enum! generates the enum, so its default variant is named here.
#[allow(clippy::derivable_impls)]
impl Default for WcOpcode {
    fn default() -> Self {
        Self::Send
    }
}

c_flags! {
    /// `enum ibv_wc_flags`.
    pub struct WcFlags: u32, "IBV_WC_" {
        /// `IBV_WC_GRH`.
        const GRH = 1 << 0 => "GRH";
        /// `IBV_WC_WITH_IMM`.
        const WITH_IMM = 1 << 1 => "WITH_IMM";
        /// `IBV_WC_IP_CSUM_OK`.
        const IP_CSUM_OK = 1 << 2 => "IP_CSUM_OK";
        /// `IBV_WC_WITH_INV`.
        const WITH_INV = 1 << 3 => "WITH_INV";
        /// `IBV_WC_TM_SYNC_REQ`.
        const TM_SYNC_REQ = 1 << 4 => "TM_SYNC_REQ";
        /// `IBV_WC_TM_MATCH`.
        const TM_MATCH = 1 << 5 => "TM_MATCH";
        /// `IBV_WC_TM_DATA_VALID`.
        const TM_DATA_VALID = 1 << 6 => "TM_DATA_VALID";
    }
}

/// `struct ibv_wc`: one work completion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Wc {
    /// `wr_id`.
    pub wr_id: u64,
    /// `status`.
    pub status: WcStatus,
    /// `opcode` (not meaningful on error completions, as on hardware).
    pub opcode: WcOpcode,
    /// `vendor_err`.
    pub vendor_err: u32,
    /// `byte_len`.
    pub byte_len: u32,
    /// `imm_data` (host order) or `invalidated_rkey`; valid per `wc_flags`.
    pub imm_data: u32,
    /// `qp_num`: the local QP.
    pub qp_num: u32,
    /// `src_qp`: the remote QP (UD, and receives in general).
    pub src_qp: u32,
    /// `wc_flags`.
    pub wc_flags: WcFlags,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `slid`.
    pub slid: u16,
    /// `sl`.
    pub sl: u8,
    /// `dlid_path_bits`.
    pub dlid_path_bits: u8,
}
