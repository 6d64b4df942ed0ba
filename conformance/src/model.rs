//! A pure reference model of the QP control path: what `ibv_modify_qp`,
//! `ibv_create_qp(_ex)`, `ibv_query_qp` and `ibv_destroy_qp` must return,
//! computed from the spec alone (no backend is consulted).
//!
//! The property tests (`tests/prop_*.rs`) drive a backend and this model side
//! by side and compare errno classes and states (style rule R24 b).
//!
//! * State and attribute-mask validation is verbs-api's transition table
//!   ([`check_modify`], spec `qp-state-machine.md` §2–§4, §5.1, §6.1).
//! * Attribute value ranges are `qp-state-machine.md` §5.1/§5.2, using the
//!   *recommended simulator rule* of each row.
//! * Creation follows `create-qp.md` §2–§6. Where the spec leaves the outcome
//!   to a provider's internal sizes (mlx5 WQE overheads) or only says
//!   "expected to fail" (caps above `ibv_device_attr` limits that mlx5 may
//!   still accept), the model says so: [`CreateExpect::ok_allowed`] is set
//!   together with the errnos that are also acceptable, instead of guessing.
//! * When several independent rules are broken at once, the spec does not
//!   say which check runs first, so every errno of a broken rule is accepted.
//!
//! Everything here is plain data and pure functions; nothing is random.

use verbs_api::errno::{EBUSY, EINVAL, ENOENT, EOPNOTSUPP};
use verbs_api::{
    check_modify, transition_masks, LinkLayer, Mtu, QpAttr, QpAttrMask, QpCap, QpClass,
    QpCreateFlags, QpInitAttrMask, QpState, QpType, SendOpsFlags, TableFlavor, TransitionMasks,
    QPF_GRH_REQUIRED,
};

/// Per-driver creation limits the spec's rounding rules need
/// (`create-qp.md` §4.2 for mlx5, §4.3 for rxe).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverLimits {
    /// mlx5 user-space provider sizes.
    Mlx5 {
        /// `max_sq_desc_sz`: largest send WQE in bytes.
        max_sq_desc_sz: u32,
        /// `max_rq_desc_sz`: largest receive WQE in bytes.
        max_rq_desc_sz: u32,
        /// `max_send_wqebb`: most 64-byte blocks in one send queue.
        max_send_wqebb: u32,
    },
    /// rxe: every cap is checked against a fixed limit.
    Rxe {
        /// `RXE_MAX_INLINE_DATA`.
        max_inline_data: u32,
    },
}

/// What the model needs to know about one device: the values a program sees
/// through `ibv_query_device` / `ibv_query_port`, which driver rules apply and
/// which optional features it has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceModel {
    /// Profile name, for messages and printed scripts (`cx6`, `rxe`).
    pub name: String,
    /// Which transition table `ibv_modify_qp` follows (spec §6.1).
    pub flavor: TableFlavor,
    /// `phys_port_cnt`.
    pub phys_port_cnt: u8,
    /// `max_qp_wr`.
    pub max_qp_wr: u32,
    /// `max_sge`.
    pub max_sge: u32,
    /// `max_qp_rd_atom` (responder resources bound).
    pub max_qp_rd_atom: u32,
    /// `max_qp_init_rd_atom` (initiator depth bound).
    pub max_qp_init_rd_atom: u32,
    /// Port 1 `pkey_tbl_len`.
    pub pkey_tbl_len: u16,
    /// Port 1 `gid_tbl_len`.
    pub gid_tbl_len: u32,
    /// Port 1 `active_mtu`.
    pub active_mtu: Mtu,
    /// Port 1 `max_mtu`.
    pub max_mtu: Mtu,
    /// `true` on RoCE ports: address vectors need a GRH and ALT_PATH is refused.
    pub grh_required: bool,
    /// Create flags the device supports (others: `EOPNOTSUPP`, `create-qp.md` §3.2).
    pub create_flags: QpCreateFlags,
    /// Driver-specific creation limits.
    pub driver: DriverLimits,
}

impl DeviceModel {
    /// `true` when `grh_required` follows from the port's link layer and flags.
    pub fn grh_required_from(link_layer: LinkLayer, port_flags: u8) -> bool {
        link_layer == LinkLayer::Ethernet || port_flags & QPF_GRH_REQUIRED != 0
    }

    /// `true` for a port number `1..=phys_port_cnt` (spec §5.1).
    pub fn port_valid(&self, port: u8) -> bool {
        port >= 1 && port <= self.phys_port_cnt
    }

