//! DC and OOO workloads: `sim_dc_fanout` ([`DcFanout`]: 8 DCIs writing
//! 64 B round-robin over N DCTs) and `sim_ooo_placement` ([`OooWrite`]: a
//! 64 KiB WRITE in 16 packets between two RC QPs made with
//! `mlx5dv_create_qp`, with or without `MLX5DV_QP_CREATE_OOO_DP`).
//!
//! Posting contract (as in [`crate::data`]): every MR lives from `new` to
//! `teardown`, requests name only bytes inside them, and each round of
//! requests is completed (its CQEs reaped) before the next round is posted,
//! so nothing is reused while in flight; landing buffers are never read by
//! the workload.

use verbs_api::{
    AccessFlags, DcInfo, DcType, Mlx5QpCreateFlags, Mlx5QpInitAttr, Mlx5QpInitAttrMask, Mtu,
    QpAttr, QpAttrMask, QpCap, QpInitAttrEx, QpInitAttrMask, QpState, QpType, RdmaInfo, SendFlags,
    SendWr, Sge, SrqAttr, Verbs, Wc, WcStatus, WrOpcode,
};

use crate::fixture::{peer_device_index, rc_attr, Endpoint, PORT};
use crate::WorkloadError;

/// DCIs of [`DcFanout`].
pub const FANOUT_DCIS: usize = 8;

/// The DC key of every DCT of [`DcFanout`].
const DC_KEY: u64 = 0x0dc0_ffee;

fn check(wc: &[Wc]) -> Result<(), WorkloadError> {
    for w in wc {
        if w.status != WcStatus::Success {
            return Err(WorkloadError::Completion {
                wr_id: w.wr_id,
                status: w.status,
                opcode: w.opcode,
            });
        }
    }
    Ok(())
}

/// Polls until `n` completions were reaped from `cq`.
fn reap<V: Verbs>(v: &mut V, cq: &V::Cq, mut n: usize) -> Result<(), WorkloadError> {
    let mut wc = [Wc::default(); 16];
    while n > 0 {
        let want = n.min(wc.len());
        let got = v.poll_cq(cq, &mut wc[..want])?;
        check(&wc[..got])?;
        n -= got;
    }
    Ok(())
}

/// `sim_dc_fanout`: 8 DCIs on device 0, `dcts` DCTs on the peer device
/// sharing one SRQ; one step posts one 64 B RDMA WRITE per DCI, each to the
/// next DCT in round-robin order, and reaps the 8 completions.
pub struct DcFanout<V: Verbs> {
    a: Endpoint<V>,
    b: Endpoint<V>,
    srq: V::Srq,
    dcis: Vec<V::Qp>,
    dcts: Vec<V::Qp>,
    dctns: Vec<u32>,
    ah: V::Ah,
    src: V::Mr,
    src_info: verbs_api::MrInfo,
    dst: V::Mr,
    dst_info: verbs_api::MrInfo,
    next: usize,
}

