//! mlx5's provider logic under the `mlx5dv_*` entry points (`mlx5dv.rs`):
//! the `mlx5dv_qp_ex` builders (DC addresses, raw WQEs decoded into work
//! requests) a QP carries, and the checks mlx5 makes at object creation
//! (`MLX5_CQE_SIZE`, `MLX_*_ALLOC_TYPE`) and of device identity.

use core::ffi::{c_int, c_void};
use core::mem::{offset_of, size_of};

use verbs_api::*;

use crate::provider::qpex::QpAlloc;
use crate::provider::state::{c, Fail, Res, Shim, SimRes};

/// Whether `dev` is one of ours with an mlx5 profile (`None`: not ours).
pub(crate) fn device_is_mlx5(shim: &Shim, dev: *mut c::ibv_device) -> Option<bool> {
    let i = shim.devices.iter().position(|&d| d == dev as usize)?;
    Some(shim.sim.is_mlx5(i))
}

/// Fills a QP's `mlx5dv_qp_ex` table (the DC address setters).
///
/// Every other builder of `struct mlx5dv_qp_ex` (mkeys, memcpy, signature
/// and crypto) is set too, to [`dv_unsupported`]: the inline
/// `mlx5dv_wr_*` wrappers call them unchecked, so a NULL would crash the
/// program; instead the batch fails at `ibv_wr_complete` with `EOPNOTSUPP`.
/// Raw WQEs likewise ([`wr_raw_wqe_not_enabled`]) until
/// [`enable_raw_wqe`] says the QP was created for them.
pub(crate) fn fill_dv(q: &mut QpAlloc) {
    let d = &mut q.dv;
    d.wr_raw_wqe = Some(wr_raw_wqe_not_enabled);
    d.wr_set_dc_addr = Some(wr_set_dc_addr);
    d.wr_set_dc_addr_stream = Some(wr_set_dc_addr_stream);
    type Unsupported = Option<unsafe extern "C" fn(*mut c::mlx5dv_qp_ex)>;
    let f: Unsupported = Some(dv_unsupported);
    macro_rules! set {
        ($($slot:ident),*) => {$(
            // SAFETY: the slot is an `Option<unsafe extern "C" fn(*mut
            // mlx5dv_qp_ex, ...)>`, the same size and layout as `f`'s type;
            // the function reads only its first argument (the same `struct
            // mlx5dv_qp_ex *`) and returns nothing, so on the x86-64 SysV
            // ABI a caller passing more arguments calls it soundly.
            unsafe { (&raw mut d.$slot).cast::<Unsupported>().write(f) };
        )*};
    }
    set!(
        wr_mr_interleaved,
        wr_mr_list,
        wr_mkey_configure,
        wr_set_mkey_access_flags,
        wr_set_mkey_layout_list,
        wr_set_mkey_layout_interleaved,
        wr_set_mkey_sig_block,
        wr_memcpy,
        wr_set_mkey_crypto
    );
}

