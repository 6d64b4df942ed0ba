//! Helpers shared by the property tests: building a [`DeviceModel`] from what
//! a backend reports, a per-case environment (context, PD, CQ, port, GID),
//! value generators, comparing a backend result with the model, and printing
//! what a case did as a `.verbs` script (docs/script-format.md) so a shrunk
//! failure can be replayed with `verbsim run`.
//!
//! Everything that touches a backend is generic over `V: Verbs`; only
//! [`sim_facts`] knows the simulator.

#![allow(dead_code)] // each test binary uses a different subset

use backend_sim::{DeviceProfile, DriverModel};
use conformance::model::{DeviceModel, DriverLimits};
use std::fmt::Write as _;
use verbs_api::*;

/// Driver facts the Verbs trait does not report (which transition table,
/// which create flags, provider queue limits): configuration of the device
/// under test, not behaviour.
#[derive(Clone, Debug)]
pub(crate) struct DriverFacts {
    /// Profile name (`cx6`, `cx7`, `rxe`).
    pub(crate) name: String,
    /// Transition table flavor.
    pub(crate) flavor: TableFlavor,
    /// Supported create flags.
    pub(crate) create_flags: QpCreateFlags,
    /// Provider limits.
    pub(crate) driver: DriverLimits,
}

/// The facts of a simulator profile.
pub(crate) fn sim_facts(p: &DeviceProfile) -> DriverFacts {
    let driver = match (p.driver, p.mlx5) {
        (DriverModel::Mlx5, Some(m)) => DriverLimits::Mlx5 {
            max_sq_desc_sz: m.max_sq_desc_sz,
            max_rq_desc_sz: m.max_rq_desc_sz,
            max_send_wqebb: m.max_send_wqebb,
        },
        _ => DriverLimits::Rxe {
            max_inline_data: p.max_inline_data,
        },
    };
    DriverFacts {
        name: p.name.clone(),
        flavor: p.table_flavor,
        create_flags: p.create_flags,
        driver,
    }
}

/// The profiles the property tests draw from.
pub(crate) const PROFILES: &[&str] = &["cx6", "cx7", "rxe"];

/// A simulator profile by name (panics on a typo: a test bug).
pub(crate) fn profile(name: &str) -> DeviceProfile {
    DeviceProfile::by_name(name).unwrap_or_else(|| panic!("no simulator profile {name}"))
}

/// One opened device with the objects every case needs.
pub(crate) struct Env<V: Verbs> {
    /// Index in the device list.
    pub(crate) index: usize,
    /// The context.
    pub(crate) ctx: V::Context,
    /// A PD.
    pub(crate) pd: V::Pd,
    /// A CQ used as send and receive CQ.
    pub(crate) cq: V::Cq,
    /// Port 1.
    pub(crate) port: PortAttr,
    /// GID 0 of port 1.
    pub(crate) gid: Gid,
    /// The model of the device.
    pub(crate) model: DeviceModel,
}

/// Opens device `index` and creates a PD and a CQ; the model combines the
/// queried values with `facts`.
pub(crate) fn open_env<V: Verbs>(
    v: &mut V,
    index: usize,
    facts: &DriverFacts,
) -> Result<Env<V>, String> {
    let ctx = v
        .open_device(index, ProcessId(0))
        .map_err(|e| format!("open_device {index}: {e}"))?;
    let dev = v
        .query_device(&ctx)
        .map_err(|e| format!("query_device: {e}"))?;
    let port = v
        .query_port(&ctx, 1)
        .map_err(|e| format!("query_port: {e}"))?;
    let gid = v
        .query_gid(&ctx, 1, 0)
        .map_err(|e| format!("query_gid: {e}"))?;
    let pd = v.alloc_pd(&ctx).map_err(|e| format!("alloc_pd: {e}"))?;
    let cq = v
        .create_cq(
            &ctx,
            &CqInit {
                cqe: 64,
                ..CqInit::default()
            },
        )
        .map_err(|e| format!("create_cq: {e}"))?;
    let model = DeviceModel {
        name: facts.name.clone(),
        flavor: facts.flavor,
        phys_port_cnt: dev.phys_port_cnt,
        max_qp_wr: dev.max_qp_wr,
        max_sge: dev.max_sge,
        max_qp_rd_atom: dev.max_qp_rd_atom,
        max_qp_init_rd_atom: dev.max_qp_init_rd_atom,
        pkey_tbl_len: port.pkey_tbl_len,
        gid_tbl_len: u32::try_from(port.gid_tbl_len).unwrap_or(0),
        active_mtu: port.active_mtu,
        max_mtu: port.max_mtu,
        grh_required: DeviceModel::grh_required_from(port.link_layer, port.flags),
        create_flags: facts.create_flags,
        driver: facts.driver,
    };
    Ok(Env {
        index,
        ctx,
        pd,
        cq,
        port,
        gid,
        model,
    })
}

