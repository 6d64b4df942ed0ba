//! Capability rounding at QP creation: the send operations a QP type
//! supports, and how mlx5 and rxe round `max_send_wr`, `max_recv_wr`,
//! `max_send_sge`, `max_recv_sge` and `max_inline_data`.

use verbs_api::{QpCap, QpType, SendOpsFlags};

use crate::profile::{DeviceProfile, DriverModel, Mlx5Limits};
use crate::world::srq::ring_size_minus_one;

/// `send_ops_flags` each type may ask for, per provider: each has its own
/// table. mlx5: rdma-core `providers/mlx5/qp.c`
/// `MLX5_SUPPORTED_SEND_OPS_FLAGS_*` (create-qp.md §3.3). rxe: rdma-core
/// `providers/rxe/rxe.c` `RXE_SUP_{RC,UC,UD}_QP_SEND_OPS_FLAGS` (RC adds
/// FLUSH and ATOMIC_WRITE, for which `set_qp_send_ops` installs
/// `wr_flush` and `wr_atomic_write`; UC has no LOCAL_INV; other QP types
/// are refused), FLUSH and ATOMIC_WRITE only where the device claims them.
pub(super) fn supported_send_ops(profile: &DeviceProfile, qp_type: QpType) -> SendOpsFlags {
    use SendOpsFlags as S;
    if profile.driver == DriverModel::Rxe {
        let uc = S::SEND
            | S::SEND_WITH_INV
            | S::SEND_WITH_IMM
            | S::RDMA_WRITE
            | S::RDMA_WRITE_WITH_IMM
            | S::BIND_MW;
        let new_ops = if profile.flush_and_atomic_write {
            S::FLUSH | S::ATOMIC_WRITE
        } else {
            S::empty()
        };
        return match qp_type {
            QpType::Rc => {
                uc | S::RDMA_READ
                    | S::ATOMIC_CMP_AND_SWP
                    | S::ATOMIC_FETCH_AND_ADD
                    | S::LOCAL_INV
                    | new_ops
            }
            QpType::Uc => uc,
            QpType::Ud => S::SEND | S::SEND_WITH_IMM,
            _ => S::empty(),
        };
    }
    mlx5_send_ops(qp_type)
}

/// mlx5's table (`MLX5_SUPPORTED_SEND_OPS_FLAGS_*`).
fn mlx5_send_ops(qp_type: QpType) -> SendOpsFlags {
    use SendOpsFlags as S;
    let uc = S::SEND
        | S::SEND_WITH_INV
        | S::SEND_WITH_IMM
        | S::RDMA_WRITE
        | S::RDMA_WRITE_WITH_IMM
        | S::LOCAL_INV
        | S::BIND_MW;
    match qp_type {
        QpType::Rc | QpType::XrcSend | QpType::XrcRecv | QpType::Driver => {
            uc | S::RDMA_READ | S::ATOMIC_CMP_AND_SWP | S::ATOMIC_FETCH_AND_ADD
        }
        QpType::Uc => uc,
        QpType::Ud => S::SEND | S::SEND_WITH_IMM,
        QpType::RawPacket => S::SEND | S::TSO,
        QpType::Unknown(_) => S::empty(),
    }
}

/// The ops mlx5 assumes when `send_ops_flags` is not given (`sq_overhead`).
pub(super) fn default_send_ops(qp_type: QpType) -> SendOpsFlags {
    use SendOpsFlags as S;
    match qp_type {
        QpType::Ud => S::SEND | S::SEND_WITH_IMM | S::TSO,
        QpType::RawPacket => S::SEND | S::TSO,
        other => mlx5_send_ops(other),
    }
}

/// mlx5 send-WQE overhead in bytes (rdma-core `providers/mlx5/verbs.c`
/// `_sq_overhead`): the control segment or the largest per-operation segment
/// set (RDMA: ctrl+raddr = 32; atomic: ctrl+raddr+atomic = 48; bind/UMR:
/// ctrl + umr ctrl 48 + mkey context 64 + 64 = 192), plus the transport
/// segment (UD datagram 48, XRC 16, Ethernet 32).
pub(crate) fn mlx5_sq_overhead(qp_type: QpType, ops: SendOpsFlags) -> u32 {
    use SendOpsFlags as S;
    let mut size = 16;
    if ops.intersects(S::RDMA_WRITE | S::RDMA_WRITE_WITH_IMM | S::RDMA_READ) {
        size = size.max(16 + 16);
    }
    if ops.intersects(S::ATOMIC_CMP_AND_SWP | S::ATOMIC_FETCH_AND_ADD) {
        size = size.max(16 + 16 + 16);
    }
    if ops.intersects(S::BIND_MW | S::LOCAL_INV) {
        size = size.max(16 + 48 + 64 + 64);
    }
    size + match qp_type {
        QpType::Ud | QpType::Driver => 48,
        QpType::XrcSend | QpType::XrcRecv => 16,
        QpType::RawPacket => 32,
        _ => 0,
    }
}

pub(super) fn align(v: u64, a: u64) -> u64 {
    v.div_ceil(a) * a
}

