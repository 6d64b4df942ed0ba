//! Reserved QP numbers: `mlx5dv_reserved_qpn_alloc` and
//! `mlx5dv_reserved_qpn_dealloc` (rdma-core
//! `providers/mlx5/man/mlx5dv_reserved_qpn_alloc.3.md`).
//!
//! `rdma_cm` with an external QP needs a number unique on the device for
//! each connection (the CM's timewait logic keys on it); a DCI that
//! connects to one DCT several times has only one QP number, so the
//! passive side reserves one per further connection and puts it in its
//! `conn_param.qp_num`.
//!
//! The model: a reserved number is drawn from the device's QP-number
//! space by the allocator QPs use (cyclic from `SimConfig::qpn_start`, so
//! it never equals a live QP's number) and marked in the device's number
//! table, so a QP created later skips it; no packet reaches anything
//! through it. It belongs to the context that reserved it: releasing it
//! through another context, releasing a number that is not reserved, or
//! releasing twice is `EINVAL` (the provider's per-context bitmap); closing
//! the context releases what it still holds. rxe contexts answer
//! `EOPNOTSUPP` (libmlx5's `is_mlx5_dev` check). The hardware hands out
//! numbers in firmware blocks; the simulator's are single numbers in
//! allocation order (docs/divergence.md).

use std::collections::BTreeMap;

use verbs_api::{Error, ErrorKind, Result, Verb};

use super::{invalid, unsupported, World};
use crate::handles::ContextHandle;
use crate::trace::TraceEvent;

/// The number-table entry of a reserved number: not a QP arena index
/// (no arena holds that many slots), so lookups by number find no QP and
/// the QP-number allocator skips it.
const RESERVED: u32 = u32::MAX - 1;

/// Every reserved number: `(device, qpn)` → the context that holds it.
#[derive(Debug, Default)]
pub(crate) struct ReservedQpns {
    owners: BTreeMap<(u32, u32), ContextHandle>,
}

impl ReservedQpns {
    /// QP numbers reserved and not yet released.
    pub(crate) fn len(&self) -> usize {
        self.owners.len()
    }
}

impl World {
    /// `mlx5dv_reserved_qpn_alloc(ctx, &qpn)`: `EOPNOTSUPP` on a non-mlx5
    /// device, `ENOMEM` when the 24-bit space is exhausted.
    pub fn mlx5dv_reserved_qpn_alloc(&mut self, ctx: ContextHandle) -> Result<u32> {
        let v = Verb::Mlx5dvReservedQpnAlloc;
        let device = self.mlx5_ctx_device(ctx, v)?;
        let qpn = self.alloc_qpn(device, RESERVED).ok_or_else(|| {
            Error::new(
                v,
                ErrorKind::OutOfResources,
                "no free QP number left on the device",
            )
        })?;
        self.rqpn.owners.insert((device, qpn), ctx);
        self.record(TraceEvent::QpnReserved { device, qpn });
        Ok(qpn)
    }

    /// `mlx5dv_reserved_qpn_dealloc(ctx, qpn)`: `EINVAL` unless `ctx`
    /// holds `qpn` (never reserved, released already, or another
    /// context's), `EOPNOTSUPP` on a non-mlx5 device.
    pub fn mlx5dv_reserved_qpn_dealloc(&mut self, ctx: ContextHandle, qpn: u32) -> Result<()> {
        let v = Verb::Mlx5dvReservedQpnDealloc;
        let device = self.mlx5_ctx_device(ctx, v)?;
        match self.rqpn.owners.get(&(device, qpn)) {
            Some(&owner) if owner == ctx => {}
            Some(_) => {
                return Err(invalid(
                    v,
                    format!("QP number {qpn:#x} is reserved by another device context"),
                ))
            }
            None => {
                return Err(invalid(
                    v,
                    format!("QP number {qpn:#x} is not a reserved number of this context"),
                ))
            }
        }
        self.release_reserved_qpn(device, qpn);
        Ok(())
    }

    /// Releases every number `ctx` still holds (`ibv_close_device`).
    pub(crate) fn release_reserved_qpns(&mut self, ctx: ContextHandle) {
        let held: Vec<(u32, u32)> = self
            .rqpn
            .owners
            .iter()
            .filter(|&(_, &owner)| owner == ctx)
            .map(|(&key, _)| key)
            .collect();
        for (device, qpn) in held {
            self.release_reserved_qpn(device, qpn);
        }
    }

    /// How many QP numbers are reserved on `device`.
    pub fn reserved_qpn_count(&self, device: u32) -> usize {
        self.rqpn
            .owners
            .range((device, 0)..=(device, u32::MAX))
            .count()
    }

    fn release_reserved_qpn(&mut self, device: u32, qpn: u32) {
        self.rqpn.owners.remove(&(device, qpn));
        self.free_qpn(device, qpn);
        self.record(TraceEvent::QpnReleased { device, qpn });
    }

    /// The device of `ctx` if it is an mlx5 device, else `EOPNOTSUPP`.
    fn mlx5_ctx_device(&self, ctx: ContextHandle, v: Verb) -> Result<u32> {
        let device = self.ctx(ctx, v)?.device;
        if self.device(device).profile.mlx5.is_none() {
            return Err(unsupported(
                v,
                "the device is not an mlx5 device (reserved QP numbers are an mlx5 direct verb)",
            ));
        }
        Ok(device)
    }
}