    /// The largest MTU a QP may use: the port's active MTU (spec §5.2,
    /// recommended rule "≤ port active_mtu/max_mtu"; the generators never
    /// ask for an MTU between the two, where the rule is ambiguous).
    pub fn mtu_ok(&self, mtu: Mtu) -> bool {
        let raw = mtu.to_raw();
        (1..=5).contains(&raw) && raw <= self.active_mtu.to_raw()
    }
}

/// The class of a QP of `qp_type` for the transition table, or `None` for
/// types the model does not cover.
pub fn class_of(qp_type: QpType) -> Option<QpClass> {
    match qp_type {
        QpType::Rc => Some(QpClass::Rc),
        QpType::Uc => Some(QpClass::Uc),
        QpType::Ud => Some(QpClass::Ud),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// modify_qp

/// What the model remembers about one QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpModel {
    /// Its class (RC, UC or UD).
    pub class: QpClass,
    /// Its state: RESET at creation (`create-qp.md` §1), then whatever the
    /// last successful modify entered.
    pub state: QpState,
    /// The port set by the last successful modify with `PORT` (0: never set).
    pub port: u8,
}

impl QpModel {
    /// A freshly created QP: RESET, no port.
    pub fn new(class: QpClass) -> Self {
        Self {
            class,
            state: QpState::Reset,
            port: 0,
        }
    }

    /// What `ibv_modify_qp(attr, mask)` must return, without changing the model.
    ///
    /// # Errors
    /// The errno the spec gives: `EOPNOTSUPP` for mask bits outside
    /// `STANDARD_BITS | RATE_LIMIT` (spec §5.1, checked first by uverbs), and
    /// `EINVAL` for everything else (§8).
    pub fn expect_modify(
        &self,
        dev: &DeviceModel,
        attr: &QpAttr,
        mask: QpAttrMask,
    ) -> Result<QpState, i32> {
        let next = check_modify(
            self.class,
            dev.flavor,
            self.state,
            mask,
            attr.qp_state,
            attr.cur_qp_state,
        )
        .map_err(|kind| kind.errno())?;
        if range_violation(dev, self, attr, mask).is_some() {
            return Err(EINVAL);
        }
        Ok(next)
    }

    /// Applies `modify_qp`: returns what [`QpModel::expect_modify`] returns and,
    /// on success, updates the state (when `STATE` is in the mask) and port
    /// (nothing changes on error, spec §3 "Atomicity").
    ///
    /// The model validates against `attr.cur_qp_state` when `CUR_STATE` is
    /// given, as the kernel does (§3); callers pass the QP's real state there
    /// (or a value beyond ERR), because the spec leaves a *false* in-range
    /// `cur_qp_state` open (§3 vs the §7 recommendation).
    ///
    /// # Errors
    /// As [`QpModel::expect_modify`].
    pub fn apply_modify(
        &mut self,
        dev: &DeviceModel,
        attr: &QpAttr,
        mask: QpAttrMask,
    ) -> Result<QpState, i32> {
        let next = self.expect_modify(dev, attr, mask)?;
        // libibverbs records the new state only when STATE was in the mask (U-VERBS, spec §3).
        if mask.contains(QpAttrMask::STATE) {
            self.state = next;
        }
        if mask.contains(QpAttrMask::PORT) {
            self.port = attr.port_num;
        }
        Ok(next)
    }
}

/// The first attribute value of `attr` (among the bits of `mask`) that is out
/// of range per spec §5.1/§5.2, named, or `None` when every value is fine.
///
/// Only called once the state and mask passed the table, so every bit in
/// `mask` is one the transition accepts.
pub fn range_violation(
    dev: &DeviceModel,
    qp: &QpModel,
    attr: &QpAttr,
    mask: QpAttrMask,
) -> Option<&'static str> {
    use QpAttrMask as M;
    let has = |bit: QpAttrMask| mask.contains(bit);
    // §5.1: PORT must be 1..=phys_port_cnt.
    if has(M::PORT) && !dev.port_valid(attr.port_num) {
        return Some("port_num");
    }
    // The QP's port after this modify (PORT given or the one set earlier).
    let qp_port = if has(M::PORT) { attr.port_num } else { qp.port };
    // §5.2 pkey_index < pkey table length.
    if has(M::PKEY_INDEX) && attr.pkey_index >= dev.pkey_tbl_len {
        return Some("pkey_index");
    }
    // §5.1 AV: valid port, equal to the QP's port; §5.2 GRH on RoCE, sgid_index.
    if has(M::AV) {
        let ah = &attr.ah_attr;
        if !dev.port_valid(ah.port_num) || ah.port_num != qp_port {
            return Some("ah_attr.port_num");
        }
        if dev.grh_required && !ah.is_global {
            return Some("ah_attr.is_global");
        }
        if ah.is_global && u32::from(ah.grh.sgid_index) >= dev.gid_tbl_len {
            return Some("ah_attr.grh.sgid_index");
        }
    }
    // §5.1: ALT_PATH is refused on RoCE; otherwise a valid alternate port whose
    // AV names it, and the §5.2 ranges of its fields.
    if has(M::ALT_PATH) {
        if dev.grh_required {
            return Some("alt_path on RoCE");
        }
        let ah = &attr.alt_ah_attr;
        if !dev.port_valid(attr.alt_port_num) || ah.port_num != attr.alt_port_num {
            return Some("alt_port_num");
        }
        if attr.alt_pkey_index >= dev.pkey_tbl_len {
            return Some("alt_pkey_index");
        }
        if attr.alt_timeout > 31 {
            return Some("alt_timeout");
        }
        if ah.is_global && u32::from(ah.grh.sgid_index) >= dev.gid_tbl_len {
            return Some("alt_ah_attr.grh.sgid_index");
        }
    }
    // §5.2 path_mtu: enum 1..=5 and within the port's MTU.
    if has(M::PATH_MTU) && !dev.mtu_ok(attr.path_mtu) {
        return Some("path_mtu");
    }
    // §5.2 recommended rules for the retry/timer fields.
    if has(M::TIMEOUT) && attr.timeout > 31 {
        return Some("timeout");
    }
    if has(M::RETRY_CNT) && attr.retry_cnt > 7 {
        return Some("retry_cnt");
    }
    if has(M::RNR_RETRY) && attr.rnr_retry > 7 {
        return Some("rnr_retry");
    }
    if has(M::MIN_RNR_TIMER) && attr.min_rnr_timer > 31 {
        return Some("min_rnr_timer");
    }
    // §5.2 rd_atomic bounds.
    if has(M::MAX_QP_RD_ATOMIC) && u32::from(attr.max_rd_atomic) > dev.max_qp_init_rd_atom {
        return Some("max_rd_atomic");
    }
    if has(M::MAX_DEST_RD_ATOMIC) && u32::from(attr.max_dest_rd_atomic) > dev.max_qp_rd_atom {
        return Some("max_dest_rd_atomic");
    }
    None
}

