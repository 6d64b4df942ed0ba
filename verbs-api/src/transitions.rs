//! The QP state-transition table and the `ibv_modify_qp` mask validation, as
//! pure data plus one algorithm (style rule R4).
//!
//! backend-sim *enforces* this table in `modify_qp` through [`check_modify`];
//! backend-hw uses [`diagnose_modify`] to turn a bare `EINVAL` from the device
//! into a precise message. Conformance generators and property tests walk
//! [`legal_transitions`].
//!
//! Source of truth: `spec/qp-state-machine.md`. Source tags in comments are the
//! ones of its §0: K-VERBS (`qp_state_table`, `ib_modify_qp_is_ok`), K-UVERBS
//! (`modify_qp`, `modify_qp_mask`), K-MLX5 (`optab`, `modify_dci_qp_is_ok`,
//! `mlx5_ib_modify_dct`).
//!
//! # Shape of the data
//!
//! * RC, UC, UD, RAW_PACKET, XRC_INI and XRC_TGT share the kernel core table
//!   (spec §2 and §4): one entry per legal `(from, to)` pair, with one
//!   required/optional column per type. As in the kernel, legality belongs to
//!   the pair, not to the type: RC SQE→RTS is legal with only `STATE`.
//! * [`TableFlavor::Mlx5`] removes the two pairs mlx5 has no firmware command
//!   for (RTS→SQD, SQD→SQD; spec §6.1).
//! * DCI and DCT have their own small tables (spec §6.2, §6.3), used whatever
//!   the flavor (they exist only on mlx5). Because mlx5 starts both checks
//!   from `IB_QP_STATE`, **their rows list `STATE` in `required`**; the kernel
//!   rows never list it (it is implicitly allowed, spec §3 step 5).

use core::fmt;

use crate::{DcType, ErrorKind, QpAttrMask, QpState, QpType};

use QpAttrMask as M;

const RESET: QpState = QpState::Reset;
const INIT: QpState = QpState::Init;
const RTR: QpState = QpState::ReadyToReceive;
const RTS: QpState = QpState::ReadyToSend;
const SQD: QpState = QpState::SendQueueDrain;
const SQE: QpState = QpState::SendQueueError;
const ERR: QpState = QpState::Error;

/// The seven states the tables are indexed by, in `enum ib_qp_state` order
/// (K-IBH). Any other value (`UNKNOWN`, `Unknown(n)`) is beyond `ERR` and
/// never part of a legal transition (spec §5.1).
const TABLE_STATES: [QpState; 7] = [RESET, INIT, RTR, RTS, SQD, SQE, ERR];

/// Which row set of the table applies: the QP type as the kernel sees it, with
/// mlx5's two DC sub-types of `IBV_QPT_DRIVER` told apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum QpClass {
    /// `IBV_QPT_RC` (kernel `IB_QPT_RC`).
    Rc,
    /// `IBV_QPT_UC` (kernel `IB_QPT_UC`).
    Uc,
    /// `IBV_QPT_UD` (kernel `IB_QPT_UD`).
    Ud,
    /// `IBV_QPT_RAW_PACKET` (kernel `IB_QPT_RAW_PACKET`).
    RawPacket,
    /// `IBV_QPT_XRC_SEND` (kernel `IB_QPT_XRC_INI`).
    XrcIni,
    /// `IBV_QPT_XRC_RECV` (kernel `IB_QPT_XRC_TGT`).
    XrcTgt,
    /// mlx5 DC initiator (`IBV_QPT_DRIVER` + `MLX5DV_DCTYPE_DCI`), spec §6.2.
    Dci,
    /// mlx5 DC target (`IBV_QPT_DRIVER` + `MLX5DV_DCTYPE_DCT`), spec §6.3.
    Dct,
}

impl QpClass {
    /// Every class, in declaration order.
    pub const VALUES: &'static [Self] = &[
        Self::Rc,
        Self::Uc,
        Self::Ud,
        Self::RawPacket,
        Self::XrcIni,
        Self::XrcTgt,
        Self::Dci,
        Self::Dct,
    ];

    /// The class of a QP created with `qp_type`; `dc_type` is consulted only
    /// for `IBV_QPT_DRIVER`, which is DCI or DCT on mlx5.
    ///
    /// Returns `None` for `DRIVER` without a known DC type and for unknown
    /// QP types: no table applies to them.
    pub fn from_qp_type(qp_type: QpType, dc_type: Option<DcType>) -> Option<Self> {
        match qp_type {
            QpType::Rc => Some(Self::Rc),
            QpType::Uc => Some(Self::Uc),
            QpType::Ud => Some(Self::Ud),
            QpType::RawPacket => Some(Self::RawPacket),
            QpType::XrcSend => Some(Self::XrcIni),
            QpType::XrcRecv => Some(Self::XrcTgt),
            QpType::Driver => match dc_type {
                Some(DcType::Dci) => Some(Self::Dci),
                Some(DcType::Dct) => Some(Self::Dct),
                Some(DcType::Unknown(_)) | None => None,
            },
            QpType::Unknown(_) => None,
        }
    }

    /// The kernel-style name: `RC`, `UC`, `UD`, `RAW_PACKET`, `XRC_INI`,
    /// `XRC_TGT`, `DCI`, `DCT`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Rc => "RC",
            Self::Uc => "UC",
            Self::Ud => "UD",
            Self::RawPacket => "RAW_PACKET",
            Self::XrcIni => "XRC_INI",
            Self::XrcTgt => "XRC_TGT",
            Self::Dci => "DCI",
            Self::Dct => "DCT",
        }
    }

    /// `true` for the classes validated by the kernel core table
    /// (`ib_modify_qp_is_ok`); `false` for DCI/DCT, which mlx5 validates itself.
    pub fn uses_kernel_table(self) -> bool {
        !matches!(self, Self::Dci | Self::Dct)
    }
}

impl fmt::Display for QpClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which driver's deviations from the kernel core table apply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum TableFlavor {
    /// The kernel core table exactly (`ib_modify_qp_is_ok`, K-VERBS), as every
    /// kernel driver applies it.
    #[default]
    Kernel,
    /// mlx5: the core table minus RTS→SQD and SQD→SQD, which mlx5's `optab`
    /// does not implement (`EINVAL`, K-MLX5, spec §6.1). RESET→RESET stays
    /// legal (mlx5 short-circuits it to success).
    Mlx5,
}

impl TableFlavor {
    /// Every flavor, in declaration order.
    pub const VALUES: &'static [Self] = &[Self::Kernel, Self::Mlx5];
}

impl fmt::Display for TableFlavor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Kernel => "kernel",
            Self::Mlx5 => "mlx5",
        })
    }
}

/// The attribute-mask rule of one legal transition.
///
/// A mask passes when it holds every `required` bit and nothing outside
/// [`TransitionMasks::allowed`] (`required | optional | STATE`). For the
/// kernel classes `STATE` is never listed (it is always allowed); DCI/DCT
/// rows list it in `required` because mlx5 insists on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TransitionMasks {
    /// Bits that must be present.
    pub required: QpAttrMask,
    /// Bits that may be present.
    pub optional: QpAttrMask,
}

impl TransitionMasks {
    /// No required and no optional bit: the mask must be exactly `STATE`
    /// (or empty, for a `cur → cur` modify).
    pub const EMPTY: Self = Self {
        required: M::empty(),
        optional: M::empty(),
    };

    /// Every bit a mask may hold: `required | optional | STATE`.
    pub const fn allowed(self) -> QpAttrMask {
        self.required.union(self.optional).union(M::STATE)
    }

    /// Required bits absent from `mask`.
    pub const fn missing(self, mask: QpAttrMask) -> QpAttrMask {
        self.required.difference(mask)
    }

    /// Bits of `mask` that are neither required, optional nor `STATE`.
    pub const fn extra(self, mask: QpAttrMask) -> QpAttrMask {
        mask.difference(self.allowed())
    }
}

// ---------------------------------------------------------------------------
// Table-building helpers (const, so the tables below are plain data).

/// The union of a list of mask bits.
const fn bits(list: &[QpAttrMask]) -> QpAttrMask {
    let mut acc = 0;
    let mut i = 0;
    while i < list.len() {
        acc |= list[i].0;
        i += 1;
    }
    QpAttrMask(acc)
}

/// Masks with `required` bits and `optional` bits.
const fn ro(required: &[QpAttrMask], optional: &[QpAttrMask]) -> TransitionMasks {
    TransitionMasks {
        required: bits(required),
        optional: bits(optional),
    }
}

/// Masks with only optional bits.
const fn opt(optional: &[QpAttrMask]) -> TransitionMasks {
    ro(&[], optional)
}

/// Masks with only required bits.
const fn req(required: &[QpAttrMask]) -> TransitionMasks {
    ro(required, &[])
}

const E: TransitionMasks = TransitionMasks::EMPTY;

// ---------------------------------------------------------------------------
// The kernel core table (K-VERBS `qp_state_table`, spec §2 and §4).

/// One `.valid = 1` entry of K-VERBS `qp_state_table`: a legal `(from, to)`
/// pair with its required/optional column per QP type.
#[derive(Clone, Copy)]
struct KernelEntry {
    from: QpState,
    to: QpState,
    ud: TransitionMasks,
    uc: TransitionMasks,
    rc: TransitionMasks,
    raw_packet: TransitionMasks,
    xrc_ini: TransitionMasks,
    xrc_tgt: TransitionMasks,
}

impl KernelEntry {
    /// The column for `class`; `None` for DCI/DCT (not in the kernel table).
    const fn column(&self, class: QpClass) -> Option<TransitionMasks> {
        match class {
            QpClass::Ud => Some(self.ud),
            QpClass::Uc => Some(self.uc),
            QpClass::Rc => Some(self.rc),
            QpClass::RawPacket => Some(self.raw_packet),
            QpClass::XrcIni => Some(self.xrc_ini),
            QpClass::XrcTgt => Some(self.xrc_tgt),
            QpClass::Dci | QpClass::Dct => None,
        }
    }
}

/// An entry whose sets are empty for every type (X→RESET, X→ERR, ERR→ERR;
/// spec §4.10): the mask must be exactly `STATE`.
const fn uniform_empty(from: QpState, to: QpState) -> KernelEntry {
    KernelEntry {
        from,
        to,
        ud: E,
        uc: E,
        rc: E,
        raw_packet: E,
        xrc_ini: E,
        xrc_tgt: E,
    }
}