/// Destroys the CQ and the PD and closes the device: all must succeed.
pub(crate) fn close_env<V: Verbs>(v: &mut V, env: &Env<V>) -> Result<(), String> {
    v.destroy_cq(&env.cq)
        .map_err(|e| format!("teardown destroy_cq on d{}: {e}", env.index))?;
    v.dealloc_pd(&env.pd)
        .map_err(|e| format!("teardown dealloc_pd on d{}: {e}", env.index))?;
    v.close_device(&env.ctx)
        .map_err(|e| format!("teardown close_device d{}: {e}", env.index))
}

/// The errno class of a backend result; "not implemented" is never a match
/// (script-format.md), so it is reported as an error message.
pub(crate) fn errno_of<T>(r: &Result<T>) -> Result<Result<(), i32>, String> {
    match r {
        Ok(_) => Ok(Ok(())),
        Err(e) if e.is_not_implemented() => Err(format!("not implemented: {e}")),
        Err(e) => Ok(Err(ErrorKind::from_errno(e.kind().errno()).errno())),
    }
}

/// `EINVAL`, `ok`, … for messages.
pub(crate) fn show(r: Result<(), i32>) -> String {
    match r {
        Ok(()) => "success".to_owned(),
        Err(e) => errno::name(e).map_or_else(|| format!("errno {e}"), str::to_owned),
    }
}

/// The ` -> ERRNO` suffix of a script line (empty for success).
pub(crate) fn expect_suffix(r: Result<(), i32>) -> String {
    match r {
        Ok(()) => String::new(),
        Err(e) => format!(" -> {}", errno::name(e).unwrap_or("EINVAL")),
    }
}

/// An RC/UC/UD creation request with small caps.
pub(crate) fn small_cap() -> QpCap {
    QpCap {
        max_send_wr: 4,
        max_recv_wr: 4,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    }
}

/// Creates a QP of `qp_type` on `env` with `cap` through `ibv_create_qp`.
pub(crate) fn create_qp<V: Verbs>(
    v: &mut V,
    env: &Env<V>,
    qp_type: QpType,
    cap: QpCap,
) -> Result<V::Qp> {
    let mut attr = QpInitAttrEx::<V> {
        qp_type,
        send_cq: Some(&env.cq),
        recv_cq: Some(&env.cq),
        cap,
        ..QpInitAttrEx::default()
    };
    v.create_qp(&env.pd, &mut attr)
}

// ---------------------------------------------------------------------------
// Script printing

thread_local! {
    /// The script of the case running on this thread, as far as it got: what
    /// [`catch_panics`] prints when the backend panics mid-case.
    static LAST_SCRIPT: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// Runs a case; a panic (in the backend or the runner) becomes a failure that
/// shows the script up to the verb that panicked.
pub(crate) fn catch_panics(case: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(case)) {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "(no message)".to_owned());
            let script = LAST_SCRIPT.with(|l| l.borrow().clone());
            Err(format!("the backend panicked: {msg}\n--- as a script (the last line panicked) ---\n{script}"))
        }
    }
}

/// A `.verbs` script being written: headers and statement lines.
#[derive(Clone, Debug, Default)]
pub(crate) struct ScriptText {
    /// `#!` header lines.
    pub(crate) headers: Vec<String>,
    /// Statement lines (and `#` comments).
    pub(crate) lines: Vec<String>,
}

impl ScriptText {
    /// A script with a description, the device profiles and the seed.
    pub(crate) fn new(description: &str, devices: &[&str], seed: u64) -> Self {
        let script = Self {
            headers: vec![
                format!("#! description: {description}"),
                "#! backends: sim".to_owned(),
                format!("#! seed: {seed}"),
                format!("#! devices: {}", devices.join(" ")),
            ],
            lines: Vec::new(),
        };
        LAST_SCRIPT.with(|l| *l.borrow_mut() = script.text());
        script
    }

