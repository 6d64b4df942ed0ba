//! The extended verbs (issue #13 item 4): `ibv_rereg_mr`, `ibv_resize_cq`,
//! `ibv_query_device_ex`, extended CQs, the `ibv_wr_*` API, memory
//! windows, `ibv_query_qp_data_in_order`, GID entries and ECE.
//!
//! Their state lives in [`ExtState`], beside the objects it describes
//! (keyed by arena index and generation), so the core object types stay
//! as they are.
//!
//! The verbs are in rooms by family: [`mw`] (`ibv_rereg_mr`, memory
//! windows and their work requests), [`cq`] (`ibv_resize_cq`, extended CQs),
//! [`post`] (the `ibv_wr_*` API, `ibv_query_qp_data_in_order`) and
//! [`device`] (`ibv_query_device_ex`, GID entries, ECE).

use std::collections::BTreeMap;

use verbs_api::{AccessFlags, Error, MwType, SendOpsFlags, Verb, WcExFlags};

use crate::arena::Arena;
use crate::handles::{MrHandle, MwHandle, PdHandle, QpHandle};
use crate::world::World;

/// The index bit that marks an rkey as a memory window's: MW keys are
/// `((MW_KEY_BIT | index) << 8) | variant`, MR keys `(index << 8) | variant`.
const MW_KEY_BIT: u32 = 0x80_0000;

/// mlx5's PCI vendor id, the `vendor_id` of its ECE (`PCI_VENDOR_ID_MELLANOX`).
const MLX5_ECE_VENDOR: u32 = 0x02c9;

/// The ECE option bits the simulated mlx5 devices accept (an *estimate*:
/// the bits are firmware-defined and undocumented; docs/divergence.md).
pub const MLX5_ECE_OPTIONS: u32 = 0x0000_0003;

/// The simulated mlx5 `hca_core_clock` in kHz (*estimate*, the 156.25 MHz
/// clock ConnectX-5/6 dumps commonly show).
pub const MLX5_HCA_CORE_CLOCK_KHZ: u64 = 156_250;

/// `completion_timestamp_mask` of the simulated mlx5 devices (63 bits).
pub(crate) const MLX5_TS_MASK: u64 = 0x7fff_ffff_ffff_ffff;

/// A memory window.
#[derive(Debug)]
pub(crate) struct Mw {
    pub(crate) pd: PdHandle,
    pub(crate) device: u32,
    pub(crate) mw_type: MwType,
    /// The key the device checks (changed when a bind executes).
    pub(crate) rkey: u32,
    /// `ibv_mw.rkey` as the application sees it (changed at post time,
    /// as mlx5's `ibv_bind_mw` does).
    pub(crate) user_rkey: u32,
    pub(crate) bound: Option<MwBound>,
}

/// Where a bound window points.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MwBound {
    pub(crate) mr: MrHandle,
    pub(crate) addr: u64,
    pub(crate) length: u64,
    pub(crate) access: AccessFlags,
    /// Type 2 (2B): the QP the window is bound to.
    pub(crate) qp: Option<QpHandle>,
}

/// A bind posted and not yet executed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PendingBind {
    mw: MwHandle,
    rkey: u32,
    mr: Option<MrHandle>,
    addr: u64,
    length: u64,
    access: AccessFlags,
}

/// State of the extended verbs.
#[derive(Debug, Default)]
pub(crate) struct ExtState {
    pub(crate) mws: Arena<Mw>,
    /// Device memory allocations (`world/dm.rs`).
    pub(crate) dms: Arena<super::dm::Dm>,
    /// Extended CQs: index → (generation, `wc_flags`).
    cq_ex: BTreeMap<u32, (u32, WcExFlags)>,
    /// QPs created with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`: index →
    /// (generation, `send_ops_flags`).
    qp_ops: BTreeMap<u32, (u32, SendOpsFlags)>,
    /// ECE of mlx5 QPs: QP index → (generation, (options set with
    /// `ibv_set_ece` and not yet sent with a modify, options the device
    /// answered with)).
    ece: BTreeMap<u32, (u32, (u32, u32))>,
    /// Binds posted: (QP index, generation, send-queue seq) → bind.
    binds: BTreeMap<(u32, u32, u64), PendingBind>,
    /// Requests posted as raw mlx5 WQEs (`WrEx::raw_wqe`): (QP index,
    /// generation, send-queue seq). Their successful completions report
    /// `IBV_WC_DRIVER2`; an entry goes when its completion is polled, or
    /// with the request once the queue has moved past it.
    pub(crate) raw_wqes: std::collections::BTreeSet<(u32, u32, u64)>,
}

