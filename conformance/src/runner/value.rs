//! What a script name is bound to, and the plain values fields hold.

use crate::literal::{parse_gid, to_hex};
use crate::schema::parse_mtu;
use std::collections::BTreeMap;
use std::fmt;
use verbs_api::*;

/// A plain value: a number, an enum/flag value that remembers its C name,
/// a GID, text, or a bare word from the script (compared by meaning).
#[derive(Clone, Debug)]
pub(crate) enum Scalar {
    /// A number.
    Int(i128),
    /// An enum or flag set: its C name(s), raw value, and how to parse a name of its type.
    Sym {
        name: String,
        raw: u64,
        parse: fn(&str) -> Option<u64>,
    },
    /// A GID.
    Gid(Gid),
    /// Text (firmware version, device names, private data in hex).
    Text(String),
    /// A bare word of the script that is not a number or a bound name (`RTS`).
    Word(String),
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Int(v) if *v > 0xffff => write!(f, "{v} ({v:#x})"),
            Self::Int(v) => write!(f, "{v}"),
            Self::Sym { name, .. } => f.write_str(name),
            Self::Gid(g) => write!(f, "{g}"),
            Self::Text(t) | Self::Word(t) => f.write_str(t),
        }
    }
}

/// A C enum value as a [`Scalar::Sym`].
macro_rules! enum_sym {
    ($t:ty, $v:expr) => {{
        let v: $t = $v;
        $crate::runner::value::Scalar::Sym {
            name: v.to_string(),
            raw: u64::from(v.to_raw()),
            parse: |s| <$t>::from_name(s).map(|x| u64::from(x.to_raw())),
        }
    }};
}

/// A C flag set as a [`Scalar::Sym`].
macro_rules! flags_sym {
    ($t:ty, $v:expr) => {{
        let v: $t = $v;
        $crate::runner::value::Scalar::Sym {
            name: v.names(),
            raw: u64::from(v.bits()),
            parse: |s| <$t>::from_names(s).map(|x| u64::from(x.bits())),
        }
    }};
}
pub(crate) use enum_sym;
pub(crate) use flags_sym;

fn mtu_sym(m: Mtu) -> Scalar {
    Scalar::Sym {
        name: m.to_string(),
        raw: u64::from(m.to_raw()),
        parse: |s| parse_mtu(s).map(|x| u64::from(x.to_raw())),
    }
}

fn qp_type_sym(t: QpType) -> Scalar {
    Scalar::Sym {
        name: t.to_string(),
        raw: u64::from(t.to_raw()),
        parse: |s| QpType::from_name_loose(s).map(|x| u64::from(x.to_raw())),
    }
}

fn int(v: impl Into<i128>) -> Scalar {
    Scalar::Int(v.into())
}

/// Compares two values with an `assert` operator.
///
/// # Errors
/// When the two sides cannot be compared (a word that is not a valid name
/// for the other side's type, a GID with a number, an ordering on GIDs).
pub(crate) fn compare(left: &Scalar, op: &str, right: &Scalar) -> Result<bool, String> {
    use std::cmp::Ordering;
    let ord: Ordering = match (left, right) {
        (Scalar::Int(a), Scalar::Int(b)) => a.cmp(b),
        // A number is first read as a name of the enum's type (an MTU's
        // `1024` is `IBV_MTU_1024`, raw 3), else as the raw value.
        (Scalar::Sym { raw, parse, .. }, Scalar::Int(b)) => {
            i128::from(*raw).cmp(&parse(&b.to_string()).map_or(*b, i128::from))
        }
        (Scalar::Int(a), Scalar::Sym { raw, parse, .. }) => parse(&a.to_string())
            .map_or(*a, i128::from)
            .cmp(&i128::from(*raw)),
        (Scalar::Sym { raw: a, .. }, Scalar::Sym { raw: b, .. }) => a.cmp(b),
        (Scalar::Sym { raw, parse, name }, Scalar::Word(w)) => {
            let b = parse(w)
                .ok_or_else(|| format!("`{w}` is not a value of the same type as `{name}`"))?;
            raw.cmp(&b)
        }
        (Scalar::Word(w), Scalar::Sym { raw, parse, name }) => {
            let a = parse(w)
                .ok_or_else(|| format!("`{w}` is not a value of the same type as `{name}`"))?;
            a.cmp(raw)
        }
        (Scalar::Gid(a), Scalar::Gid(b)) => eq_only(op, a == b)?,
        (Scalar::Gid(a), Scalar::Word(w)) | (Scalar::Word(w), Scalar::Gid(a)) => {
            let b = parse_gid(w).ok_or_else(|| format!("`{w}` is not a GID"))?;
            eq_only(op, *a == b)?
        }
        (Scalar::Text(a) | Scalar::Word(a), Scalar::Text(b) | Scalar::Word(b)) => a.cmp(b),
        (a, b) => return Err(format!("cannot compare `{a}` with `{b}`")),
    };
    Ok(match op {
        "==" => ord == Ordering::Equal,
        "!=" => ord != Ordering::Equal,
        "<" => ord == Ordering::Less,
        "<=" => ord != Ordering::Greater,
        ">" => ord == Ordering::Greater,
        ">=" => ord != Ordering::Less,
        other => return Err(format!("unknown operator `{other}`")),
    })
}

