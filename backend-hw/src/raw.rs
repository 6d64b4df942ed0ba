//! A pre-built RDMA WRITE posted and polled straight through the C entry
//! points, for `hw_post_poll_overhead`: the baseline the safe
//! [`crate::HwVerbs`] path is compared with.
//!
//! [`RawWrite`] keeps one `ibv_send_wr` and one `ibv_sge` built once, posts
//! them with the provider's `post_send` and polls with `poll_cq` into a
//! C `ibv_wc` array: no handle checks, no conversion, no allocation. It
//! holds clones of the QP, CQ and MR handles, so the objects outlive it.

use core::ptr;

use rdma_sys as sys;
use verbs_api::{Error, Result, Verb, Verbs};

use crate::backend::HwVerbs;
use crate::convert::zeroed;
use crate::errors::c_error;
use crate::ffi::verbs as fv;
use crate::handles::{HwCq, HwMr, HwQp};

/// One signalled RDMA WRITE of a fixed buffer, ready to post.
pub struct RawWrite {
    wr: Box<sys::ibv_send_wr>,
    sge: Box<sys::ibv_sge>,
    wc: Box<[sys::ibv_wc; 16]>,
    qp: *mut sys::ibv_qp,
    cq: *mut sys::ibv_cq,
    // Keep the objects alive (and so the raw pointers above valid).
    _keep: (HwQp, HwCq, HwMr),
}

impl core::fmt::Debug for RawWrite {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RawWrite").finish_non_exhaustive()
    }
}

impl RawWrite {
    /// Builds the request: `len` bytes from the start of `mr` to
    /// `remote_addr`/`rkey`, signalled, `wr_id` 0.
    ///
    /// # Errors
    /// A stale or foreign handle (`EINVAL`).
    pub fn new(
        hw: &mut HwVerbs,
        qp: &HwQp,
        cq: &HwCq,
        mr: &HwMr,
        len: u32,
        remote_addr: u64,
        rkey: u32,
    ) -> Result<Self> {
        let verb = Verb::PostSend;
        let qpp = hw.qp_ptr(qp, verb)?;
        hw.check_owner(&cq.0.obj.ctx, verb, "CQ")?;
        let cqp = cq.0.obj.get(verb)?;
        let info = hw.mr_info(mr)?;
        let sge = Box::new(sys::ibv_sge {
            addr: info.addr,
            length: len,
            lkey: info.lkey,
        });
        let mut wr: Box<sys::ibv_send_wr> = Box::new(zeroed());
        wr.opcode = sys::ibv_wr_opcode::IBV_WR_RDMA_WRITE;
        wr.send_flags = sys::ibv_send_flags::IBV_SEND_SIGNALED.0;
        wr.num_sge = 1;
        wr.wr.rdma = sys::rdma_t { remote_addr, rkey };
        let mut this = Self {
            wr,
            sge,
            wc: Box::new(core::array::from_fn(|_| zeroed())),
            qp: qpp,
            cq: cqp,
            _keep: (qp.clone(), cq.clone(), mr.clone()),
        };
        this.wr.sg_list = &raw mut *this.sge;
        this.wr.next = ptr::null_mut();
        Ok(this)
    }

    /// `ibv_post_send` of the pre-built request.
    ///
    /// # Safety
    /// The [`Verbs::post_send`] contract: the MR's first `len` bytes and the
    /// remote range stay valid and untouched until the completion is polled.
    ///
    /// # Errors
    /// The provider's errno (e.g. `ENOMEM` with a full send queue).
    pub unsafe fn post(&mut self) -> Result<()> {
        let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
        // SAFETY: (1) the QP is alive (its handle is kept); (2) one valid
        // request whose SGE is kept in `self`; (3) `bad` is writable;
        // (4) our caller's contract.
        let rc = unsafe { fv::ibv_post_send(self.qp, &raw mut *self.wr, &mut bad) };
        if rc != 0 {
            return Err(c_error(Verb::PostSend, rc, "ibv_post_send"));
        }
        Ok(())
    }

    /// `ibv_poll_cq` into the internal array; returns how many completions
    /// were reaped (failed ones count too; see [`RawWrite::all_ok`]).
    ///
    /// # Errors
    /// A CQ in error (overrun).
    pub fn poll(&mut self) -> Result<usize> {
        // SAFETY: live CQ (handle kept); the array has room for 16; `&mut
        // self` serialises polling through this value.
        let n = unsafe { fv::ibv_poll_cq(self.cq, 16, self.wc.as_mut_ptr()) };
        if n < 0 {
            return Err(Error::from_errno(Verb::PollCq, -n, "ibv_poll_cq failed"));
        }
        Ok(n as usize)
    }

    /// `true` when the last `n` completions polled are all successful.
    pub fn all_ok(&self, n: usize) -> bool {
        self.wc[..n.min(16)]
            .iter()
            .all(|w| w.status == sys::ibv_wc_status::IBV_WC_SUCCESS)
    }
}