impl World {
    /// Forgets what the extended verbs kept about a destroyed QP: its
    /// `send_ops_flags`, ECE options, pending binds and raw-WQE marks.
    pub(crate) fn ext_on_destroy_qp(&mut self, qp: QpHandle) {
        let e = &mut self.ext;
        if e.qp_ops
            .get(&qp.index)
            .is_some_and(|(g, _)| *g == qp.generation)
        {
            e.qp_ops.remove(&qp.index);
        }
        if e.ece
            .get(&qp.index)
            .is_some_and(|(g, _)| *g == qp.generation)
        {
            e.ece.remove(&qp.index);
        }
        e.binds
            .retain(|&(index, generation, _), _| (index, generation) != (qp.index, qp.generation));
        e.raw_wqes
            .retain(|&(index, generation, _)| (index, generation) != (qp.index, qp.generation));
    }

    /// Forgets the `wc_flags` of a destroyed extended CQ.
    pub(crate) fn ext_on_destroy_cq(&mut self, cq: crate::handles::CqHandle) {
        let e = &mut self.ext;
        if e.cq_ex
            .get(&cq.index)
            .is_some_and(|(g, _)| *g == cq.generation)
        {
            e.cq_ex.remove(&cq.index);
        }
    }

    /// Entries of the extended verbs' side tables (each belongs to a live
    /// object; none should outlive it).
    pub(crate) fn ext_entries(&self) -> usize {
        let e = &self.ext;
        e.cq_ex.len() + e.qp_ops.len() + e.ece.len() + e.binds.len() + e.raw_wqes.len()
    }
}

impl ExtState {
    /// No QP has ECE state.
    pub(crate) fn ece_is_empty(&self) -> bool {
        self.ece.is_empty()
    }
}

fn get_gen<T: Copy>(m: &BTreeMap<u32, (u32, T)>, index: u32, generation: u32) -> Option<T> {
    m.get(&index)
        .filter(|(g, _)| *g == generation)
        .map(|(_, v)| *v)
}

impl World {
    /// The `send_ops_flags` of `qp`, when it was created with
    /// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
    pub(crate) fn send_ops_of(&self, qp: QpHandle) -> Option<SendOpsFlags> {
        get_gen(&self.ext.qp_ops, qp.index, qp.generation)
    }
}

fn err(verb: Verb, errno: i32, msg: impl Into<String>) -> Error {
    Error::from_errno(verb, errno, msg)
}

mod cq;
mod device;
mod mw;
mod post;

/// Virtual nanoseconds as ticks of the simulated mlx5 core clock.
pub(crate) fn ns_to_ticks(ns: u64) -> u64 {
    (u128::from(ns) * u128::from(MLX5_HCA_CORE_CLOCK_KHZ) / 1_000_000) as u64
}

/// `shift` of the simulated clock's [`verbs_api::ClockInfo`]: 23, as the
/// mlx5 kernel driver's cycle counter uses (`MLX5_CYCLES_SHIFT`). `mult`
/// then rounds 6.4 ns a tick to 2.4e-8 relative, and `delta * mult`
/// stays in 64 bits for timestamps within about 2 200 s of
/// `last_cycles`; the kernel refreshes its clock info page well within
/// that, the simulator computes fresh info at every call.
const CLOCK_SHIFT: u32 = 23;