fn eq_only(op: &str, equal: bool) -> Result<std::cmp::Ordering, String> {
    match op {
        "==" | "!=" => Ok(if equal {
            std::cmp::Ordering::Equal
        } else {
            std::cmp::Ordering::Less
        }),
        _ => Err(format!("`{op}` does not apply to GIDs (use == or !=)")),
    }
}

/// A set of named fields (the result of a query, a completion, an event).
pub(crate) type Record = BTreeMap<String, Scalar>;

/// A QP binding: the handle and what the runner remembers about it.
pub(crate) struct QpVal<V: Verbs> {
    pub(crate) qp: V::Qp,
    /// The device context it was created on (for port queries in `connect`).
    pub(crate) ctx: Option<V::Context>,
    pub(crate) qp_type: QpType,
    pub(crate) dc_type: Option<DcType>,
    /// Capabilities written back at creation.
    pub(crate) cap: QpCap,
    /// The port last given with `IBV_QP_PORT` (for `connect`).
    pub(crate) port: Option<u8>,
}

impl<V: Verbs> Clone for QpVal<V> {
    fn clone(&self) -> Self {
        Self {
            qp: self.qp.clone(),
            ctx: self.ctx.clone(),
            qp_type: self.qp_type,
            dc_type: self.dc_type,
            cap: self.cap,
            port: self.port,
        }
    }
}

/// What a name is bound to.
pub(crate) enum Value<V: Verbs> {
    Context(V::Context),
    Pd {
        pd: V::Pd,
        ctx: V::Context,
    },
    Cq(V::Cq),
    Channel(V::CompChannel),
    Mr(V::Mr),
    Srq {
        srq: V::Srq,
        attr: SrqAttr,
    },
    Qp(QpVal<V>),
    Ah(V::Ah),
    Xrcd {
        xrcd: V::Xrcd,
        ctx: V::Context,
    },
    /// A legacy XRC receive QP (known by number in its domain).
    XrcRcvQp {
        xrcd: V::Xrcd,
        ctx: V::Context,
        qp_num: u32,
    },
    CmChannel(V::CmChannel),
    CmId(V::CmId),
    /// A memory window (`alloc_mw`).
    Mw(V::Mw),
    /// Device memory (`alloc_dm`).
    Dm(V::Dm),
    CmEvent {
        id: V::CmId,
        listen_id: Option<V::CmId>,
        fields: Record,
    },
    Record(Record),
    Scalar(Scalar),
}