/// The table entry for `from → to` (verbs-api's transcription of spec §4).
pub fn masks_for(
    class: QpClass,
    flavor: TableFlavor,
    from: QpState,
    to: QpState,
) -> Option<TransitionMasks> {
    transition_masks(class, from, to, flavor)
}

/// Attribute values that pass every §5.2 range rule on `dev` for a QP whose
/// port is (or becomes) 1: the baseline the generators perturb.
pub fn valid_attr(dev: &DeviceModel, to: QpState, cur: QpState, dest_qp_num: u32) -> QpAttr {
    let mut attr = QpAttr {
        qp_state: to,
        cur_qp_state: cur,
        path_mtu: if dev.mtu_ok(Mtu::Mtu1024) {
            Mtu::Mtu1024
        } else {
            Mtu::Mtu256
        },
        qkey: 0x1111_1111,
        dest_qp_num,
        qp_access_flags: verbs_api::AccessFlags::REMOTE_WRITE,
        pkey_index: 0,
        max_rd_atomic: 1,
        max_dest_rd_atomic: 1,
        min_rnr_timer: 12,
        port_num: 1,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        alt_port_num: 1,
        alt_timeout: 14,
        ..QpAttr::default()
    };
    attr.ah_attr.port_num = 1;
    attr.ah_attr.is_global = true;
    attr.ah_attr.grh.hop_limit = 1;
    attr.alt_ah_attr = attr.ah_attr;
    attr
}

// ---------------------------------------------------------------------------
// create_qp

/// Which creation verb is called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreateApi {
    /// `ibv_create_qp(pd, init_attr)`: the legacy struct has no `comp_mask`,
    /// `create_flags` or `send_ops_flags`; they are ignored (`create-qp.md` §1).
    Legacy,
    /// `ibv_create_qp_ex(ctx, init_attr_ex)`.
    Ex,
}

