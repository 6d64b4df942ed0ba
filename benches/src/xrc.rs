//! `sim_xrc_srq_fanin` (perf.md): `n` XRC_INI QPs on device 0, each
//! connected to its own XRC_TGT QP on device 1, all TGT QPs in one XRC
//! domain delivering 64-byte SENDs into one XRC SRQ. One unit of work is one
//! SEND (posted, delivered into the SRQ, both completions reaped), so the
//! rate at 1 024 INIs over the rate at 1 shows what fan-in costs.
//!
//! Sends go round robin over the INIs in batches of [`BATCH`]; every send is
//! signalled; after each batch both CQs are drained and the consumed SRQ
//! WQEs re-posted.

use verbs_api::*;

use crate::data::require_data_path;
use crate::WorkloadError;

/// Sends posted between two drains.
pub const BATCH: u64 = 64;

/// The message size.
pub const MSG_BYTES: u32 = 64;

/// SRQ receive WQEs kept posted.
const SRQ_DEPTH: u32 = 256;

/// Send-queue depth of each of `n` INIs: what one batch can put on it
/// (round robin), so `n` INIs hold no more send WQEs than one.
fn sq_depth(n: usize) -> u32 {
    (BATCH as usize).div_ceil(n.max(1)) as u32
}

/// The XRC fan-in workload; owns every verbs object it creates.
pub struct XrcFanIn<V: Verbs> {
    ctx: [V::Context; 2],
    pd: [V::Pd; 2],
    cq: [V::Cq; 2],
    xrcd: V::Xrcd,
    srq: V::Srq,
    srqn: u32,
    src: V::Mr,
    src_info: MrInfo,
    dst: V::Mr,
    dst_info: MrInfo,
    inis: Vec<V::Qp>,
    tgts: Vec<V::Qp>,
    cursor: usize,
    next_recv: u64,
    wc: Vec<Wc>,
}

/// An address vector to port 1 of the device behind `ctx`.
fn av_of<V: Verbs>(v: &mut V, ctx: &V::Context) -> Result<AhAttr, WorkloadError> {
    let port = v.query_port(ctx, 1)?;
    Ok(AhAttr {
        grh: GlobalRoute {
            dgid: v.query_gid(ctx, 1, 0)?,
            sgid_index: 0,
            hop_limit: 64,
            ..GlobalRoute::default()
        },
        dlid: port.lid,
        is_global: port.link_layer == LinkLayer::Ethernet,
        port_num: 1,
        ..AhAttr::default()
    })
}

impl<V: Verbs> XrcFanIn<V> {
    /// Builds the domain, the SRQ and `n` connected INI/TGT pairs, and
    /// fills the SRQ.
    ///
    /// # Errors
    /// [`WorkloadError::Unsupported`] without XRC or two devices; otherwise
    /// the first verb that fails.
    pub fn new(v: &mut V, n: usize) -> Result<Self, WorkloadError> {
        require_data_path(v)?;
        let caps = v.capabilities();
        if !caps.contains(Capabilities::XRC | Capabilities::TWO_DEVICES) {
            return Err(WorkloadError::Unsupported(
                "sim_xrc_srq_fanin needs XRC and two devices".to_owned(),
            ));
        }
        let c0 = v.open_device(0, ProcessId(0))?;
        let c1 = v.open_device(1, ProcessId(1))?;
        let p0 = v.alloc_pd(&c0)?;
        let p1 = v.alloc_pd(&c1)?;
        let cqe = |k: u32| CqInit {
            cqe: k,
            ..CqInit::default()
        };
        let cq0 = v.create_cq(&c0, &cqe(2 * BATCH as u32))?;
        let cq1 = v.create_cq(&c1, &cqe(2 * BATCH as u32))?;
        let xrcd = v.open_xrcd(&c1, &XrcdInitAttr::default())?;
        let mut sa = SrqInitAttrEx::<V> {
            attr: SrqAttr {
                max_wr: SRQ_DEPTH,
                max_sge: 1,
                srq_limit: 0,
            },
            comp_mask: SrqInitAttrMask::TYPE
                | SrqInitAttrMask::PD
                | SrqInitAttrMask::XRCD
                | SrqInitAttrMask::CQ,
            srq_type: SrqType::Xrc,
            pd: Some(&p1),
            xrcd: Some(&xrcd),
            cq: Some(&cq1),
            ..SrqInitAttrEx::default()
        };
        let srq = v.create_srq_ex(&c1, &mut sa)?;
        let srqn = v.get_srq_num(&srq)?;
        let src = v.reg_mr(&p0, MSG_BYTES as usize, AccessFlags::LOCAL_WRITE)?;
        let src_info = v.mr_info(&src)?;
        let dst = v.reg_mr(
            &p1,
            (MSG_BYTES * SRQ_DEPTH) as usize,
            AccessFlags::LOCAL_WRITE,
        )?;
        let dst_info = v.mr_info(&dst)?;
        let to1 = av_of(v, &c1)?;
        let to0 = av_of(v, &c0)?;
        let mut w = Self {
            ctx: [c0, c1],
            pd: [p0, p1],
            cq: [cq0, cq1],
            xrcd,
            srq,
            srqn,
            src,
            src_info,
            dst,
            dst_info,
            inis: Vec::with_capacity(n),
            tgts: Vec::with_capacity(n),
            cursor: 0,
            next_recv: 0,
            wc: vec![Wc::default(); 2 * BATCH as usize],
        };
        for _ in 0..n {
            w.add_pair(v, &to0, &to1, sq_depth(n))?;
        }
        for _ in 0..SRQ_DEPTH {
            w.post_recv(v)?;
        }
        Ok(w)
    }