/// `mlx5dv_wr_raw_wqe(mqp, wqe)` on an RC or UC QP: the WQE the program
/// wrote in mlx5's format, decoded into the request it describes (the
/// provider copies it into the send queue as it is, rdma-core
/// `providers/mlx5/qp.c`, `mlx5_wr_raw_wqe`). Its completion reports
/// `IBV_WC_DRIVER2` (`MLX5DV_WC_RAW_WQE`), with `qpx->wr_id`.
///
/// Read, all big-endian (`mlx5dv.h`): the control segment (`opmod_idx_opcode`:
/// the opcode in its low byte, the opmod in its high byte; `qpn_ds`: the
/// count of 16-byte segments in its low six bits; `fm_ce_se`: `CQ_UPDATE`
/// for a signalled request, `SOLICITED`, the fence bits; `imm`), then for
/// RDMA and atomics a remote-address segment (`raddr`, `rkey`), for
/// atomics an atomic segment (`swap_add`, `compare`), then data segments
/// (`byte_count`, `lkey`, `addr`; a `byte_count` of 0 is 2 GiB, as the
/// hardware reads it). Taken: `SEND`, `SEND_IMM`, `SEND_INVAL`,
/// `RDMA_WRITE`, `RDMA_WRITE_IMM`, `RDMA_READ`, `ATOMIC_CS`, `ATOMIC_FA`
/// with opmod 0. A NULL WQE, a segment count that does not fit the
/// opcode, or an inline data segment fail the batch with `EINVAL`; another
/// opcode or opmod with `EOPNOTSUPP` (nothing of the batch is posted).
unsafe extern "C" fn wr_raw_wqe(mqp: *mut c::mlx5dv_qp_ex, wqe: *const c_void) {
    let qp = qp_ex_of(mqp);
    let decoded = if wqe.is_null() {
        Err(libc::EINVAL)
    } else {
        // SAFETY: `mlx5dv_wr_raw_wqe`'s contract: `wqe` points to a whole
        // WQE, which starts with its 16-byte control segment.
        let ctrl = unsafe { wqe.cast::<c::mlx5_wqe_ctrl_seg>().read_unaligned() };
        let ds = (u32::from_be(ctrl.qpn_ds) & 0x3f) as usize;
        // SAFETY: the same contract: the WQE is `ds` 16-byte segments long
        // (at least the control segment just read).
        let bytes = unsafe { core::slice::from_raw_parts(wqe.cast::<u8>(), ds.max(1) * SEG) };
        decode_raw_wqe(bytes)
    };
    crate::provider::qpex::push_raw(qp, decoded);
}

/// A QP `mlx5dv_create_qp` made with mlx5dv `send_ops_flags` (any of
/// them, as libmlx5's `mlx5_qp_fill_wr_pfns` installs the builder; the
/// manual asks for `MLX5DV_QP_EX_WITH_RAW_WQE`): `mlx5dv_wr_raw_wqe`
/// decodes raw WQEs on RC
/// and UC QPs ([`wr_raw_wqe`]) and refuses them on the other types
/// ([`wr_raw_wqe_unsupported`]).
pub(crate) fn enable_raw_wqe(q: &mut QpAlloc) {
    let qp_type = q.ex.qp_base.qp_type;
    q.dv.wr_raw_wqe = Some(if matches!(qp_type, c::IBV_QPT_RC | c::IBV_QPT_UC) {
        wr_raw_wqe
    } else {
        wr_raw_wqe_unsupported
    });
}

/// `mlx5dv_wr_raw_wqe` on a QP created without mlx5dv `send_ops_flags`
/// (or not by `mlx5dv_create_qp`): the batch fails at `ibv_wr_complete`
/// with `EOPNOTSUPP`, nothing of it posted.
///
/// mlx5dv_wr_post(3) asks for `MLX5DV_QP_EX_WITH_RAW_WQE`. rdma-core
/// `providers/mlx5/qp.c`, `mlx5_qp_fill_wr_pfns`, sets
/// `dv_qp->wr_raw_wqe = mlx5_wr_raw_wqe` when the QP was created with
/// mlx5dv `send_ops_flags` (any of them: the code is laxer than the
/// manual, and the library follows the code), and leaves the slot NULL
/// otherwise, so there the inline `mlx5dv_wr_raw_wqe` jumps to NULL; no
/// errno exists for it upstream. The
/// library must not crash the program, so it fails the batch as it does
/// for the other builders it does not serve ([`dv_unsupported`]), with
/// `EOPNOTSUPP`, what `mlx5_qp_fill_wr_pfns` answers for send ops it does
/// not serve.
unsafe extern "C" fn wr_raw_wqe_not_enabled(mqp: *mut c::mlx5dv_qp_ex, _wqe: *const c_void) {
    crate::guard::log_err(
        "mlx5dv_wr_raw_wqe",
        libc::EOPNOTSUPP,
        &"the QP was not created with mlx5dv send_ops_flags (MLX5DV_QP_EX_WITH_RAW_WQE)",
    );
    crate::provider::qpex::fail(qp_ex_of(mqp), libc::EOPNOTSUPP);
}

/// `mlx5dv_wr_raw_wqe` on a QP whose WQEs carry more segments than RC's
/// (UD and DC address vectors, XRC's SRQ number): not decoded, the batch
/// fails with `EOPNOTSUPP`.
unsafe extern "C" fn wr_raw_wqe_unsupported(mqp: *mut c::mlx5dv_qp_ex, _wqe: *const c_void) {
    crate::provider::qpex::fail(qp_ex_of(mqp), libc::EOPNOTSUPP);
}

