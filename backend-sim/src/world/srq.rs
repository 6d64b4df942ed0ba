//! Basic shared receive queues.

use verbs_api::{DeviceCapFlags, Result, SrqAttr, SrqAttrMask, Verb};

use super::queues::{RecvWqe, Ring};
use super::{busy, invalid, World};
use crate::handles::{PdHandle, SrqHandle};
use crate::profile::DriverModel;

#[derive(Debug)]
pub(crate) struct Srq {
    pub(crate) pd: PdHandle,
    pub(crate) device: u32,
    pub(crate) max_wr: u32,
    pub(crate) max_sge: u32,
    /// The armed low watermark (0 = not armed).
    pub(crate) limit: u32,
    /// QPs receiving from this SRQ.
    pub(crate) users: u32,
    pub(crate) ring: Ring<RecvWqe>,
}

/// `roundup_pow_of_two(n + 1) - 1`: the usable size of a ring allocated with
/// one spare slot (mlx5 `align_queue_size`, rxe `rxe_queue_init`).
pub(crate) fn ring_size_minus_one(n: u32) -> u32 {
    ((u64::from(n) + 1).next_power_of_two() - 1) as u32
}

impl World {
    /// The actual `(max_wr, max_sge)` of an SRQ request on `device`.
    ///
    /// * mlx5 (rdma-core `providers/mlx5/verbs.c` `mlx5_create_srq`,
    ///   `providers/mlx5/srq.c` `mlx5_alloc_srq_buf`): `max_sge` above
    ///   the device's `max_srq_sge` (or `max_rq_desc_sz / 16`) → `EINVAL`; the WQE is `16 + 16·max_sge`
    ///   bytes (at least 32) rounded up to a power of two, and the returned
    ///   `max_sge` is what fits after the 16-byte next segment; `max_wr`
    ///   becomes `align_queue_size(max_wr + 1) − 1`. Above the device's
    ///   `max_srq_wr` → `EINVAL` (the kernel's `1 << log_max_srq_sz` check).
    /// * rxe (torvalds/linux `rxe_srq.c` `rxe_srq_chk_init`,
    ///   `rxe_queue.c`): `max_wr` 0 or above `max_srq_wr`, `max_sge` above
    ///   `max_srq_sge` → `EINVAL`; `max_sge` 0 becomes 1; `max_wr` becomes
    ///   `roundup_pow_of_two(max_wr + 1) − 1`.
    fn srq_size(&self, device: u32, attr: &SrqAttr, verb: Verb) -> Result<(u32, u32)> {
        let p = &self.device(device).profile;
        let max_wr_dev = p.attr.max_srq_wr;
        if attr.max_wr > max_wr_dev {
            return Err(invalid(
                verb,
                format!(
                    "max_wr {} is above the device's max_srq_wr {max_wr_dev}",
                    attr.max_wr
                ),
            ));
        }
        // Every cap above the device limit is refused (create-qp.md §6), on
        // mlx5 too: its userspace bound (max_rq_desc_sz / 16) is one above
        // max_srq_sge and would otherwise grow the SRQ to 63 SGEs.
        let max_sge_dev = p.attr.max_srq_sge;
        if attr.max_sge > max_sge_dev {
            return Err(invalid(
                verb,
                format!(
                    "max_sge {} is above the device's max_srq_sge {max_sge_dev}",
                    attr.max_sge
                ),
            ));
        }
        match (p.driver, p.mlx5) {
            (DriverModel::Mlx5, Some(m)) => {
                let max_gs = m.max_rq_desc_sz / 16;
                if attr.max_sge > max_gs {
                    return Err(invalid(
                        verb,
                        format!(
                            "max_sge {} is above max_rq_desc_sz/16 = {max_gs}",
                            attr.max_sge
                        ),
                    ));
                }
                let wqe = (16 + 16 * attr.max_sge).max(32).next_power_of_two();
                Ok((ring_size_minus_one(attr.max_wr), (wqe - 16) / 16))
            }
            _ => {
                if attr.max_wr == 0 {
                    return Err(invalid(verb, "max_wr must be at least 1"));
                }
                Ok((ring_size_minus_one(attr.max_wr), attr.max_sge.max(1)))
            }
        }
    }

    /// `ibv_create_srq`; `attr` is written back with the actual sizes.
    ///
    /// `srq_limit` is ignored, as `ibv_create_srq(3)` says ("irrelevant for
    /// ibv_create_srq"); arm it with `ibv_modify_srq`.
    pub fn create_srq(&mut self, pd: PdHandle, attr: &mut SrqAttr) -> Result<SrqHandle> {
        let v = Verb::CreateSrq;
        let device = self.pd(pd, v)?.device;
        let (max_wr, max_sge) = self.srq_size(device, attr, v)?;
        let srq = Srq {
            pd,
            device,
            max_wr,
            max_sge,
            limit: 0,
            users: 0,
            ring: Ring::new(max_wr, max_sge),
        };
        self.pd_mut(pd, v)?.users += 1;
        attr.max_wr = max_wr;
        attr.max_sge = max_sge;
        attr.srq_limit = 0;
        Ok(SrqHandle::from_parts(self.srqs.insert(srq)))
    }