    fn add_pair(
        &mut self,
        v: &mut V,
        to0: &AhAttr,
        to1: &AhAttr,
        sq: u32,
    ) -> Result<(), WorkloadError> {
        let mut ia = QpInitAttrEx::<V> {
            qp_type: QpType::XrcSend,
            comp_mask: QpInitAttrMask::PD,
            pd: Some(&self.pd[0]),
            send_cq: Some(&self.cq[0]),
            cap: QpCap {
                max_send_wr: sq,
                max_send_sge: 1,
                ..QpCap::default()
            },
            ..QpInitAttrEx::default()
        };
        let ini = v.create_qp_ex(&self.ctx[0], &mut ia)?;
        let mut ta = QpInitAttrEx::<V> {
            qp_type: QpType::XrcRecv,
            comp_mask: QpInitAttrMask::XRCD,
            xrcd: Some(&self.xrcd),
            ..QpInitAttrEx::default()
        };
        let tgt = v.create_qp_ex(&self.ctx[1], &mut ta)?;
        let init = QpAttr {
            qp_state: QpState::Init,
            port_num: 1,
            ..QpAttr::default()
        };
        let m_init = QpAttrMask::STATE
            | QpAttrMask::PKEY_INDEX
            | QpAttrMask::PORT
            | QpAttrMask::ACCESS_FLAGS;
        v.modify_qp(&ini, &init, m_init)?;
        v.modify_qp(&tgt, &init, m_init)?;
        let (iq, tq) = (v.qp_num(&ini)?, v.qp_num(&tgt)?);
        let rtr = |ah_attr: AhAttr, dest_qp_num| QpAttr {
            qp_state: QpState::ReadyToReceive,
            ah_attr,
            path_mtu: Mtu::Mtu1024,
            dest_qp_num,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 1,
            ..QpAttr::default()
        };
        let m_rtr = QpAttrMask::STATE
            | QpAttrMask::AV
            | QpAttrMask::PATH_MTU
            | QpAttrMask::DEST_QPN
            | QpAttrMask::RQ_PSN
            | QpAttrMask::MAX_DEST_RD_ATOMIC
            | QpAttrMask::MIN_RNR_TIMER;
        v.modify_qp(&ini, &rtr(*to1, tq), m_rtr)?;
        v.modify_qp(&tgt, &rtr(*to0, iq), m_rtr)?;
        let rts = QpAttr {
            qp_state: QpState::ReadyToSend,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            max_rd_atomic: 1,
            ..QpAttr::default()
        };
        v.modify_qp(
            &ini,
            &rts,
            QpAttrMask::STATE
                | QpAttrMask::TIMEOUT
                | QpAttrMask::RETRY_CNT
                | QpAttrMask::RNR_RETRY
                | QpAttrMask::SQ_PSN
                | QpAttrMask::MAX_QP_RD_ATOMIC,
        )?;
        self.inis.push(ini);
        self.tgts.push(tgt);
        Ok(())
    }