/// mlx5 opcodes (`mlx5dv.h`, `MLX5_OPCODE_*`) a raw WQE may carry.
const RAW_SEND_INVAL: u32 = 0x01;
const RAW_RDMA_WRITE: u32 = 0x08;
const RAW_RDMA_WRITE_IMM: u32 = 0x09;
const RAW_SEND: u32 = 0x0a;
const RAW_SEND_IMM: u32 = 0x0b;
const RAW_RDMA_READ: u32 = 0x10;
const RAW_ATOMIC_CS: u32 = 0x11;
const RAW_ATOMIC_FA: u32 = 0x12;

/// The size of a WQE segment, the unit of `ds`: the control segment's
/// (`sys`'s hand-declared `mlx5_wqe_ctrl_seg`; bindgen's was 20 bytes).
const SEG: usize = size_of::<c::mlx5_wqe_ctrl_seg>();
const _: () = assert!(
    SEG == 16
        && size_of::<c::mlx5_wqe_raddr_seg>() == SEG
        && size_of::<c::mlx5_wqe_atomic_seg>() == SEG
        && size_of::<c::mlx5_wqe_data_seg>() == SEG
);
/// Offsets of the control segment's fields (`mlx5dv.h`;
/// `tests/layout.rs` checks them against the header).
const CTRL_OPMOD_IDX_OPCODE: usize = offset_of!(c::mlx5_wqe_ctrl_seg, opmod_idx_opcode);
const CTRL_QPN_DS: usize = offset_of!(c::mlx5_wqe_ctrl_seg, qpn_ds);
const CTRL_FM_CE_SE: usize = offset_of!(c::mlx5_wqe_ctrl_seg, fm_ce_se);
const CTRL_IMM: usize = offset_of!(c::mlx5_wqe_ctrl_seg, imm);
/// Offsets in the segments after it.
const RADDR_RADDR: usize = offset_of!(c::mlx5_wqe_raddr_seg, raddr);
const RADDR_RKEY: usize = offset_of!(c::mlx5_wqe_raddr_seg, rkey);
const ATOMIC_SWAP_ADD: usize = offset_of!(c::mlx5_wqe_atomic_seg, swap_add);
const ATOMIC_COMPARE: usize = offset_of!(c::mlx5_wqe_atomic_seg, compare);
const DATA_BYTE_COUNT: usize = offset_of!(c::mlx5_wqe_data_seg, byte_count);
const DATA_LKEY: usize = offset_of!(c::mlx5_wqe_data_seg, lkey);
const DATA_ADDR: usize = offset_of!(c::mlx5_wqe_data_seg, addr);

