//! The `ibv_wr_*` work-request API (`post_wr`), posting sends with memory
//! window binds, and `ibv_query_qp_data_in_order`.

use verbs_api::errno::{EOPNOTSUPP, EPERM};
use verbs_api::{
    DataInOrderCaps, DataInOrderFlags, Error, MwType, QpType, Result, SendFlags, SendOpsFlags,
    SendWr, Sge, UdInfo, Verb, WrEx, WrOp, WrOpcode,
};

use crate::datapath::{
    check_post_send, send_wr_of_wr_ex, single_sge_of, SendQueueView, SendWrView,
};
use crate::handles::{MwHandle, QpHandle};
use crate::profile::DriverModel;
use crate::world::{invalid, World};
use crate::SimVerbs;

use super::*;

impl World {
    // ------------------------------------------------------- send ops

    /// Records the `send_ops_flags` of a QP created with
    /// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` (the `ibv_wr_*` API exists only
    /// for those).
    pub(crate) fn record_send_ops(&mut self, qp: QpHandle, ops: SendOpsFlags) {
        self.ext.qp_ops.insert(qp.index, (qp.generation, ops));
    }

    /// The `ibv_wr_*` batch (`ibv_wr_start` … `ibv_wr_complete`): checked
    /// whole first, then posted; nothing is posted on error.
    pub(crate) fn post_wr(&mut self, qp: QpHandle, batch: &[WrEx<'_, SimVerbs>]) -> Result<()> {
        self.post_wr_carrying(qp, batch, None)
    }

    /// [`World::post_wr`]; with `carried`, the inline requests bring
    /// their bytes (copied when the program posted them, `carried[i]` for
    /// `batch[i]`, as `post_send_carrying` takes them) instead of being
    /// read from the poster's memory now.
    pub(crate) fn post_wr_carrying(
        &mut self,
        qp: QpHandle,
        batch: &[WrEx<'_, SimVerbs>],
        carried: Option<&[&[u8]]>,
    ) -> Result<()> {
        let v = Verb::PostWr;
        if carried.is_some_and(|c| c.len() != batch.len()) {
            return Err(invalid(
                v,
                "a batch whose inline bytes do not match its requests",
            ));
        }
        let q = self.qp(qp, v)?;
        let Some(ops) = get_gen(&self.ext.qp_ops, qp.index, qp.generation) else {
            return Err(err(
                v,
                EOPNOTSUPP,
                "the QP was not created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: it has no ibv_wr_* API",
            ));
        };
        if matches!(q.class, verbs_api::QpClass::Dci | verbs_api::QpClass::Dct) {
            return Err(err(
                v,
                EOPNOTSUPP,
                "DC addressing (mlx5dv_wr_set_dc_addr) is not part of WrEx: post on a DCI with post_send",
            ));
        }
        let (qp_type, device, pd, qp_ctx) = (q.qp_type, q.device, q.pd, q.ctx);
        // Singles of ibv_wr_set_sge, kept alive for the SendWr slices.
        let singles: Vec<[Sge; 1]> = batch.iter().map(single_sge_of).collect();
        let mut wrs: Vec<SendWr<'_, SimVerbs>> = Vec::with_capacity(batch.len());
        let mut binds = Vec::new();
        for (i, w) in batch.iter().enumerate() {
            let at = |msg: String| format!("work request {i} (wr_id {}): {msg}", w.wr_id);
            // A raw WQE is copied as it is: send_ops_flags do not limit it.
            if !w.raw_wqe && !ops.contains(w.op.send_op_flag()) {
                return Err(err(
                    v,
                    EOPNOTSUPP,
                    at(format!(
                        "{} is not in the QP's send_ops_flags {ops}",
                        w.op.opcode()
                    )),
                ));
            }
            let mut s = send_wr_of_wr_ex(w, &singles[i]);
            if let WrOp::BindMw {
                mw,
                rkey,
                bind_info,
            } = &w.op
            {
                {
                    let m = self.mw(**mw, v)?;
                    let mw_ctx = self.pd(m.pd, v)?.ctx;
                    self.same_ctx(v, "QP that binds the window", qp_ctx, mw_ctx)?;
                    let m = self.mw(**mw, v)?;
                    if m.mw_type != MwType::Type2 {
                        return Err(invalid(v, at("ibv_wr_bind_mw binds type 2 windows; a type 1 window is bound with ibv_bind_mw".into())));
                    }
                    if let Some(mr) = bind_info.mr {
                        let mpd = self.live_mr(*mr, v)?.pd;
                        if mpd != m.pd {
                            return Err(err(
                                v,
                                EPERM,
                                at("the MR's PD is not the window's".into()),
                            ));
                        }
                    } else if bind_info.addr != 0 || bind_info.length != 0 {
                        return Err(invalid(
                            v,
                            at("bind_info has an address or length but no MR".into()),
                        ));
                    }
                    self.check_bind_length(qp, bind_info.length, v)
                        .map_err(|e| err(v, e.errno(), at(e.message().to_owned())))?;
                    binds.push((
                        i,
                        PendingBind {
                            mw: **mw,
                            rkey: *rkey,
                            mr: bind_info.mr.copied(),
                            addr: bind_info.addr,
                            length: bind_info.length,
                            access: bind_info.mw_access_flags,
                        },
                    ));
                }
            }
            match (qp_type, &w.ud) {
                (QpType::Ud, None) => {
                    return Err(invalid(v, at("a UD QP needs ibv_wr_set_ud_addr".into())));
                }
                (QpType::Ud, Some(ud)) => {
                    self.ah(*ud.ah, v)?;
                    s.ud = Some(UdInfo {
                        ah: ud.ah,
                        remote_qpn: ud.remote_qpn,
                        remote_qkey: ud.remote_qkey,
                    });
                }
                (_, Some(_)) => {
                    return Err(invalid(
                        v,
                        at(format!("ibv_wr_set_ud_addr on a {qp_type} QP")),
                    ));
                }
                _ => {}
            }
            match (qp_type, w.xrc_srqn) {
                (QpType::XrcSend, None) => {
                    return Err(invalid(
                        v,
                        at("an XRC_SEND QP needs ibv_wr_set_xrc_srqn".into()),
                    ));
                }
                (QpType::XrcSend, Some(n)) => s.remote_srqn = n,
                (_, Some(_)) => {
                    return Err(invalid(
                        v,
                        at(format!("ibv_wr_set_xrc_srqn on a {qp_type} QP")),
                    ));
                }
                _ => {}
            }
            wrs.push(s);
        }
        // The whole batch must pass the post-time checks (mlx5 records the
        // first builder error and ibv_wr_complete returns it, posting
        // nothing), so every request is checked against the queue as it
        // will be when its turn comes.
        let flavor = self.config.errno_flavor;
        let q = self.qp(qp, v)?;
        let profile = &self.device(device).profile;
        let occupied = q.sq.occupied();
        for (i, s) in wrs.iter().enumerate() {
            let view = SendQueueView {
                transport: crate::world::state::transport_of(q.class),
                state: q.phase.state(),
                cap: q.cap,
                outstanding: u32::try_from(occupied + i as u64).unwrap_or(u32::MAX),
                atomics_supported: profile.attr.atomic_cap != verbs_api::AtomicCap::None,
                ip_csum_supported: false,
            };
            if let Err(r) = check_post_send(&view, &SendWrView::of(s), flavor) {
                // The errno of ibv_post_send under the same driver (mlx5's
                // builders report a full queue and oversized inline data as
                // ENOMEM, too many SGEs as ENOMEM or EINVAL by flavour).
                let e = r.to_error(v, 0);
                return Err(err(
                    v,
                    e.errno(),
                    format!(
                        "work request {i} (wr_id {}): {}; nothing of the batch was posted",
                        s.wr_id,
                        e.message()
                    ),
                ));
            }
            if carried.is_none()
                && s.send_flags.contains(SendFlags::INLINE)
                && !s.sg_list.is_empty()
            {
                self.inline_sources(qp, s.sg_list)
                    .map_err(|e| Error::new(v, e.kind(), e.message().to_owned()))?;
            }
        }
        let _ = pd;
        // Binds are known to the executor before the post runs them.
        let tail = q.sq.tail;
        for (i, b) in &binds {
            self.ext
                .binds
                .insert((qp.index, qp.generation, tail + *i as u64), *b);
        }
        let raw: Vec<u64> = batch
            .iter()
            .enumerate()
            .filter(|(_, w)| w.raw_wqe)
            .map(|(i, _)| tail + i as u64)
            .collect();
        // Raw WQEs are rare: everything they need is behind this test.
        let lifted = !raw.is_empty() && self.raw_wqes_signal_alone(qp, batch, &mut wrs);
        let r = match carried {
            Some(c) => self.post_send_carrying(qp, &wrs, c),
            None => self.post_send(qp, &wrs),
        };
        if lifted {
            if let Some(q) = self.qps.get_mut(qp.index, qp.generation) {
                q.sq_sig_all = true;
            }
        }
        match r {
            Ok(()) => {
                for seq in raw {
                    self.ext.raw_wqes.insert((qp.index, qp.generation, seq));
                }
                for (_, b) in &binds {
                    if let Some(m) = self.ext.mws.get_mut(b.mw.index, b.mw.generation) {
                        m.user_rkey = b.rkey;
                    }
                }
                if !binds.is_empty() {
                    self.prune_binds();
                }
                Ok(())
            }
            Err(e) => {
                for (i, _) in &binds {
                    self.ext
                        .binds
                        .remove(&(qp.index, qp.generation, tail + *i as u64));
                }
                Err(Error::from_errno(v, e.errno(), e.message().to_owned()))
            }
        }
    }

    /// Readies a batch with raw WQEs in it for posting: forgets stale
    /// raw-WQE marks, and makes each raw WQE's own `SIGNALED` (its control
    /// segment's `MLX5_WQE_CTRL_CQ_UPDATE`) alone decide whether it
    /// completes, as on mlx5: `sq_sig_all` is libmlx5's default, ORed into
    /// the control segments it builds (rdma-core `providers/mlx5/verbs.c`
    /// sets `sq_signal_bits` from it, `providers/mlx5/qp.c` ORs them into
    /// `fm_ce_se`), while `mlx5_wr_raw_wqe` copies the program's control
    /// segment as given. So on a QP created with `sq_sig_all` the ordinary
    /// requests of the batch get the `SIGNALED` the default stands for and
    /// the QP's flag is lifted for the post: returns whether it was, for
    /// the caller to set it again once the post is done. (The flag is read
    /// when a request is queued, `World::post_send`, so the post's own
    /// paths stay as they are.)
    #[cold]
    #[inline(never)]
    fn raw_wqes_signal_alone(
        &mut self,
        qp: QpHandle,
        batch: &[WrEx<'_, SimVerbs>],
        wrs: &mut [SendWr<'_, SimVerbs>],
    ) -> bool {
        self.prune_raw_wqes();
        let Some(q) = self.qps.get_mut(qp.index, qp.generation) else {
            return false;
        };
        if !q.sq_sig_all {
            return false;
        }
        q.sq_sig_all = false;
        for (s, w) in wrs.iter_mut().zip(batch) {
            if !w.raw_wqe {
                s.send_flags |= SendFlags::SIGNALED;
            }
        }
        true
    }

    /// `ibv_post_send` with `IBV_WR_BIND_MW` requests (type 2 windows):
    /// the `wr.bind_mw` part C carries beside each such request, given as
    /// `(index in wrs, window, new rkey, bind info)`. The drop-in library
    /// posts legacy chains with binds through this; the checks are those
    /// of `ibv_wr_bind_mw` (a type 2 window, the MR in the window's PD),
    /// then the chain is posted as by `World::post_send`, `bad_wr` at the
    /// first failing request.
    pub fn post_send_with_binds(
        &mut self,
        qp: QpHandle,
        wrs: &[SendWr<'_, SimVerbs>],
        binds: &[(usize, MwHandle, u32, verbs_api::MwBindInfo<'_, SimVerbs>)],
    ) -> Result<()> {
        let v = Verb::PostSend;
        let mut pending = Vec::with_capacity(binds.len());
        for (i, mw, rkey, info) in binds {
            let m = self.mw(*mw, v).map_err(|e| e.with_bad_wr(*i))?;
            if m.mw_type != MwType::Type2 {
                return Err(invalid(v, "IBV_WR_BIND_MW binds type 2 windows; a type 1 window is bound with ibv_bind_mw").with_bad_wr(*i));
            }
            if let Some(mr) = info.mr {
                let mpd = self.live_mr(*mr, v).map_err(|e| e.with_bad_wr(*i))?.pd;
                if mpd != m.pd {
                    return Err(err(v, EPERM, "the MR's PD is not the window's").with_bad_wr(*i));
                }
            }
            pending.push((
                *i,
                PendingBind {
                    mw: *mw,
                    rkey: *rkey,
                    mr: info.mr.copied(),
                    addr: info.addr,
                    length: info.length,
                    access: info.mw_access_flags,
                },
            ));
        }
        let tail = self.qp(qp, v)?.sq.tail;
        for (i, b) in &pending {
            self.ext
                .binds
                .insert((qp.index, qp.generation, tail + *i as u64), *b);
        }
        let r = self.post_send(qp, wrs);
        let posted = match &r {
            Ok(()) => wrs.len(),
            Err(e) => e.bad_wr().unwrap_or(0),
        };
        for (i, b) in &pending {
            if *i < posted {
                if let Some(m) = self.ext.mws.get_mut(b.mw.index, b.mw.generation) {
                    m.user_rkey = b.rkey;
                }
            } else {
                self.ext
                    .binds
                    .remove(&(qp.index, qp.generation, tail + *i as u64));
            }
        }
        r
    }

    // ------------------------------------------------------ data in order

    /// `ibv_query_qp_data_in_order`: rxe has no provider entry
    /// (libibverbs answers 0); mlx5 answers "in order" (whole message and
    /// aligned 128-byte pieces) for SEND, WRITE and READ data, except on a
    /// QP created with `MLX5DV_QP_CREATE_OOO_DP`, whose placement is not
    /// ordered (dc-and-mlx5dv.md §5).
    pub fn query_qp_data_in_order(
        &self,
        qp: QpHandle,
        op: WrOpcode,
        flags: DataInOrderFlags,
    ) -> Result<DataInOrderCaps> {
        let v = Verb::QueryQpDataInOrder;
        if flags.unknown_bits() != 0 {
            return Err(invalid(
                v,
                format!("unknown flag bits {:#x}", flags.unknown_bits()),
            ));
        }
        let q = self.qp(qp, v)?;
        if self.device(q.device).profile.driver != DriverModel::Mlx5 || q.dv.ooo {
            return Ok(DataInOrderCaps::empty());
        }
        let data_op = matches!(
            op,
            WrOpcode::Send
                | WrOpcode::SendWithImm
                | WrOpcode::SendWithInv
                | WrOpcode::RdmaWrite
                | WrOpcode::RdmaWriteWithImm
                | WrOpcode::RdmaRead
        );
        if !data_op {
            return Ok(DataInOrderCaps::empty());
        }
        Ok(if flags.contains(DataInOrderFlags::RETURN_CAPS) {
            DataInOrderCaps::WHOLE_MSG | DataInOrderCaps::ALIGNED_128_BYTES
        } else {
            DataInOrderCaps::WHOLE_MSG
        })
    }
}