impl<V: Verbs> DcFanout<V> {
    /// Builds the DCIs, the DCTs (in RTR) and the MRs.
    ///
    /// # Errors
    /// The first verb that fails (nothing is torn down then).
    pub fn new(v: &mut V, dcts: usize) -> Result<Self, WorkloadError> {
        let peer = peer_device_index(v)?;
        let a = Endpoint::open(v, 0, 4096)?;
        let b = Endpoint::open(v, peer, 64)?;
        let mut sattr = SrqAttr {
            max_wr: 16,
            max_sge: 1,
            srq_limit: 0,
        };
        let srq = v.create_srq(&b.pd, &mut sattr)?;
        let mut dcis = Vec::with_capacity(FANOUT_DCIS);
        for _ in 0..FANOUT_DCIS {
            let qp = create_dc(v, &a, DcType::Dci, None, Mlx5QpCreateFlags::empty())?;
            let init = QpAttr {
                qp_state: QpState::Init,
                port_num: PORT,
                ..QpAttr::default()
            };
            v.modify_qp(
                &qp,
                &init,
                QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT,
            )?;
            let rtr = QpAttr {
                qp_state: QpState::ReadyToReceive,
                path_mtu: Mtu::Mtu1024,
                ..QpAttr::default()
            };
            v.modify_qp(&qp, &rtr, QpAttrMask::STATE | QpAttrMask::PATH_MTU)?;
            let rts = QpAttr {
                qp_state: QpState::ReadyToSend,
                timeout: 14,
                retry_cnt: 7,
                rnr_retry: 7,
                max_rd_atomic: 1,
                ..QpAttr::default()
            };
            v.modify_qp(
                &qp,
                &rts,
                QpAttrMask::STATE
                    | QpAttrMask::TIMEOUT
                    | QpAttrMask::RETRY_CNT
                    | QpAttrMask::RNR_RETRY
                    | QpAttrMask::SQ_PSN
                    | QpAttrMask::MAX_QP_RD_ATOMIC,
            )?;
            dcis.push(qp);
        }
        let mut dct_qps = Vec::with_capacity(dcts);
        let mut dctns = Vec::with_capacity(dcts);
        for _ in 0..dcts {
            let qp = create_dc(v, &b, DcType::Dct, Some(&srq), Mlx5QpCreateFlags::empty())?;
            dct_to_rtr(v, &qp, &b)?;
            dctns.push(v.qp_num(&qp)?);
            dct_qps.push(qp);
        }
        let ah = v.create_ah(&a.pd, &b.path.ah_attr())?;
        let src = v.reg_mr(&a.pd, 4096, AccessFlags::LOCAL_WRITE)?;
        let src_info = v.mr_info(&src)?;
        let dst = v.reg_mr(
            &b.pd,
            4096,
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
        )?;
        let dst_info = v.mr_info(&dst)?;
        Ok(Self {
            a,
            b,
            srq,
            dcis,
            dcts: dct_qps,
            dctns,
            ah,
            src,
            src_info,
            dst,
            dst_info,
            next: 0,
        })
    }

    /// The DCTs (for per-DCT memory accounting).
    pub fn dcts(&self) -> &[V::Qp] {
        &self.dcts
    }

    /// Posts `writes` 64 B WRITEs, DCI after DCI (one outstanding per DCI),
    /// each to the next DCT in round-robin order, reaping a round's
    /// completions before the next round.
    ///
    /// # Errors
    /// A failing verb or an error completion.
    #[allow(unsafe_code)]
    pub fn run(&mut self, v: &mut V, writes: u64) -> Result<(), WorkloadError> {
        let mut posted = 0;
        for k in 0..writes {
            let i = (k % FANOUT_DCIS as u64) as usize;
            let t = self.next;
            self.next = (self.next + 1) % self.dcts.len();
            let sge = [Sge {
                addr: self.src_info.addr + 64 * i as u64,
                length: 64,
                lkey: self.src_info.lkey,
            }];
            let wr = SendWr::<V> {
                wr_id: t as u64,
                sg_list: &sge,
                opcode: WrOpcode::RdmaWrite,
                send_flags: SendFlags::SIGNALED,
                rdma: RdmaInfo {
                    remote_addr: self.dst_info.addr + 64 * i as u64,
                    rkey: self.dst_info.rkey,
                },
                dc: Some(DcInfo {
                    ah: &self.ah,
                    remote_dctn: self.dctns[t],
                    remote_dc_key: DC_KEY,
                    stream_id: 0,
                }),
                ..SendWr::default()
            };
            // SAFETY: posting contract (module docs): both MRs live until
            // teardown and a round is reaped before its slots are reused.
            unsafe { v.post_send(&self.dcis[i], &[wr]) }?;
            posted += 1;
            if posted == FANOUT_DCIS {
                reap(v, &self.a.cq, posted)?;
                posted = 0;
            }
        }
        reap(v, &self.a.cq, posted)
    }

