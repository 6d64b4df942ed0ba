//! One function per statement (or family of statements) of the format.

use super::value::{
    cm_event_record, device_attr_record, enum_sym, mlx5_record, port_attr_record, qp_attr_record,
    srq_attr_record, wc_record, wc_text, QpVal, Record, Scalar, Value,
};
use super::{Runner, Step};
use crate::literal::{parse_addr, parse_gid, parse_hex, to_hex};
use crate::mask;
use crate::schema::parse_mtu;
use crate::script::{Arg, Expectation, Statement};
use std::collections::BTreeSet;
use std::time::Instant;
use verbs_api::transitions::QpClass;
use verbs_api::*;

/// Generates a getter that resolves a name to one kind of handle.
macro_rules! getter {
    ($fn:ident, $ty:ty, $what:literal, $pat:pat => $out:expr) => {
        pub(crate) fn $fn(&mut self, word: &str) -> Step<$ty> {
            match self.lookup(word)? {
                $pat => Ok($out),
                other => Err(format!(
                    "`{word}` is {}, expected {}",
                    other.kind_name(),
                    $what
                )),
            }
        }
    };
}

/// The parts of a `create_qp*` statement, owned, so that an
/// [`QpInitAttrEx`] can borrow them.
struct InitParts<V: Verbs> {
    send_cq: Option<V::Cq>,
    recv_cq: Option<V::Cq>,
    srq: Option<V::Srq>,
    pd: Option<V::Pd>,
    xrcd: Option<V::Xrcd>,
    qp_type: QpType,
    sq_sig_all: bool,
    cap: QpCap,
    qp_context: u64,
    comp_mask: QpInitAttrMask,
    create_flags: QpCreateFlags,
    max_tso_header: u16,
    source_qpn: u32,
    send_ops_flags: SendOpsFlags,
}

impl<V: Verbs> InitParts<V> {
    fn attr(&self) -> QpInitAttrEx<'_, V> {
        QpInitAttrEx {
            qp_context: self.qp_context,
            send_cq: self.send_cq.as_ref(),
            recv_cq: self.recv_cq.as_ref(),
            srq: self.srq.as_ref(),
            cap: self.cap,
            qp_type: self.qp_type,
            sq_sig_all: self.sq_sig_all,
            comp_mask: self.comp_mask,
            pd: self.pd.as_ref(),
            xrcd: self.xrcd.as_ref(),
            create_flags: self.create_flags,
            max_tso_header: self.max_tso_header,
            source_qpn: self.source_qpn,
            send_ops_flags: self.send_ops_flags,
        }
    }
}

/// One send work request, owned, so that a [`SendWr`] can borrow it.
pub(crate) struct SendParts<V: Verbs> {
    pub(crate) wr_id: u64,
    pub(crate) opcode: WrOpcode,
    pub(crate) send_flags: SendFlags,
    pub(crate) imm_data: u32,
    pub(crate) sges: Vec<Sge>,
    pub(crate) rdma: RdmaInfo,
    pub(crate) atomic: AtomicInfo,
    pub(crate) ud: Option<(V::Ah, u32, u32)>,
    pub(crate) remote_srqn: u32,
    pub(crate) dc: Option<(V::Ah, u32, u64, u16)>,
    pub(crate) flush: FlushInfo,
}

/// Something `modify_qp`-like can be applied to: a QP handle, or a legacy
/// XRC receive QP known by number in its domain.
enum QpTarget<V: Verbs> {
    Qp(QpVal<V>),
    XrcRcv {
        xrcd: V::Xrcd,
        ctx: V::Context,
        qp_num: u32,
    },
}

/// Default `connect` parameters (overridable by the statement's arguments).
struct ConnectParams {
    port_num: Option<u8>,
    pkey_index: u16,
    path_mtu: Mtu,
    timeout: u8,
    retry_cnt: u8,
    rnr_retry: u8,
    min_rnr_timer: u8,
    max_rd_atomic: u8,
    max_dest_rd_atomic: u8,
    qp_access_flags: Option<AccessFlags>,
    qkey: u32,
    sq_psn: u32,
    rq_psn: u32,
    sl: u8,
}

/// What `connect` knows about one side.
struct Side<V: Verbs> {
    target: QpTarget<V>,
    name: String,
    class: QpClass,
    ctx: V::Context,
    port: u8,
    port_attr: PortAttr,
    gid: Gid,
    qp_num: u32,
}