impl<V: Verbs> Clone for Value<V> {
    fn clone(&self) -> Self {
        match self {
            Self::Context(c) => Self::Context(c.clone()),
            Self::Pd { pd, ctx } => Self::Pd {
                pd: pd.clone(),
                ctx: ctx.clone(),
            },
            Self::Cq(c) => Self::Cq(c.clone()),
            Self::Channel(c) => Self::Channel(c.clone()),
            Self::Mr(m) => Self::Mr(m.clone()),
            Self::Srq { srq, attr } => Self::Srq {
                srq: srq.clone(),
                attr: *attr,
            },
            Self::Qp(q) => Self::Qp(q.clone()),
            Self::Ah(a) => Self::Ah(a.clone()),
            Self::Xrcd { xrcd, ctx } => Self::Xrcd {
                xrcd: xrcd.clone(),
                ctx: ctx.clone(),
            },
            Self::XrcRcvQp { xrcd, ctx, qp_num } => Self::XrcRcvQp {
                xrcd: xrcd.clone(),
                ctx: ctx.clone(),
                qp_num: *qp_num,
            },
            Self::CmChannel(c) => Self::CmChannel(c.clone()),
            Self::CmId(c) => Self::CmId(c.clone()),
            Self::Mw(m) => Self::Mw(m.clone()),
            Self::Dm(d) => Self::Dm(d.clone()),
            Self::CmEvent {
                id,
                listen_id,
                fields,
            } => Self::CmEvent {
                id: id.clone(),
                listen_id: listen_id.clone(),
                fields: fields.clone(),
            },
            Self::Record(r) => Self::Record(r.clone()),
            Self::Scalar(s) => Self::Scalar(s.clone()),
        }
    }
}

impl<V: Verbs> Value<V> {
    /// What kind of object this is, for messages ("a PD").
    pub(crate) fn kind_name(&self) -> &'static str {
        match self {
            Self::Context(_) => "a device context",
            Self::Pd { .. } => "a PD",
            Self::Cq(_) => "a CQ",
            Self::Channel(_) => "a completion channel",
            Self::Mr(_) => "an MR",
            Self::Srq { .. } => "an SRQ",
            Self::Qp(_) => "a QP",
            Self::Ah(_) => "an AH",
            Self::Xrcd { .. } => "an XRC domain",
            Self::XrcRcvQp { .. } => "a legacy XRC receive QP",
            Self::CmChannel(_) => "an rdma_cm event channel",
            Self::CmId(_) => "an rdma_cm id",
            Self::Mw(_) => "a memory window",
            Self::Dm(_) => "device memory",
            Self::CmEvent { .. } => "an rdma_cm event",
            Self::Record(_) => "a set of fields",
            Self::Scalar(_) => "a value",
        }
    }
}

// ------------------------------------------------------------------ records

pub(crate) fn device_attr_record(a: &DeviceAttr) -> Record {
    let mut r = Record::new();
    let mut put = |k: &str, v: Scalar| {
        r.insert(k.to_owned(), v);
    };
    put("fw_ver", Scalar::Text(a.fw_ver.clone()));
    put("node_guid", int(a.node_guid));
    put("sys_image_guid", int(a.sys_image_guid));
    put("max_mr_size", int(a.max_mr_size));
    put("page_size_cap", int(a.page_size_cap));
    put("vendor_id", int(a.vendor_id));
    put("vendor_part_id", int(a.vendor_part_id));
    put("hw_ver", int(a.hw_ver));
    put("max_qp", int(a.max_qp));
    put("max_qp_wr", int(a.max_qp_wr));
    put(
        "device_cap_flags",
        flags_sym!(DeviceCapFlags, a.device_cap_flags),
    );
    put("max_sge", int(a.max_sge));
    put("max_sge_rd", int(a.max_sge_rd));
    put("max_cq", int(a.max_cq));
    put("max_cqe", int(a.max_cqe));
    put("max_mr", int(a.max_mr));
    put("max_pd", int(a.max_pd));
    put("max_qp_rd_atom", int(a.max_qp_rd_atom));
    put("max_ee_rd_atom", int(a.max_ee_rd_atom));
    put("max_res_rd_atom", int(a.max_res_rd_atom));
    put("max_qp_init_rd_atom", int(a.max_qp_init_rd_atom));
    put("max_ee_init_rd_atom", int(a.max_ee_init_rd_atom));
    put("atomic_cap", enum_sym!(AtomicCap, a.atomic_cap));
    put("max_ee", int(a.max_ee));
    put("max_rdd", int(a.max_rdd));
    put("max_mw", int(a.max_mw));
    put("max_raw_ipv6_qp", int(a.max_raw_ipv6_qp));
    put("max_raw_ethy_qp", int(a.max_raw_ethy_qp));
    put("max_mcast_grp", int(a.max_mcast_grp));
    put("max_mcast_qp_attach", int(a.max_mcast_qp_attach));
    put(
        "max_total_mcast_qp_attach",
        int(a.max_total_mcast_qp_attach),
    );
    put("max_ah", int(a.max_ah));
    put("max_fmr", int(a.max_fmr));
    put("max_map_per_fmr", int(a.max_map_per_fmr));
    put("max_srq", int(a.max_srq));
    put("max_srq_wr", int(a.max_srq_wr));
    put("max_srq_sge", int(a.max_srq_sge));
    put("max_pkeys", int(a.max_pkeys));
    put("local_ca_ack_delay", int(a.local_ca_ack_delay));
    put("phys_port_cnt", int(a.phys_port_cnt));
    r
}