/// The parts of a creation request the spec's rules look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CreateRequest {
    /// Which verb.
    pub api: CreateApi,
    /// `qp_type`.
    pub qp_type: QpType,
    /// `comp_mask` (ex only).
    pub comp_mask: QpInitAttrMask,
    /// `create_flags` (ex only, read with `CREATE_FLAGS`).
    pub create_flags: QpCreateFlags,
    /// `send_ops_flags` (ex only, read with `SEND_OPS_FLAGS`).
    pub send_ops_flags: SendOpsFlags,
    /// Requested capabilities.
    pub cap: QpCap,
    /// An SRQ is given.
    pub srq: bool,
    /// A send CQ is given.
    pub send_cq: bool,
    /// A receive CQ is given.
    pub recv_cq: bool,
}

/// What a creation must do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CreateExpect {
    /// Success is acceptable (then every returned cap must be ≥ requested).
    pub ok_allowed: bool,
    /// Errnos that are acceptable failures (empty with `ok_allowed`: must succeed).
    pub errnos: Vec<i32>,
    /// Why each errno is acceptable, for messages.
    pub reasons: Vec<String>,
}

impl CreateExpect {
    /// Adds a definite violation: success is no longer acceptable.
    fn broken(&mut self, errno: i32, why: impl Into<String>) {
        self.add(errno, why);
    }

    /// Adds an errno that may or may not be returned (a provider-dependent limit).
    fn maybe(&mut self, errno: i32, why: impl Into<String>) {
        self.add(errno, why);
    }

    fn add(&mut self, errno: i32, why: impl Into<String>) {
        if !self.errnos.contains(&errno) {
            self.errnos.push(errno);
        }
        self.reasons.push(why.into());
    }

    /// `true` when `result` (`Ok` or an errno) is acceptable.
    pub fn accepts(&self, result: Result<(), i32>) -> bool {
        match result {
            Ok(()) => self.ok_allowed,
            Err(e) => self.errnos.contains(&e),
        }
    }
}

/// The `ibv_qp_create_send_ops_flags` an mlx5 QP of `class` supports
/// (`create-qp.md` §3.3, `MLX5_SUPPORTED_SEND_OPS_FLAGS_*`).
pub fn mlx5_send_ops(class: QpClass) -> SendOpsFlags {
    use SendOpsFlags as S;
    let uc = S::SEND
        .union(S::SEND_WITH_INV)
        .union(S::SEND_WITH_IMM)
        .union(S::RDMA_WRITE)
        .union(S::RDMA_WRITE_WITH_IMM)
        .union(S::LOCAL_INV)
        .union(S::BIND_MW);
    match class {
        QpClass::Rc | QpClass::XrcIni | QpClass::Dci => uc
            .union(S::RDMA_READ)
            .union(S::ATOMIC_CMP_AND_SWP)
            .union(S::ATOMIC_FETCH_AND_ADD),
        QpClass::Uc => uc,
        QpClass::Ud => S::SEND.union(S::SEND_WITH_IMM),
        QpClass::RawPacket => S::SEND.union(S::TSO),
        QpClass::XrcTgt | QpClass::Dct => S::empty(),
    }
}

fn align_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to) * to
}

fn pow2_at_least(v: u64) -> u64 {
    v.max(1).next_power_of_two()
}

/// Smallest and largest per-WQE overhead the mlx5 send-queue rule may use:
/// a control segment only, up to a generous bound on the type segments
/// (`create-qp.md` §4.2 step 1 does not give exact sizes).
const MLX5_OVERHEAD_MIN: u64 = 16;
const MLX5_OVERHEAD_MAX: u64 = 128;

/// The mlx5 send-queue size checks (`create-qp.md` §4.2 steps 2–6) for one
/// overhead value: `true` when they pass.
fn mlx5_sq_fits(cap: &QpCap, overhead: u64, max_sq_desc_sz: u32, max_send_wqebb: u32) -> bool {
    let desc = u64::from(max_sq_desc_sz);
    let sge = u64::from(cap.max_send_sge);
    if overhead + 16 * sge > desc {
        return false;
    }
    let by_sge = overhead + 16 * sge;
    let by_inline = overhead + align_up(4 + u64::from(cap.max_inline_data), 16);
    let wqe = align_up(by_sge.max(by_inline), 64);
    if wqe > desc {
        return false;
    }
    let wr = u64::from(cap.max_send_wr);
    if wr > 0x7fff_ffff / desc {
        return false;
    }
    pow2_at_least(wr * wqe) / 64 <= u64::from(max_send_wqebb)
}