/// The [`verbs_api::ClockInfo`] of the simulated mlx5 clock at tick
/// `cycles`: `nsec` is that tick's time, whole nanoseconds, `frac` its
/// fraction in units of `2^-CLOCK_SHIFT` ns, `mult` the tick length in
/// the same units (rounded).
fn clock_info(cycles: u64) -> verbs_api::ClockInfo {
    let khz = u128::from(MLX5_HCA_CORE_CLOCK_KHZ);
    let scaled = u128::from(cycles) * 1_000_000;
    let (nsec, rem) = (scaled / khz, scaled % khz);
    let one = 1u128 << CLOCK_SHIFT;
    verbs_api::ClockInfo {
        nsec: nsec as u64,
        last_cycles: cycles,
        frac: (rem * one / khz) as u64,
        mult: ((1_000_000 * one + khz / 2) / khz) as u32,
        shift: CLOCK_SHIFT,
        mask: MLX5_TS_MASK,
    }
}

#[cfg(test)]
mod tests {
    use crate::{SimConfig, SimVerbs};
    use verbs_api::*;

    #[test]
    fn clock_info_converts_ticks_back_to_their_nanoseconds() {
        // Goal: mlx5dv_ts_to_ns over the simulator's clock info gives each
        // completion timestamp's virtual time, to the tick (6.4 ns) plus
        // the rounding of `mult` (2.4e-8 of the distance), for timestamps
        // after the info was taken and before it, up to 2 000 s apart.
        for now_ns in [0u64, 1, 7, 1_000_003, 2_000_000_000_000, 86_400_000_000_123] {
            let info = super::clock_info(super::ns_to_ticks(now_ns));
            let mut at = vec![
                now_ns,
                now_ns + 6,
                now_ns + 64_000,
                now_ns + 2_000_000_000_000,
            ];
            at.extend([
                now_ns.saturating_sub(5),
                now_ns.saturating_sub(1_000_000_000_000),
            ]);
            for ns in at {
                let got = info.ts_to_ns(super::ns_to_ticks(ns));
                let slack = 7 + ns.abs_diff(now_ns) / 40_000_000;
                assert!(
                    got.abs_diff(ns) <= slack,
                    "now {now_ns}: {ns} ns -> tick {} -> {got} ns",
                    super::ns_to_ticks(ns)
                );
            }
        }
    }

    #[test]
    fn flushed_binds_are_forgotten() {
        // Goal: a bind posted on a QP in ERR is flushed, never executed; its
        // pending entry must not stay behind (a loop of such posts would
        // otherwise grow the table without bound).
        let mut sim = SimVerbs::new(SimConfig::default());
        let ctx = sim.open_device(0, ProcessId(0)).unwrap();
        let pd = sim.alloc_pd(&ctx).unwrap();
        let cq = sim
            .create_cq(
                &ctx,
                &CqInit {
                    cqe: 64,
                    ..CqInit::default()
                },
            )
            .unwrap();
        let mut attr = QpInitAttrEx::<SimVerbs> {
            send_cq: Some(&cq),
            recv_cq: Some(&cq),
            cap: QpCap {
                max_send_wr: 4,
                max_recv_wr: 4,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: QpType::Rc,
            ..QpInitAttrEx::default()
        };
        let qp = sim.create_qp(&pd, &mut attr).unwrap();
        let ep = Endpoint::query(&mut sim, &ctx, &qp, 1).unwrap();
        connect_qp(&mut sim, &qp, &ep, &ep, &ConnectOptions::default()).unwrap();
        let to_err = QpAttr {
            qp_state: QpState::Error,
            ..QpAttr::default()
        };
        sim.modify_qp(&qp, &to_err, QpAttrMask::STATE).unwrap();
        let mw = sim.alloc_mw(&pd, MwType::Type1).unwrap();
        let unbind = MwBind::<SimVerbs> {
            wr_id: 1,
            send_flags: SendFlags::empty(),
            bind_info: MwBindInfo {
                mr: None,
                addr: 0,
                length: 0,
                mw_access_flags: AccessFlags::empty(),
            },
        };
        for _ in 0..3 {
            sim.bind_mw(&qp, &mw, &unbind).unwrap();
            let mut wc = [Wc::default(); 1];
            assert_eq!(sim.poll_cq(&cq, &mut wc).unwrap(), 1);
            assert_eq!(wc[0].status, WcStatus::WrFlushErr);
        }
        assert!(
            sim.world().ext.binds.len() <= 1,
            "{} pending binds kept for flushed requests",
            sim.world().ext.binds.len()
        );
    }
}