/// K-VERBS `qp_state_table`, valid entries only, in `from`-major order.
/// Every pair not listed is an invalid transition (spec §2), notably
/// RESET→ERR and anything →SQE.
const KERNEL_TABLE: &[KernelEntry] = &[
    // RESET → RESET: any state → RESET, empty sets (spec §4.10).
    uniform_empty(RESET, RESET),
    // RESET → INIT (spec §4.1).
    KernelEntry {
        from: RESET,
        to: INIT,
        ud: req(&[M::PKEY_INDEX, M::PORT, M::QKEY]),
        uc: req(&[M::PKEY_INDEX, M::PORT, M::ACCESS_FLAGS]),
        rc: req(&[M::PKEY_INDEX, M::PORT, M::ACCESS_FLAGS]),
        raw_packet: req(&[M::PORT]),
        xrc_ini: req(&[M::PKEY_INDEX, M::PORT, M::ACCESS_FLAGS]),
        xrc_tgt: req(&[M::PKEY_INDEX, M::PORT, M::ACCESS_FLAGS]),
    },
    // INIT → RESET (spec §4.10).
    uniform_empty(INIT, RESET),
    // INIT → INIT (spec §4.2).
    KernelEntry {
        from: INIT,
        to: INIT,
        ud: opt(&[M::PKEY_INDEX, M::PORT, M::QKEY]),
        uc: opt(&[M::PKEY_INDEX, M::PORT, M::ACCESS_FLAGS]),
        rc: opt(&[M::PKEY_INDEX, M::PORT, M::ACCESS_FLAGS]),
        raw_packet: E,
        xrc_ini: opt(&[M::PKEY_INDEX, M::PORT, M::ACCESS_FLAGS]),
        xrc_tgt: opt(&[M::PKEY_INDEX, M::PORT, M::ACCESS_FLAGS]),
    },
    // INIT → RTR (spec §4.3).
    KernelEntry {
        from: INIT,
        to: RTR,
        ud: opt(&[M::PKEY_INDEX, M::QKEY]),
        uc: ro(
            &[M::AV, M::PATH_MTU, M::DEST_QPN, M::RQ_PSN],
            &[M::ALT_PATH, M::ACCESS_FLAGS, M::PKEY_INDEX],
        ),
        rc: ro(
            &[
                M::AV,
                M::PATH_MTU,
                M::DEST_QPN,
                M::RQ_PSN,
                M::MAX_DEST_RD_ATOMIC,
                M::MIN_RNR_TIMER,
            ],
            &[M::ALT_PATH, M::ACCESS_FLAGS, M::PKEY_INDEX],
        ),
        raw_packet: E,
        xrc_ini: ro(
            &[M::AV, M::PATH_MTU, M::DEST_QPN, M::RQ_PSN],
            &[M::ALT_PATH, M::ACCESS_FLAGS, M::PKEY_INDEX],
        ),
        xrc_tgt: ro(
            &[
                M::AV,
                M::PATH_MTU,
                M::DEST_QPN,
                M::RQ_PSN,
                M::MAX_DEST_RD_ATOMIC,
                M::MIN_RNR_TIMER,
            ],
            &[M::ALT_PATH, M::ACCESS_FLAGS, M::PKEY_INDEX],
        ),
    },
    // INIT → ERR (spec §4.10).
    uniform_empty(INIT, ERR),
    // RTR → RESET (spec §4.10).
    uniform_empty(RTR, RESET),
    // RTR → RTS (spec §4.4). RATE_LIMIT only for RAW_PACKET (spec §4.5 note).
    KernelEntry {
        from: RTR,
        to: RTS,
        ud: ro(&[M::SQ_PSN], &[M::CUR_STATE, M::QKEY]),
        uc: ro(
            &[M::SQ_PSN],
            &[
                M::CUR_STATE,
                M::ALT_PATH,
                M::ACCESS_FLAGS,
                M::PATH_MIG_STATE,
            ],
        ),
        rc: ro(
            &[
                M::TIMEOUT,
                M::RETRY_CNT,
                M::RNR_RETRY,
                M::SQ_PSN,
                M::MAX_QP_RD_ATOMIC,
            ],
            &[
                M::CUR_STATE,
                M::ALT_PATH,
                M::ACCESS_FLAGS,
                M::MIN_RNR_TIMER,
                M::PATH_MIG_STATE,
            ],
        ),
        raw_packet: opt(&[M::RATE_LIMIT]),
        xrc_ini: ro(
            &[
                M::TIMEOUT,
                M::RETRY_CNT,
                M::RNR_RETRY,
                M::SQ_PSN,
                M::MAX_QP_RD_ATOMIC,
            ],
            &[
                M::CUR_STATE,
                M::ALT_PATH,
                M::ACCESS_FLAGS,
                M::PATH_MIG_STATE,
            ],
        ),
        xrc_tgt: ro(
            &[M::TIMEOUT, M::SQ_PSN],
            &[
                M::CUR_STATE,
                M::ALT_PATH,
                M::ACCESS_FLAGS,
                M::MIN_RNR_TIMER,
                M::PATH_MIG_STATE,
            ],
        ),
    },
    // RTR → ERR (spec §4.10).
    uniform_empty(RTR, ERR),
    // RTS → RESET (spec §4.10).
    uniform_empty(RTS, RESET),
    // RTS → RTS (spec §4.5). RATE_LIMIT only for RAW_PACKET.
    KernelEntry {
        from: RTS,
        to: RTS,
        ud: opt(&[M::CUR_STATE, M::QKEY]),
        uc: opt(&[
            M::CUR_STATE,
            M::ACCESS_FLAGS,
            M::ALT_PATH,
            M::PATH_MIG_STATE,
        ]),
        rc: opt(&[
            M::CUR_STATE,
            M::ACCESS_FLAGS,
            M::ALT_PATH,
            M::PATH_MIG_STATE,
            M::MIN_RNR_TIMER,
        ]),
        raw_packet: opt(&[M::RATE_LIMIT]),
        xrc_ini: opt(&[
            M::CUR_STATE,
            M::ACCESS_FLAGS,
            M::ALT_PATH,
            M::PATH_MIG_STATE,
        ]),
        xrc_tgt: opt(&[
            M::CUR_STATE,
            M::ACCESS_FLAGS,
            M::ALT_PATH,
            M::PATH_MIG_STATE,
            M::MIN_RNR_TIMER,
        ]),
    },
    // RTS → SQD (spec §4.6). Not implemented by mlx5 (spec §6.1).
    KernelEntry {
        from: RTS,
        to: SQD,
        ud: opt(&[M::EN_SQD_ASYNC_NOTIFY]),
        uc: opt(&[M::EN_SQD_ASYNC_NOTIFY]),
        rc: opt(&[M::EN_SQD_ASYNC_NOTIFY]),
        raw_packet: E,
        xrc_ini: opt(&[M::EN_SQD_ASYNC_NOTIFY]),
        xrc_tgt: opt(&[M::EN_SQD_ASYNC_NOTIFY]),
    },
    // RTS → ERR (spec §4.10).
    uniform_empty(RTS, ERR),
    // SQD → RESET (spec §4.10).
    uniform_empty(SQD, RESET),
    // SQD → RTS (spec §4.7).
    KernelEntry {
        from: SQD,
        to: RTS,
        ud: opt(&[M::CUR_STATE, M::QKEY]),
        uc: opt(&[
            M::CUR_STATE,
            M::ALT_PATH,
            M::ACCESS_FLAGS,
            M::PATH_MIG_STATE,
        ]),
        rc: opt(&[
            M::CUR_STATE,
            M::ALT_PATH,
            M::ACCESS_FLAGS,
            M::MIN_RNR_TIMER,
            M::PATH_MIG_STATE,
        ]),
        raw_packet: E,
        xrc_ini: opt(&[
            M::CUR_STATE,
            M::ALT_PATH,
            M::ACCESS_FLAGS,
            M::PATH_MIG_STATE,
        ]),
        xrc_tgt: opt(&[
            M::CUR_STATE,
            M::ALT_PATH,
            M::ACCESS_FLAGS,
            M::MIN_RNR_TIMER,
            M::PATH_MIG_STATE,
        ]),
    },
    // SQD → SQD (spec §4.8). Not implemented by mlx5 (spec §6.1).
    KernelEntry {
        from: SQD,
        to: SQD,
        ud: opt(&[M::PKEY_INDEX, M::QKEY]),
        uc: opt(&[
            M::AV,
            M::ALT_PATH,
            M::ACCESS_FLAGS,
            M::PKEY_INDEX,
            M::PATH_MIG_STATE,
        ]),
        rc: opt(&[
            M::PORT,
            M::AV,
            M::TIMEOUT,
            M::RETRY_CNT,
            M::RNR_RETRY,
            M::MAX_QP_RD_ATOMIC,
            M::MAX_DEST_RD_ATOMIC,
            M::ALT_PATH,
            M::ACCESS_FLAGS,
            M::PKEY_INDEX,
            M::MIN_RNR_TIMER,
            M::PATH_MIG_STATE,
        ]),
        raw_packet: E,
        xrc_ini: opt(&[
            M::PORT,
            M::AV,
            M::TIMEOUT,
            M::RETRY_CNT,
            M::RNR_RETRY,
            M::MAX_QP_RD_ATOMIC,
            M::ALT_PATH,
            M::ACCESS_FLAGS,
            M::PKEY_INDEX,
            M::PATH_MIG_STATE,
        ]),
        xrc_tgt: opt(&[
            M::PORT,
            M::AV,
            M::TIMEOUT,
            M::MAX_DEST_RD_ATOMIC,
            M::ALT_PATH,
            M::ACCESS_FLAGS,
            M::PKEY_INDEX,
            M::MIN_RNR_TIMER,
            M::PATH_MIG_STATE,
        ]),
    },
    // SQD → ERR (spec §4.10).
    uniform_empty(SQD, ERR),
    // SQE → RESET (spec §4.10).
    uniform_empty(SQE, RESET),
    // SQE → RTS (spec §4.9): only UD and UC have bits; the entry is valid for
    // every type, so RC/RAW_PACKET/XRC accept a bare STATE here.
    KernelEntry {
        from: SQE,
        to: RTS,
        ud: opt(&[M::CUR_STATE, M::QKEY]),
        uc: opt(&[M::CUR_STATE, M::ACCESS_FLAGS]),
        rc: E,
        raw_packet: E,
        xrc_ini: E,
        xrc_tgt: E,
    },
    // SQE → ERR (spec §4.10).
    uniform_empty(SQE, ERR),
    // ERR → RESET, ERR → ERR (spec §4.10).
    uniform_empty(ERR, RESET),
    uniform_empty(ERR, ERR),
];

/// Pairs the kernel table accepts but mlx5's `optab` has no command for
/// (K-MLX5, spec §6.1): `EINVAL` on mlx5.
const MLX5_UNIMPLEMENTED: &[(QpState, QpState)] = &[(RTS, SQD), (SQD, SQD)];

// ---------------------------------------------------------------------------
// mlx5 DC tables (spec §6). `STATE` is required in every row.

/// One legal transition of a DC table.
#[derive(Clone, Copy)]
struct DcEntry {
    from: QpState,
    to: QpState,
    masks: TransitionMasks,
}

/// A DC row with `STATE` plus `required` bits required and `optional` bits optional.
const fn dc(
    from: QpState,
    to: QpState,
    required: &[QpAttrMask],
    optional: &[QpAttrMask],
) -> DcEntry {
    DcEntry {
        from,
        to,
        masks: TransitionMasks {
            required: bits(required).union(M::STATE),
            optional: bits(optional),
        },
    }
}

/// DCI (K-MLX5 `modify_dci_qp_is_ok`, spec §6.2), `from`-major order: any →
/// RESET, RESET→INIT, INIT→INIT, INIT→RTR, RTR→RTS, RTS→RTS, any except RESET
/// → ERR. Nothing else is legal. No ACCESS_FLAGS, DEST_QPN, RQ_PSN,
/// MAX_DEST_RD_ATOMIC or CUR_STATE anywhere (DCI is requester-only).
const DCI_TABLE: &[DcEntry] = &[
    dc(RESET, RESET, &[], &[]),
    dc(RESET, INIT, &[M::PKEY_INDEX, M::PORT], &[]),
    dc(INIT, RESET, &[], &[]),
    dc(INIT, INIT, &[], &[M::PKEY_INDEX, M::PORT]),
    dc(INIT, RTR, &[M::PATH_MTU], &[M::PKEY_INDEX, M::AV]),
    dc(INIT, ERR, &[], &[]),
    dc(RTR, RESET, &[], &[]),
    dc(
        RTR,
        RTS,
        &[
            M::TIMEOUT,
            M::RETRY_CNT,
            M::RNR_RETRY,
            M::MAX_QP_RD_ATOMIC,
            M::SQ_PSN,
        ],
        &[M::MIN_RNR_TIMER],
    ),
    dc(RTR, ERR, &[], &[]),
    dc(RTS, RESET, &[], &[]),
    dc(RTS, RTS, &[], &[M::MIN_RNR_TIMER]),
    dc(RTS, ERR, &[], &[]),
    dc(SQD, RESET, &[], &[]),
    dc(SQD, ERR, &[], &[]),
    dc(SQE, RESET, &[], &[]),
    dc(SQE, ERR, &[], &[]),
    dc(ERR, RESET, &[], &[]),
    dc(ERR, ERR, &[], &[]),
];

/// DCT (K-MLX5 `mlx5_ib_modify_dct`, spec §6.3): exact masks, nothing
/// optional, and no other transition — not even →RESET or →ERR (a DCT is
/// torn down only by destroy).
const DCT_TABLE: &[DcEntry] = &[
    dc(RESET, INIT, &[M::ACCESS_FLAGS, M::PKEY_INDEX, M::PORT], &[]),
    dc(INIT, RTR, &[M::MIN_RNR_TIMER, M::AV, M::PATH_MTU], &[]),
];

// ---------------------------------------------------------------------------
// The lookup grids: the lists above compiled (at compile time) into one
// 7×7 grid per (flavor, class), so a lookup is two array indexings.