    /// Appends a line (also to the copy [`catch_panics`] prints).
    pub(crate) fn push(&mut self, line: impl Into<String>) {
        let line = line.into();
        LAST_SCRIPT.with(|l| {
            let mut l = l.borrow_mut();
            l.push_str(&line);
            l.push('\n');
        });
        self.lines.push(line);
    }

    /// Replaces the last line (the copy [`catch_panics`] prints keeps the first version).
    pub(crate) fn replace_last(&mut self, line: impl Into<String>) {
        if let Some(last) = self.lines.last_mut() {
            *last = line.into();
        }
    }

    /// The setup of [`open_env`] for device `i` (`d{i}`, `pd{i}`, `cq{i}`, `port{i}`, `gid{i}`).
    pub(crate) fn env(&mut self, i: usize) {
        self.push(format!("let d{i} = open_device index={i}"));
        self.push(format!("let port{i} = query_port d{i} port_num=1"));
        self.push(format!("let gid{i} = query_gid d{i} port_num=1 index=0"));
        self.push(format!("let pd{i} = alloc_pd d{i}"));
        self.push(format!("let cq{i} = create_cq d{i} cqe=64"));
    }

    /// The whole text.
    pub(crate) fn text(&self) -> String {
        let mut out = String::new();
        for h in &self.headers {
            let _ = writeln!(out, "{h}");
        }
        out.push('\n');
        for l in &self.lines {
            let _ = writeln!(out, "{l}");
        }
        out
    }
}

/// A state as the script format writes it (a number for values without a name).
pub(crate) fn state_text(s: QpState) -> String {
    match s {
        QpState::Unknown(n) => n.to_string(),
        other => other.name().to_owned(),
    }
}

/// An MTU as the script format writes it.
pub(crate) fn mtu_text(m: Mtu) -> String {
    match m {
        Mtu::Unknown(n) => n.to_string(),
        other => other.name().to_owned(),
    }
}

fn ah_fields(out: &mut String, prefix: &str, ah: &AhAttr, env: Option<usize>, gid: &Gid, lid: u16) {
    let dgid = match env {
        Some(i) if ah.grh.dgid == *gid => format!("gid{i}"),
        _ => ah.grh.dgid.to_string(),
    };
    let dlid = match env {
        Some(i) if ah.dlid == lid => format!("port{i}.lid"),
        _ => ah.dlid.to_string(),
    };
    let _ = write!(
        out,
        " {prefix}.is_global={} {prefix}.grh.dgid={dgid} {prefix}.grh.sgid_index={} {prefix}.grh.hop_limit={} {prefix}.dlid={dlid} {prefix}.sl={} {prefix}.port_num={}",
        u8::from(ah.is_global),
        ah.grh.sgid_index,
        ah.grh.hop_limit,
        ah.sl,
        ah.port_num
    );
}