    /// Destroys everything.
    ///
    /// # Errors
    /// The first verb that fails.
    pub fn teardown(self, v: &mut V) -> Result<(), WorkloadError> {
        for qp in self.dcis.iter().chain(self.dcts.iter()) {
            v.destroy_qp(qp)?;
        }
        v.destroy_ah(&self.ah)?;
        v.dereg_mr(&self.src)?;
        v.dereg_mr(&self.dst)?;
        v.destroy_srq(&self.srq)?;
        close(v, self.a)?;
        close(v, self.b)?;
        Ok(())
    }
}

fn close<V: Verbs>(v: &mut V, e: Endpoint<V>) -> Result<(), WorkloadError> {
    v.destroy_cq(&e.cq)?;
    v.dealloc_pd(&e.pd)?;
    v.close_device(&e.ctx)?;
    Ok(())
}

fn create_dc<V: Verbs>(
    v: &mut V,
    e: &Endpoint<V>,
    dc: DcType,
    srq: Option<&V::Srq>,
    flags: Mlx5QpCreateFlags,
) -> Result<V::Qp, WorkloadError> {
    let dci = dc == DcType::Dci;
    let mut attr = QpInitAttrEx::<V> {
        qp_type: QpType::Driver,
        comp_mask: QpInitAttrMask::PD,
        pd: Some(&e.pd),
        send_cq: Some(&e.cq),
        recv_cq: Some(&e.cq),
        srq,
        cap: QpCap {
            max_send_wr: if dci { 64 } else { 0 },
            max_send_sge: u32::from(dci),
            ..QpCap::default()
        },
        ..QpInitAttrEx::default()
    };
    let mut dv = Mlx5QpInitAttr {
        comp_mask: Mlx5QpInitAttrMask::DC,
        ..Mlx5QpInitAttr::default()
    };
    dv.dc_init_attr.dc_type = dc;
    dv.dc_init_attr.dct_access_key = DC_KEY;
    if !flags.is_empty() {
        dv.comp_mask |= Mlx5QpInitAttrMask::QP_CREATE_FLAGS;
        dv.create_flags = flags;
    }
    Ok(v.mlx5dv_create_qp(&e.ctx, &mut attr, &dv)?)
}

fn dct_to_rtr<V: Verbs>(v: &mut V, qp: &V::Qp, e: &Endpoint<V>) -> Result<(), WorkloadError> {
    let init = QpAttr {
        qp_state: QpState::Init,
        port_num: PORT,
        qp_access_flags: AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ,
        ..QpAttr::default()
    };
    v.modify_qp(
        qp,
        &init,
        QpAttrMask::STATE | QpAttrMask::ACCESS_FLAGS | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT,
    )?;
    let rtr = QpAttr {
        qp_state: QpState::ReadyToReceive,
        ah_attr: e.path.ah_attr(),
        path_mtu: Mtu::Mtu1024,
        min_rnr_timer: 12,
        ..QpAttr::default()
    };
    v.modify_qp(
        qp,
        &rtr,
        QpAttrMask::STATE | QpAttrMask::MIN_RNR_TIMER | QpAttrMask::AV | QpAttrMask::PATH_MTU,
    )?;
    Ok(())
}

/// `sim_ooo_placement`: one 64 KiB RDMA WRITE (16 packets at a 4096-byte
/// path MTU) per step between two RC QPs made with `mlx5dv_create_qp`,
/// `MLX5DV_QP_CREATE_OOO_DP` on both or on neither.
pub struct OooWrite<V: Verbs> {
    a: Endpoint<V>,
    b: Endpoint<V>,
    qa: V::Qp,
    qb: V::Qp,
    src: V::Mr,
    src_info: verbs_api::MrInfo,
    dst: V::Mr,
    dst_info: verbs_api::MrInfo,
}

/// Bytes of one [`OooWrite`] step.
pub const OOO_WRITE_BYTES: u32 = 64 * 1024;