/// One class's table under one flavor: `grid[from][to]`, both indexed by
/// [`state_slot`]; `None` where the pair is not a legal transition.
type Grid = [[Option<TransitionMasks>; 7]; 7];

/// Number of [`QpClass`] variants (the grids' class dimension).
const CLASSES: usize = QpClass::VALUES.len();

/// Number of [`TableFlavor`] variants (the grids' flavor dimension).
const FLAVORS: usize = TableFlavor::VALUES.len();

/// [`state_slot`] of every state beyond `ERR`.
const BEYOND_ERR: usize = 7;

/// Position of `state` in [`TABLE_STATES`] (its `enum ib_qp_state` value),
/// or [`BEYOND_ERR`] for `UNKNOWN` and `Unknown(n)` (spec §5.1). The `const`
/// form, for building the grids; lookups use [`slot`].
const fn state_slot(state: QpState) -> usize {
    match state {
        QpState::Reset => 0,
        QpState::Init => 1,
        QpState::ReadyToReceive => 2,
        QpState::ReadyToSend => 3,
        QpState::SendQueueDrain => 4,
        QpState::SendQueueError => 5,
        QpState::Error => 6,
        QpState::UnknownState | QpState::Unknown(_) => BEYOND_ERR,
    }
}

/// [`state_slot`] for lookups at run time: the same value, computed from
/// the state's order and raw value instead of a `match`, which LLVM turns
/// into jump tables (an indirect branch, mispredicted on most modifies).
#[inline]
fn slot(state: QpState) -> usize {
    // The derived order compares variants first: only the seven table
    // states sort before `UnknownState`, and their raw value is their slot
    // (`grids_match_the_source_lists` checks this, `Unknown(n < 7)` included).
    if state < QpState::UnknownState {
        state.to_raw() as usize
    } else {
        BEYOND_ERR
    }
}

/// [`state_slot`] of a state the source tables list (always a table state).
const fn table_index(state: QpState) -> usize {
    let slot = state_slot(state);
    assert!(
        slot != BEYOND_ERR,
        "the source tables list table states only"
    );
    slot
}

/// The grid of a DC table (flavor-independent).
const fn dc_grid(table: &[DcEntry]) -> Grid {
    let mut grid: Grid = [[None; 7]; 7];
    let mut i = 0;
    while i < table.len() {
        let e = &table[i];
        grid[table_index(e.from)][table_index(e.to)] = Some(e.masks);
        i += 1;
    }
    grid
}

/// The grid of `class` (a kernel class) under `flavor`: [`KERNEL_TABLE`]'s
/// column for `class`, minus [`MLX5_UNIMPLEMENTED`] for mlx5.
const fn kernel_grid(class: QpClass, flavor: TableFlavor) -> Grid {
    let mut grid: Grid = [[None; 7]; 7];
    let mut i = 0;
    while i < KERNEL_TABLE.len() {
        let e = &KERNEL_TABLE[i];
        grid[table_index(e.from)][table_index(e.to)] = e.column(class);
        i += 1;
    }
    if matches!(flavor, TableFlavor::Mlx5) {
        let mut j = 0;
        while j < MLX5_UNIMPLEMENTED.len() {
            let (from, to) = MLX5_UNIMPLEMENTED[j];
            grid[table_index(from)][table_index(to)] = None;
            j += 1;
        }
    }
    grid
}

/// Every grid, indexed `[flavor as usize][class as usize]`.
const fn build_grids() -> [[Grid; CLASSES]; FLAVORS] {
    let mut grids: [[Grid; CLASSES]; FLAVORS] = [[[[None; 7]; 7]; CLASSES]; FLAVORS];
    let mut f = 0;
    while f < FLAVORS {
        let flavor = TableFlavor::VALUES[f];
        let mut c = 0;
        while c < CLASSES {
            let class = QpClass::VALUES[c];
            // The VALUES lists are in declaration order, so `as usize` of a
            // value is its position there.
            assert!(class as usize == c && flavor as usize == f);
            grids[f][c] = match class {
                QpClass::Dci => dc_grid(DCI_TABLE),
                QpClass::Dct => dc_grid(DCT_TABLE),
                _ => kernel_grid(class, flavor),
            };
            c += 1;
        }
        f += 1;
    }
    grids
}

/// The tables of every class under every flavor, built at compile time.
static GRIDS: [[Grid; CLASSES]; FLAVORS] = GRIDS_CONST;

/// The state of each [`slot`] ([`TABLE_STATES`], then `UNKNOWN` for
/// [`BEYOND_ERR`], which no pass cell leads to).
const SLOT_STATES: [QpState; 8] = [RESET, INIT, RTR, RTS, SQD, SQE, ERR, QpState::UnknownState];

/// One `(cur, next)` cell of a [`PassGrid`]: a mask (as given, before
/// [`strip_mask`]) passes [`check_modify`] exactly when it holds every
/// `need` bit and no bit outside `allow`.
#[derive(Clone, Copy)]
struct PassCell {
    need: u32,
    allow: u32,
}

/// A cell no mask passes.
const NO_PASS: PassCell = PassCell {
    need: u32::MAX,
    allow: 0,
};

/// One class's verdicts under one flavor, indexed by the [`slot`]s of
/// `cur` and `next` (`BEYOND_ERR` included): every rule of
/// [`check_modify`] folded into two masks, so accepting a modify is one
/// lookup and one test. A refused mask takes the step-by-step path, which
/// names the reason.
type PassGrid = [[PassCell; 8]; 8];

/// The [`PassGrid`] of `class` under `flavor`, from its [`Grid`]:
/// `allow` is the transition's `required | optional | STATE`, minus
/// `CUR_STATE` where `cur` may not carry it (step 5), plus the bits uverbs
/// strips (they are ignored, so any value passes); a transition that
/// requires a stripped bit, or a pair without an entry, passes nothing.
/// Unsupported bits are outside every `allow` (step 2).
const fn pass_grid(class: QpClass, grid: &Grid) -> PassGrid {
    let stripped = stripped_bits(class).0;
    let mut out: PassGrid = [[NO_PASS; 8]; 8];
    let mut c = 0;
    while c < 7 {
        let mut n = 0;
        while n < 7 {
            if let Some(m) = grid[c][n] {
                let mut allow = m.allowed().0;
                if !CUR_STATE_OK[c] {
                    allow &= !M::CUR_STATE.0;
                }
                assert!(allow & !SUPPORTED_BITS.0 == 0);
                if m.required.0 & stripped == 0 {
                    out[c][n] = PassCell {
                        need: m.required.0,
                        allow: allow | stripped,
                    };
                }
            }
            n += 1;
        }
        c += 1;
    }
    out
}

/// Every [`PassGrid`], indexed like [`GRIDS`].
const fn build_pass_grids() -> [[PassGrid; CLASSES]; FLAVORS] {
    let mut out: [[PassGrid; CLASSES]; FLAVORS] = [[[[NO_PASS; 8]; 8]; CLASSES]; FLAVORS];
    let mut f = 0;
    while f < FLAVORS {
        let mut c = 0;
        while c < CLASSES {
            out[f][c] = pass_grid(QpClass::VALUES[c], &GRIDS_CONST[f][c]);
            c += 1;
        }
        f += 1;
    }
    out
}

/// [`GRIDS`] as a constant (the pass grids are built from it at compile
/// time).
const GRIDS_CONST: [[Grid; CLASSES]; FLAVORS] = build_grids();

/// The pass grids of every class under every flavor, built at compile time.
static PASS_GRIDS: [[PassGrid; CLASSES]; FLAVORS] = build_pass_grids();

/// The grid of `class` under `flavor`.
#[inline]
fn grid(class: QpClass, flavor: TableFlavor) -> &'static Grid {
    &GRIDS[flavor as usize][class as usize]
}

/// The table: the required/optional masks of `from → to` for `class` under
/// `flavor`, or `None` when the pair is not a legal transition (`EINVAL`
/// whatever the mask).
///
/// Kernel classes read K-VERBS `qp_state_table` (spec §2, §4), minus the
/// mlx5 gaps for [`TableFlavor::Mlx5`] (spec §6.1). DCI/DCT read the mlx5 DC
/// rules (spec §6.2, §6.3) under both flavors; their `required` includes
/// `STATE`. O(1): one lookup in a grid built at compile time.
#[inline]
pub fn transition_masks(
    class: QpClass,
    from: QpState,
    to: QpState,
    flavor: TableFlavor,
) -> Option<TransitionMasks> {
    let (f, t) = (slot(from), slot(to));
    if f == BEYOND_ERR || t == BEYOND_ERR {
        return None;
    }
    grid(class, flavor)[f][t]
}

/// Bits uverbs removes from an XRC QP's mask before validation (K-UVERBS
/// `modify_qp_mask()`, spec §5.1); empty for other classes.
const fn stripped_bits(class: QpClass) -> QpAttrMask {
    match class {
        QpClass::XrcIni => bits(&[M::MAX_DEST_RD_ATOMIC, M::MIN_RNR_TIMER]),
        QpClass::XrcTgt => bits(&[M::MAX_QP_RD_ATOMIC, M::RETRY_CNT, M::RNR_RETRY]),
        _ => M::empty(),
    }
}

/// uverbs `modify_qp_mask()` (K-UVERBS, spec §5.1): the bits silently
/// removed before validation — `MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER` for
/// XRC_INI, `MAX_QP_RD_ATOMIC | RETRY_CNT | RNR_RETRY` for XRC_TGT. Identity
/// for every other class.
///
/// This is why an RC-style mask passes on an XRC QP.
#[inline]
pub fn strip_mask(class: QpClass, mask: QpAttrMask) -> QpAttrMask {
    mask.difference(stripped_bits(class))
}

/// Every bit the extended uverbs modify command accepts (spec §5.1):
/// `IB_QP_ATTR_STANDARD_BITS | IB_QP_RATE_LIMIT`. Anything else is `EOPNOTSUPP`.
const SUPPORTED_BITS: QpAttrMask = QpAttrMask::STANDARD_BITS.union(M::RATE_LIMIT);

/// States from which `CUR_STATE` may appear at all (K-VERBS
/// `ib_modify_qp_is_ok` first check, spec §3 step 1).
const CUR_STATE_OK_FROM: [QpState; 4] = [RTR, RTS, SQD, SQE];

/// [`CUR_STATE_OK_FROM`] indexed by [`state_slot`].
const CUR_STATE_OK: [bool; 7] = {
    let mut ok = [false; 7];
    let mut i = 0;
    while i < CUR_STATE_OK_FROM.len() {
        ok[table_index(CUR_STATE_OK_FROM[i])] = true;
        i += 1;
    }
    ok
};

/// `(cur, next)` as drivers compute them (spec §3, K-MLX5 `mlx5_ib_modify_qp`).
#[inline]
fn resolve_states(
    qp_state: QpState,
    mask: QpAttrMask,
    attr_state: QpState,
    attr_cur_state: QpState,
) -> (QpState, QpState) {
    let cur = if mask.contains(M::CUR_STATE) {
        attr_cur_state
    } else {
        qp_state
    };
    let next = if mask.contains(M::STATE) {
        attr_state
    } else {
        cur
    };
    (cur, next)
}

fn is_table_state(state: QpState) -> bool {
    state_slot(state) != BEYOND_ERR
}

