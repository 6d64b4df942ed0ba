//! Posting DC work requests on a DCI through the extended-QP API
//! (`ibv_wr_start`, an opcode builder, `mlx5dv_wr_set_dc_addr[_stream]`,
//! `ibv_wr_set_sge_list` / `ibv_wr_set_inline_data_list`, `ibv_wr_complete`).
//!
//! # `bad_wr` semantics
//!
//! `ibv_post_send` stops at the first bad request and posts the ones before
//! it. The `ibv_wr_*` API has no per-request error: the builders record the
//! first problem inside the provider and `ibv_wr_complete` then fails the
//! **whole batch**, posting none of it (mlx5 rolls the send queue back).
//! The backend keeps as much of the C contract as that allows:
//!
//! * everything it can check before building — the request has DC
//!   addressing, its AH is live and ours, the opcode is one DC supports and
//!   the QP was created with its `send_ops_flags` builder — is checked up
//!   front; at the first request that fails, the requests *before* it are
//!   posted as one batch and the error reports `bad_wr` = its index, as C
//!   would;
//! * a failure only the provider sees (send queue full, too many SGEs,
//!   inline data too long) makes `ibv_wr_complete` fail: nothing of the
//!   batch is posted and `bad_wr` is the batch's first index (0, or the
//!   first request of a batch posted before a pre-check failure).

use rdma_sys::{ibv_ah, ibv_data_buf, ibv_qp_ex, ibv_sge};

use crate::ffi::mlx5dv::{self as dv, mlx5dv_qp_ex};
use crate::ffi::verbs::{self as fv, WrBuilder, EOPNOTSUPP};

/// One request, converted and checked, ready for the builders.
pub(crate) struct DcWr {
    pub(crate) wr_id: u64,
    pub(crate) wr_flags: u32,
    pub(crate) op: WrBuilder,
    pub(crate) ah: *mut ibv_ah,
    pub(crate) remote_dctn: u32,
    pub(crate) remote_dc_key: u64,
    pub(crate) stream_id: u16,
    pub(crate) sges: Vec<ibv_sge>,
    /// `IBV_SEND_INLINE`: the SGE bytes are copied into the WQE at post time.
    pub(crate) inline: bool,
}

/// Why a request cannot be built on this QP (checked before the batch).
///
/// # Safety
///
/// `qpx` and `mqpx` are the live extended tables of one live DCI.
pub(crate) unsafe fn unbuildable(
    qpx: *mut ibv_qp_ex,
    mqpx: *mut mlx5dv_qp_ex,
    w: &DcWr,
) -> Option<&'static str> {
    // SAFETY: live tables (caller).
    if !unsafe { fv::ibv_wr_has_batch_ops(qpx, w.inline) } {
        return Some("the QP's extended table lacks wr_start/wr_complete or the data setter");
    }
    // SAFETY: live table (caller).
    if !unsafe { fv::ibv_wr_has_builder(qpx, &w.op) } {
        return Some("the QP was not created with the send_ops_flags bit of this opcode");
    }
    // SAFETY: live mlx5 table (caller); plain reads of two entries.
    let has_addr = unsafe {
        if w.stream_id == 0 {
            (*mqpx).wr_set_dc_addr.is_some()
        } else {
            (*mqpx).wr_set_dc_addr_stream.is_some()
        }
    };
    if !has_addr {
        return Some("the provider has no DC address setter for this QP");
    }
    None
}