/// What `ibv_create_qp` / `ibv_create_qp_ex` must do with `req` on `dev`
/// (`create-qp.md` §2–§6).
pub fn expect_create(dev: &DeviceModel, req: &CreateRequest) -> CreateExpect {
    use QpInitAttrMask as CM;
    let mut out = CreateExpect {
        ok_allowed: true,
        ..CreateExpect::default()
    };
    let mut definite = false;
    let class = class_of(req.qp_type);
    // §2 qp_type: anything but the known types is EINVAL.
    if class.is_none() {
        out.broken(EINVAL, format!("unknown qp_type {}", req.qp_type.to_raw()));
        definite = true;
    }
    if req.api == CreateApi::Ex {
        // §3.1 unknown comp_mask bits: EINVAL (generic path).
        if req.comp_mask.unknown_bits() != 0 {
            out.broken(EINVAL, "unknown comp_mask bit");
            definite = true;
        }
        // §2/§6: a non-XRC_RECV QP needs IBV_QP_INIT_ATTR_PD.
        if !req.comp_mask.contains(CM::PD) {
            out.broken(EINVAL, "comp_mask without PD");
            definite = true;
        }
        if req.comp_mask.contains(CM::CREATE_FLAGS) && !req.create_flags.is_empty() {
            let flags = req.create_flags;
            // §3.2 unknown flag bits: EINVAL.
            if flags.unknown_bits() != 0 {
                out.broken(EINVAL, "unknown create flag bit");
                definite = true;
            }
            let known = QpCreateFlags(flags.bits() & QpCreateFlags::all_named().bits());
            if !known.is_empty() {
                // §3.2: any create flag on a type other than UD: EINVAL.
                if class != Some(QpClass::Ud) {
                    out.broken(EINVAL, "create flags on a non-UD QP");
                    definite = true;
                }
                // §3.2: SCATTER_FCS / CVLAN_STRIPPING on UD: EINVAL.
                if class == Some(QpClass::Ud)
                    && known.intersects(
                        QpCreateFlags::SCATTER_FCS.union(QpCreateFlags::CVLAN_STRIPPING),
                    )
                {
                    out.broken(EINVAL, "Ethernet-only create flag on UD");
                    definite = true;
                }
                // §3.2 / §4.3: flags the device does not support: EOPNOTSUPP.
                if !known.difference(dev.create_flags).is_empty() {
                    out.broken(EOPNOTSUPP, "create flag the device does not support");
                    definite = true;
                }
            }
        }
        if req.comp_mask.contains(CM::SEND_OPS_FLAGS) {
            // §3.3: ops the type cannot post: EOPNOTSUPP (mlx5 sets; the
            // generators ask for send ops on mlx5 profiles only).
            if let Some(c) = class {
                if !req.send_ops_flags.difference(mlx5_send_ops(c)).is_empty() {
                    out.broken(EOPNOTSUPP, "send_ops_flags the QP type does not support");
                    definite = true;
                }
            }
        }
    }
    // §5: RC/UC/UD need both CQs.
    if !req.send_cq || !req.recv_cq {
        out.broken(EINVAL, "missing CQ");
        definite = true;
    }
    // §4: capabilities.
    let cap = &req.cap;
    let recv_checked = !req.srq;
    match dev.driver {
        DriverLimits::Rxe { max_inline_data } => {
            // §4.3: any cap above the limit is EINVAL; recv caps unchecked with an SRQ.
            let over = cap.max_send_wr > dev.max_qp_wr
                || cap.max_send_sge > dev.max_sge
                || cap.max_inline_data > max_inline_data
                || (recv_checked
                    && (cap.max_recv_wr > dev.max_qp_wr || cap.max_recv_sge > dev.max_sge));
            if over {
                out.broken(EINVAL, "cap above an rxe limit");
                definite = true;
            }
        }
        DriverLimits::Mlx5 {
            max_sq_desc_sz,
            max_rq_desc_sz,
            max_send_wqebb,
        } => {
            // §4.1: max_qp_wr bounds max_send_wr; with WQEs of at least one
            // 64-byte block, §4.2 step 6 refuses anything above it.
            if cap.max_send_wr > dev.max_qp_wr {
                out.broken(EINVAL, "max_send_wr above max_qp_wr");
                definite = true;
            } else {
                let fits_small =
                    mlx5_sq_fits(cap, MLX5_OVERHEAD_MIN, max_sq_desc_sz, max_send_wqebb);
                let fits_large =
                    mlx5_sq_fits(cap, MLX5_OVERHEAD_MAX, max_sq_desc_sz, max_send_wqebb);
                if !fits_small && cap.max_send_wr > 0 {
                    out.broken(EINVAL, "send queue too large for any WQE overhead (§4.2)");
                    definite = true;
                } else if !fits_large || (cap.max_send_wr == 0 && !fits_small) {
                    out.maybe(
                        EINVAL,
                        "send queue size depends on the mlx5 WQE overhead (§4.2)",
                    );
                }
                // §4.1 "expected to fail" above max_sge, but mlx5 may accept it.
                if cap.max_send_sge > dev.max_sge && fits_small {
                    out.maybe(EINVAL, "max_send_sge above max_sge (mlx5 may accept, §4.1)");
                }
            }
            if recv_checked {
                // §4.2 receive step 1.
                if cap.max_recv_wr > dev.max_qp_wr {
                    out.broken(EINVAL, "max_recv_wr above max_qp_wr");
                    definite = true;
                }
                // §4.2 receive step 2: RQ WQE size.
                // With max_recv_wr = 0 there is no RQ (§4.2 step 4), so whether the
                // SGE count is still checked is provider-dependent.
                let rq_wqe = pow2_at_least(16 * u64::from(cap.max_recv_sge.max(1)));
                if rq_wqe > u64::from(max_rq_desc_sz) && cap.max_recv_wr == 0 {
                    out.maybe(EINVAL, "receive WQE above max_rq_desc_sz with no RQ");
                } else if rq_wqe > u64::from(max_rq_desc_sz) {
                    out.broken(EINVAL, "receive WQE above max_rq_desc_sz");
                    definite = true;
                } else if cap.max_recv_sge > dev.max_sge {
                    out.maybe(EINVAL, "max_recv_sge above max_sge (mlx5 may accept, §4.1)");
                }
            }
        }
    }
    if definite {
        out.ok_allowed = false;
    }
    out
}