/// The whole `ibv_modify_qp` state/mask validation as the kernel does it:
/// the uverbs checks of spec §5.1, then `ib_modify_qp_is_ok` (spec §3), or
/// the DCI/DCT rules of spec §6.
///
/// `qp_state` is the state the driver has cached for the QP; `attr_state` and
/// `attr_cur_state` are `attr.qp_state` / `attr.cur_qp_state`, read only when
/// `mask` holds `STATE` / `CUR_STATE`. Steps, in order:
///
/// 1. Strip the XRC bits ([`strip_mask`]).
/// 2. A bit outside `STANDARD_BITS | RATE_LIMIT` → [`ErrorKind::Unsupported`].
/// 3. `cur = mask ∋ CUR_STATE ? attr_cur_state : qp_state`;
///    `next = mask ∋ STATE ? attr_state : cur`.
/// 4. `cur` or `next` beyond `ERR` → [`ErrorKind::InvalidTransition`]
///    (uverbs refuses such states before the table, spec §5.1).
/// 5. `CUR_STATE` while `cur` ∉ {RTR, RTS, SQD, SQE} →
///    [`ErrorKind::InvalidAttrMask`] with `extra = CUR_STATE`, `missing` empty.
/// 6. No table entry for `(cur, next)` → [`ErrorKind::InvalidTransition`].
/// 7. Missing required bits or bits outside `required | optional | STATE` →
///    [`ErrorKind::InvalidAttrMask`] with both sets computed exactly.
///
/// O(1) and allocation-free: a few mask operations and one grid lookup.
///
/// # Errors
///
/// `EOPNOTSUPP` ([`ErrorKind::Unsupported`]) for unknown mask bits; `EINVAL`
/// ([`ErrorKind::InvalidTransition`] or [`ErrorKind::InvalidAttrMask`]) for
/// everything else. Returns the state the QP enters on success.
#[inline]
pub fn check_modify(
    class: QpClass,
    flavor: TableFlavor,
    qp_state: QpState,
    mask: QpAttrMask,
    attr_state: QpState,
    attr_cur_state: QpState,
) -> Result<QpState, ErrorKind> {
    // Accepting: one pass-grid test (every step below folded into it).
    let m = mask.0;
    let c = slot(if m & M::CUR_STATE.0 != 0 {
        attr_cur_state
    } else {
        qp_state
    });
    let n = if m & M::STATE.0 != 0 {
        slot(attr_state)
    } else {
        c
    };
    let cell = PASS_GRIDS[flavor as usize][class as usize][c][n];
    if (cell.need & !m) | (m & !cell.allow) == 0 {
        return Ok(SLOT_STATES[n]);
    }
    refuse_modify(class, flavor, qp_state, mask, attr_state, attr_cur_state)
}

/// [`check_modify`] step by step, for a modify the pass grid refused: the
/// exact reason (out of line, so accepting stays small).
#[cold]
#[inline(never)]
fn refuse_modify(
    class: QpClass,
    flavor: TableFlavor,
    qp_state: QpState,
    mask: QpAttrMask,
    attr_state: QpState,
    attr_cur_state: QpState,
) -> Result<QpState, ErrorKind> {
    let mask = strip_mask(class, mask);
    if !mask.difference(SUPPORTED_BITS).is_empty() {
        return Err(ErrorKind::Unsupported);
    }
    // The slots of `cur` and `next` (step 3), without building the states
    // themselves: a state of a table slot is the slot's state, and the
    // states are needed only for an invalid transition.
    let c = slot(if mask.contains(M::CUR_STATE) {
        attr_cur_state
    } else {
        qp_state
    });
    let n = if mask.contains(M::STATE) {
        slot(attr_state)
    } else {
        c
    };
    let invalid_transition = || {
        let (from, to) = resolve_states(qp_state, mask, attr_state, attr_cur_state);
        ErrorKind::InvalidTransition { from, to }
    };
    if c == BEYOND_ERR || n == BEYOND_ERR {
        return Err(invalid_transition());
    }
    if mask.contains(M::CUR_STATE) && !CUR_STATE_OK[c] {
        return Err(ErrorKind::InvalidAttrMask {
            missing: M::empty(),
            extra: M::CUR_STATE,
        });
    }
    let Some(masks) = grid(class, flavor)[c][n] else {
        return Err(invalid_transition());
    };
    let missing = masks.missing(mask);
    let extra = masks.extra(mask);
    if missing.is_empty() && extra.is_empty() {
        Ok(TABLE_STATES[n])
    } else {
        Err(ErrorKind::InvalidAttrMask { missing, extra })
    }
}

/// Why the table refused an `ibv_modify_qp`, as plain data: the inputs of
/// [`check_modify`] that matter and its verdict. Nothing is formatted until
/// the refusal is displayed, so refusing a modify costs no allocation
/// ([`crate::Error::modify_refused`] keeps it as the error's message).
///
/// `Display` explains the refusal in one line, naming the transition, the
/// rule and the offending bits, e.g. `RTR->RTS for RC requires
/// TIMEOUT|RETRY_CNT|RNR_RETRY|MAX_QP_RD_ATOMIC|SQ_PSN; missing TIMEOUT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ModifyRefusal {
    /// The QP's class.
    pub class: QpClass,
    /// The table flavor that was applied.
    pub flavor: TableFlavor,
    /// The state the modify was validated from (`cur`: `attr.cur_qp_state`
    /// when the mask holds `CUR_STATE`, else the QP's state).
    pub from: QpState,
    /// The state the modify was validated towards (`next`: `attr.qp_state`
    /// when the mask holds `STATE`, else `from`).
    pub to: QpState,
    /// The mask after [`strip_mask`].
    pub mask: QpAttrMask,
    /// The verdict of [`check_modify`].
    pub kind: ErrorKind,
}

impl ModifyRefusal {
    /// The refusal of a modify that [`check_modify`] answered with `kind`,
    /// from the same arguments (`cur`/`next` are resolved the same way).
    #[inline]
    pub fn new(
        class: QpClass,
        flavor: TableFlavor,
        qp_state: QpState,
        mask: QpAttrMask,
        attr_state: QpState,
        attr_cur_state: QpState,
        kind: ErrorKind,
    ) -> Self {
        let mask = strip_mask(class, mask);
        let (from, to) = resolve_states(qp_state, mask, attr_state, attr_cur_state);
        Self {
            class,
            flavor,
            from,
            to,
            mask,
            kind,
        }
    }
}

/// A required/optional set for a refusal message: `nothing but STATE` when
/// empty.
struct RuleSet(QpAttrMask);

impl fmt::Display for RuleSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("nothing but STATE")
        } else {
            fmt::Display::fmt(&self.0, f)
        }
    }
}

impl fmt::Display for ModifyRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            class,
            flavor,
            from,
            to,
            mask,
            kind,
        } = *self;
        match kind {
            ErrorKind::Unsupported => write!(
                f,
                "attr_mask bits {:#x} are outside IB_QP_ATTR_STANDARD_BITS|IBV_QP_RATE_LIMIT",
                mask.difference(SUPPORTED_BITS).bits()
            ),
            ErrorKind::InvalidTransition { from, to } => {
                write!(f, "{from}->{to} is not a legal transition for {class}")?;
                if flavor == TableFlavor::Mlx5
                    && transition_masks(class, from, to, TableFlavor::Kernel).is_some()
                {
                    f.write_str(" on mlx5 (no firmware command for it)")?;
                }
                if !mask.contains(M::STATE) {
                    f.write_str(
                        " (no IBV_QP_STATE in the mask: validated as a modify within the \
                         current state)",
                    )?;
                }
                Ok(())
            }
            ErrorKind::InvalidAttrMask { missing, extra } => {
                match transition_masks(class, from, to, flavor) {
                    // The rule of the pair, unless the only complaint is a
                    // CUR_STATE the rule allows (then it was the pre-check
                    // of spec §3 step 1).
                    Some(t)
                        if !(extra == M::CUR_STATE
                            && missing.is_empty()
                            && t.optional.contains(M::CUR_STATE)) =>
                    {
                        write!(
                            f,
                            "{from}->{to} for {class} requires {}",
                            RuleSet(t.required)
                        )?;
                        if !missing.is_empty() {
                            write!(f, "; missing {missing}")?;
                        }
                        if !extra.is_empty() {
                            write!(
                                f,
                                "; {extra} not allowed (optional: {})",
                                RuleSet(t.optional)
                            )?;
                        }
                        Ok(())
                    }
                    _ => write!(
                        f,
                        "IBV_QP_CUR_STATE is accepted only from RTR, RTS, SQD or SQE (current \
                         state {from})"
                    ),
                }
            }
            other => fmt::Display::fmt(&other, f),
        }
    }
}

/// `"none"` for an empty set, else the `A|B|C` names.
fn set_text(mask: QpAttrMask) -> String {
    if mask.is_empty() {
        "none".to_owned()
    } else {
        mask.names()
    }
}

/// Human-readable diagnosis of a modify the device refused with `EINVAL`:
/// which transition was validated, which bits were missing or extra, and
/// what the table allows — for backend-hw error messages.
///
/// Mentions the XRC bits uverbs dropped, a missing `STATE` bit (the modify
/// then validates as `cur → cur`), mlx5's unimplemented transitions, and,
/// when the state and mask are fine, that the `EINVAL` must come from an
/// attribute value (spec §5.2).
pub fn diagnose_modify(
    class: QpClass,
    flavor: TableFlavor,
    qp_state: QpState,
    mask: QpAttrMask,
    attr_state: QpState,
    attr_cur_state: QpState,
) -> String {
    let stripped = mask.intersection(stripped_bits(class));
    let effective = strip_mask(class, mask);
    let (cur, next) = resolve_states(qp_state, effective, attr_state, attr_cur_state);
    let rules = if class.uses_kernel_table() {
        format!("{flavor} table")
    } else {
        "mlx5 DC rules".to_owned()
    };
    let mut out = format!("{class} QP, {rules}: {cur} -> {next} with mask {mask}");
    if !effective.contains(M::STATE) {
        out.push_str(&format!(" (no STATE bit, so validated as {cur} -> {cur})"));
    }
    if !stripped.is_empty() {
        out.push_str(&format!(
            " (uverbs silently dropped {stripped} for {class})"
        ));
    }
    out.push_str(": ");
    match check_modify(class, flavor, qp_state, mask, attr_state, attr_cur_state) {
        Ok(_) => out.push_str(
            "state and mask are valid for this transition, so the error comes from an \
             attribute value or a device limit (port, pkey_index, rd_atomic limits, path_mtu, \
             AV/GID; spec §5.2)",
        ),
        Err(ErrorKind::Unsupported) => out.push_str(&format!(
            "mask bits {:#x} are outside STANDARD_BITS|RATE_LIMIT (EOPNOTSUPP, not EINVAL)",
            effective.difference(SUPPORTED_BITS).bits()
        )),
        Err(ErrorKind::InvalidTransition { .. }) => {
            if !is_table_state(cur) || !is_table_state(next) {
                out.push_str("a state beyond ERR is never valid in modify_qp");
            } else if class.uses_kernel_table()
                && flavor == TableFlavor::Mlx5
                && transition_masks(class, cur, next, TableFlavor::Kernel).is_some()
            {
                out.push_str(&format!(
                    "mlx5 does not implement {cur} -> {next} (no optab command), although the \
                     kernel table allows it"
                ));
            } else {
                out.push_str(&format!(
                    "{cur} -> {next} is not a legal transition for {class}"
                ));
            }
            let targets: Vec<&str> = TABLE_STATES
                .iter()
                .filter(|to| transition_masks(class, cur, **to, flavor).is_some())
                .map(|to| to.name())
                .collect();
            if is_table_state(cur) {
                let list = if targets.is_empty() {
                    "none".to_owned()
                } else {
                    targets.join(", ")
                };
                out.push_str(&format!("; legal targets from {cur}: {list}"));
            }
        }
        Err(ErrorKind::InvalidAttrMask { missing, extra }) => {
            let masks = transition_masks(class, cur, next, flavor);
            let precheck = effective.contains(M::CUR_STATE) && !CUR_STATE_OK_FROM.contains(&cur);
            match masks {
                Some(m) if !precheck => out.push_str(&format!(
                    "missing {}; extra {}; required {}; optional {}",
                    set_text(missing),
                    set_text(extra),
                    set_text(m.required),
                    set_text(m.optional),
                )),
                _ => out.push_str(&format!(
                    "CUR_STATE is accepted only when the current state is RTR, RTS, SQD or SQE \
                     (current state {cur})"
                )),
            }
        }
        Err(other) => out.push_str(&format!("{other}")),
    }
    out
}

