//! The extended verbs' statements (issue #13 item 4): `resize_cq`,
//! `rereg_mr`, `query_device_ex`, `query_gid_ex`, `query_gid_table`,
//! `query_ece`, `set_ece`, `alloc_mw`, `dealloc_mw`, `bind_mw`,
//! `query_qp_data_in_order`, the device-memory statements (`alloc_dm`,
//! `free_dm`, `memcpy_to_dm`, `memcpy_from_dm`, `reg_dm_mr`); and `value`,
//! which keeps a value for later comparison.

use super::value::{device_attr_record, enum_sym, flags_sym, Record, Scalar, Value};
use super::{Runner, Step};
use crate::script::{Expectation, Statement};
use verbs_api::*;

const EXT: &[&str] = &[
    "value",
    "resize_cq",
    "rereg_mr",
    "query_device_ex",
    "query_gid_ex",
    "query_gid_table",
    "query_ece",
    "set_ece",
    "alloc_mw",
    "dealloc_mw",
    "bind_mw",
    "alloc_dm",
    "free_dm",
    "memcpy_to_dm",
    "memcpy_from_dm",
    "reg_dm_mr",
    "query_qp_data_in_order",
    "create_cq_ex",
    "poll_cq_ex",
    "post_wr",
];

fn int(v: impl Into<i128>) -> Scalar {
    Scalar::Int(v.into())
}

fn ece_record(e: &Ece) -> Record {
    let mut r = Record::new();
    r.insert("vendor_id".to_owned(), int(e.vendor_id));
    r.insert("options".to_owned(), int(e.options));
    r.insert("comp_mask".to_owned(), int(e.comp_mask));
    r
}

/// A completion of the extended poll: the fields always there, and each
/// optional one the CQ reports.
fn wc_ex_record(w: &WcEx) -> Record {
    let mut r = Record::new();
    r.insert("wr_id".to_owned(), int(w.wr_id));
    r.insert("status".to_owned(), enum_sym!(WcStatus, w.status));
    r.insert("opcode".to_owned(), enum_sym!(WcOpcode, w.opcode));
    r.insert("vendor_err".to_owned(), int(w.vendor_err));
    r.insert("wc_flags".to_owned(), flags_sym!(WcFlags, w.wc_flags));
    let mut opt = |k: &str, v: Option<u64>| {
        if let Some(v) = v {
            r.insert(k.to_owned(), int(v));
        }
    };
    opt("byte_len", w.byte_len.map(u64::from));
    opt("imm_data", w.imm_data.map(u64::from));
    opt("qp_num", w.qp_num.map(u64::from));
    opt("src_qp", w.src_qp.map(u64::from));
    opt("slid", w.slid.map(u64::from));
    opt("sl", w.sl.map(u64::from));
    opt("dlid_path_bits", w.dlid_path_bits.map(u64::from));
    opt("completion_timestamp", w.completion_timestamp);
    r
}

fn wc_ex_text(w: &WcEx) -> String {
    format!("wr_id={} status={}", w.wr_id, w.status)
}

fn gid_record(e: &GidEntry) -> Record {
    let mut r = Record::new();
    r.insert("gid".to_owned(), Scalar::Gid(e.gid));
    r.insert("gid_index".to_owned(), int(e.gid_index));
    r.insert("port_num".to_owned(), int(e.port_num));
    r.insert("gid_type".to_owned(), enum_sym!(GidType, e.gid_type));
    r.insert("ndev_ifindex".to_owned(), int(e.ndev_ifindex));
    r
}