// ---------------------------------------------------------------------------
// Sequences of verbs on several devices and QPs.

/// Errnos a verb on a destroyed (stale) handle may return
/// (`create-qp.md` §8 "Invalid/stale handle: EINVAL or ENOENT").
pub const STALE_HANDLE_ERRNOS: &[i32] = &[EINVAL, ENOENT];

/// One slot of the sequence model: a QP that may exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// Never created (operations on it are skipped).
    Empty,
    /// Alive, on device `dev`.
    Live {
        /// Device index.
        dev: usize,
        /// The QP.
        qp: QpModel,
    },
    /// Destroyed: its handle is stale.
    Destroyed,
}

/// The model of a small world: per device one PD and one CQ (alive for the
/// whole case), and a fixed number of QP slots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorldModel {
    /// The devices.
    pub devices: Vec<DeviceModel>,
    /// The QP slots.
    pub slots: Vec<Slot>,
}

impl WorldModel {
    /// A world with `devices` and `slots` empty QP slots.
    pub fn new(devices: Vec<DeviceModel>, slots: usize) -> Self {
        Self {
            devices,
            slots: vec![Slot::Empty; slots],
        }
    }

    /// Number of live QPs on device `dev`.
    pub fn live_on(&self, dev: usize) -> usize {
        self.slots
            .iter()
            .filter(|s| matches!(s, Slot::Live { dev: d, .. } if *d == dev))
            .count()
    }

    /// What `dealloc_pd` / `destroy_cq` of device `dev`'s PD or CQ must
    /// return while the world is as it is: `EBUSY` while a QP uses them
    /// (`create-qp.md` §5 notes), else success.
    ///
    /// # Errors
    /// `EBUSY` when a QP of that device is alive.
    pub fn expect_parent_destroy(&self, dev: usize) -> Result<(), i32> {
        if self.live_on(dev) > 0 {
            Err(EBUSY)
        } else {
            Ok(())
        }
    }

    /// Records a successful creation in `slot`.
    pub fn created(&mut self, slot: usize, dev: usize, class: QpClass) {
        self.slots[slot] = Slot::Live {
            dev,
            qp: QpModel::new(class),
        };
    }