/// Every legal `(from, to, masks)` triple for `class` under `flavor`, in a
/// fixed order: `from` then `to`, both in `enum ib_qp_state` order
/// (RESET, INIT, RTR, RTS, SQD, SQE, ERR).
pub fn legal_transitions(
    class: QpClass,
    flavor: TableFlavor,
) -> Vec<(QpState, QpState, TransitionMasks)> {
    TABLE_STATES
        .iter()
        .flat_map(|&from| TABLE_STATES.iter().map(move |&to| (from, to)))
        .filter_map(|(from, to)| transition_masks(class, from, to, flavor).map(|m| (from, to, m)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    const KERNEL_CLASSES: [QpClass; 6] = [
        QpClass::Rc,
        QpClass::Uc,
        QpClass::Ud,
        QpClass::RawPacket,
        QpClass::XrcIni,
        QpClass::XrcTgt,
    ];

    fn class(name: &str) -> QpClass {
        *QpClass::VALUES
            .iter()
            .find(|c| c.name() == name)
            .expect("class name")
    }

    fn state(name: &str) -> QpState {
        QpState::from_name(name).expect("state name")
    }

    fn mask(names: &str) -> QpAttrMask {
        QpAttrMask::from_names(names).expect("mask names")
    }

    /// Shorthand: check_modify with `STATE` set, no `CUR_STATE` redirection.
    fn modify(
        class: QpClass,
        flavor: TableFlavor,
        from: QpState,
        m: QpAttrMask,
        to: QpState,
    ) -> Result<QpState, ErrorKind> {
        check_modify(class, flavor, from, m, to, from)
    }

    /// Spec §2 grid, rows = current state, columns = requested state, both in
    /// RESET, INIT, RTR, RTS, SQD, SQE, ERR order.
    const SPEC_GRID: [&str; 7] = [
        "YY-----", // RESET
        "YYY---Y", // INIT
        "Y--Y--Y", // RTR
        "Y--YY-Y", // RTS
        "Y--YY-Y", // SQD
        "Y--Y--Y", // SQE
        "Y-----Y", // ERR
    ];

    /// Spec §4.1–§4.9, every row with a non-empty set, transcribed as text:
    /// (types, from, to, required, optional). "0" is the empty set.
    const SPEC_ROWS: &[(&str, &str, &str, &str, &str)] = &[
        // §4.1 RESET → INIT
        ("UD", "RESET", "INIT", "PKEY_INDEX|PORT|QKEY", "0"),
        ("UC RC XRC_INI XRC_TGT", "RESET", "INIT", "PKEY_INDEX|PORT|ACCESS_FLAGS", "0"),
        ("RAW_PACKET", "RESET", "INIT", "PORT", "0"),
        // §4.2 INIT → INIT
        ("UD", "INIT", "INIT", "0", "PKEY_INDEX|PORT|QKEY"),
        ("UC RC XRC_INI XRC_TGT", "INIT", "INIT", "0", "PKEY_INDEX|PORT|ACCESS_FLAGS"),
        // §4.3 INIT → RTR
        ("UD", "INIT", "RTR", "0", "PKEY_INDEX|QKEY"),
        ("UC XRC_INI", "INIT", "RTR", "AV|PATH_MTU|DEST_QPN|RQ_PSN", "ALT_PATH|ACCESS_FLAGS|PKEY_INDEX"),
        (
            "RC XRC_TGT",
            "INIT",
            "RTR",
            "AV|PATH_MTU|DEST_QPN|RQ_PSN|MAX_DEST_RD_ATOMIC|MIN_RNR_TIMER",
            "ALT_PATH|ACCESS_FLAGS|PKEY_INDEX",
        ),
        // §4.4 RTR → RTS
        ("UD", "RTR", "RTS", "SQ_PSN", "CUR_STATE|QKEY"),
        ("UC", "RTR", "RTS", "SQ_PSN", "CUR_STATE|ALT_PATH|ACCESS_FLAGS|PATH_MIG_STATE"),
        (
            "RC",
            "RTR",
            "RTS",
            "TIMEOUT|RETRY_CNT|RNR_RETRY|SQ_PSN|MAX_QP_RD_ATOMIC",
            "CUR_STATE|ALT_PATH|ACCESS_FLAGS|MIN_RNR_TIMER|PATH_MIG_STATE",
        ),
        ("RAW_PACKET", "RTR", "RTS", "0", "RATE_LIMIT"),
        (
            "XRC_INI",
            "RTR",
            "RTS",
            "TIMEOUT|RETRY_CNT|RNR_RETRY|SQ_PSN|MAX_QP_RD_ATOMIC",
            "CUR_STATE|ALT_PATH|ACCESS_FLAGS|PATH_MIG_STATE",
        ),
        (
            "XRC_TGT",
            "RTR",
            "RTS",
            "TIMEOUT|SQ_PSN",
            "CUR_STATE|ALT_PATH|ACCESS_FLAGS|MIN_RNR_TIMER|PATH_MIG_STATE",
        ),
        // §4.5 RTS → RTS
        ("UD", "RTS", "RTS", "0", "CUR_STATE|QKEY"),
        ("UC XRC_INI", "RTS", "RTS", "0", "CUR_STATE|ACCESS_FLAGS|ALT_PATH|PATH_MIG_STATE"),
        ("RC XRC_TGT", "RTS", "RTS", "0", "CUR_STATE|ACCESS_FLAGS|ALT_PATH|PATH_MIG_STATE|MIN_RNR_TIMER"),
        ("RAW_PACKET", "RTS", "RTS", "0", "RATE_LIMIT"),
        // §4.6 RTS → SQD
        ("UD UC RC XRC_INI XRC_TGT", "RTS", "SQD", "0", "EN_SQD_ASYNC_NOTIFY"),
        // §4.7 SQD → RTS
        ("UD", "SQD", "RTS", "0", "CUR_STATE|QKEY"),
        ("UC XRC_INI", "SQD", "RTS", "0", "CUR_STATE|ALT_PATH|ACCESS_FLAGS|PATH_MIG_STATE"),
        ("RC XRC_TGT", "SQD", "RTS", "0", "CUR_STATE|ALT_PATH|ACCESS_FLAGS|MIN_RNR_TIMER|PATH_MIG_STATE"),
        // §4.8 SQD → SQD
        ("UD", "SQD", "SQD", "0", "PKEY_INDEX|QKEY"),
        ("UC", "SQD", "SQD", "0", "AV|ALT_PATH|ACCESS_FLAGS|PKEY_INDEX|PATH_MIG_STATE"),
        (
            "RC",
            "SQD",
            "SQD",
            "0",
            "PORT|AV|TIMEOUT|RETRY_CNT|RNR_RETRY|MAX_QP_RD_ATOMIC|MAX_DEST_RD_ATOMIC|ALT_PATH|ACCESS_FLAGS|PKEY_INDEX|MIN_RNR_TIMER|PATH_MIG_STATE",
        ),
        (
            "XRC_INI",
            "SQD",
            "SQD",
            "0",
            "PORT|AV|TIMEOUT|RETRY_CNT|RNR_RETRY|MAX_QP_RD_ATOMIC|ALT_PATH|ACCESS_FLAGS|PKEY_INDEX|PATH_MIG_STATE",
        ),
        (
            "XRC_TGT",
            "SQD",
            "SQD",
            "0",
            "PORT|AV|TIMEOUT|MAX_DEST_RD_ATOMIC|ALT_PATH|ACCESS_FLAGS|PKEY_INDEX|MIN_RNR_TIMER|PATH_MIG_STATE",
        ),
        // §4.9 SQE → RTS
        ("UD", "SQE", "RTS", "0", "CUR_STATE|QKEY"),
        ("UC", "SQE", "RTS", "0", "CUR_STATE|ACCESS_FLAGS"),
    ];

    #[test]
    fn kernel_legal_pairs_match_spec_grid() {
        // Goal: legality of every (from, to) pair equals spec §2 for all kernel classes; method: compare against the Y/– grid.
        for flavor in TableFlavor::VALUES {
            for &c in &KERNEL_CLASSES {
                for (i, from) in TABLE_STATES.iter().enumerate() {
                    for (j, to) in TABLE_STATES.iter().enumerate() {
                        let mut expected = SPEC_GRID[i].as_bytes()[j] == b'Y';
                        if *flavor == TableFlavor::Mlx5
                            && MLX5_UNIMPLEMENTED.contains(&(*from, *to))
                        {
                            expected = false;
                        }
                        let got = transition_masks(c, *from, *to, *flavor).is_some();
                        assert_eq!(got, expected, "{c} {from}->{to} {flavor:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn kernel_masks_match_spec_rows() {
        // Goal: every per-type mask equals spec §4 (rows not listed are empty); method: text transcription parsed with from_names.
        let mut listed = BTreeSet::new();
        for (types, from, to, required, optional) in SPEC_ROWS {
            for t in types.split_whitespace() {
                let (c, f, t2) = (class(t), state(from), state(to));
                let got = transition_masks(c, f, t2, TableFlavor::Kernel).expect("legal row");
                let want = TransitionMasks {
                    required: mask(required),
                    optional: mask(optional),
                };
                assert_eq!(got, want, "{c} {f}->{t2}");
                assert!(
                    listed.insert((c.name(), f.to_raw(), t2.to_raw())),
                    "row listed twice"
                );
            }
        }
        for &c in &KERNEL_CLASSES {
            for (f, t, m) in legal_transitions(c, TableFlavor::Kernel) {
                if !listed.contains(&(c.name(), f.to_raw(), t.to_raw())) {
                    assert_eq!(m, TransitionMasks::EMPTY, "{c} {f}->{t} should be empty");
                }
            }
        }
    }

    #[test]
    fn concrete_rows_from_the_brief() {
        // Goal: spot-check the rows other crates rely on; method: direct lookups with literal masks.
        let k = TableFlavor::Kernel;
        let rc = transition_masks(QpClass::Rc, INIT, RTR, k).unwrap();
        assert_eq!(
            rc.required,
            M::AV
                | M::PATH_MTU
                | M::DEST_QPN
                | M::RQ_PSN
                | M::MAX_DEST_RD_ATOMIC
                | M::MIN_RNR_TIMER
        );
        let ud = transition_masks(QpClass::Ud, RESET, INIT, k).unwrap();
        assert_eq!(ud.required, M::PKEY_INDEX | M::PORT | M::QKEY);
        assert!(ud.optional.is_empty());
        // RATE_LIMIT: optional only for RAW_PACKET RTR->RTS and RTS->RTS.
        for &c in QpClass::VALUES {
            for flavor in TableFlavor::VALUES {
                for (f, t, m) in legal_transitions(c, *flavor) {
                    let expect = c == QpClass::RawPacket && t == RTS && (f == RTR || f == RTS);
                    assert_eq!(m.optional.contains(M::RATE_LIMIT), expect, "{c} {f}->{t}");
                    assert!(!m.required.contains(M::RATE_LIMIT));
                }
            }
        }
    }

    #[test]
    fn reset_to_err_and_to_sqe_illegal_for_all_classes() {
        // Goal: RESET->ERR and anything->SQE are never legal (spec §2, §6); method: lookup and check_modify for every class and flavor.
        for &c in QpClass::VALUES {
            for &flavor in TableFlavor::VALUES {
                assert_eq!(transition_masks(c, RESET, ERR, flavor), None, "{c}");
                assert_eq!(
                    modify(c, flavor, RESET, M::STATE, ERR),
                    Err(ErrorKind::InvalidTransition {
                        from: RESET,
                        to: ERR
                    })
                );
                for &from in &TABLE_STATES {
                    assert_eq!(
                        transition_masks(c, from, SQE, flavor),
                        None,
                        "{c} {from}->SQE"
                    );
                }
            }
        }
    }

    #[test]
    fn any_to_reset_and_non_reset_to_err_state_only() {
        // Goal: X->RESET and X(!=RESET)->ERR need exactly STATE for kernel classes and DCI (spec §4.10, §6.2); method: loop over states.
        let classes = KERNEL_CLASSES.iter().copied().chain([QpClass::Dci]);
        for c in classes {
            for &flavor in TableFlavor::VALUES {
                for &from in &TABLE_STATES {
                    assert_eq!(
                        modify(c, flavor, from, M::STATE, RESET),
                        Ok(RESET),
                        "{c} {from}->RESET"
                    );
                    assert!(modify(c, flavor, from, M::STATE | M::PORT, RESET).is_err());
                    if from != RESET {
                        assert_eq!(
                            modify(c, flavor, from, M::STATE, ERR),
                            Ok(ERR),
                            "{c} {from}->ERR"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn xrc_stripping_accepts_rc_style_masks() {
        // Goal: uverbs stripping lets RC masks pass on XRC QPs but keeps TGT's own requirements (spec §5.1); method: check_modify with RC masks.
        let k = TableFlavor::Kernel;
        let rc_rtr = transition_masks(QpClass::Rc, INIT, RTR, k)
            .unwrap()
            .required
            | M::STATE;
        assert_eq!(modify(QpClass::XrcIni, k, INIT, rc_rtr, RTR), Ok(RTR));
        assert_eq!(modify(QpClass::XrcTgt, k, INIT, rc_rtr, RTR), Ok(RTR));
        // Without stripping the same mask on the INI table has two extra bits.
        let ini = transition_masks(QpClass::XrcIni, INIT, RTR, k).unwrap();
        assert_eq!(ini.extra(rc_rtr), M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER);
        let rc_rts = transition_masks(QpClass::Rc, RTR, RTS, k).unwrap().required | M::STATE;
        assert_eq!(modify(QpClass::XrcTgt, k, RTR, rc_rts, RTS), Ok(RTS));
        assert_eq!(modify(QpClass::XrcIni, k, RTR, rc_rts, RTS), Ok(RTS));
        // TGT keeps MIN_RNR_TIMER required at INIT->RTR (not stripped for TGT).
        assert_eq!(
            modify(QpClass::XrcTgt, k, INIT, rc_rtr - M::MIN_RNR_TIMER, RTR),
            Err(ErrorKind::InvalidAttrMask {
                missing: M::MIN_RNR_TIMER,
                extra: M::empty()
            })
        );
        assert_eq!(
            strip_mask(
                QpClass::XrcTgt,
                M::MAX_QP_RD_ATOMIC | M::RETRY_CNT | M::RNR_RETRY | M::AV
            ),
            M::AV
        );
        assert_eq!(
            strip_mask(
                QpClass::XrcIni,
                M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER | M::AV
            ),
            M::AV
        );
        for c in [
            QpClass::Rc,
            QpClass::Uc,
            QpClass::Ud,
            QpClass::RawPacket,
            QpClass::Dci,
            QpClass::Dct,
        ] {
            assert_eq!(strip_mask(c, M(0xffff_ffff)), M(0xffff_ffff), "{c}");
        }
    }

    #[test]
    fn mlx5_refuses_rts_sqd_and_sqd_sqd() {
        // Goal: mlx5 flavor removes exactly RTS->SQD and SQD->SQD (spec §6.1); method: compare both flavors per class.
        for &c in &KERNEL_CLASSES {
            assert_eq!(modify(c, TableFlavor::Kernel, RTS, M::STATE, SQD), Ok(SQD));
            assert_eq!(
                modify(c, TableFlavor::Mlx5, RTS, M::STATE, SQD),
                Err(ErrorKind::InvalidTransition { from: RTS, to: SQD })
            );
            assert_eq!(
                modify(c, TableFlavor::Mlx5, SQD, M::STATE, SQD),
                Err(ErrorKind::InvalidTransition { from: SQD, to: SQD })
            );
            assert_eq!(modify(c, TableFlavor::Mlx5, SQD, M::STATE, RTS), Ok(RTS));
            assert_eq!(
                modify(c, TableFlavor::Mlx5, RESET, M::STATE, RESET),
                Ok(RESET)
            );
            let kernel = legal_transitions(c, TableFlavor::Kernel);
            let mlx5 = legal_transitions(c, TableFlavor::Mlx5);
            assert_eq!(kernel.len(), 22);
            assert_eq!(mlx5.len(), 20);
            let removed: Vec<_> = kernel
                .iter()
                .filter(|k| !mlx5.contains(k))
                .map(|(f, t, _)| (*f, *t))
                .collect();
            assert_eq!(removed, vec![(RTS, SQD), (SQD, SQD)]);
        }
    }

    #[test]
    fn dct_exact_masks() {
        // Goal: DCT has exactly RESET->INIT and INIT->RTR with exact masks, nothing else (spec §6.3); method: table and check_modify.
        for &flavor in TableFlavor::VALUES {
            let legal = legal_transitions(QpClass::Dct, flavor);
            assert_eq!(
                legal,
                vec![
                    (
                        RESET,
                        INIT,
                        TransitionMasks {
                            required: mask("STATE|ACCESS_FLAGS|PKEY_INDEX|PORT"),
                            optional: M::empty()
                        }
                    ),
                    (
                        INIT,
                        RTR,
                        TransitionMasks {
                            required: mask("STATE|MIN_RNR_TIMER|AV|PATH_MTU"),
                            optional: M::empty()
                        }
                    ),
                ]
            );
            let init = mask("STATE|ACCESS_FLAGS|PKEY_INDEX|PORT");
            assert_eq!(modify(QpClass::Dct, flavor, RESET, init, INIT), Ok(INIT));
            assert_eq!(
                modify(QpClass::Dct, flavor, RESET, init - M::PORT, INIT),
                Err(ErrorKind::InvalidAttrMask {
                    missing: M::PORT,
                    extra: M::empty()
                })
            );
            assert_eq!(
                modify(QpClass::Dct, flavor, RESET, init | M::QKEY, INIT),
                Err(ErrorKind::InvalidAttrMask {
                    missing: M::empty(),
                    extra: M::QKEY
                })
            );
            let rtr = mask("STATE|MIN_RNR_TIMER|AV|PATH_MTU");
            assert_eq!(modify(QpClass::Dct, flavor, INIT, rtr, RTR), Ok(RTR));
            // Without STATE the modify is INIT->INIT, which a DCT does not have.
            assert_eq!(
                modify(QpClass::Dct, flavor, INIT, rtr - M::STATE, RTR),
                Err(ErrorKind::InvalidTransition {
                    from: INIT,
                    to: INIT
                })
            );
            for (from, to) in [
                (RTR, RTS),
                (RTR, ERR),
                (RTR, RESET),
                (INIT, RESET),
                (INIT, ERR),
                (RESET, RESET),
            ] {
                assert_eq!(
                    modify(QpClass::Dct, flavor, from, M::STATE, to),
                    Err(ErrorKind::InvalidTransition { from, to }),
                    "DCT {from}->{to}"
                );
            }
        }
    }

    #[test]
    fn dci_rows() {
        // Goal: DCI rules of spec §6.2 including STATE being required; method: table lookups and check_modify.
        let f = TableFlavor::Mlx5;
        let rows: &[(QpState, QpState, &str, &str)] = &[
            (RESET, INIT, "STATE|PKEY_INDEX|PORT", "0"),
            (INIT, INIT, "STATE", "PKEY_INDEX|PORT"),
            (INIT, RTR, "STATE|PATH_MTU", "PKEY_INDEX|AV"),
            (
                RTR,
                RTS,
                "STATE|TIMEOUT|RETRY_CNT|RNR_RETRY|MAX_QP_RD_ATOMIC|SQ_PSN",
                "MIN_RNR_TIMER",
            ),
            (RTS, RTS, "STATE", "MIN_RNR_TIMER"),
        ];
        for (from, to, r, o) in rows {
            let want = TransitionMasks {
                required: mask(r),
                optional: mask(o),
            };
            assert_eq!(
                transition_masks(QpClass::Dci, *from, *to, f),
                Some(want),
                "DCI {from}->{to}"
            );
        }
        // 7 x->RESET + 6 x->ERR + the 5 rows above.
        assert_eq!(legal_transitions(QpClass::Dci, f).len(), 18);
        assert_eq!(
            legal_transitions(QpClass::Dci, TableFlavor::Kernel),
            legal_transitions(QpClass::Dci, f)
        );
        for (from, to) in [
            (RTS, SQD),
            (SQD, RTS),
            (SQE, RTS),
            (RTR, RTR),
            (RESET, ERR),
            (SQD, SQD),
        ] {
            assert_eq!(
                transition_masks(QpClass::Dci, from, to, f),
                None,
                "DCI {from}->{to}"
            );
        }
        assert_eq!(
            modify(
                QpClass::Dci,
                f,
                INIT,
                mask("STATE|PATH_MTU|DEST_QPN|RQ_PSN"),
                RTR
            ),
            Err(ErrorKind::InvalidAttrMask {
                missing: M::empty(),
                extra: M::DEST_QPN | M::RQ_PSN
            })
        );
        // INIT->INIT without STATE: mlx5 requires STATE for DCI.
        assert_eq!(
            check_modify(QpClass::Dci, f, INIT, M::PKEY_INDEX, INIT, INIT),
            Err(ErrorKind::InvalidAttrMask {
                missing: M::STATE,
                extra: M::empty()
            })
        );
        // The kernel classes accept the same STATE-less INIT->INIT.
        assert_eq!(
            check_modify(QpClass::Rc, f, INIT, M::PKEY_INDEX, INIT, INIT),
            Ok(INIT)
        );
    }

    #[test]
    fn cur_state_rules() {
        // Goal: CUR_STATE redirects cur and is refused outside RTR/RTS/SQD/SQE or where not optional (spec §3); method: check_modify cases.
        let k = TableFlavor::Kernel;
        let only_cur = ErrorKind::InvalidAttrMask {
            missing: M::empty(),
            extra: M::CUR_STATE,
        };
        // CUR_STATE = INIT: refused by the first check, even for a legal INIT->RTR.
        let rtr =
            mask("STATE|CUR_STATE|AV|PATH_MTU|DEST_QPN|RQ_PSN|MAX_DEST_RD_ATOMIC|MIN_RNR_TIMER");
        assert_eq!(
            check_modify(QpClass::Rc, k, INIT, rtr, RTR, INIT),
            Err(only_cur)
        );
        for cur in [RESET, INIT, ERR] {
            assert_eq!(
                check_modify(QpClass::Ud, k, cur, mask("STATE|CUR_STATE"), ERR, cur),
                Err(only_cur),
                "{cur}"
            );
        }
        // CUR_STATE overrides the cached state: cached RTS, attr says RTR.
        let rts = mask("STATE|CUR_STATE|TIMEOUT|RETRY_CNT|RNR_RETRY|SQ_PSN|MAX_QP_RD_ATOMIC");
        assert_eq!(check_modify(QpClass::Rc, k, RTS, rts, RTS, RTR), Ok(RTS));
        // Without CUR_STATE the same attrs are validated as RTS->RTS: required bits become extra.
        assert_eq!(
            check_modify(QpClass::Rc, k, RTS, rts - M::CUR_STATE, RTS, RTR),
            Err(ErrorKind::InvalidAttrMask {
                missing: M::empty(),
                extra: mask("TIMEOUT|RETRY_CNT|RNR_RETRY|SQ_PSN|MAX_QP_RD_ATOMIC")
            })
        );
        // Allowed cur state but not in the optional set: RTS->SQD.
        assert_eq!(
            check_modify(QpClass::Rc, k, RTS, mask("STATE|CUR_STATE"), SQD, RTS),
            Err(only_cur)
        );
        // GSI-style SQE recovery on UD: STATE|CUR_STATE with cur=SQE.
        assert_eq!(
            check_modify(QpClass::Ud, k, RTS, mask("STATE|CUR_STATE"), RTS, SQE),
            Ok(RTS)
        );
        // RC SQE->RTS entry exists but has no bits: CUR_STATE is extra, STATE alone passes.
        assert_eq!(
            check_modify(QpClass::Rc, k, SQE, mask("STATE|CUR_STATE"), RTS, SQE),
            Err(only_cur)
        );
        assert_eq!(modify(QpClass::Rc, k, SQE, M::STATE, RTS), Ok(RTS));
    }

    #[test]
    fn no_state_bit_is_cur_to_cur() {
        // Goal: without STATE the modify is validated as cur->cur (spec §3); method: check_modify from each state with an empty mask.
        let k = TableFlavor::Kernel;
        for (cur, ok) in [
            (RESET, true),
            (INIT, true),
            (RTR, false),
            (RTS, true),
            (SQD, true),
            (SQE, false),
            (ERR, true),
        ] {
            let got = check_modify(QpClass::Rc, k, cur, M::empty(), RESET, RESET);
            if ok {
                assert_eq!(got, Ok(cur), "{cur}");
            } else {
                assert_eq!(
                    got,
                    Err(ErrorKind::InvalidTransition { from: cur, to: cur }),
                    "{cur}"
                );
            }
        }
        assert_eq!(
            check_modify(QpClass::Rc, k, RTS, M::ACCESS_FLAGS, RESET, RESET),
            Ok(RTS)
        );
    }

    #[test]
    fn unknown_bits_are_unsupported() {
        // Goal: bits outside STANDARD_BITS|RATE_LIMIT give EOPNOTSUPP before any state check (spec §5.1); method: bits 21-24, 26, 31.
        for bit in [21, 22, 23, 24, 26, 31] {
            for &c in QpClass::VALUES {
                let m = M::STATE | M(1 << bit);
                assert_eq!(
                    check_modify(c, TableFlavor::Kernel, RESET, m, ERR, RESET),
                    Err(ErrorKind::Unsupported)
                );
                assert_eq!(ErrorKind::Unsupported.errno(), crate::errno::EOPNOTSUPP);
            }
        }
        // RATE_LIMIT is known: accepted for RAW_PACKET RTS->RTS, an extra bit for RC.
        let m = M::STATE | M::RATE_LIMIT;
        assert_eq!(
            modify(QpClass::RawPacket, TableFlavor::Kernel, RTS, m, RTS),
            Ok(RTS)
        );
        assert_eq!(
            modify(QpClass::Rc, TableFlavor::Kernel, RTS, m, RTS),
            Err(ErrorKind::InvalidAttrMask {
                missing: M::empty(),
                extra: M::RATE_LIMIT
            })
        );
    }

    #[test]
    fn missing_and_extra_sets_are_exact() {
        // Goal: both sets are reported together and exactly; method: RC INIT->RTR with some required bits and some foreign bits.
        let m = mask("STATE|AV|QKEY|CAP");
        assert_eq!(
            modify(QpClass::Rc, TableFlavor::Kernel, INIT, m, RTR),
            Err(ErrorKind::InvalidAttrMask {
                missing: mask("PATH_MTU|DEST_QPN|RQ_PSN|MAX_DEST_RD_ATOMIC|MIN_RNR_TIMER"),
                extra: mask("QKEY|CAP"),
            })
        );
        // UD RESET->INIT with nothing but STATE.
        assert_eq!(
            modify(QpClass::Ud, TableFlavor::Kernel, RESET, M::STATE, INIT),
            Err(ErrorKind::InvalidAttrMask {
                missing: mask("PKEY_INDEX|PORT|QKEY"),
                extra: M::empty()
            })
        );
    }

    #[test]
    fn states_beyond_err_are_invalid_transitions() {
        // Goal: UNKNOWN / Unknown(n) states are refused as transitions (spec §5.1); method: put them in each state input.
        let k = TableFlavor::Kernel;
        for bad in [QpState::UnknownState, QpState::Unknown(42)] {
            assert_eq!(
                modify(QpClass::Rc, k, INIT, M::STATE, bad),
                Err(ErrorKind::InvalidTransition {
                    from: INIT,
                    to: bad
                })
            );
            assert_eq!(
                modify(QpClass::Rc, k, bad, M::STATE, RESET),
                Err(ErrorKind::InvalidTransition {
                    from: bad,
                    to: RESET
                })
            );
            assert_eq!(
                check_modify(QpClass::Ud, k, RTS, mask("STATE|CUR_STATE"), RTS, bad),
                Err(ErrorKind::InvalidTransition { from: bad, to: RTS })
            );
            assert!(legal_transitions(QpClass::Rc, k)
                .iter()
                .all(|(f, t, _)| *f != bad && *t != bad));
        }
    }

    #[test]
    fn from_qp_type_mapping() {
        // Goal: QP type (+DC type) maps to the right class; method: enumerate every QpType.
        let cases = [
            (QpType::Rc, None, Some(QpClass::Rc)),
            (QpType::Uc, Some(DcType::Dci), Some(QpClass::Uc)),
            (QpType::Ud, None, Some(QpClass::Ud)),
            (QpType::RawPacket, None, Some(QpClass::RawPacket)),
            (QpType::XrcSend, None, Some(QpClass::XrcIni)),
            (QpType::XrcRecv, None, Some(QpClass::XrcTgt)),
            (QpType::Driver, Some(DcType::Dci), Some(QpClass::Dci)),
            (QpType::Driver, Some(DcType::Dct), Some(QpClass::Dct)),
            (QpType::Driver, None, None),
            (QpType::Driver, Some(DcType::Unknown(9)), None),
            (QpType::Unknown(1), None, None),
        ];
        for (t, dc, want) in cases {
            assert_eq!(QpClass::from_qp_type(t, dc), want, "{t} {dc:?}");
        }
        let names: Vec<_> = QpClass::VALUES.iter().map(|c| c.to_string()).collect();
        assert_eq!(
            names,
            [
                "RC",
                "UC",
                "UD",
                "RAW_PACKET",
                "XRC_INI",
                "XRC_TGT",
                "DCI",
                "DCT"
            ]
        );
    }

    #[test]
    fn legal_transitions_order_and_consistency() {
        // Goal: legal_transitions is from-major in enum order and agrees with transition_masks; method: sort check and lookups.
        for &c in QpClass::VALUES {
            for &flavor in TableFlavor::VALUES {
                let all = legal_transitions(c, flavor);
                let keys: Vec<_> = all
                    .iter()
                    .map(|(f, t, _)| (f.to_raw(), t.to_raw()))
                    .collect();
                let mut sorted = keys.clone();
                sorted.sort_unstable();
                sorted.dedup();
                assert_eq!(keys, sorted, "{c} {flavor:?}");
                for (f, t, m) in &all {
                    assert_eq!(transition_masks(c, *f, *t, flavor), Some(*m));
                    assert!(!m.required.intersects(m.optional), "{c} {f}->{t} overlap");
                }
            }
        }
    }

    #[test]
    fn diagnose_names_the_problem() {
        // Goal: the diagnosis names the transition and the exact bits; method: substring checks on typical failures.
        let k = TableFlavor::Kernel;
        let d = diagnose_modify(QpClass::Rc, k, INIT, mask("STATE|AV|QKEY"), RTR, INIT);
        assert!(d.contains("INIT -> RTR"), "{d}");
        let missing = mask("PATH_MTU|DEST_QPN|RQ_PSN|MAX_DEST_RD_ATOMIC|MIN_RNR_TIMER").names();
        assert!(d.contains(&format!("missing {missing};")), "{d}");
        assert!(d.contains("extra QKEY"), "{d}");
        let d = diagnose_modify(QpClass::Rc, TableFlavor::Mlx5, RTS, M::STATE, SQD, RTS);
        assert!(d.contains("mlx5 does not implement RTS -> SQD"), "{d}");
        let d = diagnose_modify(QpClass::Rc, k, RESET, M::STATE, ERR, RESET);
        assert!(
            d.contains("RESET -> ERR is not a legal transition for RC"),
            "{d}"
        );
        assert!(d.contains("legal targets from RESET: RESET, INIT"), "{d}");
        let d = diagnose_modify(QpClass::Rc, k, RTR, M::empty(), RESET, RESET);
        assert!(d.contains("no STATE bit"), "{d}");
        let d = diagnose_modify(
            QpClass::XrcIni,
            k,
            INIT,
            mask("STATE|MIN_RNR_TIMER"),
            RTR,
            INIT,
        );
        assert!(d.contains("dropped MIN_RNR_TIMER"), "{d}");
        let d = diagnose_modify(QpClass::Rc, k, INIT, mask("STATE|CUR_STATE"), INIT, INIT);
        assert!(d.contains("CUR_STATE is accepted only"), "{d}");
        let d = diagnose_modify(QpClass::Rc, k, INIT, M::STATE | M(1 << 22), INIT, INIT);
        assert!(d.contains("0x400000") && d.contains("EOPNOTSUPP"), "{d}");
        let d = diagnose_modify(QpClass::Rc, k, INIT, M::STATE, INIT, INIT);
        assert!(d.contains("attribute value"), "{d}");
        let d = diagnose_modify(QpClass::Dct, TableFlavor::Mlx5, RTR, M::STATE, ERR, RTR);
        assert!(
            d.contains("DC rules") && d.contains("legal targets from RTR: none"),
            "{d}"
        );
    }

    /// The lookup the grids replace: a linear search of the source lists.
    fn reference_masks(
        c: QpClass,
        from: QpState,
        to: QpState,
        flavor: TableFlavor,
    ) -> Option<TransitionMasks> {
        let dc = |table: &[DcEntry]| {
            table
                .iter()
                .find(|e| e.from == from && e.to == to)
                .map(|e| e.masks)
        };
        match c {
            QpClass::Dci => dc(DCI_TABLE),
            QpClass::Dct => dc(DCT_TABLE),
            _ => {
                if flavor == TableFlavor::Mlx5 && MLX5_UNIMPLEMENTED.contains(&(from, to)) {
                    return None;
                }
                KERNEL_TABLE
                    .iter()
                    .find(|e| e.from == from && e.to == to)
                    .and_then(|e| e.column(c))
            }
        }
    }

    /// Every state worth feeding a lookup: the seven table states, and
    /// states beyond ERR including `Unknown(n)` whose raw value is a table
    /// state's.
    fn lookup_states() -> Vec<QpState> {
        let mut states = TABLE_STATES.to_vec();
        states.push(QpState::UnknownState);
        states.extend((0..=9).chain([42, u32::MAX]).map(QpState::Unknown));
        states
    }

    #[test]
    fn table_states_invert_the_slots() {
        // Goal: check_modify returns the state of the target slot; method: every table state round-trips.
        for (i, s) in TABLE_STATES.iter().enumerate() {
            assert_eq!(slot(*s), i);
            assert_eq!(state_slot(*s), i);
        }
    }

    #[test]
    fn grids_match_the_source_lists() {
        // Goal: the compile-time grids are exactly the listed tables, and states beyond ERR (even Unknown(n) with n < 7) are never legal; method: compare every lookup with a linear search of the lists.
        let states = lookup_states();
        for &c in QpClass::VALUES {
            for &flavor in TableFlavor::VALUES {
                for &from in &states {
                    for &to in &states {
                        assert_eq!(
                            transition_masks(c, from, to, flavor),
                            reference_masks(c, from, to, flavor),
                            "{c} {flavor} {from}->{to}"
                        );
                    }
                }
            }
        }
        for &s in &states {
            let want = TABLE_STATES.iter().position(|t| *t == s);
            assert_eq!(
                (slot(s), state_slot(s)),
                (want.unwrap_or(BEYOND_ERR), want.unwrap_or(BEYOND_ERR)),
                "{s:?}"
            );
        }
        for bad in [QpState::Unknown(3), QpState::Unknown(0)] {
            assert_eq!(
                modify(QpClass::Rc, TableFlavor::Kernel, RTS, M::STATE, bad),
                Err(ErrorKind::InvalidTransition { from: RTS, to: bad })
            );
            assert_eq!(
                check_modify(
                    QpClass::Rc,
                    TableFlavor::Kernel,
                    RTS,
                    mask("STATE|CUR_STATE"),
                    RTS,
                    bad
                ),
                Err(ErrorKind::InvalidTransition { from: bad, to: RTS })
            );
        }
    }

    /// The refusal of `check_modify` on these arguments, displayed.
    fn refusal_text(
        c: QpClass,
        flavor: TableFlavor,
        qp_state: QpState,
        m: QpAttrMask,
        attr_state: QpState,
        attr_cur: QpState,
    ) -> String {
        let kind = check_modify(c, flavor, qp_state, m, attr_state, attr_cur)
            .expect_err("a refused modify");
        ModifyRefusal::new(c, flavor, qp_state, m, attr_state, attr_cur, kind).to_string()
    }

    #[test]
    fn refusal_messages_name_rule_and_bits() {
        // Goal: the refusal text names the transition, the rule and the offending bits, word for word; method: one case per message shape.
        let k = TableFlavor::Kernel;
        let rts = mask("STATE|RETRY_CNT|RNR_RETRY|SQ_PSN|MAX_QP_RD_ATOMIC");
        assert_eq!(
            refusal_text(QpClass::Rc, k, RTR, rts, RTS, RTR),
            "RTR->RTS for RC requires TIMEOUT|RETRY_CNT|RNR_RETRY|MAX_QP_RD_ATOMIC|SQ_PSN; \
             missing TIMEOUT"
        );
        assert_eq!(
            refusal_text(QpClass::Rc, k, RTS, mask("STATE|QKEY"), RESET, RTS),
            "RTS->RESET for RC requires nothing but STATE; QKEY not allowed (optional: nothing \
             but STATE)"
        );
        assert_eq!(
            refusal_text(
                QpClass::Ud,
                k,
                RESET,
                mask("STATE|PORT|SQ_PSN"),
                INIT,
                RESET
            ),
            "RESET->INIT for UD requires PKEY_INDEX|PORT|QKEY; missing PKEY_INDEX|QKEY; SQ_PSN \
             not allowed (optional: nothing but STATE)"
        );
        assert_eq!(
            refusal_text(QpClass::Rc, k, RESET, M::STATE, ERR, RESET),
            "RESET->ERR is not a legal transition for RC"
        );
        assert_eq!(
            refusal_text(QpClass::Rc, TableFlavor::Mlx5, RTS, M::STATE, SQD, RTS),
            "RTS->SQD is not a legal transition for RC on mlx5 (no firmware command for it)"
        );
        assert_eq!(
            refusal_text(QpClass::Rc, k, RTR, M::AV, RTR, RTR),
            "RTR->RTR is not a legal transition for RC (no IBV_QP_STATE in the mask: validated \
             as a modify within the current state)"
        );
        assert_eq!(
            refusal_text(QpClass::Rc, k, INIT, mask("STATE|CUR_STATE"), RTS, INIT),
            "IBV_QP_CUR_STATE is accepted only from RTR, RTS, SQD or SQE (current state INIT)"
        );
        assert_eq!(
            refusal_text(QpClass::Rc, k, RTS, mask("STATE|CUR_STATE"), SQD, RTS),
            "RTS->SQD for RC requires nothing but STATE; CUR_STATE not allowed (optional: \
             EN_SQD_ASYNC_NOTIFY)"
        );
        assert_eq!(
            refusal_text(QpClass::Rc, k, INIT, M::STATE | M(1 << 22), RTR, INIT),
            "attr_mask bits 0x400000 are outside IB_QP_ATTR_STANDARD_BITS|IBV_QP_RATE_LIMIT"
        );
        // XRC bits uverbs strips are neither missing nor extra.
        let r = ModifyRefusal::new(
            QpClass::XrcIni,
            k,
            INIT,
            mask("STATE|MIN_RNR_TIMER"),
            RTR,
            INIT,
            ErrorKind::InvalidAttrMask {
                missing: mask("AV|PATH_MTU|DEST_QPN|RQ_PSN"),
                extra: M::empty(),
            },
        );
        assert_eq!((r.from, r.to, r.mask), (INIT, RTR, M::STATE));
    }

    #[test]
    fn refused_error_is_lazy_and_equals_its_text_form() {
        // Goal: an Error built from a refusal allocates no text until asked, and is indistinguishable (message, Display, Debug, ==) from one built with the text; method: compare with Error::new on the displayed refusal.
        use crate::{Error, Verb};
        let kind = modify(QpClass::Rc, TableFlavor::Kernel, RESET, M::STATE, INIT)
            .expect_err("missing bits");
        let refusal = ModifyRefusal::new(
            QpClass::Rc,
            TableFlavor::Kernel,
            RESET,
            M::STATE,
            INIT,
            RESET,
            kind,
        );
        let lazy = Error::modify_refused(Verb::ModifyQp, refusal);
        let text = Error::new(Verb::ModifyQp, kind, refusal.to_string());
        assert_eq!(lazy.refusal(), Some(&refusal));
        assert_eq!(text.refusal(), None);
        // Display and equality before the text is cached, then after.
        assert_eq!(lazy.to_string(), text.to_string());
        assert_eq!(lazy, text);
        assert_eq!(text, lazy);
        assert_eq!(lazy.clone(), lazy);
        assert_eq!(
            lazy.message(),
            "RESET->INIT for RC requires ACCESS_FLAGS|PKEY_INDEX|PORT; missing \
             ACCESS_FLAGS|PKEY_INDEX|PORT"
        );
        assert_eq!(lazy.to_string(), text.to_string());
        assert_eq!(format!("{lazy:?}"), format!("{text:?}"));
        assert_eq!(
            (lazy.kind(), lazy.errno(), lazy.verb(), lazy.bad_wr()),
            (kind, crate::errno::EINVAL, Verb::ModifyQp, None)
        );
        assert_ne!(lazy, Error::new(Verb::ModifyQp, kind, "other text"));
        assert_ne!(lazy, text.clone().with_errno(crate::errno::ENOMEM));
    }

    // ----- property tests -----

    fn any_class() -> impl Strategy<Value = QpClass> {
        prop::sample::select(QpClass::VALUES.to_vec())
    }

    fn any_flavor() -> impl Strategy<Value = TableFlavor> {
        prop::sample::select(TableFlavor::VALUES.to_vec())
    }

    fn any_state() -> impl Strategy<Value = QpState> {
        prop_oneof![
            10 => prop::sample::select(TABLE_STATES.to_vec()),
            1 => Just(QpState::UnknownState),
            1 => (8u32..20).prop_map(QpState::Unknown),
        ]
    }

    fn any_mask() -> impl Strategy<Value = QpAttrMask> {
        prop_oneof![
            6 => any::<u32>().prop_map(|b| M(b & SUPPORTED_BITS.0)),
            1 => any::<u32>().prop_map(M),
        ]
    }

    /// The reference: §3/§5.1 re-derived from transition_masks alone.
    fn oracle(
        c: QpClass,
        flavor: TableFlavor,
        qp_state: QpState,
        m: QpAttrMask,
        attr_state: QpState,
        attr_cur: QpState,
    ) -> Result<QpState, &'static str> {
        let m = strip_mask(c, m);
        if m.0 & !SUPPORTED_BITS.0 != 0 {
            return Err("unsupported");
        }
        let cur = if m.0 & M::CUR_STATE.0 != 0 {
            attr_cur
        } else {
            qp_state
        };
        let next = if m.0 & M::STATE.0 != 0 {
            attr_state
        } else {
            cur
        };
        match transition_masks(c, cur, next, flavor) {
            Some(t)
                if m.0 & t.required.0 == t.required.0
                    && m.0 & !(t.required.0 | t.optional.0 | M::STATE.0) == 0 =>
            {
                Ok(next)
            }
            _ => Err("einval"),
        }
    }

    fn assert_agrees(
        c: QpClass,
        flavor: TableFlavor,
        qp_state: QpState,
        m: QpAttrMask,
        attr_state: QpState,
        attr_cur: QpState,
    ) -> Result<(), TestCaseError> {
        let got = check_modify(c, flavor, qp_state, m, attr_state, attr_cur);
        let want = oracle(c, flavor, qp_state, m, attr_state, attr_cur);
        match (&got, &want) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Err(ErrorKind::Unsupported), Err("unsupported")) => {}
            (
                Err(ErrorKind::InvalidTransition { .. } | ErrorKind::InvalidAttrMask { .. }),
                Err("einval"),
            ) => {}
            _ => prop_assert!(
                false,
                "{c} {flavor:?} {qp_state} {m} {attr_state} {attr_cur}: got {got:?}, want {want:?}"
            ),
        }
        // When the error is about the mask of an existing entry (and not the
        // CUR_STATE pre-check), the two sets are exactly req-m and m-allowed.
        if let Err(ErrorKind::InvalidAttrMask { missing, extra }) = got {
            let sm = strip_mask(c, m);
            let (cur, next) = resolve_states(qp_state, sm, attr_state, attr_cur);
            let precheck = sm.contains(M::CUR_STATE) && !CUR_STATE_OK_FROM.contains(&cur);
            if precheck {
                prop_assert_eq!((missing, extra), (M::empty(), M::CUR_STATE));
            } else {
                let t = transition_masks(c, cur, next, flavor)
                    .expect("mask error implies a legal pair");
                prop_assert_eq!(missing, M(t.required.0 & !sm.0));
                prop_assert_eq!(extra, M(sm.0 & !(t.required.0 | t.optional.0 | M::STATE.0)));
                prop_assert!(!missing.is_empty() || !extra.is_empty());
            }
        }
        if let Err(ErrorKind::InvalidTransition { from, to }) = got {
            let sm = strip_mask(c, m);
            prop_assert_eq!(
                (from, to),
                resolve_states(qp_state, sm, attr_state, attr_cur)
            );
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn prop_random_inputs_agree_with_table(
            c in any_class(), flavor in any_flavor(), qp_state in any_state(),
            m in any_mask(), attr_state in any_state(), attr_cur in any_state(),
        ) {
            // Goal: check_modify == re-derivation from transition_masks on arbitrary inputs; method: random states and masks.
            assert_agrees(c, flavor, qp_state, m, attr_state, attr_cur)?;
        }

        #[test]
        fn prop_near_legal_masks_agree_with_table(
            c in any_class(), flavor in any_flavor(), idx in any::<usize>(),
            opt_pick in any::<u32>(), noise in any::<u32>(), use_noise in any::<bool>(),
            with_cur in any::<bool>(),
        ) {
            // Goal: same agreement near the legal boundary; method: start from a legal triple's mask and flip random bits.
            let legal = legal_transitions(c, flavor);
            let (from, to, t) = legal[idx % legal.len()];
            let mut m = t.required | M(t.optional.0 & opt_pick) | M::STATE;
            if use_noise {
                m = M((m.0 ^ (noise & noise.rotate_left(7))) & SUPPORTED_BITS.0);
            }
            if with_cur && t.optional.contains(M::CUR_STATE) {
                m |= M::CUR_STATE;
            }
            assert_agrees(c, flavor, from, m, to, from)?;
            if !use_noise {
                prop_assert_eq!(check_modify(c, flavor, from, m, to, from), Ok(to));
            }
        }
    }

    #[test]
    fn pass_grid_accepts_exactly_what_the_steps_accept() {
        // Goal: the one-test acceptance of check_modify agrees with the
        // step-by-step rules (refuse_modify) on every class, flavor and
        // state triple; method: masks drawn from the bits that matter
        // (the transition's, STATE, CUR_STATE, the stripped ones, one
        // unsupported and one unrelated bit), deterministically.
        let states = [
            RESET,
            INIT,
            RTR,
            RTS,
            SQD,
            SQE,
            ERR,
            QpState::UnknownState,
            QpState::Unknown(3),
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut accepted = 0;
        for &class in QpClass::VALUES {
            for &flavor in TableFlavor::VALUES {
                for &qp_state in &states {
                    for &attr_state in &states {
                        for &attr_cur in &states {
                            let masks = [
                                reference_masks(class, qp_state, attr_state, flavor),
                                reference_masks(class, attr_cur, attr_state, flavor),
                                reference_masks(class, qp_state, qp_state, flavor),
                            ];
                            let mut pool = M::STATE
                                .union(M::CUR_STATE)
                                .union(stripped_bits(class))
                                .union(stripped_bits(QpClass::XrcIni))
                                .union(stripped_bits(QpClass::XrcTgt))
                                .union(M(1 << 30));
                            for m in masks.into_iter().flatten() {
                                pool = pool.union(m.required).union(m.optional);
                            }
                            for i in 0..48 {
                                let r = next();
                                let mut mask = M(pool.0 & r as u32);
                                if i % 4 == 0 {
                                    mask = mask.union(M(1 << ((r >> 40) % 32)));
                                }
                                if i % 8 == 1 {
                                    // Every bit of one transition: the legal case.
                                    if let Some(m) = masks.into_iter().flatten().next() {
                                        mask = m
                                            .required
                                            .union(M::STATE)
                                            .union(M(m.optional.0 & (r >> 32) as u32));
                                    }
                                }
                                let fast = check_modify(
                                    class, flavor, qp_state, mask, attr_state, attr_cur,
                                );
                                let slow = refuse_modify(
                                    class, flavor, qp_state, mask, attr_state, attr_cur,
                                );
                                accepted += usize::from(fast.is_ok());
                                assert_eq!(
                                    fast, slow,
                                    "{class} {flavor:?} qp {qp_state} attr {attr_state} cur {attr_cur} mask {mask}"
                                );
                            }
                        }
                    }
                }
            }
        }
        // The draws reach the accepting side often, not by luck.
        assert!(accepted > 10_000, "{accepted} accepted");
    }
}