    /// Posts one SRQ receive WQE (slot `next_recv % SRQ_DEPTH`).
    // Posting is `unsafe` (the buffer contract of ibv_post_srq_recv): the
    // slot lies inside `dst`, which the workload owns until teardown.
    #[allow(unsafe_code)]
    fn post_recv(&mut self, v: &mut V) -> Result<(), WorkloadError> {
        let slot = self.next_recv % u64::from(SRQ_DEPTH);
        let sge = Sge {
            addr: self.dst_info.addr + slot * u64::from(MSG_BYTES),
            length: MSG_BYTES,
            lkey: self.dst_info.lkey,
        };
        let wr = RecvWr {
            wr_id: self.next_recv,
            sg_list: core::slice::from_ref(&sge),
        };
        // SAFETY: `dst` stays registered until teardown (see above).
        unsafe { v.post_srq_recv(&self.srq, &[wr]) }?;
        self.next_recv += 1;
        Ok(())
    }

    /// Sends `n` messages round robin over the INIs, draining after each batch.
    ///
    /// # Errors
    /// The first verb that fails or an error completion.
    // Posting is `unsafe` (the buffer contract of ibv_post_send): `src` is
    // owned by the workload until teardown.
    #[allow(unsafe_code)]
    pub fn run(&mut self, v: &mut V, n: u64) -> Result<(), WorkloadError> {
        let sge = Sge {
            addr: self.src_info.addr,
            length: MSG_BYTES,
            lkey: self.src_info.lkey,
        };
        let mut left = n;
        while left > 0 {
            let k = left.min(BATCH);
            for i in 0..k {
                let wr = SendWr::<V> {
                    wr_id: i,
                    sg_list: core::slice::from_ref(&sge),
                    opcode: WrOpcode::Send,
                    send_flags: SendFlags::SIGNALED,
                    remote_srqn: self.srqn,
                    ..SendWr::default()
                };
                let qp = &self.inis[self.cursor];
                self.cursor = (self.cursor + 1) % self.inis.len();
                // SAFETY: `src` stays registered until teardown.
                unsafe { v.post_send(qp, &[wr]) }?;
            }
            self.reap(v, k)?;
            left -= k;
        }
        Ok(())
    }

    /// Reaps `k` send and `k` receive completions, re-posting the receives.
    fn reap(&mut self, v: &mut V, k: u64) -> Result<(), WorkloadError> {
        for side in 0..2 {
            let mut got = 0u64;
            let mut empty = 0u32;
            while got < k {
                let m = v.poll_cq(&self.cq[side], &mut self.wc[..(k - got) as usize])?;
                if m == 0 {
                    empty += 1;
                    if empty > 1_000_000 {
                        return Err(WorkloadError::Stalled("sim_xrc_srq_fanin"));
                    }
                    continue;
                }
                for w in &self.wc[..m] {
                    if w.status != WcStatus::Success {
                        return Err(WorkloadError::Completion {
                            wr_id: w.wr_id,
                            status: w.status,
                            opcode: w.opcode,
                        });
                    }
                }
                got += m as u64;
            }
        }
        for _ in 0..k {
            self.post_recv(v)?;
        }
        Ok(())
    }

    /// Nothing is outstanding after [`XrcFanIn::run`]; kept for symmetry
    /// with the other data-path workloads.
    ///
    /// # Errors
    /// None today.
    pub fn drain(&mut self, _v: &mut V) -> Result<(), WorkloadError> {
        Ok(())
    }

    /// Destroys everything, in dependency order.
    ///
    /// # Errors
    /// The first verb that fails (e.g. `EBUSY` if something leaked).
    pub fn teardown(self, v: &mut V) -> Result<(), WorkloadError> {
        for q in self.inis.iter().chain(&self.tgts) {
            v.destroy_qp(q)?;
        }
        v.destroy_srq(&self.srq)?;
        v.close_xrcd(&self.xrcd)?;
        v.dereg_mr(&self.src)?;
        v.dereg_mr(&self.dst)?;
        for i in 0..2 {
            v.destroy_cq(&self.cq[i])?;
            v.dealloc_pd(&self.pd[i])?;
            v.close_device(&self.ctx[i])?;
        }
        Ok(())
    }
}