    /// Records a successful destroy of `slot` (`create-qp.md` §8: allowed from
    /// any state; not attached to a multicast group here).
    pub fn destroyed(&mut self, slot: usize) {
        self.slots[slot] = Slot::Destroyed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cx6_like() -> DeviceModel {
        DeviceModel {
            name: "test-mlx5".to_owned(),
            flavor: TableFlavor::Mlx5,
            phys_port_cnt: 1,
            max_qp_wr: 32_768,
            max_sge: 30,
            max_qp_rd_atom: 16,
            max_qp_init_rd_atom: 16,
            pkey_tbl_len: 128,
            gid_tbl_len: 8,
            active_mtu: Mtu::Mtu4096,
            max_mtu: Mtu::Mtu4096,
            grh_required: false,
            create_flags: QpCreateFlags::all_named(),
            driver: DriverLimits::Mlx5 {
                max_sq_desc_sz: 1024,
                max_rq_desc_sz: 512,
                max_send_wqebb: 32_768,
            },
        }
    }

    fn rxe_like() -> DeviceModel {
        DeviceModel {
            name: "test-rxe".to_owned(),
            flavor: TableFlavor::Kernel,
            max_qp_wr: 0x4000,
            max_sge: 32,
            max_qp_rd_atom: 128,
            max_qp_init_rd_atom: 128,
            pkey_tbl_len: 64,
            gid_tbl_len: 1024,
            active_mtu: Mtu::Mtu1024,
            grh_required: true,
            create_flags: QpCreateFlags::empty(),
            driver: DriverLimits::Rxe {
                max_inline_data: 400,
            },
            ..cx6_like()
        }
    }

    #[test]
    fn rc_walk_to_rts_with_exact_masks() {
        // Goal: the exact §4.1/§4.3/§4.4 masks with valid values take an RC QP to RTS in the model.
        // Method: apply the three modifies and check each new state, then a range error that changes nothing.
        let dev = cx6_like();
        let mut qp = QpModel::new(QpClass::Rc);
        for to in [QpState::Init, QpState::ReadyToReceive, QpState::ReadyToSend] {
            let m = masks_for(QpClass::Rc, dev.flavor, qp.state, to).expect("legal");
            let attr = valid_attr(&dev, to, qp.state, 0x100);
            assert_eq!(
                qp.apply_modify(&dev, &attr, m.required | QpAttrMask::STATE),
                Ok(to)
            );
        }
        let mut bad = valid_attr(&dev, QpState::ReadyToSend, qp.state, 0);
        bad.min_rnr_timer = 32;
        let m = QpAttrMask::STATE | QpAttrMask::MIN_RNR_TIMER;
        assert_eq!(qp.apply_modify(&dev, &bad, m), Err(EINVAL));
        assert_eq!(qp.state, QpState::ReadyToSend);
    }

    #[test]
    fn range_rules_follow_the_spec_rows() {
        // Goal: each §5.2 row is enforced only when its bit is in the mask.
        // Method: one bad value per row, with and without the bit, on an INIT QP.
        let dev = rxe_like();
        let qp = QpModel {
            class: QpClass::Rc,
            state: QpState::Init,
            port: 1,
        };
        let base = valid_attr(&dev, QpState::Init, QpState::Init, 0);
        let mut a = base;
        a.port_num = 0;
        assert_eq!(
            range_violation(&dev, &qp, &a, QpAttrMask::PORT),
            Some("port_num")
        );
        assert_eq!(range_violation(&dev, &qp, &a, QpAttrMask::PKEY_INDEX), None);
        let mut a = base;
        a.path_mtu = Mtu::Mtu2048;
        assert_eq!(
            range_violation(&dev, &qp, &a, QpAttrMask::PATH_MTU),
            Some("path_mtu")
        );
        let mut a = base;
        a.ah_attr.is_global = false;
        assert_eq!(
            range_violation(&dev, &qp, &a, QpAttrMask::AV),
            Some("ah_attr.is_global")
        );
        assert_eq!(
            range_violation(&dev, &qp, &base, QpAttrMask::ALT_PATH),
            Some("alt_path on RoCE")
        );
        assert_eq!(
            range_violation(&dev, &qp, &base, QpAttrMask::all_named()),
            Some("alt_path on RoCE")
        );
        assert_eq!(
            range_violation(
                &dev,
                &qp,
                &base,
                QpAttrMask::all_named() - QpAttrMask::ALT_PATH
            ),
            None
        );
    }

    #[test]
    fn create_rules() {
        // Goal: the §2–§4 creation rules give the spec's errnos and tolerate only provider-dependent limits.
        // Method: table of requests on an mlx5-like and an rxe-like device.
        let mlx5 = cx6_like();
        let rxe = rxe_like();
        let base = CreateRequest {
            api: CreateApi::Ex,
            qp_type: QpType::Rc,
            comp_mask: QpInitAttrMask::PD,
            create_flags: QpCreateFlags::empty(),
            send_ops_flags: SendOpsFlags::empty(),
            cap: QpCap {
                max_send_wr: 16,
                max_recv_wr: 16,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            srq: false,
            send_cq: true,
            recv_cq: true,
        };
        let must_ok = CreateExpect {
            ok_allowed: true,
            errnos: vec![],
            reasons: vec![],
        };
        assert_eq!(expect_create(&mlx5, &base), must_ok);
        assert_eq!(expect_create(&rxe, &base), must_ok);
        let e = expect_create(
            &mlx5,
            &CreateRequest {
                qp_type: QpType::Unknown(66),
                ..base
            },
        );
        assert!(!e.ok_allowed && e.errnos == [EINVAL]);
        let e = expect_create(
            &mlx5,
            &CreateRequest {
                comp_mask: QpInitAttrMask::empty(),
                ..base
            },
        );
        assert!(!e.ok_allowed && e.errnos == [EINVAL]);
        let e = expect_create(
            &mlx5,
            &CreateRequest {
                comp_mask: QpInitAttrMask(0x81),
                ..base
            },
        );
        assert!(!e.ok_allowed && e.errnos == [EINVAL]);
        let flags = CreateRequest {
            comp_mask: QpInitAttrMask::PD | QpInitAttrMask::CREATE_FLAGS,
            create_flags: QpCreateFlags::BLOCK_SELF_MCAST_LB,
            ..base
        };
        assert_eq!(expect_create(&mlx5, &flags).errnos, [EINVAL]);
        assert!(
            expect_create(
                &mlx5,
                &CreateRequest {
                    qp_type: QpType::Ud,
                    ..flags
                }
            )
            .ok_allowed
        );
        let e = expect_create(
            &rxe,
            &CreateRequest {
                qp_type: QpType::Ud,
                ..flags
            },
        );
        assert!(!e.ok_allowed && e.errnos == [EOPNOTSUPP]);
        let ops = CreateRequest {
            qp_type: QpType::Ud,
            comp_mask: QpInitAttrMask::PD | QpInitAttrMask::SEND_OPS_FLAGS,
            send_ops_flags: SendOpsFlags::RDMA_READ,
            ..base
        };
        assert_eq!(expect_create(&mlx5, &ops).errnos, [EOPNOTSUPP]);
        // Legacy create ignores comp_mask and flags.
        assert!(expect_create(
            &mlx5,
            &CreateRequest {
                api: CreateApi::Legacy,
                ..ops
            }
        )
        .errnos
        .is_empty());
        // Caps: definite over-limit, provider-dependent band, SRQ.
        let big = |cap: QpCap| CreateRequest { cap, ..base };
        let over_wr = QpCap {
            max_send_wr: 32_769,
            ..base.cap
        };
        assert!(!expect_create(&mlx5, &big(over_wr)).ok_allowed);
        let over_recv = QpCap {
            max_recv_wr: 1_000_000,
            max_recv_sge: 1000,
            ..base.cap
        };
        assert!(!expect_create(&mlx5, &big(over_recv)).ok_allowed);
        assert_eq!(
            expect_create(
                &mlx5,
                &CreateRequest {
                    srq: true,
                    ..big(over_recv)
                }
            ),
            must_ok
        );
        let sge31 = QpCap {
            max_send_sge: 31,
            ..base.cap
        };
        let e = expect_create(&mlx5, &big(sge31));
        assert!(e.ok_allowed && e.errnos == [EINVAL]);
        assert!(
            !expect_create(
                &rxe,
                &big(QpCap {
                    max_inline_data: 401,
                    ..base.cap
                })
            )
            .ok_allowed
        );
        assert!(expect_create(
            &rxe,
            &big(QpCap {
                max_inline_data: 400,
                ..base.cap
            })
        )
        .errnos
        .is_empty());
        assert!(
            !expect_create(
                &mlx5,
                &big(QpCap {
                    max_inline_data: 4096,
                    ..base.cap
                })
            )
            .ok_allowed
        );
    }

    #[test]
    fn world_parents_busy_while_qps_live() {
        // Goal: dealloc_pd/destroy_cq are EBUSY exactly while a QP of that device is alive (create-qp.md §5).
        // Method: create, check, destroy, check.
        let mut w = WorldModel::new(vec![cx6_like(), rxe_like()], 4);
        assert_eq!(w.expect_parent_destroy(0), Ok(()));
        w.created(2, 0, QpClass::Ud);
        assert_eq!(w.expect_parent_destroy(0), Err(EBUSY));
        assert_eq!(w.expect_parent_destroy(1), Ok(()));
        w.destroyed(2);
        assert_eq!(w.expect_parent_destroy(0), Ok(()));
        assert_eq!(w.slots[2], Slot::Destroyed);
    }
}