pub(crate) fn port_attr_record(a: &PortAttr) -> Record {
    let mut r = Record::new();
    let mut put = |k: &str, v: Scalar| {
        r.insert(k.to_owned(), v);
    };
    put("state", enum_sym!(PortState, a.state));
    put("max_mtu", mtu_sym(a.max_mtu));
    put("active_mtu", mtu_sym(a.active_mtu));
    put("gid_tbl_len", int(a.gid_tbl_len));
    put("port_cap_flags", int(a.port_cap_flags));
    put("max_msg_sz", int(a.max_msg_sz));
    put("bad_pkey_cntr", int(a.bad_pkey_cntr));
    put("qkey_viol_cntr", int(a.qkey_viol_cntr));
    put("pkey_tbl_len", int(a.pkey_tbl_len));
    put("lid", int(a.lid));
    put("sm_lid", int(a.sm_lid));
    put("lmc", int(a.lmc));
    put("max_vl_num", int(a.max_vl_num));
    put("sm_sl", int(a.sm_sl));
    put("subnet_timeout", int(a.subnet_timeout));
    put("init_type_reply", int(a.init_type_reply));
    put("active_width", int(a.active_width));
    put("active_speed", int(a.active_speed));
    put("phys_state", int(a.phys_state));
    put("link_layer", enum_sym!(LinkLayer, a.link_layer));
    put("flags", int(a.flags));
    r
}

fn ah_fields(r: &mut Record, prefix: &str, a: &AhAttr) {
    let mut put = |k: &str, v: Scalar| {
        r.insert(format!("{prefix}{k}"), v);
    };
    put("dlid", int(a.dlid));
    put("sl", int(a.sl));
    put("src_path_bits", int(a.src_path_bits));
    put("static_rate", int(a.static_rate));
    put("is_global", int(u8::from(a.is_global)));
    put("port_num", int(a.port_num));
    put("grh.dgid", Scalar::Gid(a.grh.dgid));
    put("grh.sgid_index", int(a.grh.sgid_index));
    put("grh.hop_limit", int(a.grh.hop_limit));
    put("grh.traffic_class", int(a.grh.traffic_class));
    put("grh.flow_label", int(a.grh.flow_label));
}

pub(crate) fn cap_fields(r: &mut Record, prefix: &str, c: &QpCap) {
    let mut put = |k: &str, v: u32| {
        r.insert(format!("{prefix}{k}"), int(v));
    };
    put("max_send_wr", c.max_send_wr);
    put("max_recv_wr", c.max_recv_wr);
    put("max_send_sge", c.max_send_sge);
    put("max_recv_sge", c.max_recv_sge);
    put("max_inline_data", c.max_inline_data);
}