/// mlx5 capability maths (create-qp.md §4.2; rdma-core
/// `providers/mlx5/verbs.c` `mlx5_calc_send_wqe`, `mlx5_calc_sq_size`,
/// `mlx5_calc_rcv_wqe`, `mlx5_calc_rq_size`).
pub(crate) fn mlx5_caps(
    m: &Mlx5Limits,
    qp_type: QpType,
    ops: SendOpsFlags,
    tso_header: Option<u16>,
    req: QpCap,
    has_rq: bool,
) -> Result<QpCap, String> {
    let mut cap = req;
    let desc = u64::from(m.max_sq_desc_sz);
    if req.max_send_wr > 0 {
        let overhead = u64::from(mlx5_sq_overhead(qp_type, ops));
        let inl_size = if req.max_inline_data > 0 {
            overhead + align(4 + u64::from(req.max_inline_data), 16)
        } else {
            0
        };
        let mut size = overhead + tso_header.map_or(0, |t| align(u64::from(t), 16));
        let max_gather = desc.saturating_sub(size) / 16;
        if u64::from(req.max_send_sge) > max_gather {
            return Err(format!(
                "max_send_sge {} is above {max_gather}, what fits in a {desc}-byte send WQE after {size} bytes of segments",
                req.max_send_sge
            ));
        }
        size += 16 * u64::from(req.max_send_sge);
        let total = size.max(inl_size);
        if total > desc {
            return Err(format!(
                "a send WQE for max_inline_data {} needs {total} bytes, above max_sq_desc_sz {desc}",
                req.max_inline_data
            ));
        }
        let wqe = align(total, 64);
        // mlx5_calc_sq_size computes `wqe - overhead - 4` in C ints; with no
        // SGE and no inline data the WQE can be the overhead alone, where the
        // provider's result goes negative. Divergence from hardware: the
        // simulator reports 0 instead of a wrapped value.
        cap.max_inline_data = u32::try_from(wqe.saturating_sub(overhead + 4)).unwrap_or(u32::MAX);
        if u64::from(req.max_send_wr) > 0x7fff_ffff / desc {
            return Err(format!(
                "max_send_wr {} overflows the SQ size",
                req.max_send_wr
            ));
        }
        let wq = (u64::from(req.max_send_wr) * wqe).next_power_of_two();
        if wq / 64 > u64::from(m.max_send_wqebb) {
            return Err(format!(
                "max_send_wr {} needs {} send WQE basic blocks, above the device's {}",
                req.max_send_wr,
                wq / 64,
                m.max_send_wqebb
            ));
        }
        cap.max_send_wr = (wq / wqe) as u32;
    }
    if !has_rq || req.max_recv_wr == 0 {
        cap.max_recv_wr = 0;
        cap.max_recv_sge = 0;
    } else {
        if req.max_recv_wr > m.max_recv_wr {
            return Err(format!(
                "max_recv_wr {} is above the device's {}",
                req.max_recv_wr, m.max_recv_wr
            ));
        }
        let size = 16 * u64::from(req.max_recv_sge.max(1));
        if size > u64::from(m.max_rq_desc_sz) {
            return Err(format!(
                "max_recv_sge {} needs a {size}-byte receive WQE, above max_rq_desc_sz {}",
                req.max_recv_sge, m.max_rq_desc_sz
            ));
        }
        let wqe = size.next_power_of_two();
        let wq = (u64::from(req.max_recv_wr).next_power_of_two() * wqe).max(64);
        cap.max_recv_wr = (wq / wqe) as u32;
        cap.max_recv_sge = (wqe / 16) as u32;
    }
    Ok(cap)
}

/// rxe capability checks and rounding (create-qp.md §4.3; torvalds/linux
/// `drivers/infiniband/sw/rxe/rxe_qp.c` `rxe_qp_chk_cap`,
/// `rxe_qp_init_req`, `rxe_qp_init_resp`, `rxe_queue.c`).
pub(crate) fn rxe_caps(
    max_qp_wr: u32,
    max_sge: u32,
    max_inline: u32,
    req: QpCap,
    has_rq: bool,
) -> Result<QpCap, String> {
    if req.max_send_wr > max_qp_wr {
        return Err(format!(
            "max_send_wr {} is above max_qp_wr {max_qp_wr}",
            req.max_send_wr
        ));
    }
    if req.max_send_sge > max_sge {
        return Err(format!(
            "max_send_sge {} is above max_sge {max_sge}",
            req.max_send_sge
        ));
    }
    if has_rq {
        if req.max_recv_wr > max_qp_wr {
            return Err(format!(
                "max_recv_wr {} is above max_qp_wr {max_qp_wr}",
                req.max_recv_wr
            ));
        }
        if req.max_recv_sge > max_sge {
            return Err(format!(
                "max_recv_sge {} is above max_sge {max_sge}",
                req.max_recv_sge
            ));
        }
    }
    if req.max_inline_data > max_inline {
        return Err(format!(
            "max_inline_data {} is above {max_inline}",
            req.max_inline_data
        ));
    }
    let wqe = (req.max_send_sge * 16).max(req.max_inline_data);
    let mut cap = QpCap {
        max_send_wr: ring_size_minus_one(req.max_send_wr),
        max_send_sge: wqe / 16,
        max_inline_data: wqe,
        max_recv_wr: 0,
        max_recv_sge: 0,
    };
    if has_rq {
        cap.max_recv_wr = ring_size_minus_one(req.max_recv_wr);
        cap.max_recv_sge = req.max_recv_sge;
    }
    Ok(cap)
}
