//! Script printing for data-path property tests: the `.verbs` lines for
//! memory registration and contents, posting, fault rules and polling
//! (docs/script-format.md, "Data path" and "Memory, checks and the
//! simulator"), so a shrunk data-path failure replays with `verbsim run`.

#![allow(dead_code)] // each test binary uses a different subset

use conformance::literal::to_hex;
use std::fmt::Write as _;
use verbs_api::*;

/// `let NAME = reg_mr PD length=N access=FLAGS`.
pub(crate) fn reg_mr_line(name: &str, pd: &str, length: usize, access: AccessFlags) -> String {
    format!(
        "let {name} = reg_mr {pd} length={length} access={}",
        access.names()
    )
}

/// `write MR offset=N hex=…` (nothing for no bytes: the format needs at least one).
pub(crate) fn write_hex_line(mr: &str, offset: u64, bytes: &[u8]) -> Option<String> {
    (!bytes.is_empty()).then(|| format!("write {mr} offset={offset} hex={}", to_hex(bytes)))
}

/// `write MR offset=N u64=V` (a little-endian u64).
pub(crate) fn write_u64_line(mr: &str, offset: u64, value: u64) -> String {
    format!("write {mr} offset={offset} u64={value:#x}")
}

/// `check MR offset=N hex=…` (nothing for no bytes).
pub(crate) fn check_hex_line(mr: &str, offset: u64, bytes: &[u8]) -> Option<String> {
    (!bytes.is_empty()).then(|| format!("check {mr} offset={offset} hex={}", to_hex(bytes)))
}

/// `check MR offset=N u64=V`.
pub(crate) fn check_u64_line(mr: &str, offset: u64, value: u64) -> String {
    format!("check {mr} offset={offset} u64={value:#x}")
}

/// `sim fault action=… rate_ppm=N|next=N [ns=N] [window=N]` for a rule on every packet.
pub(crate) fn fault_line(action: FaultAction, when: FaultWhen) -> String {
    let mut out = String::from("sim fault");
    match action {
        FaultAction::Drop => out.push_str(" action=drop"),
        FaultAction::Duplicate => out.push_str(" action=duplicate"),
        FaultAction::DelayNs(ns) => {
            let _ = write!(out, " action=delay ns={ns}");
        }
        FaultAction::Reorder(window) => {
            let _ = write!(out, " action=reorder window={window}");
        }
        other => {
            let _ = write!(out, " action={other:?}");
        }
    }
    match when {
        FaultWhen::Next(n) => {
            let _ = write!(out, " next={n}");
        }
        FaultWhen::RatePpm(ppm) => {
            let _ = write!(out, " rate_ppm={ppm}");
        }
        other => {
            let _ = write!(out, " {other:?}");
        }
    }
    out
}

/// One send work request as the script writes it (the `post_send` fields).
#[derive(Clone, Debug, Default)]
pub(crate) struct SendWrText {
    /// `wr_id`.
    pub(crate) wr_id: u64,
    /// `opcode`.
    pub(crate) opcode: WrOpcode,
    /// `send_flags`.
    pub(crate) send_flags: SendFlags,
    /// `imm_data` (printed when non-zero).
    pub(crate) imm_data: u32,
    /// `sge=MR:OFFSET:LENGTH` entries.
    pub(crate) sges: Vec<(String, u64, u32)>,
    /// `remote=MR:OFFSET`.
    pub(crate) remote: Option<(String, u64)>,
    /// `compare_add=` and `swap=` (atomics).
    pub(crate) atomic: Option<(u64, u64)>,
}

impl SendWrText {
    fn text(&self) -> String {
        let mut out = format!("wr_id={} opcode={}", self.wr_id, self.opcode.name());
        if !self.send_flags.is_empty() {
            let _ = write!(out, " send_flags={}", self.send_flags.names());
        }
        if self.imm_data != 0 {
            let _ = write!(out, " imm_data={:#x}", self.imm_data);
        }
        for (mr, off, len) in &self.sges {
            let _ = write!(out, " sge={mr}:{off}:{len}");
        }
        if let Some((mr, off)) = &self.remote {
            let _ = write!(out, " remote={mr}:{off}");
        }
        if let Some((compare_add, swap)) = self.atomic {
            let _ = write!(out, " compare_add={compare_add:#x} swap={swap:#x}");
        }
        out
    }
}

/// `post_send QP wr… ; wr…`.
pub(crate) fn post_send_line(qp: &str, wrs: &[SendWrText]) -> String {
    let parts: Vec<String> = wrs.iter().map(SendWrText::text).collect();
    format!("post_send {qp} {}", parts.join(" ; "))
}

/// `post_recv QP wr_id=N sge=MR:OFFSET:LENGTH ; …`.
pub(crate) fn post_recv_line(qp: &str, wrs: &[(u64, String, u64, u32)]) -> String {
    let parts: Vec<String> = wrs
        .iter()
        .map(|(wr_id, mr, off, len)| format!("wr_id={wr_id} sge={mr}:{off}:{len}"))
        .collect();
    format!("post_recv {qp} {}", parts.join(" ; "))
}

/// `poll_cq CQ -> field=value…` (or `-> empty` for no fields).
pub(crate) fn poll_line(cq: &str, fields: &[(&str, String)]) -> String {
    if fields.is_empty() {
        return format!("poll_cq {cq} -> empty");
    }
    let mut out = format!("poll_cq {cq} ->");
    for (k, v) in fields {
        let _ = write!(out, " {k}={v}");
    }
    out
}

/// A completion as text for messages (`wr_id=3 status=SUCCESS opcode=RECV …`).
pub(crate) fn wc_text(wc: &Wc) -> String {
    format!(
        "wr_id={} status={} opcode={} byte_len={} imm_data={:#x} qp_num={:#x} wc_flags={}",
        wc.wr_id,
        wc.status.name(),
        wc.opcode.name(),
        wc.byte_len,
        wc.imm_data,
        wc.qp_num,
        if wc.wc_flags.is_empty() {
            "0".to_owned()
        } else {
            wc.wc_flags.names()
        }
    )
}
