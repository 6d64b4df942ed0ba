//! The legacy OFED XRC receive-QP API (`ibv_create_xrc_rcv_qp` and its
//! family), built on XRC_TGT QPs.

use verbs_api::{
    Error, ErrorKind, ProcessId, QpAttr, QpAttrMask, QpCap, QpInitInfo, QpType, Result, SrqAttr,
    SrqInitAttrEx, SrqInitAttrMask, SrqType, Verb,
};

use crate::world::{invalid, World};
use crate::SimVerbs;

use super::*;

/// Capabilities written back by the creation of an XRC_TGT QP: it has
/// neither queue.
pub(crate) const TGT_CAP: QpCap = QpCap {
    max_send_wr: 0,
    max_recv_wr: 0,
    max_send_sge: 0,
    max_recv_sge: 0,
    max_inline_data: 0,
};

/// `attr` of the legacy `ibv_create_xrc_srq`, through `ibv_create_srq_ex`.
pub(crate) fn legacy_srq_attr<'a>(
    pd: &'a PdHandle,
    xrcd: &'a XrcdHandle,
    cq: &'a CqHandle,
    attr: SrqAttr,
) -> SrqInitAttrEx<'a, SimVerbs> {
    SrqInitAttrEx {
        attr,
        comp_mask: SrqInitAttrMask::TYPE
            | SrqInitAttrMask::PD
            | SrqInitAttrMask::XRCD
            | SrqInitAttrMask::CQ,
        srq_type: SrqType::Xrc,
        pd: Some(pd),
        xrcd: Some(xrcd),
        cq: Some(cq),
        ..SrqInitAttrEx::default()
    }
}

impl World {
    // -------------------------------------------------------- legacy API

    pub(super) fn legacy_key(
        &self,
        xrcd: XrcdHandle,
        qpn: u32,
        verb: Verb,
    ) -> Result<(ProcessId, u32, u32)> {
        let o = self.xrcd_open(xrcd, verb)?;
        let process = self.ctx(o.ctx, verb)?.process;
        Ok((process, self.xrcd_device(xrcd, verb)?, qpn & 0xff_ffff))
    }

    /// The calling process's registration handle for `qpn`, checked against
    /// the domain of `xrcd`.
    pub(super) fn legacy_handle(&self, xrcd: XrcdHandle, qpn: u32, verb: Verb) -> Result<QpHandle> {
        let key = self.legacy_key(xrcd, qpn, verb)?;
        let Some(&h) = self.xrc.legacy.get(&key) else {
            // Say why: unknown number, not XRC, other domain, or simply
            // not registered.
            let ctx = self.xrcd_open(xrcd, verb)?.ctx;
            self.find_tgt(ctx, xrcd, qpn, QpType::XrcRecv, verb)?;
            return Err(invalid(
                verb,
                format!(
                    "process {} is not registered with XRC receive QP {qpn:#x}",
                    key.0 .0
                ),
            ));
        };
        let domain = self.xrcd_open(xrcd, verb)?.domain;
        let real = self.tgt_open(h, verb)?.real;
        if self.xrc.tgts.get(&real.index).map(|t| t.domain) != Some(domain) {
            return Err(invalid(
                verb,
                format!("XRC receive QP {qpn:#x} belongs to another XRC domain"),
            ));
        }
        Ok(h)
    }

    /// `ibv_create_xrc_rcv_qp`: a TGT QP in the domain, the calling process
    /// registered with it; returns its number.
    pub(crate) fn create_xrc_rcv_qp(&mut self, xrcd: XrcdHandle) -> Result<u32> {
        let v = Verb::CreateXrcRcvQp;
        let ctx = self.xrcd_open(xrcd, v)?.ctx;
        let mut attr = verbs_api::QpInitAttrEx::<SimVerbs> {
            qp_type: QpType::XrcRecv,
            comp_mask: verbs_api::QpInitAttrMask::XRCD,
            xrcd: Some(&xrcd),
            ..Default::default()
        };
        let h = self.create_qp(ctx, &mut attr, None, v)?;
        let real = self.resolve_qp(h, v)?;
        let qpn = self
            .qps
            .get(real.index, real.generation)
            .expect("live")
            .qp_num;
        let key = self.legacy_key(xrcd, qpn, v)?;
        self.xrc.legacy.insert(key, h);
        Ok(qpn)
    }