impl<V: Verbs> Runner<'_, V> {
    getter!(ctx, V::Context, "a device context (open_device)", Value::Context(c) => c);
    getter!(pd, (V::Pd, V::Context), "a PD (alloc_pd)", Value::Pd { pd, ctx } => (pd, ctx));
    getter!(cq, V::Cq, "a CQ (create_cq)", Value::Cq(c) => c);
    getter!(channel, V::CompChannel, "a completion channel (create_comp_channel)", Value::Channel(c) => c);
    getter!(mr, V::Mr, "an MR (reg_mr)", Value::Mr(m) => m);
    getter!(srq, V::Srq, "an SRQ (create_srq)", Value::Srq { srq, .. } => srq);
    getter!(qp, QpVal<V>, "a QP (create_qp)", Value::Qp(q) => q);
    getter!(ah, V::Ah, "an AH (create_ah)", Value::Ah(a) => a);
    getter!(xrcd, (V::Xrcd, V::Context), "an XRC domain (open_xrcd)", Value::Xrcd { xrcd, ctx } => (xrcd, ctx));
    getter!(cm_channel, V::CmChannel, "an rdma_cm event channel", Value::CmChannel(c) => c);
    getter!(cm_id, V::CmId, "an rdma_cm id", Value::CmId(c) => c);

    /// An optional handle argument (`key=NAME` or `key=none`).
    pub(crate) fn opt<T>(
        &mut self,
        stmt: &Statement,
        key: &str,
        get: fn(&mut Self, &str) -> Step<T>,
    ) -> Step<Option<T>> {
        match stmt.named(key) {
            None | Some("none") => Ok(None),
            Some(word) => get(self, word).map(Some),
        }
    }

    fn gid(&mut self, key: &str, text: &str) -> Step<Gid> {
        if let Some(g) = parse_gid(text) {
            return Ok(g);
        }
        match self.eval(text)? {
            Scalar::Gid(g) => Ok(g),
            other => Err(format!(
                "expected a GID for `{key}`, got `{text}` ({other})"
            )),
        }
    }

    fn first(stmt: &Statement) -> String {
        stmt.positional().next().unwrap_or_default().to_owned()
    }

    /// Runs one statement.
    pub(crate) fn exec(&mut self, stmt: &Statement) -> Step {
        let p0 = Self::first(stmt);
        match stmt.verb.as_str() {
            // ------------------------------------------------------------ device
            "get_device_list" => {
                let r = self.v.get_device_list();
                if let Some(list) = self.expect(stmt, r)? {
                    let mut rec = Record::new();
                    rec.insert("num_devices".to_owned(), Scalar::Int(list.len() as i128));
                    let names: Vec<&str> = list.iter().map(|d| d.name.as_str()).collect();
                    rec.insert("names".to_owned(), Scalar::Text(names.join(" ")));
                    self.bind(stmt, Value::Record(rec));
                }
            }
            "open_device" => {
                let index: usize = self.num_arg(stmt, "index", 0)?;
                let process: u32 = self.num_arg(stmt, "process", 0)?;
                let r = self.v.open_device(index, ProcessId(process));
                if let Some(c) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Context(c));
                }
            }
            "close_device" => {
                let c = self.ctx(&p0)?;
                let r = self.v.close_device(&c);
                self.expect(stmt, r)?;
            }
            "query_device" => {
                let c = self.ctx(&p0)?;
                let r = self.v.query_device(&c);
                if let Some(a) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Record(device_attr_record(&a)));
                }
            }
            "query_port" => {
                let c = self.ctx(&p0)?;
                let port: u8 = self.num_arg(stmt, "port_num", 1)?;
                let r = self.v.query_port(&c, port);
                if let Some(a) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Record(port_attr_record(&a)));
                }
            }
            "query_gid" => {
                let c = self.ctx(&p0)?;
                let port: u8 = self.num_arg(stmt, "port_num", 1)?;
                let index: u32 = self.num_arg(stmt, "index", 0)?;
                let r = self.v.query_gid(&c, port, index);
                if let Some(g) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Scalar(Scalar::Gid(g)));
                }
            }
            "query_pkey" => {
                let c = self.ctx(&p0)?;
                let port: u8 = self.num_arg(stmt, "port_num", 1)?;
                let index: u16 = self.num_arg(stmt, "index", 0)?;
                let r = self.v.query_pkey(&c, port, index);
                if let Some(p) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Scalar(Scalar::Int(p.into())));
                }
            }
            "get_async_event" => self.get_async_event(stmt, &p0)?,
            // ------------------------------------------------------------ PD, CQ, MR
            "alloc_pd" => {
                let c = self.ctx(&p0)?;
                let r = self.v.alloc_pd(&c);
                if let Some(pd) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Pd { pd, ctx: c });
                }
            }
            "dealloc_pd" => {
                let (pd, _) = self.pd(&p0)?;
                let r = self.v.dealloc_pd(&pd);
                self.expect(stmt, r)?;
            }
            "create_comp_channel" => {
                let c = self.ctx(&p0)?;
                let r = self.v.create_comp_channel(&c);
                if let Some(ch) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Channel(ch));
                }
            }
            "destroy_comp_channel" => {
                let ch = self.channel(&p0)?;
                let r = self.v.destroy_comp_channel(&ch);
                self.expect(stmt, r)?;
            }
            "create_cq" => {
                let c = self.ctx(&p0)?;
                // `int cqe` and `int comp_vector` in C.
                let cqe = self.signed_u32_arg(stmt, "cqe", 64)?;
                let comp_vector = self.signed_u32_arg(stmt, "comp_vector", 0)?;
                let cq_context = self.num_arg(stmt, "cq_context", 0)?;
                let channel = self.opt(stmt, "channel", Self::channel)?;
                let init = CqInit {
                    cqe,
                    cq_context,
                    channel: channel.as_ref(),
                    comp_vector,
                };
                let r = self.v.create_cq(&c, &init);
                if let Some(cq) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Cq(cq));
                }
            }
            "destroy_cq" => {
                let cq = self.cq(&p0)?;
                let r = self.v.destroy_cq(&cq);
                self.expect(stmt, r)?;
            }
            "req_notify_cq" => {
                let cq = self.cq(&p0)?;
                let solicited: u8 = self.num_arg(stmt, "solicited_only", 0)?;
                let r = self.v.req_notify_cq(&cq, solicited != 0);
                self.expect(stmt, r)?;
            }
            "get_cq_event" => self.get_cq_event(stmt, &p0)?,
            "ack_cq_events" => {
                let cq = self.cq(&p0)?;
                let n = self.num_arg(stmt, "nevents", 1)?;
                let r = self.v.ack_cq_events(&cq, n);
                self.expect(stmt, r)?;
            }
            "poll_cq" | "poll" => self.poll_cq(stmt, &p0)?,
            "reg_mr" => {
                let (pd, _) = self.pd(&p0)?;
                let length: usize = self.num_arg(stmt, "length", 4096)?;
                let access = match stmt.named("access") {
                    Some(t) => self.flags("access", t, AccessFlags::from_names)?,
                    None => AccessFlags::LOCAL_WRITE,
                };
                let r = self.v.reg_mr(&pd, length, access);
                if let Some(m) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Mr(m));
                }
            }
            "dereg_mr" => {
                let m = self.mr(&p0)?;
                let r = self.v.dereg_mr(&m);
                self.expect(stmt, r)?;
            }
            // ------------------------------------------------------------ SRQ
            "create_srq" => {
                let (pd, _) = self.pd(&p0)?;
                let mut attr = self.srq_attr(stmt)?;
                let r = self.v.create_srq(&pd, &mut attr);
                if let Some(srq) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Srq { srq, attr });
                }
            }
            "create_srq_ex" => self.create_srq_ex(stmt, &p0)?,
            "modify_srq" => {
                let srq = self.srq(&p0)?;
                let attr = self.srq_attr(stmt)?;
                let mask = match stmt.named("srq_attr_mask") {
                    Some(t) => self.flags("srq_attr_mask", t, SrqAttrMask::from_names)?,
                    None => mask::srq_attr_mask(Self::keys(stmt)),
                };
                let r = self.v.modify_srq(&srq, &attr, mask);
                self.expect(stmt, r)?;
            }
            "query_srq" => {
                let srq = self.srq(&p0)?;
                let r = self.v.query_srq(&srq);
                if let Some(a) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Record(srq_attr_record(&a)));
                }
            }
            "destroy_srq" => {
                let srq = self.srq(&p0)?;
                let r = self.v.destroy_srq(&srq);
                self.expect(stmt, r)?;
            }
            "get_srq_num" => {
                let srq = self.srq(&p0)?;
                let r = self.v.get_srq_num(&srq);
                if let Some(n) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Scalar(Scalar::Int(n.into())));
                }
            }
            "post_srq_recv" | "post_recv" => self.post_recv(stmt, &p0)?,
            "post_send" => self.post_send(stmt, &p0)?,
            // ------------------------------------------------------------ QP
            "create_qp" => {
                let (pd, ctx) = self.pd(&p0)?;
                let parts = self.init_parts(stmt, false)?;
                let mut attr = parts.attr();
                let r = self.v.create_qp(&pd, &mut attr);
                let cap = attr.cap;
                if let Some(qp) = self.expect(stmt, r)? {
                    self.bind_qp(stmt, qp, Some(ctx), parts.qp_type, None, cap);
                }
            }
            "create_qp_ex" => {
                let ctx = self.ctx(&p0)?;
                let parts = self.init_parts(stmt, true)?;
                let mut attr = parts.attr();
                let r = self.v.create_qp_ex(&ctx, &mut attr);
                let cap = attr.cap;
                if let Some(qp) = self.expect(stmt, r)? {
                    self.bind_qp(stmt, qp, Some(ctx), parts.qp_type, None, cap);
                }
            }
            "mlx5dv_create_qp" => {
                let ctx = self.ctx(&p0)?;
                let parts = self.init_parts(stmt, true)?;
                let dv = self.dv_attr(stmt)?;
                let mut attr = parts.attr();
                let r = self.v.mlx5dv_create_qp(&ctx, &mut attr, &dv);
                let cap = attr.cap;
                let dc_type = dv
                    .comp_mask
                    .contains(Mlx5QpInitAttrMask::DC)
                    .then_some(dv.dc_init_attr.dc_type);
                if let Some(qp) = self.expect(stmt, r)? {
                    self.bind_qp(stmt, qp, Some(ctx), parts.qp_type, dc_type, cap);
                }
            }
            "modify_qp" => {
                let mut q = self.qp(&p0)?;
                let (attr, mask) = self.qp_attr(stmt)?;
                let r = self.v.modify_qp(&q.qp, &attr, mask);
                if self.expect(stmt, r)?.is_some() && mask.contains(QpAttrMask::PORT) {
                    q.port = Some(attr.port_num);
                    self.names.insert(p0, Value::Qp(q));
                }
            }
            "query_qp" => {
                let q = self.qp(&p0)?;
                let mask = self.attr_mask_arg(stmt)?;
                let r = self.v.query_qp(&q.qp, mask);
                if let Some((attr, init)) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Record(qp_attr_record(&attr, &init)));
                }
            }
            "destroy_qp" => {
                let q = self.qp(&p0)?;
                let r = self.v.destroy_qp(&q.qp);
                self.expect(stmt, r)?;
            }
            "open_qp" => {
                let ctx = self.ctx(&p0)?;
                let xrcd = match stmt.named("xrcd") {
                    Some(w) => self.xrcd(w)?.0,
                    None => return Err("open_qp needs xrcd=".to_owned()),
                };
                let qp_num = self.num_arg(stmt, "qp_num", 0)?;
                let qp_type = match stmt.named("qp_type") {
                    Some(t) => self.sym("qp_type", t, QpType::from_name_loose, QpType::from_raw)?,
                    None => QpType::XrcRecv,
                };
                let qp_context = self.num_arg(stmt, "qp_context", 0)?;
                let r = self.v.open_qp(
                    &ctx,
                    &xrcd,
                    &QpOpenAttr {
                        qp_num,
                        qp_type,
                        qp_context,
                    },
                );
                if let Some(qp) = self.expect(stmt, r)? {
                    self.bind_qp(stmt, qp, Some(ctx), qp_type, None, QpCap::default());
                }
            }
            "attach_mcast" | "detach_mcast" => {
                let q = self.qp(&p0)?;
                let gid = match stmt.named("gid") {
                    Some(t) => self.gid("gid", t)?,
                    None => Gid::default(),
                };
                let lid = self.num_arg(stmt, "lid", 0)?;
                let r = if stmt.verb == "attach_mcast" {
                    self.v.attach_mcast(&q.qp, &gid, lid)
                } else {
                    self.v.detach_mcast(&q.qp, &gid, lid)
                };
                self.expect(stmt, r)?;
            }
            "create_ah" => {
                let (pd, _) = self.pd(&p0)?;
                let mut attr = AhAttr {
                    port_num: 1,
                    ..AhAttr::default()
                };
                for (key, value) in Self::named(stmt) {
                    self.set_ah(&mut attr, key, key, value)?;
                }
                let r = self.v.create_ah(&pd, &attr);
                if let Some(ah) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Ah(ah));
                }
            }
            "destroy_ah" => {
                let ah = self.ah(&p0)?;
                let r = self.v.destroy_ah(&ah);
                self.expect(stmt, r)?;
            }
            "connect" => self.connect(stmt)?,
            // ------------------------------------------------------------ XRC
            "open_xrcd" => {
                let ctx = self.ctx(&p0)?;
                let fd = self.fd_arg(stmt)?;
                let oflags = match stmt.named("oflags") {
                    Some(t) => self.flags("oflags", t, OpenFlags::from_names)?,
                    None => OpenFlags::CREAT,
                };
                let comp_mask = match stmt.named("comp_mask") {
                    Some(t) => self.flags("comp_mask", t, XrcdInitAttrMask::from_names)?,
                    None => XrcdInitAttrMask::FD | XrcdInitAttrMask::OFLAGS,
                };
                let r = self.v.open_xrcd(
                    &ctx,
                    &XrcdInitAttr {
                        comp_mask,
                        fd,
                        oflags,
                    },
                );
                if let Some(x) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Xrcd { xrcd: x, ctx });
                }
            }
            "open_xrc_domain" => {
                let ctx = self.ctx(&p0)?;
                let fd = self.fd_arg(stmt)?;
                let oflags = match stmt.named("oflags") {
                    Some(t) => self.flags("oflags", t, OpenFlags::from_names)?,
                    None => OpenFlags::CREAT,
                };
                let r = self.v.open_xrc_domain(&ctx, fd, oflags);
                if let Some(x) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Xrcd { xrcd: x, ctx });
                }
            }
            "close_xrcd" | "close_xrc_domain" => {
                let (x, _) = self.xrcd(&p0)?;
                let r = if stmt.verb == "close_xrcd" {
                    self.v.close_xrcd(&x)
                } else {
                    self.v.close_xrc_domain(&x)
                };
                self.expect(stmt, r)?;
            }
            "create_xrc_srq" => {
                let (pd, _) = self.pd(&p0)?;
                let xrcd = match stmt.named("xrcd") {
                    Some(w) => self.xrcd(w)?.0,
                    None => return Err("create_xrc_srq needs xrcd=".to_owned()),
                };
                let cq = match stmt.named("cq") {
                    Some(w) => self.cq(w)?,
                    None => return Err("create_xrc_srq needs cq=".to_owned()),
                };
                let mut attr = self.srq_attr(stmt)?;
                let r = self.v.create_xrc_srq(&pd, &xrcd, &cq, &mut attr);
                if let Some(srq) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Srq { srq, attr });
                }
            }
            "create_xrc_rcv_qp" => {
                let (xrcd, ctx) = self.xrcd(&p0)?;
                let r = self.v.create_xrc_rcv_qp(&xrcd);
                if let Some(qp_num) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::XrcRcvQp { xrcd, ctx, qp_num });
                }
            }
            "modify_xrc_rcv_qp" => {
                let (xrcd, _) = self.xrcd(&p0)?;
                let qp_num = self.num_arg(stmt, "qp_num", 0)?;
                let (attr, mask) = self.qp_attr(stmt)?;
                let r = self.v.modify_xrc_rcv_qp(&xrcd, qp_num, &attr, mask);
                self.expect(stmt, r)?;
            }
            "query_xrc_rcv_qp" => {
                let (xrcd, _) = self.xrcd(&p0)?;
                let qp_num = self.num_arg(stmt, "qp_num", 0)?;
                let mask = self.attr_mask_arg(stmt)?;
                let r = self.v.query_xrc_rcv_qp(&xrcd, qp_num, mask);
                if let Some((attr, init)) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Record(qp_attr_record(&attr, &init)));
                }
            }
            "reg_xrc_rcv_qp" | "unreg_xrc_rcv_qp" => {
                let (xrcd, _) = self.xrcd(&p0)?;
                let qp_num = self.num_arg(stmt, "qp_num", 0)?;
                let r = if stmt.verb == "reg_xrc_rcv_qp" {
                    self.v.reg_xrc_rcv_qp(&xrcd, qp_num)
                } else {
                    self.v.unreg_xrc_rcv_qp(&xrcd, qp_num)
                };
                self.expect(stmt, r)?;
            }
            // ------------------------------------------------------------ mlx5dv
            "mlx5dv_query_device" => {
                let ctx = self.ctx(&p0)?;
                let mask = match stmt.named("comp_mask") {
                    Some(t) => self.flags("comp_mask", t, Mlx5ContextMask::from_names)?,
                    None => Mlx5ContextMask::all_named(),
                };
                let r = self.v.mlx5dv_query_device(&ctx, mask);
                if let Some(c) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Record(mlx5_record(&c)));
                }
            }
            "mlx5dv_dci_stream_id_reset" => {
                let q = self.qp(&p0)?;
                let id = self.num_arg(stmt, "stream_id", 0)?;
                let r = self.v.mlx5dv_dci_stream_id_reset(&q.qp, id);
                self.expect(stmt, r)?;
            }
            "mlx5dv_reserved_qpn_alloc" => {
                let ctx = self.ctx(&p0)?;
                let r = self.v.mlx5dv_reserved_qpn_alloc(&ctx);
                if let Some(qpn) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Scalar(Scalar::Int(i128::from(qpn))));
                }
            }
            "mlx5dv_reserved_qpn_dealloc" => {
                let ctx = self.ctx(&p0)?;
                let qpn = self.num_arg(stmt, "qpn", 0)?;
                let r = self.v.mlx5dv_reserved_qpn_dealloc(&ctx, qpn);
                self.expect(stmt, r)?;
            }
            // ------------------------------------------------------------ memory, checks
            "fill" | "write" => self.write_mr(stmt, &p0)?,
            "check" => self.check_mr(stmt, &p0)?,
            "assert" => self.assert(stmt)?,
            "sim" => self.sim(stmt)?,
            verb if verb.starts_with("rdma_") => self.rdma(stmt, &p0)?,
            verb if Self::is_ext(verb) => self.ext(stmt, &p0)?,
            other => {
                return Err(format!(
                    "statement `{other}` is not supported by this runner"
                ))
            }
        }
        Ok(())
    }

    // ---------------------------------------------------------------- helpers

    /// The `key=value` arguments of a statement, in order.
    fn named(stmt: &Statement) -> Vec<(&str, &str)> {
        stmt.args
            .iter()
            .filter_map(|a| match a {
                Arg::Named { key, value } => Some((key.as_str(), value.as_str())),
                _ => None,
            })
            .collect()
    }

    fn keys(stmt: &Statement) -> impl Iterator<Item = &str> {
        stmt.args.iter().filter_map(|a| match a {
            Arg::Named { key, .. } => Some(key.as_str()),
            _ => None,
        })
    }

    fn bind_qp(
        &mut self,
        stmt: &Statement,
        qp: V::Qp,
        ctx: Option<V::Context>,
        qp_type: QpType,
        dc_type: Option<DcType>,
        cap: QpCap,
    ) {
        self.bind(
            stmt,
            Value::Qp(QpVal {
                qp,
                ctx,
                qp_type,
                dc_type,
                cap,
                port: None,
            }),
        );
    }

    fn attr_mask_arg(&mut self, stmt: &Statement) -> Step<QpAttrMask> {
        match stmt.named("attr_mask") {
            Some(t) => self.flags("attr_mask", t, QpAttrMask::from_names),
            None => Ok(QpAttrMask::all_named()),
        }
    }

    fn fd_arg(&mut self, stmt: &Statement) -> Step<XrcdFile> {
        Ok(match stmt.named("fd") {
            None | Some("none") => XrcdFile::None,
            Some("bad") => XrcdFile::BadDescriptor,
            Some(t) => match self.int("fd", t)? {
                v if v < 0 => XrcdFile::None,
                v => XrcdFile::Inode(
                    u64::try_from(v).map_err(|_| format!("`fd={t}` is out of range"))?,
                ),
            },
        })
    }

    fn srq_attr(&mut self, stmt: &Statement) -> Step<SrqAttr> {
        Ok(SrqAttr {
            max_wr: self.num_arg(stmt, "max_wr", 16)?,
            max_sge: self.num_arg(stmt, "max_sge", 1)?,
            srq_limit: self.num_arg(stmt, "srq_limit", 0)?,
        })
    }

    fn create_srq_ex(&mut self, stmt: &Statement, p0: &str) -> Step {
        let ctx = self.ctx(p0)?;
        let attr = self.srq_attr(stmt)?;
        let srq_type = match stmt.named("srq_type") {
            Some(t) => self.sym("srq_type", t, SrqType::from_name, SrqType::from_raw)?,
            None => SrqType::Basic,
        };
        let comp_mask = match stmt.named("comp_mask") {
            Some(t) => self.flags("comp_mask", t, SrqInitAttrMask::from_names)?,
            None => mask::srq_init_comp_mask(Self::keys(stmt)),
        };
        let pd = self.opt(stmt, "pd", Self::pd)?.map(|(pd, _)| pd);
        let xrcd = self.opt(stmt, "xrcd", Self::xrcd)?.map(|(x, _)| x);
        let cq = self.opt(stmt, "cq", Self::cq)?;
        let srq_context = self.num_arg(stmt, "srq_context", 0)?;
        let mut init = SrqInitAttrEx {
            srq_context,
            attr,
            comp_mask,
            srq_type,
            pd: pd.as_ref(),
            xrcd: xrcd.as_ref(),
            cq: cq.as_ref(),
        };
        let r = self.v.create_srq_ex(&ctx, &mut init);
        let attr = init.attr;
        if let Some(srq) = self.expect(stmt, r)? {
            self.bind(stmt, Value::Srq { srq, attr });
        }
        Ok(())
    }

    fn init_parts(&mut self, stmt: &Statement, extended: bool) -> Step<InitParts<V>> {
        let cap_arg = |s: &mut Self, field: &str, default: u32| -> Step<u32> {
            match stmt
                .named(field)
                .or_else(|| stmt.named(&format!("cap.{field}")))
            {
                Some(t) => s.num(field, t),
                None => Ok(default),
            }
        };
        let cap = QpCap {
            max_send_wr: cap_arg(self, "max_send_wr", 16)?,
            max_recv_wr: cap_arg(self, "max_recv_wr", 16)?,
            max_send_sge: cap_arg(self, "max_send_sge", 1)?,
            max_recv_sge: cap_arg(self, "max_recv_sge", 1)?,
            max_inline_data: cap_arg(self, "max_inline_data", 0)?,
        };
        let qp_type = match stmt.named("qp_type") {
            Some(t) => self.sym("qp_type", t, QpType::from_name_loose, QpType::from_raw)?,
            None => QpType::Rc,
        };
        let comp_mask = match stmt.named("comp_mask") {
            Some(t) => self.flags("comp_mask", t, QpInitAttrMask::from_names)?,
            None if extended => mask::qp_init_comp_mask(Self::keys(stmt)),
            None => QpInitAttrMask::empty(),
        };
        let create_flags = match stmt.named("create_flags") {
            Some(t) => self.flags("create_flags", t, QpCreateFlags::from_names)?,
            None => QpCreateFlags::empty(),
        };
        let send_ops_flags = match stmt.named("send_ops_flags") {
            Some(t) => self.flags("send_ops_flags", t, SendOpsFlags::from_names)?,
            None => SendOpsFlags::empty(),
        };
        let sq_sig_all: u8 = self.num_arg(stmt, "sq_sig_all", 0)?;
        Ok(InitParts {
            send_cq: self.opt(stmt, "send_cq", Self::cq)?,
            recv_cq: self.opt(stmt, "recv_cq", Self::cq)?,
            srq: self.opt(stmt, "srq", Self::srq)?,
            pd: self.opt(stmt, "pd", Self::pd)?.map(|(pd, _)| pd),
            xrcd: self.opt(stmt, "xrcd", Self::xrcd)?.map(|(x, _)| x),
            qp_type,
            sq_sig_all: sq_sig_all != 0,
            cap,
            qp_context: self.num_arg(stmt, "qp_context", 0)?,
            comp_mask,
            create_flags,
            max_tso_header: self.num_arg(stmt, "max_tso_header", 0)?,
            source_qpn: self.num_arg(stmt, "source_qpn", 0)?,
            send_ops_flags,
        })
    }

    fn dv_attr(&mut self, stmt: &Statement) -> Step<Mlx5QpInitAttr> {
        let mut dv = Mlx5QpInitAttr {
            comp_mask: match stmt.named("dv.comp_mask") {
                Some(t) => self.flags("dv.comp_mask", t, Mlx5QpInitAttrMask::from_names)?,
                None => mask::dv_comp_mask(Self::keys(stmt)),
            },
            ..Mlx5QpInitAttr::default()
        };
        if let Some(t) = stmt.named("dv.create_flags") {
            dv.create_flags = self.flags("dv.create_flags", t, Mlx5QpCreateFlags::from_names)?;
        }
        if let Some(t) = stmt.named("dv.dc_type") {
            dv.dc_init_attr.dc_type =
                self.sym("dv.dc_type", t, DcType::from_name, DcType::from_raw)?;
        }
        dv.dc_init_attr.dct_access_key = self.num_arg(stmt, "dv.dct_access_key", 0)?;
        dv.dc_init_attr.dci_streams.log_num_concurent =
            self.num_arg(stmt, "dv.log_num_concurent", 0)?;
        dv.dc_init_attr.dci_streams.log_num_errored =
            self.num_arg(stmt, "dv.log_num_errored", 0)?;
        if let Some(t) = stmt.named("dv.send_ops_flags") {
            dv.send_ops_flags = self.flags("dv.send_ops_flags", t, Mlx5SendOpsFlags::from_names)?;
        }
        Ok(dv)
    }

    /// Sets one `ibv_ah_attr` field (`sub` without its `ah_attr.` prefix).
    fn set_ah(&mut self, ah: &mut AhAttr, key: &str, sub: &str, text: &str) -> Step {
        match sub {
            "dlid" => ah.dlid = self.num(key, text)?,
            "sl" => ah.sl = self.num(key, text)?,
            "src_path_bits" => ah.src_path_bits = self.num(key, text)?,
            "static_rate" => ah.static_rate = self.num(key, text)?,
            "is_global" => ah.is_global = self.num::<u8>(key, text)? != 0,
            "port_num" => ah.port_num = self.num(key, text)?,
            "grh.dgid" => ah.grh.dgid = self.gid(key, text)?,
            "grh.sgid_index" => ah.grh.sgid_index = self.num(key, text)?,
            "grh.hop_limit" => ah.grh.hop_limit = self.num(key, text)?,
            "grh.traffic_class" => ah.grh.traffic_class = self.num(key, text)?,
            "grh.flow_label" => ah.grh.flow_label = self.num(key, text)?,
            other => return Err(format!("unknown address vector field `{other}`")),
        }
        Ok(())
    }

    /// The `ibv_qp_attr` and mask of a `modify_qp`-like statement.
    fn qp_attr(&mut self, stmt: &Statement) -> Step<(QpAttr, QpAttrMask)> {
        let mut a = QpAttr::default();
        for (key, text) in Self::named(stmt) {
            match key {
                "qp_state" => {
                    a.qp_state = self.sym(key, text, QpState::from_name, QpState::from_raw)?
                }
                "cur_qp_state" => {
                    a.cur_qp_state = self.sym(key, text, QpState::from_name, QpState::from_raw)?
                }
                "en_sqd_async_notify" => a.en_sqd_async_notify = self.num(key, text)?,
                "qp_access_flags" => {
                    a.qp_access_flags = self.flags(key, text, AccessFlags::from_names)?
                }
                "pkey_index" => a.pkey_index = self.num(key, text)?,
                "port_num" => a.port_num = self.num(key, text)?,
                "qkey" => a.qkey = self.num(key, text)?,
                "path_mtu" => a.path_mtu = self.sym(key, text, parse_mtu, Mtu::from_raw)?,
                "timeout" => a.timeout = self.num(key, text)?,
                "retry_cnt" => a.retry_cnt = self.num(key, text)?,
                "rnr_retry" => a.rnr_retry = self.num(key, text)?,
                "rq_psn" => a.rq_psn = self.num(key, text)?,
                "max_rd_atomic" => a.max_rd_atomic = self.num(key, text)?,
                "min_rnr_timer" => a.min_rnr_timer = self.num(key, text)?,
                "sq_psn" => a.sq_psn = self.num(key, text)?,
                "max_dest_rd_atomic" => a.max_dest_rd_atomic = self.num(key, text)?,
                "path_mig_state" => {
                    a.path_mig_state =
                        self.sym(key, text, PathMigState::from_name, PathMigState::from_raw)?
                }
                "dest_qp_num" => a.dest_qp_num = self.num(key, text)?,
                "rate_limit" => a.rate_limit = self.num(key, text)?,
                "alt_pkey_index" => a.alt_pkey_index = self.num(key, text)?,
                "alt_port_num" => a.alt_port_num = self.num(key, text)?,
                "alt_timeout" => a.alt_timeout = self.num(key, text)?,
                "cap.max_send_wr" => a.cap.max_send_wr = self.num(key, text)?,
                "cap.max_recv_wr" => a.cap.max_recv_wr = self.num(key, text)?,
                "cap.max_send_sge" => a.cap.max_send_sge = self.num(key, text)?,
                "cap.max_recv_sge" => a.cap.max_recv_sge = self.num(key, text)?,
                "cap.max_inline_data" => a.cap.max_inline_data = self.num(key, text)?,
                k if k.starts_with("ah_attr.") => {
                    let mut ah = a.ah_attr;
                    self.set_ah(&mut ah, k, &k["ah_attr.".len()..], text)?;
                    a.ah_attr = ah;
                }
                k if k.starts_with("alt_ah_attr.") => {
                    let mut ah = a.alt_ah_attr;
                    self.set_ah(&mut ah, k, &k["alt_ah_attr.".len()..], text)?;
                    a.alt_ah_attr = ah;
                }
                _ => {} // attr_mask, qp_num: not attributes
            }
        }
        let mask = match stmt.named("attr_mask") {
            Some(t) => self.flags("attr_mask", t, QpAttrMask::from_names)?,
            None => mask::qp_attr_mask(Self::keys(stmt)),
        };
        Ok((a, mask))
    }

    // ---------------------------------------------------------------- waiting

    /// Calls `f` until it yields something, it fails, or the wait bound is
    /// reached (then `Ok(None)`). On the simulator, after a first empty
    /// answer, virtual time is run until idle once (the simulated analogue of
    /// waiting), since only `poll_cq` and `rdma_get_cm_event` advance it themselves.
    pub(crate) fn wait_for<T>(
        &mut self,
        mut f: impl FnMut(&mut V) -> Result<Option<T>, Error>,
    ) -> Result<Option<T>, Error> {
        let is_sim = self.v.backend() == BackendKind::Sim;
        let max = if is_sim {
            self.options.wait_polls.min(64)
        } else {
            self.options.wait_polls
        };
        let start = Instant::now();
        for attempt in 0..max {
            if let Some(t) = f(self.v)? {
                return Ok(Some(t));
            }
            if is_sim && attempt == 0 {
                // Not implemented or refused: nothing more to process, keep polling.
                let _ = self.v.sim_control(SimCommand::RunUntilIdle);
            }
            if !is_sim {
                if start.elapsed() > self.options.wait_timeout {
                    break;
                }
                if attempt > 1000 {
                    std::thread::sleep(std::time::Duration::from_micros(100));
                }
            }
        }
        Ok(None)
    }

    /// Checks that `f` yields nothing (on hardware, for [`super::RunOptions::empty_grace`]).
    pub(crate) fn check_empty<T>(
        &mut self,
        mut f: impl FnMut(&mut V) -> Result<Option<T>, Error>,
    ) -> Result<Option<T>, Error> {
        let is_sim = self.v.backend() == BackendKind::Sim;
        let start = Instant::now();
        loop {
            if let Some(t) = f(self.v)? {
                return Ok(Some(t));
            }
            if is_sim || start.elapsed() >= self.options.empty_grace {
                return Ok(None);
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }

    pub(crate) fn wait_bound(&self) -> String {
        if self.v.backend() == BackendKind::Sim {
            format!("{} polls", self.options.wait_polls.min(64))
        } else {
            format!("{:?}", self.options.wait_timeout)
        }
    }

    fn poll_cq(&mut self, stmt: &Statement, p0: &str) -> Step {
        let cq = self.cq(p0)?;
        let poll = |v: &mut V| {
            let mut wc = [Wc::default()];
            v.poll_cq(&cq, &mut wc).map(|n| (n > 0).then_some(wc[0]))
        };
        match &stmt.expect {
            Expectation::Error { .. } | Expectation::AnyError { .. } => {
                let r = poll(self.v).map(|_| ());
                self.expect(stmt, r)?;
            }
            Expectation::Empty => {
                let r = self.check_empty(poll);
                if let Some(Some(wc)) = self.expect(stmt, r)? {
                    return Err(format!("expected no completion, got {}", wc_text(&wc)));
                }
            }
            Expectation::AnyOrder { wr_ids, fields } => {
                let mut waiting = self.wr_id_list(wr_ids)?;
                let mut reaped = BTreeSet::new();
                while !waiting.is_empty() {
                    let r = self.wait_for(poll);
                    let Some(got) = self.expect(stmt, r)? else {
                        return Ok(());
                    };
                    let Some(wc) = got else {
                        return Err(format!(
                            "expected completions of wr_id {}, got none within {} (already reaped: {})",
                            id_list(&waiting),
                            self.wait_bound(),
                            if reaped.is_empty() { "none".to_owned() } else { id_list(&reaped) }
                        ));
                    };
                    if !waiting.remove(&wc.wr_id) {
                        let why = if reaped.contains(&wc.wr_id) {
                            "a second completion of".to_owned()
                        } else {
                            "an unexpected completion".to_owned()
                        };
                        return Err(format!(
                            "{why} {} while waiting for wr_id {}",
                            wc_text(&wc),
                            id_list(&waiting)
                        ));
                    }
                    reaped.insert(wc.wr_id);
                    self.check_fields(
                        &format!("completion {}", wc_text(&wc)),
                        &wc_record(&wc),
                        fields,
                    )?;
                }
            }
            _ => {
                let r = self.wait_for(poll);
                let Some(got) = self.expect(stmt, r)? else {
                    return Ok(());
                };
                let Some(wc) = got else {
                    // The simulator can say why nothing will come.
                    let stalls = match self.v.sim_control(SimCommand::Raw {
                        name: "rnr_stalls",
                        args: &[],
                    }) {
                        Ok(SimReply::Text(t)) if !t.is_empty() => format!(" ({t})"),
                        _ => String::new(),
                    };
                    return Err(format!(
                        "expected a completion, got none within {}{stalls}",
                        self.wait_bound()
                    ));
                };
                let rec = wc_record(&wc);
                if let Expectation::Fields(fields) = &stmt.expect {
                    self.check_fields(&format!("completion {}", wc_text(&wc)), &rec, fields)?;
                }
                self.bind(stmt, Value::Record(rec));
            }
        }
        Ok(())
    }

    /// The work request ids of `-> any wr_id=…`: numbers, references,
    /// arithmetic and ranges `A..B` (B excluded), each listed once.
    fn wr_id_list(&mut self, items: &[String]) -> Step<BTreeSet<u64>> {
        const MAX: u64 = 1_000_000;
        let mut ids = BTreeSet::new();
        let add = |id: u64, ids: &mut BTreeSet<u64>| {
            if ids.insert(id) {
                Ok(())
            } else {
                Err(format!("wr_id {id} is listed twice after `-> any`"))
            }
        };
        for item in items {
            match item.split_once("..") {
                Some((a, b)) => {
                    let a: u64 = self.num("wr_id", a)?;
                    let b: u64 = self.num("wr_id", b)?;
                    if b < a || b - a > MAX {
                        return Err(format!(
                            "the range `wr_id={item}` is {a}..{b}: it must run forwards and hold at most {MAX} ids"
                        ));
                    }
                    for id in a..b {
                        add(id, &mut ids)?;
                    }
                }
                None => {
                    let id = self.num("wr_id", item)?;
                    add(id, &mut ids)?;
                }
            }
        }
        Ok(ids)
    }

    fn get_cq_event(&mut self, stmt: &Statement, p0: &str) -> Step {
        let ch = self.channel(p0)?;
        match &stmt.expect {
            Expectation::Error { .. } | Expectation::AnyError { .. } => {
                let r = self.v.get_cq_event(&ch).map(|_| ());
                self.expect(stmt, r)?;
            }
            Expectation::Empty => {
                let r = self.check_empty(|v| v.get_cq_event(&ch));
                if let Some(Some(cq)) = self.expect(stmt, r)? {
                    return Err(format!("expected no CQ event, got one for {cq:?}"));
                }
            }
            _ => {
                let r = self.wait_for(|v| v.get_cq_event(&ch));
                let Some(got) = self.expect(stmt, r)? else {
                    return Ok(());
                };
                let Some(cq) = got else {
                    return Err(format!(
                        "expected a CQ event, got none within {}",
                        self.wait_bound()
                    ));
                };
                if let Expectation::Fields(fields) = &stmt.expect {
                    for (_, want) in fields {
                        let want_cq = self.cq(want)?;
                        if format!("{want_cq:?}") != format!("{cq:?}") {
                            return Err(format!(
                                "expected a CQ event for `{want}`, got one for {cq:?}"
                            ));
                        }
                    }
                }
                self.bind(stmt, Value::Cq(cq));
            }
        }
        Ok(())
    }

    fn get_async_event(&mut self, stmt: &Statement, p0: &str) -> Step {
        let ctx = self.ctx(p0)?;
        let ev = match &stmt.expect {
            Expectation::Error { .. } | Expectation::AnyError { .. } => {
                let r = self.v.get_async_event(&ctx).map(|_| ());
                self.expect(stmt, r)?;
                return Ok(());
            }
            Expectation::Empty => {
                let r = self.check_empty(|v| v.get_async_event(&ctx));
                match self.expect(stmt, r)?.flatten() {
                    Some(ev) => {
                        let _ = self.v.ack_async_event(&ev);
                        return Err(format!("expected no async event, got {ev:?}"));
                    }
                    None => return Ok(()),
                }
            }
            _ => {
                let r = self.wait_for(|v| v.get_async_event(&ctx));
                let Some(got) = self.expect(stmt, r)? else {
                    return Ok(());
                };
                got.ok_or_else(|| {
                    format!(
                        "expected an async event, got none within {}",
                        self.wait_bound()
                    )
                })?
            }
        };
        let mut rec = Record::new();
        rec.insert(
            "event_type".to_owned(),
            enum_sym!(AsyncEventType, ev.event_type),
        );
        match &ev.element {
            AsyncElement::Qp(q) => {
                if let Ok(n) = self.v.qp_num(q) {
                    rec.insert("qp_num".to_owned(), Scalar::Int(n.into()));
                }
            }
            AsyncElement::QpNum(n) => {
                rec.insert("qp_num".to_owned(), Scalar::Int((*n).into()));
            }
            AsyncElement::Port(p) => {
                rec.insert("port".to_owned(), Scalar::Int((*p).into()));
            }
            _ => {}
        }
        let ack = self
            .v
            .ack_async_event(&ev)
            .map_err(|e| format!("ack_async_event after {ev:?}: {e}"));
        if let Expectation::Fields(fields) = &stmt.expect {
            let mut plain = Vec::new();
            for (key, want) in fields {
                match key.as_str() {
                    "qp" => {
                        let n = match self.lookup(want)? {
                            Value::Qp(q) => self.v.qp_num(&q.qp).map_err(|e| e.to_string())?,
                            Value::XrcRcvQp { qp_num, .. } => qp_num,
                            other => {
                                return Err(format!(
                                    "`{want}` is {}, expected a QP",
                                    other.kind_name()
                                ))
                            }
                        };
                        plain.push(("qp_num".to_owned(), n.to_string()));
                    }
                    "srq" | "cq" => {
                        let want_dbg = match self.lookup(want)? {
                            Value::Srq { srq, .. } => format!("{srq:?}"),
                            Value::Cq(cq) => format!("{cq:?}"),
                            other => return Err(format!("`{want}` is {}", other.kind_name())),
                        };
                        let got_dbg = match &ev.element {
                            AsyncElement::Srq(s) if key == "srq" => format!("{s:?}"),
                            AsyncElement::Cq(c) if key == "cq" => format!("{c:?}"),
                            _ => String::new(),
                        };
                        if want_dbg != got_dbg {
                            return Err(format!("expected an async event on `{want}`, got {ev:?}"));
                        }
                    }
                    _ => plain.push((key.clone(), want.clone())),
                }
            }
            self.check_fields(&format!("async event {ev:?}"), &rec, &plain)?;
        }
        ack?;
        self.bind(stmt, Value::Record(rec));
        Ok(())
    }

    // ---------------------------------------------------------------- data path

    /// The work requests of a `post_*` statement, split at `;`.
    pub(crate) fn wr_groups(stmt: &Statement) -> Vec<Vec<(&str, &str)>> {
        let mut groups = vec![Vec::new()];
        for a in &stmt.args {
            match a {
                Arg::Separator => groups.push(Vec::new()),
                Arg::Named { key, value } => {
                    if let Some(g) = groups.last_mut() {
                        g.push((key.as_str(), value.as_str()));
                    }
                }
                Arg::Positional(_) => {}
            }
        }
        groups.retain(|g| !g.is_empty());
        groups
    }

    fn sge(&mut self, key: &str, text: &str) -> Step<Sge> {
        let parts: Vec<&str> = text.split(':').collect();
        if parts.len() != 3 {
            return Err(format!(
                "expected `{key}=…:…:…` (three parts), got `{key}={text}`"
            ));
        }
        if key == "sge_raw" {
            return Ok(Sge {
                addr: self.num(key, parts[0])?,
                length: self.num(key, parts[1])?,
                lkey: self.num(key, parts[2])?,
            });
        }
        let mr = self.mr(parts[0])?;
        let info = self
            .v
            .mr_info(&mr)
            .map_err(|e| format!("`{key}={text}`: {e}"))?;
        let offset: u64 = self.num(key, parts[1])?;
        Ok(Sge {
            addr: info.addr.wrapping_add(offset),
            length: self.num(key, parts[2])?,
            lkey: info.lkey,
        })
    }

    pub(crate) fn send_parts(&mut self, group: &[(&str, &str)]) -> Step<SendParts<V>> {
        let mut p = SendParts {
            wr_id: 0,
            opcode: WrOpcode::Send,
            send_flags: SendFlags::empty(),
            imm_data: 0,
            sges: Vec::new(),
            rdma: RdmaInfo::default(),
            atomic: AtomicInfo::default(),
            ud: None,
            remote_srqn: 0,
            dc: None,
            flush: FlushInfo::default(),
        };
        let get = |k: &str| group.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
        for &(key, text) in group {
            match key {
                "wr_id" => p.wr_id = self.num(key, text)?,
                "opcode" => {
                    p.opcode = self.sym(key, text, WrOpcode::from_name, WrOpcode::from_raw)?
                }
                "send_flags" => p.send_flags = self.flags(key, text, SendFlags::from_names)?,
                "imm_data" | "invalidate_rkey" => p.imm_data = self.num(key, text)?,
                "sge" | "sge_raw" => {
                    let s = self.sge(key, text)?;
                    p.sges.push(s);
                }
                "remote" => {
                    let (mr, off) = text.split_once(':').unwrap_or((text, "0"));
                    let mr = self.mr(mr)?;
                    let info = self
                        .v
                        .mr_info(&mr)
                        .map_err(|e| format!("`remote={text}`: {e}"))?;
                    let offset: u64 = self.num(key, off)?;
                    p.rdma = RdmaInfo {
                        remote_addr: info.addr.wrapping_add(offset),
                        rkey: info.rkey,
                    };
                    p.atomic.remote_addr = p.rdma.remote_addr;
                    p.atomic.rkey = p.rdma.rkey;
                }
                "compare_add" => p.atomic.compare_add = self.num(key, text)?,
                "swap" => p.atomic.swap = self.num(key, text)?,
                "remote_srqn" => p.remote_srqn = self.num(key, text)?,
                "flush_type" => p.flush.flush_type = self.num(key, text)?,
                "flush_level" => p.flush.level = self.num(key, text)?,
                "flush_len" => p.flush.len = self.num(key, text)?,
                _ => {}
            }
        }
        // Raw addresses override `remote=`.
        if let Some(t) = get("remote_addr") {
            p.rdma.remote_addr = self.num("remote_addr", t)?;
            p.atomic.remote_addr = p.rdma.remote_addr;
        }
        if let Some(t) = get("rkey") {
            p.rdma.rkey = self.num("rkey", t)?;
            p.atomic.rkey = p.rdma.rkey;
        }
        if let Some(ah) = get("ah") {
            let ah = self.ah(ah)?;
            let qpn = match get("remote_qpn") {
                Some(t) => self.num("remote_qpn", t)?,
                None => 0,
            };
            let qkey = match get("remote_qkey") {
                Some(t) => self.num("remote_qkey", t)?,
                None => 0x1111_1111,
            };
            p.ud = Some((ah, qpn, qkey));
        } else if get("remote_qpn").is_some() || get("remote_qkey").is_some() {
            return Err("remote_qpn= and remote_qkey= need ah= (UD addressing)".to_owned());
        }
        if let Some(ah) = get("dc_ah") {
            let ah = self.ah(ah)?;
            let dctn = match get("dc_dctn") {
                Some(t) => self.num("dc_dctn", t)?,
                None => 0,
            };
            let key = match get("dc_key") {
                Some(t) => self.num("dc_key", t)?,
                None => 0,
            };
            let stream = match get("stream_id") {
                Some(t) => self.num("stream_id", t)?,
                None => 0,
            };
            p.dc = Some((ah, dctn, key, stream));
        } else if get("dc_dctn").is_some() || get("dc_key").is_some() || get("stream_id").is_some()
        {
            return Err("dc_dctn=, dc_key= and stream_id= need dc_ah= (DC addressing)".to_owned());
        }
        Ok(p)
    }

    // `post_send` is an `unsafe fn` (the hardware contract); the runner keeps
    // that contract as described on the block below.
    #[allow(unsafe_code)]
    fn post_send(&mut self, stmt: &Statement, p0: &str) -> Step {
        let q = self.qp(p0)?;
        let mut parts = Vec::new();
        for group in Self::wr_groups(stmt) {
            parts.push(self.send_parts(&group)?);
        }
        let wrs: Vec<SendWr<'_, V>> = parts
            .iter()
            .map(|p| SendWr {
                wr_id: p.wr_id,
                sg_list: &p.sges,
                opcode: p.opcode,
                send_flags: p.send_flags,
                imm_data: p.imm_data,
                rdma: p.rdma,
                atomic: p.atomic,
                ud: p.ud.as_ref().map(|(ah, remote_qpn, remote_qkey)| UdInfo {
                    ah,
                    remote_qpn: *remote_qpn,
                    remote_qkey: *remote_qkey,
                }),
                remote_srqn: p.remote_srqn,
                dc: p
                    .dc
                    .as_ref()
                    .map(|(ah, remote_dctn, remote_dc_key, stream_id)| DcInfo {
                        ah,
                        remote_dctn: *remote_dctn,
                        remote_dc_key: *remote_dc_key,
                        stream_id: *stream_id,
                    }),
                flush: p.flush,
            })
            .collect();
        // SAFETY: `Verbs::post_send` requires that the memory named by each
        // SGE stays valid and unwritten until the completion is reaped, and
        // that the AHs named are not destroyed before then:
        // - the SGEs name bytes of MRs, which the backend owns; the runner
        //   never frees an MR (or an AH) except when the script says
        //   `dereg_mr` / `destroy_ah`, and writes MR bytes only through
        //   `fill`/`write`, which go through `mr_bytes_mut` (checked by the
        //   simulator). A script that does either early is testing exactly
        //   that misuse, which the simulator detects and reports.
        // - `sge_raw=` entries name arbitrary addresses on purpose: the
        //   backend checks them against its MRs by lkey and range (the
        //   protection errors of the spec) and never dereferences an address
        //   it has not validated.
        let r = unsafe { self.v.post_send(&q.qp, &wrs) };
        self.expect(stmt, r)?;
        Ok(())
    }

    // `post_recv`/`post_srq_recv` are `unsafe fn`s (the hardware contract);
    // the runner keeps that contract as described on the block below.
    #[allow(unsafe_code)]
    fn post_recv(&mut self, stmt: &Statement, p0: &str) -> Step {
        let mut lists: Vec<(u64, Vec<Sge>)> = Vec::new();
        for group in Self::wr_groups(stmt) {
            let mut wr_id = 0;
            let mut sges = Vec::new();
            for (key, text) in group {
                match key {
                    "wr_id" => wr_id = self.num(key, text)?,
                    _ => sges.push(self.sge(key, text)?),
                }
            }
            lists.push((wr_id, sges));
        }
        let wrs: Vec<RecvWr<'_>> = lists
            .iter()
            .map(|(wr_id, sges)| RecvWr {
                wr_id: *wr_id,
                sg_list: sges,
            })
            .collect();
        let r = if stmt.verb == "post_srq_recv" {
            let srq = self.srq(p0)?;
            // SAFETY: the SGEs name bytes of MRs the backend owns and the
            // runner keeps registered until the script deregisters them (see
            // `post_send`); raw SGEs are validated by the backend by lkey and
            // range before any access.
            unsafe { self.v.post_srq_recv(&srq, &wrs) }
        } else {
            let q = self.qp(p0)?;
            // SAFETY: as for `post_srq_recv` just above.
            unsafe { self.v.post_recv(&q.qp, &wrs) }
        };
        self.expect(stmt, r)?;
        Ok(())
    }

    // ---------------------------------------------------------------- memory

    fn write_mr(&mut self, stmt: &Statement, p0: &str) -> Step {
        let mr = self.mr(p0)?;
        let offset: usize = self.num_arg(stmt, "offset", 0)?;
        let bytes: Vec<u8> = if stmt.verb == "fill" {
            let length: usize = self.num_arg(stmt, "length", 0)?;
            let byte: u8 = self.num_arg(stmt, "byte", 0)?;
            vec![byte; length]
        } else if let Some(h) = stmt.named("hex") {
            parse_hex(h).ok_or_else(|| format!("`hex={h}` is not hex bytes"))?
        } else if let Some(t) = stmt.named("u64") {
            self.num::<u64>("u64", t)?.to_le_bytes().to_vec()
        } else {
            return Err("write needs hex= or u64=".to_owned());
        };
        let r = self.v.mr_bytes_mut(&mr).map(|buf| {
            let len = buf.len();
            match buf.get_mut(offset..offset.saturating_add(bytes.len())) {
                Some(dst) => {
                    dst.copy_from_slice(&bytes);
                    Ok(())
                }
                None => Err(format!(
                    "{} bytes at offset {offset} go past the end of `{p0}` ({len} bytes)",
                    bytes.len()
                )),
            }
        });
        if let Some(inner) = self.expect(stmt, r)? {
            inner?;
        }
        Ok(())
    }

    fn check_mr(&mut self, stmt: &Statement, p0: &str) -> Step {
        let mr = self.mr(p0)?;
        let offset: usize = self.num_arg(stmt, "offset", 0)?;
        let want: Vec<u8> = if let Some(h) = stmt.named("hex") {
            parse_hex(h).ok_or_else(|| format!("`hex={h}` is not hex bytes"))?
        } else if let Some(t) = stmt.named("u64") {
            self.num::<u64>("u64", t)?.to_le_bytes().to_vec()
        } else {
            let length: usize = self.num_arg(stmt, "length", 0)?;
            let byte: u8 = self.num_arg(stmt, "byte", 0)?;
            vec![byte; length]
        };
        let r = self.v.mr_bytes(&mr).map(|buf| {
            buf.get(offset..offset.saturating_add(want.len()))
                .map(<[u8]>::to_vec)
        });
        let Some(got) = self.expect(stmt, r)? else {
            return Ok(());
        };
        let got = got.ok_or_else(|| {
            format!(
                "{} bytes at offset {offset} go past the end of `{p0}`",
                want.len()
            )
        })?;
        if let Some(i) = got.iter().zip(&want).position(|(g, w)| g != w) {
            let end = (i + 16).min(got.len());
            return Err(format!(
                "byte {} of `{p0}` is {:#04x}, expected {:#04x} (bytes {}..{}: {}, expected {})",
                offset + i,
                got[i],
                want[i],
                offset + i,
                offset + end,
                to_hex(&got[i..end]),
                to_hex(&want[i..end])
            ));
        }
        Ok(())
    }

    // ---------------------------------------------------------------- connect

    fn qp_target(&mut self, word: &str) -> Step<QpTarget<V>> {
        match self.lookup(word)? {
            Value::Qp(q) => Ok(QpTarget::Qp(q)),
            Value::XrcRcvQp { xrcd, ctx, qp_num } => Ok(QpTarget::XrcRcv { xrcd, ctx, qp_num }),
            other => Err(format!("`{word}` is {}, expected a QP", other.kind_name())),
        }
    }

    fn side(&mut self, word: &str, params: &ConnectParams) -> Step<Side<V>> {
        let target = self.qp_target(word)?;
        let fail = |e: Error| format!("connect: reading `{word}`: {e}");
        let (class, ctx, port, qp_num) = match &target {
            QpTarget::Qp(q) => {
                let class = QpClass::from_qp_type(q.qp_type, q.dc_type).ok_or_else(|| {
                    format!(
                        "connect: `{word}` is a {} QP, which connect does not handle",
                        q.qp_type
                    )
                })?;
                let ctx = q
                    .ctx
                    .clone()
                    .ok_or_else(|| format!("connect: the device of `{word}` is unknown"))?;
                let port = params.port_num.or(q.port).unwrap_or(1);
                (class, ctx, port, self.v.qp_num(&q.qp).map_err(fail)?)
            }
            QpTarget::XrcRcv { ctx, qp_num, .. } => (
                QpClass::XrcTgt,
                ctx.clone(),
                params.port_num.unwrap_or(1),
                *qp_num,
            ),
        };
        let port_attr = self.v.query_port(&ctx, port).map_err(fail)?;
        let gid = if port_attr.link_layer == LinkLayer::Ethernet {
            self.v.query_gid(&ctx, port, 0).map_err(fail)?
        } else {
            Gid::default()
        };
        Ok(Side {
            target,
            name: word.to_owned(),
            class,
            ctx,
            port,
            port_attr,
            gid,
            qp_num,
        })
    }

    fn modify_target(
        &mut self,
        t: &QpTarget<V>,
        attr: &QpAttr,
        mask: QpAttrMask,
    ) -> Result<(), Error> {
        match t {
            QpTarget::Qp(q) => self.v.modify_qp(&q.qp, attr, mask),
            QpTarget::XrcRcv { xrcd, qp_num, .. } => {
                self.v.modify_xrc_rcv_qp(xrcd, *qp_num, attr, mask)
            }
        }
    }

    fn connect_params(&mut self, stmt: &Statement) -> Step<ConnectParams> {
        Ok(ConnectParams {
            port_num: match stmt.named("port_num") {
                Some(t) => Some(self.num("port_num", t)?),
                None => None,
            },
            pkey_index: self.num_arg(stmt, "pkey_index", 0)?,
            path_mtu: match stmt.named("path_mtu") {
                Some(t) => self.sym("path_mtu", t, parse_mtu, Mtu::from_raw)?,
                None => Mtu::Mtu1024,
            },
            timeout: self.num_arg(stmt, "timeout", 14)?,
            retry_cnt: self.num_arg(stmt, "retry_cnt", 7)?,
            rnr_retry: self.num_arg(stmt, "rnr_retry", 6)?,
            min_rnr_timer: self.num_arg(stmt, "min_rnr_timer", 12)?,
            max_rd_atomic: self.num_arg(stmt, "max_rd_atomic", 1)?,
            max_dest_rd_atomic: self.num_arg(stmt, "max_dest_rd_atomic", 1)?,
            qp_access_flags: match stmt.named("qp_access_flags") {
                Some(t) => Some(self.flags("qp_access_flags", t, AccessFlags::from_names)?),
                None => None,
            },
            qkey: self.num_arg(stmt, "qkey", 0x1111_1111)?,
            sq_psn: self.num_arg(stmt, "sq_psn", 0)?,
            rq_psn: self.num_arg(stmt, "rq_psn", 0)?,
            sl: self.num_arg(stmt, "sl", 0)?,
        })
    }

    /// The attributes `connect` gives `me` towards `peer` (the mask decides which are read).
    fn connect_attr(&mut self, me: &Side<V>, peer: &Side<V>, p: &ConnectParams) -> QpAttr {
        let access = p.qp_access_flags.unwrap_or_else(|| {
            let atomics = self
                .v
                .query_device(&me.ctx)
                .map(|a| a.atomic_cap != AtomicCap::None)
                .unwrap_or(false);
            match me.class {
                QpClass::Uc => AccessFlags::REMOTE_WRITE,
                QpClass::Ud | QpClass::RawPacket | QpClass::Dci => AccessFlags::empty(),
                _ if atomics => {
                    AccessFlags::REMOTE_WRITE
                        | AccessFlags::REMOTE_READ
                        | AccessFlags::REMOTE_ATOMIC
                }
                _ => AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ,
            }
        });
        let global = peer.port_attr.link_layer == LinkLayer::Ethernet
            || (me.port_attr.flags | peer.port_attr.flags) & QPF_GRH_REQUIRED != 0;
        let ah_attr = AhAttr {
            grh: GlobalRoute {
                dgid: peer.gid,
                flow_label: 0,
                sgid_index: 0,
                hop_limit: 64,
                traffic_class: 0,
            },
            dlid: peer.port_attr.lid,
            sl: p.sl,
            src_path_bits: 0,
            static_rate: 0,
            is_global: global,
            port_num: me.port,
        };
        // Clamp to both ports' active MTU (an unknown MTU does not clamp).
        let mut mtu = p.path_mtu;
        for active in [me.port_attr.active_mtu, peer.port_attr.active_mtu] {
            if active.bytes().is_some() && active.to_raw() < mtu.to_raw() {
                mtu = active;
            }
        }
        QpAttr {
            qp_state: QpState::Init,
            path_mtu: mtu,
            qkey: p.qkey,
            rq_psn: p.rq_psn,
            sq_psn: p.sq_psn,
            dest_qp_num: peer.qp_num,
            qp_access_flags: access,
            ah_attr,
            pkey_index: p.pkey_index,
            max_rd_atomic: p.max_rd_atomic,
            max_dest_rd_atomic: p.max_dest_rd_atomic,
            min_rnr_timer: p.min_rnr_timer,
            port_num: me.port,
            timeout: p.timeout,
            retry_cnt: p.retry_cnt,
            rnr_retry: p.rnr_retry,
            ..QpAttr::default()
        }
    }

    /// `connect A [B]`: RESET→INIT→RTR→RTS on both QPs (XRC_RECV and DCT
    /// stop at RTR), each step with exactly the table's required mask.
    fn connect(&mut self, stmt: &Statement) -> Step {
        use transitions::{transition_masks, TableFlavor};
        let words: Vec<String> = stmt.positional().map(str::to_owned).collect();
        let params = self.connect_params(stmt)?;
        let Some(first) = words.first() else {
            return Err("connect needs one or two QPs".to_owned());
        };
        let a = self.side(first, &params)?;
        let b = match words.get(1) {
            Some(w) => Some(self.side(w, &params)?),
            None => None,
        };
        let mut plan: Vec<(&Side<V>, QpAttr)> = Vec::new();
        let attr_a = self.connect_attr(&a, b.as_ref().unwrap_or(&a), &params);
        plan.push((&a, attr_a));
        if let Some(b) = &b {
            let attr_b = self.connect_attr(b, &a, &params);
            plan.push((b, attr_b));
        }
        let steps = [
            (QpState::Reset, QpState::Init),
            (QpState::Init, QpState::ReadyToReceive),
            (QpState::ReadyToReceive, QpState::ReadyToSend),
        ];
        let mut result = Ok(());
        'steps: for (from, to) in steps {
            for (side, attr) in &plan {
                if to == QpState::ReadyToSend
                    && matches!(side.class, QpClass::XrcTgt | QpClass::Dct)
                {
                    continue;
                }
                let Some(masks) = transition_masks(side.class, from, to, TableFlavor::Kernel)
                else {
                    return Err(format!(
                        "connect: no {from} -> {to} transition for a {} QP",
                        side.class
                    ));
                };
                let mask = masks.required | QpAttrMask::STATE;
                let attr = QpAttr {
                    qp_state: to,
                    ..*attr
                };
                if let Err(e) = self.modify_target(&side.target, &attr, mask) {
                    let context = format!("{}: {from} -> {to} with mask {mask}", side.name);
                    result =
                        Err(
                            Error::new(e.verb(), e.kind(), format!("{} ({context})", e.message()))
                                .with_errno(e.errno()),
                        );
                    break 'steps;
                }
            }
        }
        let port_updates: Vec<(String, u8)> =
            plan.iter().map(|(s, _)| (s.name.clone(), s.port)).collect();
        if self.expect(stmt, result)?.is_some() {
            for (name, port) in port_updates {
                if let Some(Value::Qp(q)) = self.names.get_mut(&name) {
                    q.port = Some(port);
                }
            }
        }
        Ok(())
    }

    // ---------------------------------------------------------------- simulator

    fn sim(&mut self, stmt: &Statement) -> Step {
        let sub = Self::first(stmt);
        let r = match sub.as_str() {
            "advance" => {
                let ns = self.num_arg(stmt, "ns", 0)?;
                self.v.sim_control(SimCommand::AdvanceNs(ns))
            }
            "run_until_idle" => self.v.sim_control(SimCommand::RunUntilIdle),
            "now" => self.v.sim_control(SimCommand::Now),
            "clear_faults" => self.v.sim_control(SimCommand::ClearFaults),
            "link" => {
                let device = self.num_arg(stmt, "device", 0)?;
                let port = self.num_arg(stmt, "port", 1)?;
                let up: u8 = self.num_arg(stmt, "up", 1)?;
                self.v.sim_control(SimCommand::Link {
                    device,
                    port,
                    up: up != 0,
                })
            }
            "drop" | "fault" => {
                let action = match stmt
                    .named("action")
                    .unwrap_or("drop")
                    .to_ascii_lowercase()
                    .as_str()
                {
                    "drop" => FaultAction::Drop,
                    "duplicate" => FaultAction::Duplicate,
                    "delay" => FaultAction::DelayNs(self.num_arg(stmt, "ns", 0)?),
                    _ => FaultAction::Reorder(self.num_arg(stmt, "window", 1)?),
                };
                let when = match (stmt.named("next"), stmt.named("rate_ppm")) {
                    (Some(_), Some(_)) => {
                        return Err("give next= or rate_ppm=, not both".to_owned())
                    }
                    (Some(t), None) => FaultWhen::Next(self.num("next", t)?),
                    (None, Some(t)) => FaultWhen::RatePpm(self.num("rate_ppm", t)?),
                    (None, None) if sub == "drop" => FaultWhen::Next(1),
                    (None, None) => return Err("sim fault needs next= or rate_ppm=".to_owned()),
                };
                let from = self.opt(stmt, "from", Self::qp)?;
                let to = self.opt(stmt, "to", Self::qp)?;
                let scope = match (&from, &to) {
                    (Some(_), Some(_)) => return Err("give from= or to=, not both".to_owned()),
                    (Some(q), None) => FaultScope::From(&q.qp),
                    (None, Some(q)) => FaultScope::To(&q.qp),
                    (None, None) => FaultScope::All,
                };
                self.v.sim_control(SimCommand::Fault {
                    scope,
                    action,
                    when,
                })
            }
            other => return Err(format!("unknown sim directive `{other}`")),
        };
        if let Some(reply) = self.expect(stmt, r)? {
            match reply {
                SimReply::TimeNs(t) => self.bind(stmt, Value::Scalar(Scalar::Int(t.into()))),
                SimReply::Text(t) => self.bind(stmt, Value::Scalar(Scalar::Text(t))),
                _ => {}
            }
        }
        Ok(())
    }

    // ---------------------------------------------------------------- rdma_cm

    fn conn_param(&mut self, stmt: &Statement) -> Step<ConnParam> {
        Ok(ConnParam {
            private_data: match stmt.named("private_data") {
                Some(h) => {
                    parse_hex(h).ok_or_else(|| format!("`private_data={h}` is not hex bytes"))?
                }
                None => Vec::new(),
            },
            responder_resources: self.num_arg(stmt, "responder_resources", 1)?,
            initiator_depth: self.num_arg(stmt, "initiator_depth", 1)?,
            flow_control: self.num_arg(stmt, "flow_control", 0)?,
            retry_count: self.num_arg(stmt, "retry_count", 7)?,
            rnr_retry_count: self.num_arg(stmt, "rnr_retry_count", 7)?,
            srq: self.num_arg(stmt, "srq", 0)?,
            qp_num: self.num_arg(stmt, "qp_num", 0)?,
        })
    }

    fn addr_arg(stmt: &Statement, key: &str) -> Step<Option<std::net::SocketAddr>> {
        match stmt.named(key) {
            Some(t) => parse_addr(t)
                .map(Some)
                .ok_or_else(|| format!("`{key}={t}` is not IP:PORT")),
            None => Ok(None),
        }
    }

    fn rdma(&mut self, stmt: &Statement, p0: &str) -> Step {
        match stmt.verb.as_str() {
            "rdma_create_event_channel" => {
                let r = self.v.rdma_create_event_channel();
                if let Some(ch) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::CmChannel(ch));
                }
            }
            "rdma_destroy_event_channel" => {
                let ch = self.cm_channel(p0)?;
                let r = self.v.rdma_destroy_event_channel(&ch);
                self.expect(stmt, r)?;
            }
            "rdma_create_id" => {
                let ch = self.cm_channel(p0)?;
                let ps = match stmt.named("ps") {
                    Some(t) => self.sym("ps", t, PortSpace::from_name, PortSpace::from_raw)?,
                    None => PortSpace::Tcp,
                };
                let context = self.num_arg(stmt, "context", 0)?;
                let r = self.v.rdma_create_id(&ch, context, ps);
                if let Some(id) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::CmId(id));
                }
            }
            "rdma_destroy_id" => {
                let id = self.cm_id(p0)?;
                let r = self.v.rdma_destroy_id(&id);
                self.expect(stmt, r)?;
            }
            "rdma_bind_addr" => {
                let id = self.cm_id(p0)?;
                let addr = Self::addr_arg(stmt, "addr")?.ok_or("rdma_bind_addr needs addr=")?;
                let r = self.v.rdma_bind_addr(&id, addr);
                self.expect(stmt, r)?;
            }
            "rdma_resolve_addr" => {
                let id = self.cm_id(p0)?;
                let dst = Self::addr_arg(stmt, "dst")?.ok_or("rdma_resolve_addr needs dst=")?;
                let src = Self::addr_arg(stmt, "src")?;
                let timeout = self.num_arg(stmt, "timeout_ms", 2000)?;
                let r = self.v.rdma_resolve_addr(&id, src, dst, timeout);
                self.expect(stmt, r)?;
            }
            "rdma_resolve_route" => {
                let id = self.cm_id(p0)?;
                let timeout = self.num_arg(stmt, "timeout_ms", 2000)?;
                let r = self.v.rdma_resolve_route(&id, timeout);
                self.expect(stmt, r)?;
            }
            "rdma_listen" => {
                let id = self.cm_id(p0)?;
                let backlog = self.num_arg(stmt, "backlog", 8)?;
                let r = self.v.rdma_listen(&id, backlog);
                self.expect(stmt, r)?;
            }
            "rdma_connect" | "rdma_accept" => {
                let id = self.cm_id(p0)?;
                let param = self.conn_param(stmt)?;
                let r = if stmt.verb == "rdma_connect" {
                    self.v.rdma_connect(&id, &param)
                } else {
                    self.v.rdma_accept(&id, &param)
                };
                self.expect(stmt, r)?;
            }
            "rdma_reject" => {
                let id = self.cm_id(p0)?;
                let data = match stmt.named("private_data") {
                    Some(h) => parse_hex(h)
                        .ok_or_else(|| format!("`private_data={h}` is not hex bytes"))?,
                    None => Vec::new(),
                };
                let r = self.v.rdma_reject(&id, &data);
                self.expect(stmt, r)?;
            }
            "rdma_disconnect" => {
                let id = self.cm_id(p0)?;
                let r = self.v.rdma_disconnect(&id);
                self.expect(stmt, r)?;
            }
            "rdma_establish" => {
                let id = self.cm_id(p0)?;
                let r = self.v.rdma_establish(&id);
                self.expect(stmt, r)?;
            }
            "rdma_join_multicast" => {
                let id = self.cm_id(p0)?;
                let addr =
                    Self::addr_arg(stmt, "addr")?.ok_or("rdma_join_multicast needs addr=")?;
                let context = self.num_arg(stmt, "context", 0)?;
                // With join_flags= the call is rdma_join_multicast_ex.
                let r = match stmt.named("join_flags") {
                    Some(t) => {
                        let join_flags =
                            self.sym("join_flags", t, McJoinFlag::from_name, McJoinFlag::from_raw)?;
                        let attr = JoinMcAttr { addr, join_flags };
                        self.v.rdma_join_multicast_ex(&id, &attr, context)
                    }
                    None => self.v.rdma_join_multicast(&id, addr, context),
                };
                self.expect(stmt, r)?;
            }
            "rdma_leave_multicast" => {
                let id = self.cm_id(p0)?;
                let addr =
                    Self::addr_arg(stmt, "addr")?.ok_or("rdma_leave_multicast needs addr=")?;
                let r = self.v.rdma_leave_multicast(&id, addr);
                self.expect(stmt, r)?;
            }
            "rdma_get_cm_event" => self.rdma_get_cm_event(stmt, p0)?,
            "rdma_create_qp" | "rdma_create_qp_ex" => {
                let id = self.cm_id(p0)?;
                let ex = stmt.verb == "rdma_create_qp_ex";
                let parts = self.init_parts(stmt, ex)?;
                let pd = self.opt(stmt, "pd", Self::pd)?.map(|(pd, _)| pd);
                let mut attr = parts.attr();
                let r = if ex {
                    self.v.rdma_create_qp_ex(&id, &mut attr)
                } else {
                    self.v.rdma_create_qp(&id, pd.as_ref(), &mut attr)
                };
                let cap = attr.cap;
                if let Some(qp) = self.expect(stmt, r)? {
                    let info = self.v.rdma_id_info(&id).ok();
                    let (ctx, port) = info.map_or((None, None), |i| (i.verbs, Some(i.port_num)));
                    self.bind(
                        stmt,
                        Value::Qp(QpVal {
                            qp,
                            ctx,
                            qp_type: parts.qp_type,
                            dc_type: None,
                            cap,
                            port,
                        }),
                    );
                }
            }
            "rdma_destroy_qp" => {
                let id = self.cm_id(p0)?;
                let r = self.v.rdma_destroy_qp(&id);
                self.expect(stmt, r)?;
            }
            other => {
                return Err(format!(
                    "statement `{other}` is not supported by this runner"
                ))
            }
        }
        Ok(())
    }

    fn rdma_get_cm_event(&mut self, stmt: &Statement, p0: &str) -> Step {
        let ch = self.cm_channel(p0)?;
        let ev = match &stmt.expect {
            Expectation::Error { .. } | Expectation::AnyError { .. } => {
                let r = self.v.rdma_get_cm_event(&ch).map(|_| ());
                self.expect(stmt, r)?;
                return Ok(());
            }
            Expectation::Empty => {
                let r = self.check_empty(|v| v.rdma_get_cm_event(&ch));
                match self.expect(stmt, r)?.flatten() {
                    Some(ev) => {
                        let text = format!("{ev:?}");
                        let _ = self.v.rdma_ack_cm_event(ev);
                        return Err(format!("expected no CM event, got {text}"));
                    }
                    None => return Ok(()),
                }
            }
            _ => {
                let r = self.wait_for(|v| v.rdma_get_cm_event(&ch));
                let Some(got) = self.expect(stmt, r)? else {
                    return Ok(());
                };
                got.ok_or_else(|| {
                    format!("expected a CM event, got none within {}", self.wait_bound())
                })?
            }
        };
        let text = format!("{:?} (status {})", ev.event, ev.status);
        let id = ev.id.clone();
        let listen_id = ev.listen_id.clone();
        let fields = cm_event_record(&ev);
        let ack = self
            .v
            .rdma_ack_cm_event(ev)
            .map_err(|e| format!("rdma_ack_cm_event after {text}: {e}"));
        if let Expectation::Fields(expected) = &stmt.expect {
            let mut plain = Vec::new();
            for (key, want) in expected {
                match key.as_str() {
                    "id" | "listen_id" => {
                        let want_id = self.cm_id(want)?;
                        let got = if key == "id" {
                            Some(&id)
                        } else {
                            listen_id.as_ref()
                        };
                        if got.map(|g| format!("{g:?}")) != Some(format!("{want_id:?}")) {
                            return Err(format!(
                                "expected a CM event with {key}=`{want}`, got {text} on {got:?}"
                            ));
                        }
                    }
                    _ => plain.push((key.clone(), want.clone())),
                }
            }
            self.check_fields(&format!("CM event {text}"), &fields, &plain)?;
        }
        ack?;
        self.bind(
            stmt,
            Value::CmEvent {
                id,
                listen_id,
                fields,
            },
        );
        Ok(())
    }
}

/// `1,2,5..8` style text of a set of work request ids (runs of three or more
/// shortened to `A..B`, B excluded).
fn id_list(ids: &BTreeSet<u64>) -> String {
    let mut parts = Vec::new();
    let mut iter = ids.iter().copied().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == Some(&(end + 1)) {
            end += 1;
            iter.next();
        }
        match end - start {
            0 => parts.push(start.to_string()),
            1 => parts.push(format!("{start},{end}")),
            _ => parts.push(format!("{start}..{}", end + 1)),
        }
    }
    parts.join(",")
}