impl<V: Verbs> Runner<'_, V> {
    /// Whether `verb` is one of this module's statements.
    pub(crate) fn is_ext(verb: &str) -> bool {
        EXT.contains(&verb)
    }

    /// Runs one of the extended verbs' statements.
    pub(crate) fn ext(&mut self, stmt: &Statement, p0: &str) -> Step {
        match stmt.verb.as_str() {
            "value" => {
                // The value now (a field read later may have changed).
                let v = self.eval(p0)?;
                self.bind(stmt, Value::Scalar(v));
            }
            "resize_cq" => {
                let cq = self.cq(p0)?;
                let cqe = self.signed_u32_arg(stmt, "cqe", 64)?;
                let r = self.v.resize_cq(&cq, cqe);
                self.expect(stmt, r)?;
            }
            "rereg_mr" => {
                let mr = self.mr(p0)?;
                let flags = match stmt.named("flags") {
                    Some(t) => self.flags("flags", t, ReregMrFlags::from_names)?,
                    None => ReregMrFlags::empty(),
                };
                let pd = self.opt(stmt, "pd", Self::pd)?.map(|(pd, _)| pd);
                let length: usize = self.num_arg(stmt, "length", 0)?;
                let access = match stmt.named("access") {
                    Some(t) => self.flags("access", t, AccessFlags::from_names)?,
                    None => AccessFlags::empty(),
                };
                let args = ReregMr {
                    flags,
                    pd: pd.as_ref(),
                    length,
                    access,
                };
                let r = self.v.rereg_mr(&mr, &args);
                self.expect(stmt, r)?;
            }
            "query_device_ex" => {
                let c = self.ctx(p0)?;
                let r = self.v.query_device_ex(&c);
                if let Some(a) = self.expect(stmt, r)? {
                    let mut rec = device_attr_record(&a.orig_attr);
                    let mut put = |k: &str, v: Scalar| {
                        rec.insert(k.to_owned(), v);
                    };
                    put("odp_general_caps", int(a.odp_caps.general_caps));
                    put(
                        "completion_timestamp_mask",
                        int(a.completion_timestamp_mask),
                    );
                    put("hca_core_clock", int(a.hca_core_clock));
                    put("device_cap_flags_ex", int(a.device_cap_flags_ex));
                    put("max_wq_type_rq", int(a.max_wq_type_rq));
                    put("raw_packet_caps", int(a.raw_packet_caps));
                    put("tm_max_num_tags", int(a.tm_caps.max_num_tags));
                    put("max_cq_count", int(a.cq_mod_caps.max_cq_count));
                    put("max_cq_period", int(a.cq_mod_caps.max_cq_period));
                    put("max_dm_size", int(a.max_dm_size));
                    put("pci_atomic_fetch_add", int(a.pci_atomic_caps.fetch_add));
                    put("xrc_odp_caps", int(a.xrc_odp_caps));
                    put("phys_port_cnt_ex", int(a.phys_port_cnt_ex));
                    self.bind(stmt, Value::Record(rec));
                }
            }
            "query_gid_ex" => {
                let c = self.ctx(p0)?;
                let port: u32 = self.num_arg(stmt, "port_num", 1)?;
                let index: u32 = self.num_arg(stmt, "gid_index", 0)?;
                let flags: u32 = self.num_arg(stmt, "flags", 0)?;
                let r = self.v.query_gid_ex(&c, port, index, flags);
                if let Some(e) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Record(gid_record(&e)));
                }
            }
            "query_gid_table" => {
                let c = self.ctx(p0)?;
                let max: usize = self.num_arg(stmt, "max_entries", 64)?;
                let flags: u32 = self.num_arg(stmt, "flags", 0)?;
                let r = self.v.query_gid_table(&c, max, flags);
                if let Some(t) = self.expect(stmt, r)? {
                    let mut rec = Record::new();
                    rec.insert("num_entries".to_owned(), int(t.len() as u64));
                    self.bind(stmt, Value::Record(rec));
                }
            }
            "query_ece" => {
                let q = self.qp_handle(p0)?;
                let r = self.v.query_ece(&q);
                if let Some(e) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Record(ece_record(&e)));
                }
            }
            "set_ece" => {
                let q = self.qp_handle(p0)?;
                let mut e = Ece {
                    vendor_id: self.num_arg(stmt, "vendor_id", 0)?,
                    options: self.num_arg(stmt, "options", 0)?,
                    comp_mask: self.num_arg(stmt, "comp_mask", 0)?,
                };
                let r = self.v.set_ece(&q, &mut e);
                if self.expect(stmt, r)?.is_some() {
                    self.bind(stmt, Value::Record(ece_record(&e)));
                }
            }
            "alloc_mw" => {
                let (pd, _) = self.pd(p0)?;
                let t: u32 = self.num_arg(stmt, "type", 1)?;
                let mw_type = MwType::from_raw(t);
                let r = self.v.alloc_mw(&pd, mw_type);
                if let Some(m) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Mw(m));
                }
            }
            "dealloc_mw" => {
                let mw = self.mw(p0)?;
                let r = self.v.dealloc_mw(&mw);
                self.expect(stmt, r)?;
            }
            "alloc_dm" => {
                let c = self.ctx(p0)?;
                let attr = AllocDmAttr {
                    length: self.num_arg(stmt, "length", 4096)?,
                    log_align_req: self.num_arg(stmt, "log_align_req", 0)?,
                    comp_mask: self.num_arg(stmt, "comp_mask", 0)?,
                };
                let r = self.v.alloc_dm(&c, &attr);
                if let Some(d) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Dm(d));
                }
            }
            "free_dm" => {
                let dm = self.dm(p0)?;
                let r = self.v.free_dm(&dm);
                self.expect(stmt, r)?;
            }
            "memcpy_to_dm" => {
                let dm = self.dm(p0)?;
                let offset: u64 = self.num_arg(stmt, "offset", 0)?;
                let length: usize = self.num_arg(stmt, "length", 0)?;
                let byte: u8 = self.num_arg(stmt, "byte", 0)?;
                let r = self.v.memcpy_to_dm(&dm, offset, &vec![byte; length]);
                self.expect(stmt, r)?;
            }
            "memcpy_from_dm" => {
                let dm = self.dm(p0)?;
                let offset: u64 = self.num_arg(stmt, "offset", 0)?;
                let length: usize = self.num_arg(stmt, "length", 0)?;
                let byte: u8 = self.num_arg(stmt, "byte", 0)?;
                let mut got = vec![!byte; length];
                let r = self.v.memcpy_from_dm(&dm, offset, &mut got);
                if self.expect(stmt, r)?.is_some() {
                    if let Some(i) = got.iter().position(|&b| b != byte) {
                        return Err(format!(
                            "byte {} of `{p0}` is {:#04x}, expected {byte:#04x}",
                            offset + i as u64,
                            got[i]
                        ));
                    }
                }
            }
            "reg_dm_mr" => {
                let (pd, _) = self.pd(p0)?;
                let word = stmt
                    .positional()
                    .nth(1)
                    .ok_or("reg_dm_mr needs a PD and device memory")?
                    .to_owned();
                let dm = self.dm(&word)?;
                let offset: u64 = self.num_arg(stmt, "offset", 0)?;
                let length: usize = self.num_arg(stmt, "length", 0)?;
                let access = match stmt.named("access") {
                    Some(t) => self.flags("access", t, AccessFlags::from_names)?,
                    None => AccessFlags::ZERO_BASED | AccessFlags::LOCAL_WRITE,
                };
                let r = self.v.reg_dm_mr(&pd, &dm, offset, length, access);
                if let Some(m) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Mr(m));
                }
            }
            "bind_mw" => {
                let q = self.qp_handle(p0)?;
                let word = stmt
                    .positional()
                    .nth(1)
                    .ok_or("bind_mw needs a QP and a window")?
                    .to_owned();
                let mw = self.mw(&word)?;
                let mr = self.opt(stmt, "mr", Self::mr)?;
                let send_flags = match stmt.named("send_flags") {
                    Some(t) => self.flags("send_flags", t, SendFlags::from_names)?,
                    None => SendFlags::empty(),
                };
                let mw_access_flags = match stmt.named("mw_access_flags") {
                    Some(t) => self.flags("mw_access_flags", t, AccessFlags::from_names)?,
                    None => AccessFlags::empty(),
                };
                let bind = MwBind {
                    wr_id: self.num_arg(stmt, "wr_id", 0)?,
                    send_flags,
                    bind_info: MwBindInfo {
                        mr: mr.as_ref(),
                        addr: self.num_arg(stmt, "addr", 0)?,
                        length: self.num_arg(stmt, "length", 0)?,
                        mw_access_flags,
                    },
                };
                let r = self.v.bind_mw(&q, &mw, &bind);
                self.expect(stmt, r)?;
            }
            "query_qp_data_in_order" => {
                let q = self.qp_handle(p0)?;
                let op = match stmt.named("opcode") {
                    Some(t) => {
                        WrOpcode::from_name(t).ok_or_else(|| format!("unknown opcode `{t}`"))?
                    }
                    None => WrOpcode::RdmaWrite,
                };
                let flags = match stmt.named("flags") {
                    Some(t) => self.flags("flags", t, DataInOrderFlags::from_names)?,
                    None => DataInOrderFlags::empty(),
                };
                let r = self.v.query_qp_data_in_order(&q, op, flags);
                if let Some(c) = self.expect(stmt, r)? {
                    let mut rec = Record::new();
                    rec.insert("caps".to_owned(), flags_sym!(DataInOrderCaps, c));
                    rec.insert("value".to_owned(), int(c.bits()));
                    self.bind(stmt, Value::Record(rec));
                }
            }
            "create_cq_ex" => {
                let c = self.ctx(p0)?;
                let channel = self.opt(stmt, "channel", Self::channel)?;
                let wc_flags = match stmt.named("wc_flags") {
                    Some(t) => self.flags("wc_flags", t, WcExFlags::from_names)?,
                    None => WcExFlags::empty(),
                };
                let attr = CqInitAttrEx {
                    cqe: self.signed_u32_arg(stmt, "cqe", 64)?,
                    cq_context: self.num_arg(stmt, "cq_context", 0)?,
                    channel: channel.as_ref(),
                    comp_vector: self.signed_u32_arg(stmt, "comp_vector", 0)?,
                    wc_flags,
                    comp_mask: CqInitAttrMask(self.num_arg(stmt, "comp_mask", 0)?),
                    flags: CreateCqAttrFlags(self.num_arg(stmt, "flags", 0)?),
                };
                let r = self.v.create_cq_ex(&c, &attr);
                if let Some(cq) = self.expect(stmt, r)? {
                    self.bind(stmt, Value::Cq(cq));
                }
            }
            "poll_cq_ex" => self.poll_cq_ex(stmt, p0)?,
            "post_wr" => self.post_wr(stmt, p0)?,
            other => return Err(format!("statement `{other}` is not an extended verb")),
        }
        Ok(())
    }

    /// `ibv_start_poll` … `ibv_end_poll` for one completion, checked as
    /// `poll_cq` checks (`-> empty`, `-> FIELD=VALUE…`, an errno).
    fn poll_cq_ex(&mut self, stmt: &Statement, p0: &str) -> Step {
        let cq = self.cq(p0)?;
        let poll = |v: &mut V| {
            let mut wc = [WcEx::default()];
            v.poll_cq_ex(&cq, &mut wc).map(|n| (n > 0).then_some(wc[0]))
        };
        match &stmt.expect {
            Expectation::Error { .. } | Expectation::AnyError { .. } => {
                let r = poll(self.v).map(|_| ());
                self.expect(stmt, r)?;
            }
            Expectation::Empty => {
                let r = self.check_empty(poll);
                if let Some(Some(wc)) = self.expect(stmt, r)? {
                    return Err(format!("expected no completion, got {}", wc_ex_text(&wc)));
                }
            }
            Expectation::AnyOrder { .. } => {
                return Err("poll_cq_ex takes no `-> any` expectation (use poll_cq)".to_owned())
            }
            _ => {
                let r = self.wait_for(poll);
                let Some(got) = self.expect(stmt, r)? else {
                    return Ok(());
                };
                let Some(wc) = got else {
                    return Err(format!(
                        "expected a completion, got none within {}",
                        self.wait_bound()
                    ));
                };
                let rec = wc_ex_record(&wc);
                if let Expectation::Fields(fields) = &stmt.expect {
                    self.check_fields(&format!("completion {}", wc_ex_text(&wc)), &rec, fields)?;
                }
                self.bind(stmt, Value::Record(rec));
            }
        }
        Ok(())
    }

    /// The `ibv_wr_*` batch: one request per `;`-separated group, with the
    /// keys of `post_send` (the opcode picks the builder; `INLINE` in
    /// `send_flags` makes the SGEs `ibv_wr_set_inline_data_list`).
    // `post_wr` is an `unsafe fn` (the hardware contract), kept as below.
    #[allow(unsafe_code)]
    fn post_wr(&mut self, stmt: &Statement, p0: &str) -> Step {
        let q = self.qp(p0)?;
        let mut parts = Vec::new();
        for group in Self::wr_groups(stmt) {
            parts.push(self.send_parts(&group)?);
        }
        let mut batch: Vec<WrEx<'_, V>> = Vec::with_capacity(parts.len());
        for p in &parts {
            let (r, a) = (p.rdma, p.atomic);
            let op = match p.opcode {
                WrOpcode::Send => WrOp::Send,
                WrOpcode::SendWithImm => WrOp::SendImm {
                    imm_data: p.imm_data,
                },
                WrOpcode::SendWithInv => WrOp::SendInv {
                    invalidate_rkey: p.imm_data,
                },
                WrOpcode::RdmaWrite => WrOp::RdmaWrite {
                    rkey: r.rkey,
                    remote_addr: r.remote_addr,
                },
                WrOpcode::RdmaWriteWithImm => WrOp::RdmaWriteImm {
                    rkey: r.rkey,
                    remote_addr: r.remote_addr,
                    imm_data: p.imm_data,
                },
                WrOpcode::RdmaRead => WrOp::RdmaRead {
                    rkey: r.rkey,
                    remote_addr: r.remote_addr,
                },
                WrOpcode::AtomicCmpAndSwp => WrOp::AtomicCmpSwp {
                    rkey: a.rkey,
                    remote_addr: a.remote_addr,
                    compare: a.compare_add,
                    swap: a.swap,
                },
                WrOpcode::AtomicFetchAndAdd => WrOp::AtomicFetchAdd {
                    rkey: a.rkey,
                    remote_addr: a.remote_addr,
                    add: a.compare_add,
                },
                WrOpcode::LocalInv => WrOp::LocalInv {
                    invalidate_rkey: p.imm_data,
                },
                other => {
                    return Err(format!(
                        "post_wr has no builder for opcode {other} in scripts (BIND_MW: use bind_mw for type 1 windows)"
                    ))
                }
            };
            let inline = p.send_flags.contains(SendFlags::INLINE);
            batch.push(WrEx {
                wr_id: p.wr_id,
                wr_flags: p.send_flags - SendFlags::INLINE,
                op,
                data: match (inline, p.sges.is_empty()) {
                    (_, true) => WrData::None,
                    (true, false) => WrData::InlineList(&p.sges),
                    (false, false) => WrData::SgeList(&p.sges),
                },
                ud: p.ud.as_ref().map(|(ah, remote_qpn, remote_qkey)| UdInfo {
                    ah,
                    remote_qpn: *remote_qpn,
                    remote_qkey: *remote_qkey,
                }),
                xrc_srqn: (q.qp_type == QpType::XrcSend).then_some(p.remote_srqn),
                raw_wqe: false,
            });
        }
        // SAFETY: as for `post_send` (statements.rs): the SGEs name bytes
        // of MRs the backend owns, which the runner frees or writes only
        // when the script says so (the misuse the simulator reports).
        let r = unsafe { self.v.post_wr(&q.qp, &batch) };
        self.expect(stmt, r)?;
        Ok(())
    }

    fn mw(&mut self, word: &str) -> Step<V::Mw> {
        match self.lookup(word)? {
            Value::Mw(m) => Ok(m),
            other => Err(format!(
                "`{word}` is {}, expected a memory window (alloc_mw)",
                other.kind_name()
            )),
        }
    }

    fn dm(&mut self, word: &str) -> Step<V::Dm> {
        match self.lookup(word)? {
            Value::Dm(d) => Ok(d),
            other => Err(format!(
                "`{word}` is {}, expected device memory (alloc_dm)",
                other.kind_name()
            )),
        }
    }

    fn qp_handle(&mut self, word: &str) -> Step<V::Qp> {
        Ok(self.qp(word)?.qp)
    }
}