    /// `ibv_reg_xrc_rcv_qp`: registers the calling process (opens a handle).
    pub(crate) fn reg_xrc_rcv_qp(&mut self, xrcd: XrcdHandle, qpn: u32) -> Result<()> {
        let v = Verb::RegXrcRcvQp;
        let key = self.legacy_key(xrcd, qpn, v)?;
        let ctx = self.xrcd_open(xrcd, v)?.ctx;
        let real = self.find_tgt(ctx, xrcd, qpn, QpType::XrcRecv, v)?;
        if self.xrc.legacy.contains_key(&key) {
            return Err(Error::new(
                v,
                ErrorKind::AlreadyExists,
                format!(
                    "process {} is already registered with XRC receive QP {qpn:#x}",
                    key.0 .0
                ),
            ));
        }
        let h = self.new_tgt_handle(real, ctx, xrcd, 0);
        self.xrc.legacy.insert(key, h);
        Ok(())
    }

    /// `ibv_unreg_xrc_rcv_qp`: unregisters the calling process; the QP is
    /// destroyed when no process is registered (nor holds a handle).
    pub(crate) fn unreg_xrc_rcv_qp(&mut self, xrcd: XrcdHandle, qpn: u32) -> Result<()> {
        let v = Verb::UnregXrcRcvQp;
        let h = self.legacy_handle(xrcd, qpn, v)?;
        let key = self.legacy_key(xrcd, qpn, v)?;
        let o = self.tgt_open(h, v)?;
        let (real, ctx, hx) = (o.real, o.ctx, o.xrcd);
        self.xrc.legacy.remove(&key);
        self.close_tgt_handle(h, real, ctx, hx);
        Ok(())
    }

    /// `ibv_modify_xrc_rcv_qp`: `ibv_modify_qp` through the process's handle.
    pub(crate) fn modify_xrc_rcv_qp(
        &mut self,
        xrcd: XrcdHandle,
        qpn: u32,
        attr: &QpAttr,
        mask: QpAttrMask,
    ) -> Result<()> {
        let v = Verb::ModifyXrcRcvQp;
        let h = self.legacy_handle(xrcd, qpn, v)?;
        let real = self.resolve_qp(h, v)?;
        self.modify_qp(real, attr, mask)
            .map_err(|e| Error::new(v, e.kind(), e.message().to_owned()))
    }

    /// `ibv_query_xrc_rcv_qp`: `ibv_query_qp` through the process's handle.
    pub(crate) fn query_xrc_rcv_qp(
        &self,
        xrcd: XrcdHandle,
        qpn: u32,
        mask: QpAttrMask,
    ) -> Result<(QpAttr, QpInitInfo)> {
        let v = Verb::QueryXrcRcvQp;
        let h = self.legacy_handle(xrcd, qpn, v)?;
        self.query_qp_handle(h, mask)
            .map_err(|e| Error::new(v, e.kind(), e.message().to_owned()))
    }

    /// How many simulated processes are registered (legacy API) with the
    /// XRC receive QP `qpn` of `device`.
    pub fn xrc_rcv_registrations(&self, device: u32, qpn: u32) -> usize {
        self.xrc
            .legacy
            .keys()
            .filter(|&&(_, d, n)| d == device && n == qpn)
            .count()
    }

    /// How many handles (created, opened or registered) the real XRC_TGT
    /// QP `qpn` of `device` has; 0 when it does not exist.
    pub fn xrc_tgt_handles(&self, device: u32, qpn: u32) -> usize {
        self.qp_by_num(device, qpn)
            .and_then(|q| self.xrc.tgts.get(&q.index))
            .map_or(0, |t| t.handles.len())
    }
}