/// Builds `wrs` as one batch and completes it. Returns 0 or the positive
/// errno of `ibv_wr_complete` (nothing posted then).
///
/// # Safety
///
/// 1. `qpx`/`mqpx` are the live extended tables of one live DCI, and no
///    other thread posts on it;
/// 2. every request passed [`unbuildable`] (`None`) on these tables;
/// 3. every `ah` is a live AH of the QP's context;
/// 4. the bytes the SGEs name follow `post_send`'s contract (inline bytes
///    are read during this call; the others until completion).
pub(crate) unsafe fn post_batch(qpx: *mut ibv_qp_ex, mqpx: *mut mlx5dv_qp_ex, wrs: &[DcWr]) -> i32 {
    if wrs.is_empty() {
        return 0;
    }
    // SAFETY: (1) live table, no batch open, exclusive.
    if !unsafe { fv::ibv_wr_start(qpx) } {
        return EOPNOTSUPP;
    }
    for w in wrs {
        // SAFETY: (1) live table with a batch open; plain field writes that
        // the builder reads for this request.
        unsafe {
            (*qpx).wr_id = w.wr_id;
            (*qpx).wr_flags = w.wr_flags;
        }
        // SAFETY: (1)-(2): batch open, builder present, wr_id/flags set.
        let mut ok = unsafe { fv::ibv_wr_opcode(qpx, &w.op) };
        // SAFETY: (1) live mlx5 table, request open with its opcode set;
        // (3) live AH; (2) the stream setter is present when used.
        ok = ok
            && unsafe {
                if w.stream_id == 0 {
                    dv::mlx5dv_wr_set_dc_addr(mqpx, w.ah, w.remote_dctn, w.remote_dc_key)
                } else {
                    dv::mlx5dv_wr_set_dc_addr_stream(
                        mqpx,
                        w.ah,
                        w.remote_dctn,
                        w.remote_dc_key,
                        w.stream_id,
                    )
                }
            };
        ok = ok
            && if w.inline {
                let bufs: Vec<ibv_data_buf> = w
                    .sges
                    .iter()
                    .map(|s| ibv_data_buf {
                        addr: s.addr as usize as *mut _,
                        length: s.length as usize,
                    })
                    .collect();
                // SAFETY: request open with opcode set; `bufs` lives across
                // the call; (4) each names readable bytes, copied now.
                unsafe { fv::ibv_wr_set_inline_data_list(qpx, bufs.len(), bufs.as_ptr()) }
            } else {
                // SAFETY: request open with opcode set; the SGE array lives
                // across the call (the provider copies it into the WQE).
                unsafe { fv::ibv_wr_set_sge_list(qpx, w.sges.len(), w.sges.as_ptr()) }
            };
        if !ok {
            // Cannot happen after `unbuildable` said yes; stay safe anyway.
            // SAFETY: (1) a batch is open on the live table.
            unsafe { fv::ibv_wr_abort(qpx) };
            return EOPNOTSUPP;
        }
    }
    // SAFETY: (1) batch open on the live table; (4) caller's contract.
    unsafe { fv::ibv_wr_complete(qpx) }
}

#[cfg(test)]
mod tests {
    //! The batch logic on fake provider tables: no device needed.
    use super::*;
    use core::mem::MaybeUninit;
    use std::cell::RefCell;

    thread_local! {
        static LOG: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    }
    fn log(s: String) {
        LOG.with(|l| l.borrow_mut().push(s));
    }
    fn take_log() -> Vec<String> {
        LOG.with(|l| l.borrow_mut().drain(..).collect())
    }

    unsafe extern "C" fn start(_: *mut ibv_qp_ex) {
        log("start".into());
    }
    unsafe extern "C" fn complete_ok(_: *mut ibv_qp_ex) -> i32 {
        log("complete".into());
        0
    }
    unsafe extern "C" fn complete_enomem(_: *mut ibv_qp_ex) -> i32 {
        log("complete".into());
        12
    }
    unsafe extern "C" fn abort(_: *mut ibv_qp_ex) {
        log("abort".into());
    }
    unsafe extern "C" fn write(q: *mut ibv_qp_ex, rkey: u32, addr: u64) {
        // SAFETY: the test's live fake table.
        let (id, fl) = unsafe { ((*q).wr_id, (*q).wr_flags) };
        log(format!(
            "write id={id} flags={fl} rkey={rkey} addr={addr:#x}"
        ));
    }
    unsafe extern "C" fn sge_list(_: *mut ibv_qp_ex, n: usize, s: *const ibv_sge) {
        // SAFETY: `post_batch` passes `n` valid entries.
        let l = unsafe { (*s).length };
        log(format!("sges n={n} len0={l}"));
    }
    unsafe extern "C" fn dc_addr(_: *mut mlx5dv_qp_ex, _: *mut ibv_ah, dctn: u32, key: u64) {
        log(format!("dc dctn={dctn:#x} key={key}"));
    }