impl<V: Verbs> OooWrite<V> {
    /// Two connected RC QPs (OOO on both when `ooo`) and the MRs.
    ///
    /// # Errors
    /// The first verb that fails.
    pub fn new(v: &mut V, ooo: bool) -> Result<Self, WorkloadError> {
        let peer = peer_device_index(v)?;
        let a = Endpoint::open(v, 0, 64)?;
        let b = Endpoint::open(v, peer, 64)?;
        let flags = if ooo {
            Mlx5QpCreateFlags::OOO_DP
        } else {
            Mlx5QpCreateFlags::empty()
        };
        let qa = create_rc(v, &a, flags)?;
        let qb = create_rc(v, &b, flags)?;
        let (na, nb) = (v.qp_num(&qa)?, v.qp_num(&qb)?);
        let mut attr_a = rc_attr(&a.limits, &a.path, &b.path, nb);
        attr_a.path_mtu = Mtu::Mtu4096;
        crate::fixture::connect_rc(v, &qa, &mut attr_a)?;
        let mut attr_b = rc_attr(&b.limits, &b.path, &a.path, na);
        attr_b.path_mtu = Mtu::Mtu4096;
        crate::fixture::connect_rc(v, &qb, &mut attr_b)?;
        let len = OOO_WRITE_BYTES as usize;
        let src = v.reg_mr(&a.pd, len, AccessFlags::LOCAL_WRITE)?;
        let src_info = v.mr_info(&src)?;
        let dst = v.reg_mr(
            &b.pd,
            len,
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
        )?;
        let dst_info = v.mr_info(&dst)?;
        Ok(Self {
            a,
            b,
            qa,
            qb,
            src,
            src_info,
            dst,
            dst_info,
        })
    }

    /// Runs `steps` WRITEs, one at a time.
    ///
    /// # Errors
    /// A failing verb or an error completion.
    #[allow(unsafe_code)]
    pub fn run(&mut self, v: &mut V, steps: u64) -> Result<(), WorkloadError> {
        for i in 0..steps {
            let sge = [Sge {
                addr: self.src_info.addr,
                length: OOO_WRITE_BYTES,
                lkey: self.src_info.lkey,
            }];
            let wr = SendWr::<V> {
                wr_id: i,
                sg_list: &sge,
                opcode: WrOpcode::RdmaWrite,
                send_flags: SendFlags::SIGNALED,
                rdma: RdmaInfo {
                    remote_addr: self.dst_info.addr,
                    rkey: self.dst_info.rkey,
                },
                ..SendWr::default()
            };
            // SAFETY: posting contract (module docs): the MRs live until
            // teardown and each WRITE completes before the next is posted.
            unsafe { v.post_send(&self.qa, &[wr]) }?;
            reap(v, &self.a.cq, 1)?;
        }
        Ok(())
    }

    /// Destroys everything.
    ///
    /// # Errors
    /// The first verb that fails.
    pub fn teardown(self, v: &mut V) -> Result<(), WorkloadError> {
        v.destroy_qp(&self.qa)?;
        v.destroy_qp(&self.qb)?;
        v.dereg_mr(&self.src)?;
        v.dereg_mr(&self.dst)?;
        close(v, self.a)?;
        close(v, self.b)?;
        Ok(())
    }
}

fn create_rc<V: Verbs>(
    v: &mut V,
    e: &Endpoint<V>,
    flags: Mlx5QpCreateFlags,
) -> Result<V::Qp, WorkloadError> {
    let mut attr = QpInitAttrEx::<V> {
        qp_type: QpType::Rc,
        comp_mask: QpInitAttrMask::PD,
        pd: Some(&e.pd),
        send_cq: Some(&e.cq),
        recv_cq: Some(&e.cq),
        cap: QpCap {
            max_send_wr: 16,
            max_recv_wr: 16,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        ..QpInitAttrEx::default()
    };
    let dv = Mlx5QpInitAttr {
        comp_mask: Mlx5QpInitAttrMask::QP_CREATE_FLAGS,
        create_flags: flags,
        ..Mlx5QpInitAttr::default()
    };
    Ok(v.mlx5dv_create_qp(&e.ctx, &mut attr, &dv)?)
}