/// Decodes a raw WQE's bytes (see [`wr_raw_wqe`]) into a request, or an
/// errno.
fn decode_raw_wqe(wqe: &[u8]) -> Result<crate::provider::qpex::Pending, c_int> {
    let bytes = |off: usize, n: usize| wqe.get(off..off + n).ok_or(libc::EINVAL);
    let word = |off: usize| -> Result<u32, c_int> {
        let b = bytes(off, 4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    let dword = |off: usize| -> Result<u64, c_int> {
        Ok(u64::from(word(off)?) << 32 | u64::from(word(off + 4)?))
    };
    let opmod_idx_opcode = word(CTRL_OPMOD_IDX_OPCODE)?;
    let (opcode, opmod) = (opmod_idx_opcode & 0xff, opmod_idx_opcode >> 24);
    let ds = (word(CTRL_QPN_DS)? & 0x3f) as usize;
    let fm_ce_se = bytes(CTRL_FM_CE_SE, 1)?[0];
    let imm_bytes = bytes(CTRL_IMM, 4)?;
    let imm_bytes = [imm_bytes[0], imm_bytes[1], imm_bytes[2], imm_bytes[3]];
    let (wr, remote, atomic) = match opcode {
        RAW_SEND => (WrOpcode::Send, false, false),
        RAW_SEND_IMM => (WrOpcode::SendWithImm, false, false),
        RAW_SEND_INVAL => (WrOpcode::SendWithInv, false, false),
        RAW_RDMA_WRITE => (WrOpcode::RdmaWrite, true, false),
        RAW_RDMA_WRITE_IMM => (WrOpcode::RdmaWriteWithImm, true, false),
        RAW_RDMA_READ => (WrOpcode::RdmaRead, true, false),
        RAW_ATOMIC_CS => (WrOpcode::AtomicCmpAndSwp, true, true),
        RAW_ATOMIC_FA => (WrOpcode::AtomicFetchAndAdd, true, true),
        _ => return Err(libc::EOPNOTSUPP),
    };
    if opmod != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    let header = 1 + usize::from(remote) + usize::from(atomic);
    if ds < header || (atomic && ds != header + 1) || wqe.len() < ds * SEG {
        return Err(libc::EINVAL);
    }
    let mut flags = 0;
    if fm_ce_se & 0x08 != 0 {
        flags |= c::IBV_SEND_SIGNALED; // MLX5_WQE_CTRL_CQ_UPDATE
    }
    if fm_ce_se & 0x02 != 0 {
        flags |= c::IBV_SEND_SOLICITED; // MLX5_WQE_CTRL_SOLICITED
    }
    if fm_ce_se & (0x80 | 0x20) != 0 {
        flags |= c::IBV_SEND_FENCE; // MLX5_WQE_CTRL_FENCE, _INITIATOR_SMALL_FENCE
    }
    // The C API's immediate is the big-endian word as it lies in memory;
    // the invalidated rkey of SEND_INVAL is a number, big-endian on the wire.
    let imm = match wr {
        WrOpcode::SendWithInv => u32::from_be_bytes(imm_bytes),
        _ => u32::from_ne_bytes(imm_bytes),
    };
    let (mut rdma, mut atomic_info) = (RdmaInfo::default(), AtomicInfo::default());
    if remote {
        let (raddr, rkey) = (dword(SEG + RADDR_RADDR)?, word(SEG + RADDR_RKEY)?);
        if atomic {
            let (swap_add, compare) = (
                dword(2 * SEG + ATOMIC_SWAP_ADD)?,
                dword(2 * SEG + ATOMIC_COMPARE)?,
            );
            let cs = wr == WrOpcode::AtomicCmpAndSwp;
            atomic_info = AtomicInfo {
                remote_addr: raddr,
                compare_add: if cs { compare } else { swap_add },
                swap: if cs { swap_add } else { 0 },
                rkey,
            };
        } else {
            rdma = RdmaInfo {
                remote_addr: raddr,
                rkey,
            };
        }
    }
    let mut sges = Vec::with_capacity(ds - header);
    for seg in header..ds {
        let off = seg * SEG;
        let byte_count = word(off + DATA_BYTE_COUNT)?;
        if byte_count & 0x8000_0000 != 0 {
            return Err(libc::EINVAL); // MLX5_INLINE_SEG: inline data
        }
        sges.push(Sge {
            addr: dword(off + DATA_ADDR)?,
            // mlx5 reads a byte count of 0 as 2 GiB.
            length: if byte_count == 0 {
                0x8000_0000
            } else {
                byte_count
            },
            lkey: word(off + DATA_LKEY)?,
        });
    }
    Ok(crate::provider::qpex::Pending::raw(
        wr,
        flags,
        imm,
        rdma,
        atomic_info,
        sges,
    ))
}

/// An mlx5 work-request builder the simulator does not model: the batch
/// fails with `EOPNOTSUPP` at `ibv_wr_complete`.
unsafe extern "C" fn dv_unsupported(mqp: *mut c::mlx5dv_qp_ex) {
    crate::provider::qpex::fail(qp_ex_of(mqp), libc::EOPNOTSUPP);
}

/// The `ibv_qp_ex` of the allocation a `mlx5dv_qp_ex` lives in.
fn qp_ex_of(mqp: *mut c::mlx5dv_qp_ex) -> *mut c::ibv_qp_ex {
    (mqp as usize - offset_of!(QpAlloc, dv)) as *mut c::ibv_qp_ex
}

unsafe extern "C" fn wr_set_dc_addr(
    mqp: *mut c::mlx5dv_qp_ex,
    ah: *mut c::ibv_ah,
    remote_dctn: u32,
    remote_dc_key: u64,
) {
    if let Some(p) = crate::provider::qpex::last(qp_ex_of(mqp)) {
        p.dc = Some((ah as usize, remote_dctn, remote_dc_key, 0));
    }
}

unsafe extern "C" fn wr_set_dc_addr_stream(
    mqp: *mut c::mlx5dv_qp_ex,
    ah: *mut c::ibv_ah,
    remote_dctn: u32,
    remote_dc_key: u64,
    stream_id: u16,
) {
    if let Some(p) = crate::provider::qpex::last(qp_ex_of(mqp)) {
        p.dc = Some((ah as usize, remote_dctn, remote_dc_key, stream_id));
    }
}

/// The mlx5 provider's buffer allocation policy (`MLX_QP_ALLOC_TYPE`,
/// mlx5's `MLX5_CQE_SIZE` (read at every CQ creation that does not name
/// a CQE size, `get_cqe_size` in rdma-core `providers/mlx5/verbs.c`): a
/// value other than 64 or 128 (read as `atoi` does: anything else is 0)
/// makes the creation fail with `EINVAL`. Only mlx5 profiles read it.
pub(crate) fn check_cqe_size_env(shim: &Shim, v: &str, ctx: backend_sim::ContextHandle) -> Res<()> {
    let Ok(val) = std::env::var("MLX5_CQE_SIZE") else {
        return Ok(());
    };
    let dev = shim.sim.context_device(ctx).at(v)? as usize;
    if !shim.sim.is_mlx5(dev) {
        return Ok(());
    }
    // atoi: leading blanks, an optional sign, then digits.
    let t = val.trim_start();
    let digits: String = t
        .strip_prefix('+')
        .unwrap_or(t)
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    match digits.as_str() {
        "64" | "128" if !t.starts_with('-') => Ok(()),
        _ => Err(Fail::new(
            v,
            libc::EINVAL,
            format!("MLX5_CQE_SIZE={val}: a CQE is 64 or 128 bytes"),
        )),
    }
}

/// `MLX_CQ_ALLOC_TYPE`, `MLX_SRQ_ALLOC_TYPE`, read when the object is
/// created): with `HUGE` the queue must live in 2 MB huge pages, and
/// creation fails with `ENOMEM` when the system has none; the other
/// policies (`ANON`, `CONTIG`, `PREFER_HUGE`, `PREFER_CONTIG`, `ALL`) fall
/// back to ordinary memory. Only mlx5 profiles follow it (the simulated
/// queues themselves live in ordinary memory either way).
pub(crate) fn check_alloc_type(
    shim: &Shim,
    v: &str,
    ctx: backend_sim::ContextHandle,
    var: &str,
) -> Res<()> {
    let dev = shim.sim.context_device(ctx).at(v)? as usize;
    let mlx5 = shim.sim.is_mlx5(dev);
    if !mlx5 || std::env::var(var).ok().as_deref().map(str::trim) != Some("HUGE") {
        return Ok(());
    }
    let free = std::fs::read_to_string("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0);
    if free == 0 {
        return Err(Fail::new(
            v,
            libc::ENOMEM,
            format!("{var}=HUGE and the system has no free 2 MB huge pages"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod raw_wqe_tests {
    use super::*;

    /// A control segment: opcode (and opmod), `ds`, `fm_ce_se`, `imm`.
    fn ctrl(opcode: u32, opmod: u32, ds: u32, fm_ce_se: u8, imm: [u8; 4]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend((opmod << 24 | opcode).to_be_bytes());
        v.extend((0x00ab_cd00 | ds).to_be_bytes());
        v.extend([0, 0, 0, fm_ce_se]);
        v.extend(imm);
        v
    }

    fn data(len: u32, lkey: u32, addr: u64) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend(len.to_be_bytes());
        v.extend(lkey.to_be_bytes());
        v.extend(addr.to_be_bytes());
        v
    }

    fn raddr(addr: u64, rkey: u32) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend(addr.to_be_bytes());
        v.extend(rkey.to_be_bytes());
        v.extend([0; 4]);
        v
    }

    #[test]
    fn a_signalled_send_of_two_segments() {
        let mut w = ctrl(RAW_SEND, 0, 3, 0x08, [0; 4]);
        w.extend(data(100, 0x1234, 0x1000));
        w.extend(data(0, 0x1234, 0x2000));
        let p = decode_raw_wqe(&w).unwrap();
        assert_eq!(p.opcode_for_test(), WrOpcode::Send);
        assert_eq!(p.flags_for_test(), c::IBV_SEND_SIGNALED);
        assert_eq!(
            p.sges_for_test(),
            [
                Sge {
                    addr: 0x1000,
                    length: 100,
                    lkey: 0x1234
                },
                // A byte count of 0 is 2 GiB to the hardware.
                Sge {
                    addr: 0x2000,
                    length: 0x8000_0000,
                    lkey: 0x1234
                },
            ]
        );
    }

    #[test]
    fn write_imm_and_atomics_read_their_segments() {
        let mut w = ctrl(RAW_RDMA_WRITE_IMM, 0, 3, 0x02 | 0x80, [1, 2, 3, 4]);
        w.extend(raddr(0xdead_beef_0000, 0x77));
        w.extend(data(64, 9, 0x4000));
        let p = decode_raw_wqe(&w).unwrap();
        assert_eq!(p.opcode_for_test(), WrOpcode::RdmaWriteWithImm);
        assert_eq!(
            p.flags_for_test(),
            c::IBV_SEND_SOLICITED | c::IBV_SEND_FENCE
        );
        assert_eq!(
            p.rdma_for_test(),
            RdmaInfo {
                remote_addr: 0xdead_beef_0000,
                rkey: 0x77
            }
        );
        assert_eq!(
            p.imm_for_test(),
            u32::from_ne_bytes([1, 2, 3, 4]),
            "as C stores a __be32"
        );

        let mut w = ctrl(RAW_ATOMIC_CS, 0, 4, 0, [0; 4]);
        w.extend(raddr(0x8000, 5));
        w.extend(7u64.to_be_bytes());
        w.extend(3u64.to_be_bytes());
        w.extend(data(8, 9, 0x4000));
        let p = decode_raw_wqe(&w).unwrap();
        assert_eq!(p.opcode_for_test(), WrOpcode::AtomicCmpAndSwp);
        assert_eq!(
            p.atomic_for_test(),
            AtomicInfo {
                remote_addr: 0x8000,
                compare_add: 3,
                swap: 7,
                rkey: 5
            }
        );
    }

    #[test]
    fn malformed_wqes_are_refused_with_their_errno() {
        // A segment count short of what the opcode needs.
        let mut w = ctrl(RAW_RDMA_WRITE, 0, 1, 0, [0; 4]);
        w.extend(raddr(0, 0));
        assert_eq!(decode_raw_wqe(&w).unwrap_err(), libc::EINVAL);
        // An atomic with other than one data segment.
        let mut w = ctrl(RAW_ATOMIC_FA, 0, 3, 0, [0; 4]);
        w.extend(raddr(0, 0));
        w.extend([0; 16]);
        assert_eq!(decode_raw_wqe(&w).unwrap_err(), libc::EINVAL);
        // Inline data.
        let mut w = ctrl(RAW_SEND, 0, 2, 0, [0; 4]);
        w.extend(data(0x8000_0010, 0, 0));
        assert_eq!(decode_raw_wqe(&w).unwrap_err(), libc::EINVAL);
        // Fewer bytes than the segment count says.
        let w = ctrl(RAW_SEND, 0, 2, 0, [0; 4]);
        assert_eq!(decode_raw_wqe(&w).unwrap_err(), libc::EINVAL);
        // A NOP, a masked atomic's opmod.
        let w = ctrl(0x00, 0, 1, 0, [0; 4]);
        assert_eq!(decode_raw_wqe(&w).unwrap_err(), libc::EOPNOTSUPP);
        let mut w = ctrl(RAW_ATOMIC_CS, 8, 4, 0, [0; 4]);
        w.extend([0; 48]);
        assert_eq!(decode_raw_wqe(&w).unwrap_err(), libc::EOPNOTSUPP);
    }
}