    fn tables(complete_fails: bool) -> (Box<ibv_qp_ex>, Box<mlx5dv_qp_ex>) {
        // SAFETY: `ibv_qp_ex` is a plain C struct of integers, raw pointers,
        // nullable function pointers and opaque pthread byte arrays: all
        // zero is a valid value.
        let mut q: Box<ibv_qp_ex> = Box::new(unsafe { MaybeUninit::zeroed().assume_init() });
        q.wr_start = Some(start);
        q.wr_complete = Some(if complete_fails {
            complete_enomem
        } else {
            complete_ok
        });
        q.wr_abort = Some(abort);
        q.wr_rdma_write = Some(write);
        q.wr_set_sge_list = Some(sge_list);
        // SAFETY: as above: `mlx5dv_qp_ex` is a u64 and nullable fn pointers.
        let mut m: Box<mlx5dv_qp_ex> = Box::new(unsafe { MaybeUninit::zeroed().assume_init() });
        m.wr_set_dc_addr = Some(dc_addr);
        (q, m)
    }

    fn wr(id: u64, op: WrBuilder) -> DcWr {
        DcWr {
            wr_id: id,
            wr_flags: 2,
            op,
            ah: core::ptr::null_mut(),
            remote_dctn: 0x77,
            remote_dc_key: 9,
            stream_id: 0,
            sges: vec![ibv_sge {
                addr: 0x1000,
                length: 64,
                lkey: 5,
            }],
            inline: false,
        }
    }

    #[test]
    fn batch_calls_builders_in_order_and_completes_once() {
        // Goal: each request is built as opcode, DC address, data, after
        // wr_id/wr_flags are set, inside one start/complete pair.
        let (mut q, mut m) = tables(false);
        let w = [
            wr(
                1,
                WrBuilder::RdmaWrite {
                    rkey: 3,
                    addr: 0x2000,
                },
            ),
            wr(
                2,
                WrBuilder::RdmaWrite {
                    rkey: 3,
                    addr: 0x2040,
                },
            ),
        ];
        for x in &w {
            // SAFETY: live fake tables.
            assert_eq!(unsafe { unbuildable(&mut *q, &mut *m, x) }, None);
        }
        // SAFETY: live fake tables; the fake builders touch no memory but
        // the SGE array; the null AH is never dereferenced by `dc_addr`.
        assert_eq!(unsafe { post_batch(&mut *q, &mut *m, &w) }, 0);
        assert_eq!(
            take_log(),
            [
                "start",
                "write id=1 flags=2 rkey=3 addr=0x2000",
                "dc dctn=0x77 key=9",
                "sges n=1 len0=64",
                "write id=2 flags=2 rkey=3 addr=0x2040",
                "dc dctn=0x77 key=9",
                "sges n=1 len0=64",
                "complete",
            ]
        );
    }

    #[test]
    fn complete_failure_is_reported_for_the_whole_batch() {
        // Goal: ibv_wr_complete's errno comes back (the caller maps it to
        // bad_wr = first of the batch).
        let (mut q, mut m) = tables(true);
        let w = [wr(1, WrBuilder::RdmaWrite { rkey: 3, addr: 0 })];
        // SAFETY: as in the test above.
        assert_eq!(unsafe { post_batch(&mut *q, &mut *m, &w) }, 12);
        take_log();
    }

    #[test]
    fn missing_builders_are_found_before_the_batch() {
        // Goal: an opcode the QP was not created for, an inline request
        // without the inline setter and a stream id without the stream
        // setter are refused up front (no batch is started).
        let (mut q, mut m) = tables(false);
        // SAFETY: live fake tables; only entries are read.
        let send = unsafe { unbuildable(&mut *q, &mut *m, &wr(1, WrBuilder::Send)) };
        assert!(send.unwrap().contains("send_ops_flags"));
        let mut inl = wr(1, WrBuilder::RdmaWrite { rkey: 1, addr: 0 });
        inl.inline = true;
        // SAFETY: as above.
        assert!(unsafe { unbuildable(&mut *q, &mut *m, &inl) }.is_some());
        let mut st = wr(1, WrBuilder::RdmaWrite { rkey: 1, addr: 0 });
        st.stream_id = 2;
        // SAFETY: as above.
        assert!(unsafe { unbuildable(&mut *q, &mut *m, &st) }.is_some());
        assert!(take_log().is_empty());
        // SAFETY: as above; an empty batch does nothing.
        assert_eq!(unsafe { post_batch(&mut *q, &mut *m, &[]) }, 0);
        assert!(take_log().is_empty());
    }
}