    /// `ibv_modify_srq`: `LIMIT` arms the low watermark (`srq_limit` above
    /// `max_wr` → `EINVAL`); `MAX_WR` resizes only on a device with
    /// `IBV_DEVICE_SRQ_RESIZE` (rxe), else `EINVAL` as mlx5's
    /// `mlx5_ib_modify_srq` returns.
    pub fn modify_srq(&mut self, srq: SrqHandle, attr: &SrqAttr, mask: SrqAttrMask) -> Result<()> {
        let v = Verb::ModifySrq;
        let s = self.srq(srq, v)?;
        if mask.unknown_bits() != 0 {
            return Err(invalid(
                v,
                format!("unknown srq_attr_mask bits {:#x}", mask.unknown_bits()),
            ));
        }
        let device = s.device;
        let (mut max_wr, max_sge, mut limit) = (s.max_wr, s.max_sge, s.limit);
        let posted = s.ring.outstanding();
        if mask.contains(SrqAttrMask::MAX_WR) {
            let caps = self.device(device).profile.attr.device_cap_flags;
            if !caps.contains(DeviceCapFlags::SRQ_RESIZE) {
                return Err(invalid(
                    v,
                    "IBV_SRQ_MAX_WR: the device cannot resize SRQs (no IBV_DEVICE_SRQ_RESIZE)",
                ));
            }
            if limit > 0 && attr.max_wr < limit {
                return Err(invalid(
                    v,
                    format!(
                        "max_wr {} is below the armed srq_limit {limit}",
                        attr.max_wr
                    ),
                ));
            }
            let (new_wr, _) = self.srq_size(
                device,
                &SrqAttr {
                    max_wr: attr.max_wr,
                    max_sge,
                    srq_limit: 0,
                },
                v,
            )?;
            if u64::from(new_wr) < posted {
                return Err(invalid(
                    v,
                    format!("max_wr {new_wr} is below the {posted} posted receive requests"),
                ));
            }
            max_wr = new_wr;
        }
        if mask.contains(SrqAttrMask::LIMIT) {
            if attr.srq_limit > max_wr {
                return Err(invalid(
                    v,
                    format!("srq_limit {} is above max_wr {max_wr}", attr.srq_limit),
                ));
            }
            limit = attr.srq_limit;
        }
        let s = self.srq_mut(srq, v)?;
        let mut consumed_keys = Vec::new();
        if max_wr != s.max_wr {
            // Resizing keeps the posted requests in order and their
            // sequence numbers, so the completions still to come free the
            // right slots. The receives already consumed (their data has
            // landed, their completions may not be polled yet) leave the
            // queue: their MRs are unpinned now, and polling their
            // completions later frees nothing (issue: their pins used to
            // be lost with the old ring, which kept the MR alive for ever).
            let (head, done, tail) = (s.ring.head, s.ring.done, s.ring.tail);
            for seq in head..done {
                let (w, sges, _) = s.ring.get(seq);
                consumed_keys.extend(sges[..w.num_sge as usize].iter().map(|g| g.lkey));
            }
            let mut ring = Ring::new(max_wr, max_sge);
            (ring.head, ring.done, ring.tail) = (done, done, done);
            for seq in done..tail {
                let (w, sges, _) = s.ring.get(seq);
                let n = w.num_sge as usize;
                ring.push(*w, &sges[..n]);
            }
            s.ring = ring;
            s.max_wr = max_wr;
        }
        s.limit = limit;
        for k in consumed_keys {
            self.pin_key(device, k, false);
        }
        Ok(())
    }

    /// `ibv_query_srq`.
    pub fn query_srq(&self, srq: SrqHandle) -> Result<SrqAttr> {
        let s = self.srq(srq, Verb::QuerySrq)?;
        Ok(SrqAttr {
            max_wr: s.max_wr,
            max_sge: s.max_sge,
            srq_limit: s.limit,
        })
    }

    /// `ibv_destroy_srq`: `EBUSY` while a QP uses it.
    pub fn destroy_srq(&mut self, srq: SrqHandle) -> Result<()> {
        let v = Verb::DestroySrq;
        let s = self.srq(srq, v)?;
        if s.users > 0 {
            return Err(busy(
                v,
                format!("{} QPs still receive from this SRQ", s.users),
            ));
        }
        let pd = s.pd;
        let (range, device) = (s.ring.head..s.ring.tail, s.device);
        // Unpin the MRs named by still-posted receive requests, and by
        // consumed ones whose completion nobody polled (their CQE may sit
        // in a CQ for ever: issue #12 item 3).
        let keys: Vec<u32> = {
            let s = self.srq(srq, v)?;
            range
                .flat_map(|seq| {
                    let (w, sges, _) = s.ring.get(seq);
                    sges[..w.num_sge as usize]
                        .iter()
                        .map(|g| g.lkey)
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        for k in keys {
            self.pin_key(device, k, false);
        }
        self.srqs.remove(srq.index, srq.generation);
        self.drop_async_events_of(super::AsyncSubject::Srq(srq));
        if let Ok(p) = self.pd_mut(pd, v) {
            p.users -= 1;
        }
        Ok(())
    }
}