pub(crate) fn qp_attr_record(a: &QpAttr, init: &QpInitInfo) -> Record {
    let mut r = Record::new();
    let mut put = |k: &str, v: Scalar| {
        r.insert(k.to_owned(), v);
    };
    put("qp_state", enum_sym!(QpState, a.qp_state));
    put("cur_qp_state", enum_sym!(QpState, a.cur_qp_state));
    put("path_mtu", mtu_sym(a.path_mtu));
    put("path_mig_state", enum_sym!(PathMigState, a.path_mig_state));
    put("qkey", int(a.qkey));
    put("rq_psn", int(a.rq_psn));
    put("sq_psn", int(a.sq_psn));
    put("dest_qp_num", int(a.dest_qp_num));
    put(
        "qp_access_flags",
        flags_sym!(AccessFlags, a.qp_access_flags),
    );
    put("pkey_index", int(a.pkey_index));
    put("alt_pkey_index", int(a.alt_pkey_index));
    put("en_sqd_async_notify", int(a.en_sqd_async_notify));
    put("sq_draining", int(a.sq_draining));
    put("max_rd_atomic", int(a.max_rd_atomic));
    put("max_dest_rd_atomic", int(a.max_dest_rd_atomic));
    put("min_rnr_timer", int(a.min_rnr_timer));
    put("port_num", int(a.port_num));
    put("timeout", int(a.timeout));
    put("retry_cnt", int(a.retry_cnt));
    put("rnr_retry", int(a.rnr_retry));
    put("alt_port_num", int(a.alt_port_num));
    put("alt_timeout", int(a.alt_timeout));
    put("rate_limit", int(a.rate_limit));
    put("qp_type", qp_type_sym(init.qp_type));
    put("sq_sig_all", int(u8::from(init.sq_sig_all)));
    put("qp_context", int(init.qp_context));
    put("has_srq", int(u8::from(init.has_srq)));
    cap_fields(&mut r, "cap.", &a.cap);
    cap_fields(&mut r, "init.cap.", &init.cap);
    ah_fields(&mut r, "ah_attr.", &a.ah_attr);
    ah_fields(&mut r, "alt_ah_attr.", &a.alt_ah_attr);
    r
}

pub(crate) fn srq_attr_record(a: &SrqAttr) -> Record {
    let mut r = Record::new();
    r.insert("max_wr".to_owned(), int(a.max_wr));
    r.insert("max_sge".to_owned(), int(a.max_sge));
    r.insert("srq_limit".to_owned(), int(a.srq_limit));
    r
}

pub(crate) fn wc_record(wc: &Wc) -> Record {
    let mut r = Record::new();
    let mut put = |k: &str, v: Scalar| {
        r.insert(k.to_owned(), v);
    };
    put("wr_id", int(wc.wr_id));
    put("status", enum_sym!(WcStatus, wc.status));
    put("opcode", enum_sym!(WcOpcode, wc.opcode));
    put("vendor_err", int(wc.vendor_err));
    put("byte_len", int(wc.byte_len));
    put("imm_data", int(wc.imm_data));
    // `imm_data` and `invalidated_rkey` share a union in `struct ibv_wc`;
    // which one is meant follows from `wc_flags` (WITH_IMM / WITH_INV).
    put("invalidated_rkey", int(wc.imm_data));
    put("qp_num", int(wc.qp_num));
    put("src_qp", int(wc.src_qp));
    put("wc_flags", flags_sym!(WcFlags, wc.wc_flags));
    put("pkey_index", int(wc.pkey_index));
    put("slid", int(wc.slid));
    put("sl", int(wc.sl));
    put("dlid_path_bits", int(wc.dlid_path_bits));
    r
}

/// A one-line description of a completion, for messages.
pub(crate) fn wc_text(wc: &Wc) -> String {
    format!(
        "wr_id={} status={} opcode={} byte_len={} qp_num={:#x} src_qp={:#x} wc_flags={} imm_data={:#x} vendor_err={:#x}",
        wc.wr_id, wc.status, wc.opcode, wc.byte_len, wc.qp_num, wc.src_qp, wc.wc_flags, wc.imm_data, wc.vendor_err
    )
}

pub(crate) fn mlx5_record(c: &Mlx5Context) -> Record {
    let mut r = Record::new();
    let mut put = |k: &str, v: Scalar| {
        r.insert(k.to_owned(), v);
    };
    put("version", int(c.version));
    put("flags", flags_sym!(Mlx5ContextFlags, c.flags));
    put("comp_mask", flags_sym!(Mlx5ContextMask, c.comp_mask));
    put("dc_odp_caps", int(c.dc_odp_caps));
    put(
        "dci_streams_caps.max_log_num_concurent",
        int(c.dci_streams_caps.max_log_num_concurent),
    );
    put(
        "dci_streams_caps.max_log_num_errored",
        int(c.dci_streams_caps.max_log_num_errored),
    );
    put("max_dc_rd_atom", int(c.max_dc_rd_atom));
    put("max_dc_init_rd_atom", int(c.max_dc_init_rd_atom));
    put("ooo_recv_wrs_caps.max_rc", int(c.ooo_recv_wrs_caps.max_rc));
    put(
        "ooo_recv_wrs_caps.max_xrc",
        int(c.ooo_recv_wrs_caps.max_xrc),
    );
    put(
        "ooo_recv_wrs_caps.max_dct",
        int(c.ooo_recv_wrs_caps.max_dct),
    );
    put("ooo_recv_wrs_caps.max_ud", int(c.ooo_recv_wrs_caps.max_ud));
    put("ooo_recv_wrs_caps.max_uc", int(c.ooo_recv_wrs_caps.max_uc));
    r
}