/// `modify_qp QP field=value… attr_mask=0x…` for exactly the fields of `mask`,
/// with the mask written out so the line means the same whatever fields it names.
pub(crate) fn modify_line(
    qp: &str,
    attr: &QpAttr,
    mask: QpAttrMask,
    env: usize,
    gid: &Gid,
    lid: u16,
) -> String {
    use QpAttrMask as M;
    let mut out = format!("modify_qp {qp}");
    let has = |b: QpAttrMask| mask.contains(b);
    if has(M::STATE) {
        let _ = write!(out, " qp_state={}", state_text(attr.qp_state));
    }
    if has(M::CUR_STATE) {
        let _ = write!(out, " cur_qp_state={}", state_text(attr.cur_qp_state));
    }
    if has(M::EN_SQD_ASYNC_NOTIFY) {
        let _ = write!(out, " en_sqd_async_notify={}", attr.en_sqd_async_notify);
    }
    if has(M::ACCESS_FLAGS) {
        let _ = write!(out, " qp_access_flags={}", attr.qp_access_flags.names());
    }
    if has(M::PKEY_INDEX) {
        let _ = write!(out, " pkey_index={}", attr.pkey_index);
    }
    if has(M::PORT) {
        let _ = write!(out, " port_num={}", attr.port_num);
    }
    if has(M::QKEY) {
        let _ = write!(out, " qkey={:#x}", attr.qkey);
    }
    if has(M::AV) {
        ah_fields(&mut out, "ah_attr", &attr.ah_attr, Some(env), gid, lid);
    }
    if has(M::PATH_MTU) {
        let _ = write!(out, " path_mtu={}", mtu_text(attr.path_mtu));
    }
    if has(M::TIMEOUT) {
        let _ = write!(out, " timeout={}", attr.timeout);
    }
    if has(M::RETRY_CNT) {
        let _ = write!(out, " retry_cnt={}", attr.retry_cnt);
    }
    if has(M::RNR_RETRY) {
        let _ = write!(out, " rnr_retry={}", attr.rnr_retry);
    }
    if has(M::RQ_PSN) {
        let _ = write!(out, " rq_psn={:#x}", attr.rq_psn);
    }
    if has(M::MAX_QP_RD_ATOMIC) {
        let _ = write!(out, " max_rd_atomic={}", attr.max_rd_atomic);
    }
    if has(M::ALT_PATH) {
        ah_fields(
            &mut out,
            "alt_ah_attr",
            &attr.alt_ah_attr,
            Some(env),
            gid,
            lid,
        );
        let _ = write!(
            out,
            " alt_pkey_index={} alt_port_num={} alt_timeout={}",
            attr.alt_pkey_index, attr.alt_port_num, attr.alt_timeout
        );
    }
    if has(M::MIN_RNR_TIMER) {
        let _ = write!(out, " min_rnr_timer={}", attr.min_rnr_timer);
    }
    if has(M::SQ_PSN) {
        let _ = write!(out, " sq_psn={:#x}", attr.sq_psn);
    }
    if has(M::MAX_DEST_RD_ATOMIC) {
        let _ = write!(out, " max_dest_rd_atomic={}", attr.max_dest_rd_atomic);
    }
    if has(M::PATH_MIG_STATE) {
        let _ = write!(out, " path_mig_state={}", attr.path_mig_state.name());
    }
    if has(M::CAP) {
        let c = &attr.cap;
        let _ = write!(
            out,
            " cap.max_send_wr={} cap.max_recv_wr={} cap.max_send_sge={} cap.max_recv_sge={} cap.max_inline_data={}",
            c.max_send_wr, c.max_recv_wr, c.max_send_sge, c.max_recv_sge, c.max_inline_data
        );
    }
    if has(M::DEST_QPN) {
        let _ = write!(out, " dest_qp_num={:#x}", attr.dest_qp_num);
    }
    if has(M::RATE_LIMIT) {
        let _ = write!(out, " rate_limit={}", attr.rate_limit);
    }
    let _ = write!(out, " attr_mask={:#x}", mask.bits());
    out
}

/// `create_qp PD qp_type=… send_cq=… recv_cq=… caps…` (legacy verb).
pub(crate) fn create_line(name: &str, env: usize, qp_type: QpType, cap: &QpCap) -> String {
    format!(
        "let {name} = create_qp pd{env} qp_type={} send_cq=cq{env} recv_cq=cq{env} max_send_wr={} max_recv_wr={} max_send_sge={} max_recv_sge={} max_inline_data={}",
        qp_type_text(qp_type),
        cap.max_send_wr,
        cap.max_recv_wr,
        cap.max_send_sge,
        cap.max_recv_sge,
        cap.max_inline_data
    )
}

/// A QP type as the script format writes it.
pub(crate) fn qp_type_text(t: QpType) -> String {
    match t {
        QpType::Unknown(n) => n.to_string(),
        other => other.name().to_owned(),
    }
}

/// The proptest configuration of a property: `cases` cases with a fixed RNG
/// seed (so CI runs are reproducible), unless `PROPTEST_CASES` /
/// `PROPTEST_RNG_SEED` say otherwise; no regression files are written (a
/// failure prints its script instead).
pub(crate) fn config(cases: u32) -> proptest::test_runner::Config {
    use proptest::test_runner::{Config, RngSeed};
    let base = Config::default();
    Config {
        cases: if std::env::var_os("PROPTEST_CASES").is_some() {
            base.cases
        } else {
            cases
        },
        rng_seed: if std::env::var_os("PROPTEST_RNG_SEED").is_some() {
            base.rng_seed
        } else {
            RngSeed::Fixed(0x5eed)
        },
        failure_persistence: None,
        ..base
    }
}

/// A failure message followed by the case as a script.
pub(crate) fn failure(script: &ScriptText, msg: String) -> String {
    format!("{msg}\n--- as a script ---\n{}", script.text())
}

/// [`failure`] for step `step` of a sequence.
pub(crate) fn step_failure(script: &ScriptText, step: usize, msg: String) -> String {
    failure(script, format!("step {step}: {msg}"))
}

pub(crate) mod datapath;
