//! The statement catalogue: every statement name, how many positional
//! arguments it takes, which `key=value` arguments it accepts and what kind
//! of value each holds, and which expectations it allows.
//!
//! The parser checks scripts against this table so that a typo is a parse
//! error with a line number, not a surprise at run time; the runner relies on
//! the same table (it never sees a key it does not know).

use verbs_api::{
    AccessFlags, AsyncEventType, CmEventType, DcType, Mlx5ContextMask, Mlx5QpCreateFlags,
    Mlx5QpInitAttrMask, Mlx5SendOpsFlags, Mtu, OpenFlags, PathMigState, PortSpace, QpAttrMask,
    QpCreateFlags, QpInitAttrMask, QpState, QpType, SendFlags, SendOpsFlags, SrqAttrMask,
    SrqInitAttrMask, SrqType, WcFlags, WcOpcode, WcStatus, WrOpcode, XrcdInitAttrMask,
};

/// What kind of value a key holds (checked by the parser where the value is
/// a literal; references such as `b.qp_num` are resolved when the script runs).
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    /// A number (decimal or `0x` hex), or a reference to a binding's field.
    Int,
    /// A binding name (a handle), or `none` for a null pointer.
    Name,
    /// An enum value by C name; the function says whether a name is valid.
    Enum(&'static str, fn(&str) -> bool),
    /// Flags joined by `|`; the function says whether the text is valid.
    Flags(&'static str, fn(&str) -> bool),
    /// A GID (`fe80::1` or 32 hex digits).
    Gid,
    /// `MR:OFFSET:LENGTH`.
    Sge,
    /// `ADDR:LENGTH:LKEY`.
    SgeRaw,
    /// `MR:OFFSET`.
    Remote,
    /// Hex bytes (`deadbeef`).
    Hex,
    /// A socket address `IP:PORT` (IPv6 in brackets).
    Addr,
    /// An XRC domain file: `none`, `bad` or a number.
    Fd,
}

/// One accepted `key=value` argument.
pub(crate) type Key = (&'static str, Kind);

/// Which expectations a statement accepts besides `ok` and an errno.
#[derive(Clone, Copy)]
pub(crate) enum Expects {
    /// Only success or an errno.
    Plain,
    /// `empty` or `key=value` fields from this list.
    Fields(&'static [Key]),
}

/// How a statement's positional arguments are checked.
#[derive(Clone, Copy)]
pub(crate) enum Positionals {
    /// Binding names, one per role (`&["QP"]`); `optional` trailing ones may be left out.
    Names {
        roles: &'static [&'static str],
        optional: usize,
    },
    /// `assert LEFT OP RIGHT`.
    Assert,
}

/// One statement of the catalogue.
pub(crate) struct Spec {
    /// The statement name.
    pub(crate) name: &'static str,
    /// Positional arguments.
    pub(crate) positionals: Positionals,
    /// Accepted keys, as several groups.
    pub(crate) keys: &'static [&'static [Key]],
    /// `true` for `post_*`: `;` separates work requests and `sge`/`sge_raw` may repeat.
    pub(crate) wr_list: bool,
    /// Accepted expectations.
    pub(crate) expects: Expects,
}

impl Spec {
    /// The kind of `key`, if the statement accepts it.
    pub(crate) fn key(&self, key: &str) -> Option<Kind> {
        self.keys
            .iter()
            .flat_map(|g| g.iter())
            .find(|(k, _)| *k == key)
            .map(|(_, kind)| *kind)
    }
}

fn qp_type_ok(s: &str) -> bool {
    QpType::from_name_loose(s).is_some()
}
fn qp_state_ok(s: &str) -> bool {
    QpState::from_name(s).is_some()
}
/// Parses an MTU written `1024`, `MTU_1024` or `IBV_MTU_1024`.
pub(crate) fn parse_mtu(s: &str) -> Option<Mtu> {
    let s = s.trim();
    let bare = if s.len() > 4 && s[..4].eq_ignore_ascii_case("MTU_") {
        &s[4..]
    } else {
        s
    };
    Mtu::from_name(bare)
}
fn mtu_ok(s: &str) -> bool {
    parse_mtu(s).is_some()
}
fn mig_ok(s: &str) -> bool {
    PathMigState::from_name(s).is_some()
}
fn wc_ex_flags_ok(s: &str) -> bool {
    verbs_api::WcExFlags::from_names(s).is_some()
}
fn rereg_flags_ok(s: &str) -> bool {
    verbs_api::ReregMrFlags::from_names(s).is_some()
}
fn data_in_order_flags_ok(s: &str) -> bool {
    verbs_api::DataInOrderFlags::from_names(s).is_some()
}
fn access_ok(s: &str) -> bool {
    AccessFlags::from_names(s).is_some()
}
fn attr_mask_ok(s: &str) -> bool {
    QpAttrMask::from_names(s).is_some()
}
fn init_mask_ok(s: &str) -> bool {
    QpInitAttrMask::from_names(s).is_some()
}
fn create_flags_ok(s: &str) -> bool {
    QpCreateFlags::from_names(s).is_some()
}
fn send_ops_ok(s: &str) -> bool {
    SendOpsFlags::from_names(s).is_some()
}
fn dv_mask_ok(s: &str) -> bool {
    Mlx5QpInitAttrMask::from_names(s).is_some()
}
fn dv_create_flags_ok(s: &str) -> bool {
    Mlx5QpCreateFlags::from_names(s).is_some()
}
fn dc_type_ok(s: &str) -> bool {
    DcType::from_name(s).is_some()
}
fn dv_send_ops_ok(s: &str) -> bool {
    Mlx5SendOpsFlags::from_names(s).is_some()
}
fn dv_ctx_mask_ok(s: &str) -> bool {
    Mlx5ContextMask::from_names(s).is_some()
}
fn srq_type_ok(s: &str) -> bool {
    SrqType::from_name(s).is_some()
}
fn srq_init_mask_ok(s: &str) -> bool {
    SrqInitAttrMask::from_names(s).is_some()
}
fn srq_attr_mask_ok(s: &str) -> bool {
    SrqAttrMask::from_names(s).is_some()
}
fn xrcd_mask_ok(s: &str) -> bool {
    XrcdInitAttrMask::from_names(s).is_some()
}
fn oflags_ok(s: &str) -> bool {
    OpenFlags::from_names(s).is_some()
}
fn wr_opcode_ok(s: &str) -> bool {
    WrOpcode::from_name(s).is_some()
}
fn send_flags_ok(s: &str) -> bool {
    SendFlags::from_names(s).is_some()
}
fn wc_status_ok(s: &str) -> bool {
    WcStatus::from_name(s).is_some()
}
fn wc_opcode_ok(s: &str) -> bool {
    WcOpcode::from_name(s).is_some()
}
fn wc_flags_ok(s: &str) -> bool {
    WcFlags::from_names(s).is_some()
}
fn event_type_ok(s: &str) -> bool {
    AsyncEventType::from_name(s).is_some()
}
fn cm_event_ok(s: &str) -> bool {
    CmEventType::from_name(s).is_some()
}
fn port_space_ok(s: &str) -> bool {
    PortSpace::from_name(s).is_some()
}
fn join_flag_ok(s: &str) -> bool {
    verbs_api::McJoinFlag::from_name(s).is_some()
}
fn fault_action_ok(s: &str) -> bool {
    ["drop", "duplicate", "delay", "reorder"]
        .iter()
        .any(|a| a.eq_ignore_ascii_case(s))
}

use Kind::*;

const QP_STATE: Kind = Enum("a QP state (RESET INIT RTR RTS SQD SQE ERR)", qp_state_ok);
const ACCESS: Kind = Flags("access flags (LOCAL_WRITE|REMOTE_WRITE|…)", access_ok);

/// The `ibv_qp_attr` fields `modify_qp` accepts (the mask comes from them, see [`crate::mask`]).
pub(crate) const QP_ATTR_KEYS: &[Key] = &[
    ("qp_state", QP_STATE),
    ("cur_qp_state", QP_STATE),
    ("en_sqd_async_notify", Int),
    ("qp_access_flags", ACCESS),
    ("pkey_index", Int),
    ("port_num", Int),
    ("qkey", Int),
    ("path_mtu", Enum("an MTU (256 512 1024 2048 4096)", mtu_ok)),
    ("timeout", Int),
    ("retry_cnt", Int),
    ("rnr_retry", Int),
    ("rq_psn", Int),
    ("max_rd_atomic", Int),
    ("min_rnr_timer", Int),
    ("sq_psn", Int),
    ("max_dest_rd_atomic", Int),
    (
        "path_mig_state",
        Enum("a path migration state (MIGRATED REARM ARMED)", mig_ok),
    ),
    ("dest_qp_num", Int),
    ("rate_limit", Int),
    ("alt_pkey_index", Int),
    ("alt_port_num", Int),
    ("alt_timeout", Int),
    ("cap.max_send_wr", Int),
    ("cap.max_recv_wr", Int),
    ("cap.max_send_sge", Int),
    ("cap.max_recv_sge", Int),
    ("cap.max_inline_data", Int),
    ("ah_attr.dlid", Int),
    ("ah_attr.sl", Int),
    ("ah_attr.src_path_bits", Int),
    ("ah_attr.static_rate", Int),
    ("ah_attr.is_global", Int),
    ("ah_attr.port_num", Int),
    ("ah_attr.grh.dgid", Gid),
    ("ah_attr.grh.sgid_index", Int),
    ("ah_attr.grh.hop_limit", Int),
    ("ah_attr.grh.traffic_class", Int),
    ("ah_attr.grh.flow_label", Int),
    ("alt_ah_attr.dlid", Int),
    ("alt_ah_attr.sl", Int),
    ("alt_ah_attr.src_path_bits", Int),
    ("alt_ah_attr.static_rate", Int),
    ("alt_ah_attr.is_global", Int),
    ("alt_ah_attr.port_num", Int),
    ("alt_ah_attr.grh.dgid", Gid),
    ("alt_ah_attr.grh.sgid_index", Int),
    ("alt_ah_attr.grh.hop_limit", Int),
    ("alt_ah_attr.grh.traffic_class", Int),
    ("alt_ah_attr.grh.flow_label", Int),
];

const ATTR_MASK: &[Key] = &[(
    "attr_mask",
    Flags("QP attribute mask bits (STATE|PORT|…)", attr_mask_ok),
)];

/// `ibv_qp_init_attr` fields (legacy `create_qp`, `rdma_create_qp`).
const INIT_ATTR_KEYS: &[Key] = &[
    (
        "qp_type",
        Enum(
            "a QP type (RC UC UD XRC_SEND XRC_RECV RAW_PACKET DRIVER)",
            qp_type_ok,
        ),
    ),
    ("send_cq", Name),
    ("recv_cq", Name),
    ("srq", Name),
    ("sq_sig_all", Int),
    ("max_send_wr", Int),
    ("max_recv_wr", Int),
    ("max_send_sge", Int),
    ("max_recv_sge", Int),
    ("max_inline_data", Int),
    ("cap.max_send_wr", Int),
    ("cap.max_recv_wr", Int),
    ("cap.max_send_sge", Int),
    ("cap.max_recv_sge", Int),
    ("cap.max_inline_data", Int),
    ("qp_context", Int),
];

/// The extra `ibv_qp_init_attr_ex` fields.
const INIT_EX_KEYS: &[Key] = &[
    (
        "comp_mask",
        Flags(
            "QP init attribute mask bits (PD|XRCD|CREATE_FLAGS|…)",
            init_mask_ok,
        ),
    ),
    ("pd", Name),
    ("xrcd", Name),
    ("create_flags", Flags("QP create flags", create_flags_ok)),
    ("max_tso_header", Int),
    ("source_qpn", Int),
    (
        "send_ops_flags",
        Flags("send ops flags (RDMA_WRITE|SEND|…)", send_ops_ok),
    ),
];

/// `mlx5dv_qp_init_attr` fields.
const DV_KEYS: &[Key] = &[
    (
        "dv.comp_mask",
        Flags(
            "mlx5dv QP init mask bits (QP_CREATE_FLAGS|DC|…)",
            dv_mask_ok,
        ),
    ),
    (
        "dv.create_flags",
        Flags("mlx5dv QP create flags", dv_create_flags_ok),
    ),
    ("dv.dc_type", Enum("a DC type (DCI DCT)", dc_type_ok)),
    ("dv.dct_access_key", Int),
    ("dv.log_num_concurent", Int),
    ("dv.log_num_errored", Int),
    (
        "dv.send_ops_flags",
        Flags("mlx5dv send ops flags", dv_send_ops_ok),
    ),
];

/// `ibv_ah_attr` fields for `create_ah`.
const AH_KEYS: &[Key] = &[
    ("dlid", Int),
    ("sl", Int),
    ("src_path_bits", Int),
    ("static_rate", Int),
    ("is_global", Int),
    ("port_num", Int),
    ("grh.dgid", Gid),
    ("grh.sgid_index", Int),
    ("grh.hop_limit", Int),
    ("grh.traffic_class", Int),
    ("grh.flow_label", Int),
];

/// Fields of one send work request.
const SEND_WR_KEYS: &[Key] = &[
    ("wr_id", Int),
    (
        "opcode",
        Enum(
            "a work request opcode (SEND RDMA_WRITE RDMA_READ …)",
            wr_opcode_ok,
        ),
    ),
    (
        "send_flags",
        Flags("send flags (SIGNALED|INLINE|…)", send_flags_ok),
    ),
    ("imm_data", Int),
    ("invalidate_rkey", Int),
    ("sge", Sge),
    ("sge_raw", SgeRaw),
    ("remote", Remote),
    ("remote_addr", Int),
    ("rkey", Int),
    ("compare_add", Int),
    ("swap", Int),
    ("ah", Name),
    ("remote_qpn", Int),
    ("remote_qkey", Int),
    ("remote_srqn", Int),
    ("dc_ah", Name),
    ("dc_dctn", Int),
    ("dc_key", Int),
    ("stream_id", Int),
    ("flush_type", Int),
    ("flush_level", Int),
    ("flush_len", Int),
];

/// Fields of one receive work request.
const RECV_WR_KEYS: &[Key] = &[("wr_id", Int), ("sge", Sge), ("sge_raw", SgeRaw)];

/// `poll_cq -> …` fields (of `struct ibv_wc`).
pub(crate) const WC_FIELDS: &[Key] = &[
    ("wr_id", Int),
    (
        "status",
        Enum("a completion status (SUCCESS LOC_PROT_ERR …)", wc_status_ok),
    ),
    (
        "opcode",
        Enum("a completion opcode (SEND RDMA_WRITE RECV …)", wc_opcode_ok),
    ),
    ("byte_len", Int),
    ("imm_data", Int),
    ("invalidated_rkey", Int),
    ("qp_num", Int),
    ("src_qp", Int),
    (
        "wc_flags",
        Flags("completion flags (GRH|WITH_IMM|…)", wc_flags_ok),
    ),
    ("vendor_err", Int),
    ("pkey_index", Int),
    ("slid", Int),
    ("sl", Int),
    ("dlid_path_bits", Int),
];

/// The fields of an extended completion (`poll_cq_ex`).
pub(crate) const WC_EX_FIELDS: &[Key] = &[
    ("completion_timestamp", Int),
    ("wr_id", Int),
    (
        "status",
        Enum("a completion status (SUCCESS LOC_PROT_ERR …)", wc_status_ok),
    ),
    (
        "opcode",
        Enum("a completion opcode (SEND RDMA_WRITE RECV …)", wc_opcode_ok),
    ),
    ("byte_len", Int),
    ("imm_data", Int),
    ("invalidated_rkey", Int),
    ("qp_num", Int),
    ("src_qp", Int),
    (
        "wc_flags",
        Flags("completion flags (GRH|WITH_IMM|…)", wc_flags_ok),
    ),
    ("vendor_err", Int),
    ("pkey_index", Int),
    ("slid", Int),
    ("sl", Int),
    ("dlid_path_bits", Int),
];

/// `get_async_event -> …` fields.
const ASYNC_FIELDS: &[Key] = &[
    (
        "event_type",
        Enum("an async event type (QP_FATAL COMM_EST …)", event_type_ok),
    ),
    ("qp", Name),
    ("srq", Name),
    ("cq", Name),
    ("qp_num", Int),
    ("port", Int),
];

/// `get_cq_event -> …` fields.
const CQ_EVENT_FIELDS: &[Key] = &[("cq", Name)];

/// `rdma_get_cm_event -> …` fields.
const CM_EVENT_FIELDS: &[Key] = &[
    (
        "event",
        Enum(
            "an rdma_cm event (ADDR_RESOLVED CONNECT_REQUEST …)",
            cm_event_ok,
        ),
    ),
    ("id", Name),
    ("listen_id", Name),
    ("status", Int),
    ("private_data", Hex),
    ("responder_resources", Int),
    ("initiator_depth", Int),
    ("qp_num", Int),
    ("context", Int),
    ("ud.qp_num", Int),
    ("ud.qkey", Int),
    ("ud.dlid", Int),
    ("ud.dgid", Gid),
    ("ud.is_global", Int),
];

const CONN_PARAM_KEYS: &[Key] = &[
    ("private_data", Hex),
    ("responder_resources", Int),
    ("initiator_depth", Int),
    ("flow_control", Int),
    ("retry_count", Int),
    ("rnr_retry_count", Int),
    ("srq", Int),
    ("qp_num", Int),
];

const CONNECT_KEYS: &[Key] = &[
    ("port_num", Int),
    ("pkey_index", Int),
    ("path_mtu", Enum("an MTU (256 512 1024 2048 4096)", mtu_ok)),
    ("timeout", Int),
    ("retry_cnt", Int),
    ("rnr_retry", Int),
    ("min_rnr_timer", Int),
    ("max_rd_atomic", Int),
    ("max_dest_rd_atomic", Int),
    ("qp_access_flags", ACCESS),
    ("qkey", Int),
    ("sq_psn", Int),
    ("rq_psn", Int),
    ("sl", Int),
];

const SRQ_ATTR_KEYS: &[Key] = &[("max_wr", Int), ("max_sge", Int), ("srq_limit", Int)];

const NO_KEYS: &[&[Key]] = &[];

macro_rules! spec {
    ($name:literal, [$($role:literal),*], $keys:expr) => {
        Spec {
            name: $name,
            positionals: Positionals::Names { roles: &[$($role),*], optional: 0 },
            keys: $keys,
            wr_list: false,
            expects: Expects::Plain,
        }
    };
    ($name:literal, [$($role:literal),*], $keys:expr, $expects:expr) => {
        Spec {
            name: $name,
            positionals: Positionals::Names { roles: &[$($role),*], optional: 0 },
            keys: $keys,
            wr_list: false,
            expects: $expects,
        }
    };
}

/// Every statement of the format.
pub(crate) const SPECS: &[Spec] = &[
    // device
    spec!("get_device_list", [], NO_KEYS),
    spec!("open_device", [], &[&[("index", Int), ("process", Int)]]),
    spec!("close_device", ["CTX"], NO_KEYS),
    spec!("query_device", ["CTX"], NO_KEYS),
    spec!("query_port", ["CTX"], &[&[("port_num", Int)]]),
    spec!(
        "query_gid",
        ["CTX"],
        &[&[("port_num", Int), ("index", Int)]]
    ),
    spec!(
        "query_pkey",
        ["CTX"],
        &[&[("port_num", Int), ("index", Int)]]
    ),
    spec!(
        "get_async_event",
        ["CTX"],
        NO_KEYS,
        Expects::Fields(ASYNC_FIELDS)
    ),
    // PD, CQ, MR
    spec!("alloc_pd", ["CTX"], NO_KEYS),
    spec!("dealloc_pd", ["PD"], NO_KEYS),
    spec!("create_comp_channel", ["CTX"], NO_KEYS),
    spec!("destroy_comp_channel", ["CHANNEL"], NO_KEYS),
    spec!(
        "create_cq",
        ["CTX"],
        &[&[
            ("cqe", Int),
            ("comp_vector", Int),
            ("channel", Name),
            ("cq_context", Int)
        ]]
    ),
    spec!("destroy_cq", ["CQ"], NO_KEYS),
    spec!("req_notify_cq", ["CQ"], &[&[("solicited_only", Int)]]),
    spec!(
        "get_cq_event",
        ["CHANNEL"],
        NO_KEYS,
        Expects::Fields(CQ_EVENT_FIELDS)
    ),
    spec!("ack_cq_events", ["CQ"], &[&[("nevents", Int)]]),
    spec!("poll_cq", ["CQ"], NO_KEYS, Expects::Fields(WC_FIELDS)),
    spec!("poll", ["CQ"], NO_KEYS, Expects::Fields(WC_FIELDS)),
    spec!("reg_mr", ["PD"], &[&[("length", Int), ("access", ACCESS)]]),
    spec!("dereg_mr", ["MR"], NO_KEYS),
    // Extended verbs (runner/ext.rs), and `value` to keep a value for later.
    spec!("value", ["VALUE"], NO_KEYS),
    spec!(
        "create_cq_ex",
        ["CTX"],
        &[&[
            ("cqe", Int),
            ("comp_vector", Int),
            ("channel", Name),
            ("cq_context", Int),
            (
                "wc_flags",
                Flags("extended CQ fields (BYTE_LEN|IMM|QP_NUM|…)", wc_ex_flags_ok)
            ),
            ("comp_mask", Int),
            ("flags", Int)
        ]]
    ),
    spec!("poll_cq_ex", ["CQ"], NO_KEYS, Expects::Fields(WC_EX_FIELDS)),
    spec!("resize_cq", ["CQ"], &[&[("cqe", Int)]]),
    spec!(
        "rereg_mr",
        ["MR"],
        &[&[
            (
                "flags",
                Flags(
                    "rereg flags (CHANGE_TRANSLATION|CHANGE_PD|CHANGE_ACCESS)",
                    rereg_flags_ok
                )
            ),
            ("pd", Name),
            ("length", Int),
            ("access", ACCESS)
        ]]
    ),
    spec!("query_device_ex", ["CTX"], NO_KEYS),
    spec!(
        "query_gid_ex",
        ["CTX"],
        &[&[("port_num", Int), ("gid_index", Int), ("flags", Int)]]
    ),
    spec!(
        "query_gid_table",
        ["CTX"],
        &[&[("max_entries", Int), ("flags", Int)]]
    ),
    spec!("query_ece", ["QP"], NO_KEYS),
    spec!(
        "set_ece",
        ["QP"],
        &[&[("vendor_id", Int), ("options", Int), ("comp_mask", Int)]]
    ),
    spec!("alloc_mw", ["PD"], &[&[("type", Int)]]),
    spec!("dealloc_mw", ["MW"], NO_KEYS),
    spec!(
        "alloc_dm",
        ["CTX"],
        &[&[("length", Int), ("log_align_req", Int), ("comp_mask", Int)]]
    ),
    spec!("free_dm", ["DM"], NO_KEYS),
    spec!(
        "memcpy_to_dm",
        ["DM"],
        &[&[("offset", Int), ("length", Int), ("byte", Int)]]
    ),
    spec!(
        "memcpy_from_dm",
        ["DM"],
        &[&[("offset", Int), ("length", Int), ("byte", Int)]]
    ),
    spec!(
        "reg_dm_mr",
        ["PD", "DM"],
        &[&[("offset", Int), ("length", Int), ("access", ACCESS)]]
    ),
    spec!(
        "bind_mw",
        ["QP", "MW"],
        &[&[
            ("mr", Name),
            ("addr", Int),
            ("length", Int),
            ("mw_access_flags", ACCESS),
            ("wr_id", Int),
            (
                "send_flags",
                Flags("send flags (SIGNALED|FENCE)", send_flags_ok)
            )
        ]]
    ),
    spec!(
        "query_qp_data_in_order",
        ["QP"],
        &[&[
            (
                "opcode",
                Enum(
                    "a work request opcode (SEND RDMA_WRITE RDMA_READ …)",
                    wr_opcode_ok
                )
            ),
            (
                "flags",
                Flags("data-in-order flags (RETURN_CAPS)", data_in_order_flags_ok)
            )
        ]]
    ),
    // SRQ
    spec!(
        "create_srq",
        ["PD"],
        &[SRQ_ATTR_KEYS, &[("srq_context", Int)]]
    ),
    spec!(
        "create_srq_ex",
        ["CTX"],
        &[
            SRQ_ATTR_KEYS,
            &[
                ("srq_type", Enum("an SRQ type (BASIC XRC TM)", srq_type_ok)),
                (
                    "comp_mask",
                    Flags("SRQ init mask bits (TYPE|PD|XRCD|CQ)", srq_init_mask_ok)
                ),
                ("pd", Name),
                ("xrcd", Name),
                ("cq", Name),
                ("srq_context", Int),
            ]
        ]
    ),
    spec!(
        "modify_srq",
        ["SRQ"],
        &[&[
            ("max_wr", Int),
            ("srq_limit", Int),
            (
                "srq_attr_mask",
                Flags("SRQ attribute mask bits (MAX_WR|LIMIT)", srq_attr_mask_ok)
            ),
        ]]
    ),
    spec!("query_srq", ["SRQ"], NO_KEYS),
    spec!("destroy_srq", ["SRQ"], NO_KEYS),
    spec!("get_srq_num", ["SRQ"], NO_KEYS),
    Spec {
        name: "post_srq_recv",
        positionals: Positionals::Names {
            roles: &["SRQ"],
            optional: 0,
        },
        keys: &[RECV_WR_KEYS],
        wr_list: true,
        expects: Expects::Plain,
    },
    // QP
    spec!("create_qp", ["PD"], &[INIT_ATTR_KEYS]),
    spec!("create_qp_ex", ["CTX"], &[INIT_ATTR_KEYS, INIT_EX_KEYS]),
    spec!("modify_qp", ["QP"], &[QP_ATTR_KEYS, ATTR_MASK]),
    spec!("query_qp", ["QP"], &[ATTR_MASK]),
    spec!("destroy_qp", ["QP"], NO_KEYS),
    spec!(
        "open_qp",
        ["CTX"],
        &[&[
            ("xrcd", Name),
            ("qp_num", Int),
            ("qp_type", Enum("a QP type (XRC_RECV)", qp_type_ok)),
            ("qp_context", Int),
        ]]
    ),
    spec!("attach_mcast", ["QP"], &[&[("gid", Gid), ("lid", Int)]]),
    spec!("detach_mcast", ["QP"], &[&[("gid", Gid), ("lid", Int)]]),
    spec!("create_ah", ["PD"], &[AH_KEYS]),
    spec!("destroy_ah", ["AH"], NO_KEYS),
    Spec {
        name: "connect",
        positionals: Positionals::Names {
            roles: &["QP", "PEER"],
            optional: 1,
        },
        keys: &[CONNECT_KEYS],
        wr_list: false,
        expects: Expects::Plain,
    },
    // data path
    Spec {
        name: "post_send",
        positionals: Positionals::Names {
            roles: &["QP"],
            optional: 0,
        },
        keys: &[SEND_WR_KEYS],
        wr_list: true,
        expects: Expects::Plain,
    },
    Spec {
        name: "post_wr",
        positionals: Positionals::Names {
            roles: &["QP"],
            optional: 0,
        },
        keys: &[SEND_WR_KEYS],
        wr_list: true,
        expects: Expects::Plain,
    },
    Spec {
        name: "post_recv",
        positionals: Positionals::Names {
            roles: &["QP"],
            optional: 0,
        },
        keys: &[RECV_WR_KEYS],
        wr_list: true,
        expects: Expects::Plain,
    },
    // XRC
    spec!(
        "open_xrcd",
        ["CTX"],
        &[&[
            ("fd", Fd),
            ("oflags", Flags("open flags (CREAT|EXCL)", oflags_ok)),
            (
                "comp_mask",
                Flags("XRCD init mask bits (FD|OFLAGS)", xrcd_mask_ok)
            ),
        ]]
    ),
    spec!("close_xrcd", ["XRCD"], NO_KEYS),
    spec!(
        "open_xrc_domain",
        ["CTX"],
        &[&[
            ("fd", Fd),
            ("oflags", Flags("open flags (CREAT|EXCL)", oflags_ok))
        ]]
    ),
    spec!("close_xrc_domain", ["XRCD"], NO_KEYS),
    spec!(
        "create_xrc_srq",
        ["PD"],
        &[SRQ_ATTR_KEYS, &[("xrcd", Name), ("cq", Name)]]
    ),
    spec!("create_xrc_rcv_qp", ["XRCD"], NO_KEYS),
    spec!(
        "modify_xrc_rcv_qp",
        ["XRCD"],
        &[&[("qp_num", Int)], QP_ATTR_KEYS, ATTR_MASK]
    ),
    spec!(
        "query_xrc_rcv_qp",
        ["XRCD"],
        &[&[("qp_num", Int)], ATTR_MASK]
    ),
    spec!("reg_xrc_rcv_qp", ["XRCD"], &[&[("qp_num", Int)]]),
    spec!("unreg_xrc_rcv_qp", ["XRCD"], &[&[("qp_num", Int)]]),
    // mlx5dv
    spec!(
        "mlx5dv_query_device",
        ["CTX"],
        &[&[(
            "comp_mask",
            Flags(
                "mlx5dv context mask bits (DCI_STREAMS|OOO_RECV_WRS|…)",
                dv_ctx_mask_ok
            )
        )]]
    ),
    spec!(
        "mlx5dv_create_qp",
        ["CTX"],
        &[INIT_ATTR_KEYS, INIT_EX_KEYS, DV_KEYS]
    ),
    spec!(
        "mlx5dv_dci_stream_id_reset",
        ["QP"],
        &[&[("stream_id", Int)]]
    ),
    spec!("mlx5dv_reserved_qpn_alloc", ["CTX"], NO_KEYS),
    spec!("mlx5dv_reserved_qpn_dealloc", ["CTX"], &[&[("qpn", Int)]]),
    // rdma_cm
    spec!("rdma_create_event_channel", [], NO_KEYS),
    spec!("rdma_destroy_event_channel", ["CHANNEL"], NO_KEYS),
    spec!(
        "rdma_create_id",
        ["CHANNEL"],
        &[&[
            ("ps", Enum("a port space (TCP UDP IB IPOIB)", port_space_ok)),
            ("context", Int)
        ]]
    ),
    spec!("rdma_destroy_id", ["ID"], NO_KEYS),
    spec!("rdma_bind_addr", ["ID"], &[&[("addr", Addr)]]),
    spec!(
        "rdma_resolve_addr",
        ["ID"],
        &[&[("dst", Addr), ("src", Addr), ("timeout_ms", Int)]]
    ),
    spec!("rdma_resolve_route", ["ID"], &[&[("timeout_ms", Int)]]),
    spec!("rdma_listen", ["ID"], &[&[("backlog", Int)]]),
    spec!("rdma_connect", ["ID"], &[CONN_PARAM_KEYS]),
    spec!("rdma_accept", ["ID"], &[CONN_PARAM_KEYS]),
    spec!("rdma_reject", ["ID"], &[&[("private_data", Hex)]]),
    spec!("rdma_disconnect", ["ID"], NO_KEYS),
    spec!("rdma_establish", ["ID"], NO_KEYS),
    spec!(
        "rdma_join_multicast",
        ["ID"],
        &[&[
            ("addr", Addr),
            ("context", Int),
            (
                "join_flags",
                Enum("a join flag (FULLMEMBER SENDONLY_FULLMEMBER)", join_flag_ok)
            )
        ]]
    ),
    spec!("rdma_leave_multicast", ["ID"], &[&[("addr", Addr)]]),
    spec!(
        "rdma_get_cm_event",
        ["CHANNEL"],
        NO_KEYS,
        Expects::Fields(CM_EVENT_FIELDS)
    ),
    spec!("rdma_create_qp", ["ID"], &[&[("pd", Name)], INIT_ATTR_KEYS]),
    spec!("rdma_create_qp_ex", ["ID"], &[INIT_ATTR_KEYS, INIT_EX_KEYS]),
    spec!("rdma_destroy_qp", ["ID"], NO_KEYS),
    // memory and checks
    spec!(
        "fill",
        ["MR"],
        &[&[("offset", Int), ("length", Int), ("byte", Int)]]
    ),
    spec!(
        "write",
        ["MR"],
        &[&[("offset", Int), ("hex", Hex), ("u64", Int)]]
    ),
    spec!(
        "check",
        ["MR"],
        &[&[
            ("offset", Int),
            ("length", Int),
            ("byte", Int),
            ("hex", Hex),
            ("u64", Int)
        ]]
    ),
    Spec {
        name: "assert",
        positionals: Positionals::Assert,
        keys: NO_KEYS,
        wr_list: false,
        expects: Expects::Plain,
    },
];

/// The `sim` directives: `sim SUB key=value…`.
pub(crate) const SIM_SPECS: &[Spec] = &[
    spec!("advance", [], &[&[("ns", Int)]]),
    spec!("run_until_idle", [], NO_KEYS),
    spec!("now", [], NO_KEYS),
    spec!(
        "drop",
        [],
        &[&[("next", Int), ("from", Name), ("to", Name)]]
    ),
    spec!(
        "fault",
        [],
        &[&[
            (
                "action",
                Enum(
                    "a fault action (drop duplicate delay reorder)",
                    fault_action_ok
                )
            ),
            ("rate_ppm", Int),
            ("next", Int),
            ("from", Name),
            ("to", Name),
            ("ns", Int),
            ("window", Int),
        ]]
    ),
    spec!("clear_faults", [], NO_KEYS),
    spec!(
        "link",
        [],
        &[&[("device", Int), ("port", Int), ("up", Int)]]
    ),
];

/// The catalogue entry of a statement name.
pub(crate) fn lookup(name: &str) -> Option<&'static Spec> {
    SPECS.iter().find(|s| s.name == name)
}

/// The catalogue entry of a `sim` sub-command.
pub(crate) fn lookup_sim(name: &str) -> Option<&'static Spec> {
    SIM_SPECS.iter().find(|s| s.name == name)
}

/// The known name closest to `word` (for "did you mean" hints), if close enough.
pub(crate) fn closest<'a>(
    word: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let d = edit_distance(word, c);
        if d <= 2.max(word.len() / 4) && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// Edit distance counting an adjacent transposition as one edit (optimal
/// string alignment), so `requrie` is two edits from `requires`.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}