pub(crate) fn mr_record(m: &MrInfo) -> Record {
    let mut r = Record::new();
    r.insert("addr".to_owned(), int(m.addr));
    r.insert("length".to_owned(), int(m.length));
    r.insert("lkey".to_owned(), int(m.lkey));
    r.insert("rkey".to_owned(), int(m.rkey));
    r.insert("access".to_owned(), flags_sym!(AccessFlags, m.access));
    r
}

pub(crate) fn cm_event_record<V: Verbs>(ev: &CmEvent<V>) -> Record {
    let mut r = Record::new();
    r.insert("event".to_owned(), enum_sym!(CmEventType, ev.event));
    r.insert("status".to_owned(), int(ev.status));
    r.insert(
        "private_data".to_owned(),
        Scalar::Text(to_hex(&ev.private_data)),
    );
    r.insert(
        "responder_resources".to_owned(),
        int(ev.conn.responder_resources),
    );
    r.insert("initiator_depth".to_owned(), int(ev.conn.initiator_depth));
    r.insert("qp_num".to_owned(), int(ev.conn.qp_num));
    r.insert("context".to_owned(), int(ev.context));
    if let Some(ud) = &ev.ud {
        r.insert("ud.qp_num".to_owned(), int(ud.qp_num));
        r.insert("ud.qkey".to_owned(), int(ud.qkey));
        r.insert("ud.dlid".to_owned(), int(ud.ah_attr.dlid));
        r.insert("ud.dgid".to_owned(), Scalar::Gid(ud.ah_attr.grh.dgid));
        r.insert(
            "ud.is_global".to_owned(),
            int(u8::from(ud.ah_attr.is_global)),
        );
    }
    r
}

/// The field names of a record, for "no such field" messages.
pub(crate) fn field_names(r: &Record) -> String {
    let names: Vec<&str> = r.keys().map(String::as_str).collect();
    names.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Scalar {
        Scalar::Word(s.to_owned())
    }

    // Goal: assert/field comparisons follow the meaning of values, not their spelling.
    // Method: enums against names, prefixed names and numbers; MTUs against
    // byte counts; flags against `|` lists; GIDs; ordering errors.
    #[test]
    fn comparisons_follow_meaning() {
        let rts = enum_sym!(QpState, QpState::ReadyToSend);
        assert!(compare(&rts, "==", &w("RTS")).unwrap());
        assert!(compare(&rts, "==", &w("IBV_QPS_RTS")).unwrap());
        assert!(compare(&rts, "==", &Scalar::Int(3)).unwrap());
        assert!(compare(&rts, "!=", &w("INIT")).unwrap());
        assert!(compare(&rts, "==", &w("BOGUS")).is_err());
        let mtu = mtu_sym(Mtu::Mtu512);
        assert!(compare(&mtu, "==", &Scalar::Int(512)).unwrap());
        assert!(compare(&mtu, "<", &Scalar::Int(1024)).unwrap());
        assert!(compare(&Scalar::Int(256), "<", &mtu).unwrap());
        let access = flags_sym!(
            AccessFlags,
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ
        );
        assert!(compare(&access, "==", &w("REMOTE_READ|LOCAL_WRITE")).unwrap());
        assert!(compare(&access, "==", &Scalar::Int(5)).unwrap());
        let g = Scalar::Gid(Gid::from_parts(0xfe80_0000_0000_0000, 1));
        assert!(compare(&g, "==", &w("fe80::1")).unwrap());
        assert!(compare(&g, "<", &w("fe80::1")).is_err());
        assert!(compare(&Scalar::Int(4), ">=", &Scalar::Int(4)).unwrap());
        assert!(compare(&Scalar::Text("x".into()), "==", &Scalar::Int(1)).is_err());
    }
}
