//! The [`Verbs`] trait: one method per verb, associated types per resource.

use crate::*;
use std::net::SocketAddr;

/// What every resource handle is: cheap to clone, printable.
///
/// Handles are values (generational indices in the simulator, `Arc`s on
/// hardware). Destroying through one handle invalidates every clone; using
/// a stale handle is an error (`EINVAL`/`ENOENT`), never undefined behaviour.
pub trait Handle: Clone + core::fmt::Debug {}
impl<T: Clone + core::fmt::Debug> Handle for T {}

/// What `rdma_cm` keeps in a `struct rdma_cm_id` (its fields, as handles).
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(bound(
        serialize = "V::Context: serde::Serialize, V::Pd: serde::Serialize, V::Qp: serde::Serialize, V::Cq: serde::Serialize, V::CompChannel: serde::Serialize",
        deserialize = "V::Context: serde::Deserialize<'de>, V::Pd: serde::Deserialize<'de>, V::Qp: serde::Deserialize<'de>, V::Cq: serde::Deserialize<'de>, V::CompChannel: serde::Deserialize<'de>"
    ))
)]
pub struct CmIdInfo<V: Verbs + ?Sized> {
    /// `verbs`: the device context once the id is bound to a device.
    pub verbs: Option<V::Context>,
    /// `pd`: the PD used by `rdma_create_qp` (the device's default PD if none was given).
    pub pd: Option<V::Pd>,
    /// `qp`.
    pub qp: Option<V::Qp>,
    /// `send_cq`: the CQ `rdma_create_qp` created (C stores only those, not CQs the caller gave).
    pub send_cq: Option<V::Cq>,
    /// `recv_cq`: the CQ `rdma_create_qp` created (C stores only those, not CQs the caller gave).
    pub recv_cq: Option<V::Cq>,
    /// `send_cq_channel` (created with an automatic send CQ).
    pub send_cq_channel: Option<V::CompChannel>,
    /// `recv_cq_channel` (created with an automatic recv CQ).
    pub recv_cq_channel: Option<V::CompChannel>,
    /// `port_num`.
    pub port_num: u8,
    /// `ps`.
    pub ps: PortSpace,
    /// Local and peer addresses.
    pub addrs: CmAddrs,
}

/// The RDMA verbs API, one method per verb.
///
/// Each method's documentation names the C function it mirrors; arguments
/// carry the C struct fields with their C names, and errors carry the verb,
/// an [`ErrorKind`] and the errno. Methods a backend does not implement
/// return [`ErrorKind::Unsupported`] (errno `ENOSYS`, see
/// [`Error::is_not_implemented`]), never panic.
///
/// Every invalid argument returns an error and changes nothing: no object is
/// half created, no count moves.
///
/// Code is written generic over `V: Verbs` (static dispatch); the conformance
/// runner, the property tests and the benchmarks all are.
pub trait Verbs {
    /// An open device (`struct ibv_context`).
    type Context: Handle;
    /// A protection domain (`struct ibv_pd`).
    type Pd: Handle;
    /// A completion queue (`struct ibv_cq`).
    type Cq: Handle;
    /// A completion channel (`struct ibv_comp_channel`).
    type CompChannel: Handle;
    /// A memory region that owns its bytes (`struct ibv_mr` + its buffer).
    type Mr: Handle;
    /// A shared receive queue (`struct ibv_srq`).
    type Srq: Handle;
    /// A queue pair (`struct ibv_qp`), including DCI/DCT and opened XRC_TGT QPs.
    type Qp: Handle;
    /// An address handle (`struct ibv_ah`).
    type Ah: Handle;
    /// An XRC domain (`struct ibv_xrcd`; also the legacy `struct ibv_xrc_domain`).
    type Xrcd: Handle;
    /// A memory window (`struct ibv_mw`).
    type Mw: Handle;
    /// A device memory allocation (`struct ibv_dm`).
    type Dm: Handle;
    /// An rdma_cm event channel (`struct rdma_event_channel`).
    type CmChannel: Handle;
    /// An rdma_cm identifier (`struct rdma_cm_id`).
    type CmId: Handle;

    /// Which backend this is.
    fn backend(&self) -> BackendKind;

    /// What this backend and its first device support (scripts' `#! requires:`).
    fn capabilities(&mut self) -> Capabilities;

    // ----------------------------------------------------------------- device

    /// `ibv_get_device_list`.
    ///
    /// # Errors
    /// `NoDevice`/`Unsupported` with the cause when the machine has no RDMA
    /// subsystem (`ENOSYS`) or no device.
    fn get_device_list(&mut self) -> Result<Vec<DeviceInfo>>;

    /// `ibv_open_device` on entry `index` of the device list, by `process`.
    ///
    /// # Errors
    /// `NoDevice` for an index past the list.
    fn open_device(&mut self, index: usize, process: ProcessId) -> Result<Self::Context>;

    /// `ibv_close_device`.
    ///
    /// # Errors
    /// `Busy` while resources of the context are alive (the simulator checks;
    /// C leaves them dangling).
    fn close_device(&mut self, ctx: &Self::Context) -> Result<()>;

    /// `ibv_query_device`.
    fn query_device(&mut self, ctx: &Self::Context) -> Result<DeviceAttr>;

    /// `ibv_query_port`.
    ///
    /// # Errors
    /// `EINVAL` for a port outside `1..=phys_port_cnt`.
    fn query_port(&mut self, ctx: &Self::Context, port_num: u8) -> Result<PortAttr>;

    /// `ibv_query_gid`.
    ///
    /// # Errors
    /// `EINVAL` for an invalid port or an index past `gid_tbl_len`.
    fn query_gid(&mut self, ctx: &Self::Context, port_num: u8, index: u32) -> Result<Gid>;

    /// `ibv_query_pkey`.
    ///
    /// # Errors
    /// `EINVAL` for an invalid port or an index past `pkey_tbl_len`.
    fn query_pkey(&mut self, ctx: &Self::Context, port_num: u8, index: u16) -> Result<u16>;

    /// `ibv_query_device_ex` (no input struct: every extended field).
    fn query_device_ex(&mut self, ctx: &Self::Context) -> Result<DeviceAttrEx> {
        let _ = ctx;
        Err(Error::not_implemented(
            Verb::QueryDeviceEx,
            self.backend().name(),
        ))
    }

    /// `ibv_query_gid_ex(context, port_num, gid_index, entry, flags)`.
    ///
    /// # Errors
    /// `EINVAL` for `flags != 0`, an invalid port or an index past
    /// `gid_tbl_len`; `ENODATA` for an empty table entry.
    fn query_gid_ex(
        &mut self,
        ctx: &Self::Context,
        port_num: u32,
        gid_index: u32,
        flags: u32,
    ) -> Result<GidEntry> {
        let _ = (ctx, port_num, gid_index, flags);
        Err(Error::not_implemented(
            Verb::QueryGidEx,
            self.backend().name(),
        ))
    }

    /// `ibv_query_gid_table(context, entries, max_entries, flags)`: every
    /// valid GID of every port, in port then index order.
    ///
    /// # Errors
    /// `EINVAL` for `flags != 0` or when more than `max_entries` are valid.
    fn query_gid_table(
        &mut self,
        ctx: &Self::Context,
        max_entries: usize,
        flags: u32,
    ) -> Result<Vec<GidEntry>> {
        let _ = (ctx, max_entries, flags);
        Err(Error::not_implemented(
            Verb::QueryGidTable,
            self.backend().name(),
        ))
    }

    /// `ibv_get_async_event`, non-blocking: `Ok(None)` when no event is pending.
    fn get_async_event(&mut self, ctx: &Self::Context) -> Result<Option<AsyncEvent<Self>>> {
        let _ = ctx;
        Err(Error::not_implemented(
            Verb::GetAsyncEvent,
            self.backend().name(),
        ))
    }

    /// `ibv_ack_async_event`.
    fn ack_async_event(&mut self, event: &AsyncEvent<Self>) -> Result<()> {
        let _ = event;
        Err(Error::not_implemented(
            Verb::AckAsyncEvent,
            self.backend().name(),
        ))
    }

    // --------------------------------------------------------------------- PD

    /// `ibv_alloc_pd`.
    fn alloc_pd(&mut self, ctx: &Self::Context) -> Result<Self::Pd>;

    /// `ibv_dealloc_pd`.
    ///
    /// # Errors
    /// `EBUSY` while a QP, MR, SRQ or AH uses the PD.
    fn dealloc_pd(&mut self, pd: &Self::Pd) -> Result<()>;

    // --------------------------------------------------------------------- CQ

    /// `ibv_create_comp_channel`.
    fn create_comp_channel(&mut self, ctx: &Self::Context) -> Result<Self::CompChannel> {
        let _ = ctx;
        Err(Error::not_implemented(
            Verb::CreateCompChannel,
            self.backend().name(),
        ))
    }

    /// `ibv_destroy_comp_channel`.
    ///
    /// # Errors
    /// `EBUSY` while a CQ is bound to the channel.
    fn destroy_comp_channel(&mut self, channel: &Self::CompChannel) -> Result<()> {
        let _ = channel;
        Err(Error::not_implemented(
            Verb::DestroyCompChannel,
            self.backend().name(),
        ))
    }

    /// `ibv_create_cq`. The actual size (≥ `cqe`) is in [`Verbs::cq_info`].
    ///
    /// # Errors
    /// `EINVAL` for `cqe` of 0 or above the device's `max_cqe`.
    fn create_cq(&mut self, ctx: &Self::Context, init: &CqInit<'_, Self>) -> Result<Self::Cq>;

    /// The `cqe` and `cq_context` fields of `struct ibv_cq`.
    fn cq_info(&mut self, cq: &Self::Cq) -> Result<CqInfo>;

    /// `ibv_destroy_cq`.
    ///
    /// # Errors
    /// `EBUSY` while a QP or SRQ uses the CQ.
    fn destroy_cq(&mut self, cq: &Self::Cq) -> Result<()>;

    /// `ibv_req_notify_cq`.
    fn req_notify_cq(&mut self, cq: &Self::Cq, solicited_only: bool) -> Result<()> {
        let _ = (cq, solicited_only);
        Err(Error::not_implemented(
            Verb::ReqNotifyCq,
            self.backend().name(),
        ))
    }

    /// `ibv_get_cq_event`, non-blocking: `Ok(None)` when no event is pending.
    fn get_cq_event(&mut self, channel: &Self::CompChannel) -> Result<Option<Self::Cq>> {
        let _ = channel;
        Err(Error::not_implemented(
            Verb::GetCqEvent,
            self.backend().name(),
        ))
    }

    /// `ibv_ack_cq_events`.
    fn ack_cq_events(&mut self, cq: &Self::Cq, nevents: u32) -> Result<()> {
        let _ = (cq, nevents);
        Err(Error::not_implemented(
            Verb::AckCqEvents,
            self.backend().name(),
        ))
    }

    /// `ibv_poll_cq`: fills `wc` from the front, returns how many.
    ///
    /// The simulator processes due events first and, while the CQ is empty,
    /// advances virtual time to the next event, so a poll loop finishes
    /// instantly in wall time.
    ///
    /// # Errors
    /// After a CQ overrun the CQ is in error and polling fails.
    fn poll_cq(&mut self, cq: &Self::Cq, wc: &mut [Wc]) -> Result<usize>;

    /// `ibv_resize_cq`: at least `cqe` entries, rounded up as `ibv_create_cq`
    /// rounds (the actual size in [`Verbs::cq_info`]); queued completions
    /// are kept.
    ///
    /// # Errors
    /// `EINVAL` for `cqe` of 0, above `max_cqe`, or below the number of
    /// completions queued now.
    fn resize_cq(&mut self, cq: &Self::Cq, cqe: u32) -> Result<()> {
        let _ = (cq, cqe);
        Err(Error::not_implemented(
            Verb::ResizeCq,
            self.backend().name(),
        ))
    }

    /// `ibv_create_cq_ex`: a CQ whose completions [`Verbs::poll_cq_ex`]
    /// reads with the fields of `attr.wc_flags` (and which
    /// [`Verbs::poll_cq`] also polls, as `ibv_cq_ex_to_cq` allows).
    ///
    /// # Errors
    /// `EOPNOTSUPP` for `wc_flags` the device cannot report (mlx5:
    /// anything past `IBV_WC_STANDARD_FLAGS` and the timestamps it has),
    /// `EINVAL` for unknown `comp_mask`/`flags` bits, otherwise as
    /// [`Verbs::create_cq`].
    fn create_cq_ex(
        &mut self,
        ctx: &Self::Context,
        attr: &CqInitAttrEx<'_, Self>,
    ) -> Result<Self::Cq> {
        let _ = (ctx, attr);
        Err(Error::not_implemented(
            Verb::CreateCqEx,
            self.backend().name(),
        ))
    }

    /// `ibv_start_poll` / `ibv_next_poll` / `ibv_end_poll` with the
    /// `ibv_wc_read_*` calls of the CQ's `wc_flags`: fills `wc` from the
    /// front and returns how many (0 where `ibv_start_poll` says `ENOENT`).
    ///
    /// # Errors
    /// `EINVAL` for a CQ not made by [`Verbs::create_cq_ex`]; as
    /// [`Verbs::poll_cq`] otherwise.
    fn poll_cq_ex(&mut self, cq: &Self::Cq, wc: &mut [WcEx]) -> Result<usize> {
        let _ = (cq, wc);
        Err(Error::not_implemented(
            Verb::PollCqEx,
            self.backend().name(),
        ))
    }

    // --------------------------------------------------------------------- MR

    /// `ibv_reg_mr` over a buffer of `length` bytes that the backend
    /// allocates (page aligned, zeroed) and the MR owns.
    ///
    /// # Errors
    /// `EINVAL` when `REMOTE_WRITE` or `REMOTE_ATOMIC` is asked without
    /// `LOCAL_WRITE`; `EOPNOTSUPP` for `ON_DEMAND` without ODP.
    fn reg_mr(&mut self, pd: &Self::Pd, length: usize, access: AccessFlags) -> Result<Self::Mr>;

    /// The `addr`, `length`, `lkey`, `rkey` fields of `struct ibv_mr`.
    fn mr_info(&mut self, mr: &Self::Mr) -> Result<MrInfo>;

    /// The MR's bytes.
    fn mr_bytes<'a>(&'a self, mr: &'a Self::Mr) -> Result<&'a [u8]>;

    /// The MR's bytes, writable.
    ///
    /// # Errors
    /// The simulator refuses (`ApiMisuse`) while a posted work request still
    /// owns the memory (undefined behaviour on hardware).
    fn mr_bytes_mut<'a>(&'a mut self, mr: &'a Self::Mr) -> Result<&'a mut [u8]>;

    /// `ibv_dereg_mr`.
    fn dereg_mr(&mut self, mr: &Self::Mr) -> Result<()>;

    /// `ibv_rereg_mr`: changes the MR's buffer (`CHANGE_TRANSLATION`: a new
    /// zeroed buffer of `length` bytes), PD and/or access in place. The
    /// keys are read back with [`Verbs::mr_info`].
    ///
    /// # Errors
    /// `EINVAL` for no flags or unknown flags, `CHANGE_TRANSLATION` with
    /// length 0, `CHANGE_PD` without a PD, access flags without
    /// `CHANGE_ACCESS` (libibverbs), or invalid access flags (a PD without
    /// `CHANGE_PD` is ignored, as the kernel does);
    /// `EBUSY` while memory windows are bound to the MR; `EOPNOTSUPP` for
    /// what the driver cannot change (rxe: the translation). Nothing
    /// changes on error.
    fn rereg_mr(&mut self, mr: &Self::Mr, args: &ReregMr<'_, Self>) -> Result<()> {
        let _ = (mr, args);
        Err(Error::not_implemented(Verb::ReregMr, self.backend().name()))
    }

    /// `ibv_advise_mr(pd, advice, flags, sg_list, num_sge)`: advice about
    /// ranges of on-demand-paging MRs of `pd` (prefetch), best effort;
    /// `flags` may hold [`ADVISE_MR_FLAG_FLUSH`] (wait until done).
    ///
    /// # Errors
    /// `EOPNOTSUPP` for an advice the device does not take (or a device
    /// without ODP); `EINVAL` for unknown flags or an empty list; `ENOENT`
    /// for an lkey that is not an ODP MR of `pd` (or, with
    /// `PREFETCH_WRITE`, not a writable one); `EFAULT` for a range outside
    /// its MR.
    fn advise_mr(
        &mut self,
        pd: &Self::Pd,
        advice: AdviseMrAdvice,
        flags: u32,
        sg_list: &[Sge],
    ) -> Result<()> {
        let _ = (pd, advice, flags, sg_list);
        Err(Error::not_implemented(
            Verb::AdviseMr,
            self.backend().name(),
        ))
    }

    /// `ibv_alloc_mw(pd, type)`: an unbound memory window.
    ///
    /// # Errors
    /// `EOPNOTSUPP` on a device without memory windows (or this type).
    fn alloc_mw(&mut self, pd: &Self::Pd, mw_type: MwType) -> Result<Self::Mw> {
        let _ = (pd, mw_type);
        Err(Error::not_implemented(Verb::AllocMw, self.backend().name()))
    }

    /// `ibv_dealloc_mw`: unbinds (if bound) and frees the window.
    fn dealloc_mw(&mut self, mw: &Self::Mw) -> Result<()> {
        let _ = mw;
        Err(Error::not_implemented(
            Verb::DeallocMw,
            self.backend().name(),
        ))
    }

    /// The `rkey` and `type` fields of `struct ibv_mw`.
    fn mw_info(&mut self, mw: &Self::Mw) -> Result<MwInfo> {
        let _ = mw;
        Err(Error::not_implemented(Verb::AllocMw, self.backend().name()))
    }

    /// `ibv_bind_mw(qp, mw, mw_bind)`: posts a bind of a type 1 window on
    /// `qp` (its completion is a `BIND_MW` work completion); on success
    /// the window's rkey is the next one (`ibv_inc_rkey`). A bind with
    /// `mr == None` and length 0 unbinds.
    ///
    /// # Errors
    /// `EINVAL` for a type 2 window, ZERO_BASED access, an address or
    /// length without an MR; `EPERM` when the MR's PD is not the
    /// window's; post-time errors as [`Verbs::post_send`]. What only the
    /// device checks (MR lacking `MW_BIND`, range outside the MR) fails in
    /// the completion with `MW_BIND_ERR`.
    fn bind_mw(&mut self, qp: &Self::Qp, mw: &Self::Mw, bind: &MwBind<'_, Self>) -> Result<()> {
        let _ = (qp, mw, bind);
        Err(Error::not_implemented(Verb::BindMw, self.backend().name()))
    }

    // ---------------------------------------------------------- device memory

    /// `ibv_alloc_dm(context, attr)`: `attr.length` bytes of the adapter's
    /// own memory, zeroed, owned by `ctx` (which cannot close while it
    /// lives).
    ///
    /// # Errors
    /// `EOPNOTSUPP` on a device without device memory (`max_dm_size` 0);
    /// `EINVAL` for a `comp_mask` other than 0, length 0 or a length above
    /// `max_dm_size`; `ENOMEM` when the device's memory is used up.
    fn alloc_dm(&mut self, ctx: &Self::Context, attr: &AllocDmAttr) -> Result<Self::Dm> {
        let _ = (ctx, attr);
        Err(Error::not_implemented(Verb::AllocDm, self.backend().name()))
    }

    /// `ibv_free_dm`.
    ///
    /// # Errors
    /// `EBUSY` while MRs registered on the DM ([`Verbs::reg_dm_mr`]) exist.
    fn free_dm(&mut self, dm: &Self::Dm) -> Result<()> {
        let _ = dm;
        Err(Error::not_implemented(Verb::FreeDm, self.backend().name()))
    }

    /// `ibv_memcpy_to_dm(dm, dm_offset, host_addr, length)`: copies `host`
    /// to the DM at `offset`.
    ///
    /// # Errors
    /// `EFAULT` when `offset + host.len()` is past the DM's end (checked
    /// first); `EINVAL` when `offset` or the length is not a multiple of 4
    /// (mlx5 moves device memory in 4-byte units). Nothing is copied on error.
    fn memcpy_to_dm(&mut self, dm: &Self::Dm, offset: u64, host: &[u8]) -> Result<()> {
        let _ = (dm, offset, host);
        Err(Error::not_implemented(
            Verb::MemcpyToDm,
            self.backend().name(),
        ))
    }

    /// `ibv_memcpy_from_dm(host_addr, dm, dm_offset, length)`: copies
    /// `host.len()` bytes of the DM at `offset` into `host`.
    ///
    /// # Errors
    /// As [`Verbs::memcpy_to_dm`]; `host` is untouched on error.
    fn memcpy_from_dm(&mut self, dm: &Self::Dm, offset: u64, host: &mut [u8]) -> Result<()> {
        let _ = (dm, offset, host);
        Err(Error::not_implemented(
            Verb::MemcpyFromDm,
            self.backend().name(),
        ))
    }

    /// `ibv_reg_dm_mr(pd, dm, dm_offset, length, access)`: an MR over
    /// `length` bytes of the DM from `offset`. It is zero-based: its
    /// `addr` is 0 and requests address it from 0 (a remote address is an
    /// offset into the MR). The DM cannot be freed while the MR lives.
    ///
    /// # Errors
    /// `EINVAL` without `ZERO_BASED` in `access`, for access bits other
    /// than `LOCAL_WRITE`, `REMOTE_WRITE`, `REMOTE_READ`, `REMOTE_ATOMIC`,
    /// `ZERO_BASED` and the optional range, for `REMOTE_WRITE` or
    /// `REMOTE_ATOMIC` without `LOCAL_WRITE`, for a range outside the DM,
    /// or a DM of another context than the PD's.
    fn reg_dm_mr(
        &mut self,
        pd: &Self::Pd,
        dm: &Self::Dm,
        offset: u64,
        length: usize,
        access: AccessFlags,
    ) -> Result<Self::Mr> {
        let _ = (pd, dm, offset, length, access);
        Err(Error::not_implemented(Verb::RegDmMr, self.backend().name()))
    }

    // -------------------------------------------------------------------- SRQ

    /// `ibv_create_srq`; `attr` is written back with the actual values.
    fn create_srq(&mut self, pd: &Self::Pd, attr: &mut SrqAttr) -> Result<Self::Srq>;

    /// `ibv_create_srq_ex` (basic and XRC SRQs); `attr.attr` is written back.
    fn create_srq_ex(
        &mut self,
        ctx: &Self::Context,
        attr: &mut SrqInitAttrEx<'_, Self>,
    ) -> Result<Self::Srq> {
        let _ = (ctx, attr);
        Err(Error::not_implemented(
            Verb::CreateSrqEx,
            self.backend().name(),
        ))
    }

    /// `ibv_modify_srq` (`MAX_WR` resize, `LIMIT` arm).
    fn modify_srq(&mut self, srq: &Self::Srq, attr: &SrqAttr, mask: SrqAttrMask) -> Result<()>;

    /// `ibv_query_srq`.
    fn query_srq(&mut self, srq: &Self::Srq) -> Result<SrqAttr>;

    /// `ibv_destroy_srq`.
    ///
    /// # Errors
    /// `EBUSY` while a QP uses the SRQ.
    fn destroy_srq(&mut self, srq: &Self::Srq) -> Result<()>;

    /// `ibv_get_srq_num` (XRC SRQs).
    fn get_srq_num(&mut self, srq: &Self::Srq) -> Result<u32> {
        let _ = srq;
        Err(Error::not_implemented(
            Verb::GetSrqNum,
            self.backend().name(),
        ))
    }

    // --------------------------------------------------------------------- QP

    /// `ibv_create_qp(pd, init_attr)`: `attr.pd` and `attr.comp_mask` are
    /// ignored (the legacy struct has neither); `attr.cap` is written back.
    fn create_qp(&mut self, pd: &Self::Pd, attr: &mut QpInitAttrEx<'_, Self>) -> Result<Self::Qp>;

    /// `ibv_create_qp_ex`; `attr.cap` is written back with the actual
    /// capabilities (each ≥ requested).
    ///
    /// # Errors
    /// See create-qp.md §6: `EINVAL` for bad types, masks, flags, missing or
    /// forbidden objects and capabilities over the device limits;
    /// `EOPNOTSUPP` for types, flags and send ops the device lacks.
    fn create_qp_ex(
        &mut self,
        ctx: &Self::Context,
        attr: &mut QpInitAttrEx<'_, Self>,
    ) -> Result<Self::Qp>;

    /// `qp->qp_num`.
    fn qp_num(&mut self, qp: &Self::Qp) -> Result<u32>;

    /// `ibv_modify_qp` with an explicit attribute mask: illegal transitions
    /// and wrong masks are expressible and rejected exactly as the kernel does.
    ///
    /// # Errors
    /// `EINVAL` ([`ErrorKind::InvalidTransition`], [`ErrorKind::InvalidAttrMask`]
    /// or a range error), `EOPNOTSUPP` for unknown mask bits. Nothing changes on error.
    fn modify_qp(&mut self, qp: &Self::Qp, attr: &QpAttr, mask: QpAttrMask) -> Result<()>;

    /// `ibv_query_qp`: the attributes and the creation attributes.
    fn query_qp(&mut self, qp: &Self::Qp, mask: QpAttrMask) -> Result<(QpAttr, QpInitInfo)>;

    /// `ibv_destroy_qp`.
    ///
    /// # Errors
    /// `EBUSY` while attached to a multicast group (or, for a shared XRC_TGT
    /// QP, never: only the last handle really destroys).
    fn destroy_qp(&mut self, qp: &Self::Qp) -> Result<()>;

    /// `ibv_open_qp`: a new handle to an existing XRC_TGT QP of `xrcd`.
    fn open_qp(
        &mut self,
        ctx: &Self::Context,
        xrcd: &Self::Xrcd,
        attr: &QpOpenAttr,
    ) -> Result<Self::Qp> {
        let _ = (ctx, xrcd, attr);
        Err(Error::not_implemented(Verb::OpenQp, self.backend().name()))
    }

    /// `ibv_attach_mcast` (UD QPs only).
    fn attach_mcast(&mut self, qp: &Self::Qp, gid: &Gid, lid: u16) -> Result<()> {
        let _ = (qp, gid, lid);
        Err(Error::not_implemented(
            Verb::AttachMcast,
            self.backend().name(),
        ))
    }

    /// `ibv_detach_mcast`.
    fn detach_mcast(&mut self, qp: &Self::Qp, gid: &Gid, lid: u16) -> Result<()> {
        let _ = (qp, gid, lid);
        Err(Error::not_implemented(
            Verb::DetachMcast,
            self.backend().name(),
        ))
    }

    /// `ibv_query_qp_data_in_order(qp, op, flags)`: whether data of `op`
    /// arriving at (or, for READ, read back to) this QP is written in
    /// order within a message. Without `RETURN_CAPS` the answer is
    /// `WHOLE_MSG` (C: 1) or empty (C: 0).
    ///
    /// # Errors
    /// `EINVAL` for unknown flag bits (C returns 0 there).
    fn query_qp_data_in_order(
        &mut self,
        qp: &Self::Qp,
        op: WrOpcode,
        flags: DataInOrderFlags,
    ) -> Result<DataInOrderCaps> {
        let _ = (qp, op, flags);
        Err(Error::not_implemented(
            Verb::QueryQpDataInOrder,
            self.backend().name(),
        ))
    }

    /// `ibv_query_ece(qp, ece)`.
    ///
    /// # Errors
    /// `EOPNOTSUPP` where the device has no ECE.
    fn query_ece(&mut self, qp: &Self::Qp) -> Result<Ece> {
        let _ = qp;
        Err(Error::not_implemented(
            Verb::QueryEce,
            self.backend().name(),
        ))
    }

    /// `ibv_set_ece(qp, ece)`: the options to send with the QP's next
    /// modify; `ibv_query_ece` reports 0 until then, and afterwards the
    /// options the device accepted. The simulator leaves `ece` as it is
    /// (mlx5 only reads it); the `&mut` is kept for backends that write.
    ///
    /// # Errors
    /// `EOPNOTSUPP` for `vendor_id` 0 (libibverbs) or where the device has
    /// no ECE; `EINVAL` for another vendor or a non-zero `comp_mask`.
    fn set_ece(&mut self, qp: &Self::Qp, ece: &mut Ece) -> Result<()> {
        let _ = (qp, ece);
        Err(Error::not_implemented(Verb::SetEce, self.backend().name()))
    }

    // --------------------------------------------------------------------- AH

    /// `ibv_create_ah`.
    fn create_ah(&mut self, pd: &Self::Pd, attr: &AhAttr) -> Result<Self::Ah>;

    /// `ibv_destroy_ah`.
    fn destroy_ah(&mut self, ah: &Self::Ah) -> Result<()>;

    // ------------------------------------------------------------- data path

    /// `ibv_post_send`: posts `wrs` in order, stopping at the first one that
    /// fails a post-time check ([`Error::bad_wr`] is its index; those before
    /// it are posted).
    ///
    /// # Safety
    /// The hardware contract, in both backends: every byte named by a
    /// scatter/gather entry of a posted request must stay valid and must not
    /// be written by the caller until the request's completion has been
    /// reaped (or, for an unsignalled request, a later one's has), except
    /// with `IBV_SEND_INLINE`, where the bytes are copied at post time; the
    /// address handles named must not be destroyed before then. The
    /// simulator checks what it can see and reports violations as
    /// [`ErrorKind::ApiMisuse`].
    // Declaring an `unsafe fn` trips `unsafe_code`; the contract is the
    // hardware's (see `# Safety`), kept in the simulator on purpose (R14).
    #[allow(unsafe_code)]
    unsafe fn post_send(&mut self, qp: &Self::Qp, wrs: &[SendWr<'_, Self>]) -> Result<()>;

    /// `ibv_post_recv` (same conventions as [`Verbs::post_send`]).
    ///
    /// # Safety
    /// Every byte named by a posted receive request must stay valid and must
    /// not be accessed by the caller until its completion has been reaped.
    // Declaring an `unsafe fn` trips `unsafe_code`; the contract is the
    // hardware's (see `# Safety`), kept in the simulator on purpose (R14).
    #[allow(unsafe_code)]
    unsafe fn post_recv(&mut self, qp: &Self::Qp, wrs: &[RecvWr<'_>]) -> Result<()>;

    /// `ibv_post_srq_recv` (same conventions as [`Verbs::post_recv`]).
    ///
    /// # Safety
    /// As [`Verbs::post_recv`].
    // Declaring an `unsafe fn` trips `unsafe_code`; the contract is the
    // hardware's (see `# Safety`), kept in the simulator on purpose (R14).
    #[allow(unsafe_code)]
    unsafe fn post_srq_recv(&mut self, srq: &Self::Srq, wrs: &[RecvWr<'_>]) -> Result<()>;

    /// The `ibv_wr_*` API: `ibv_wr_start`, then for each request its
    /// `wr_id`/`wr_flags`, builder and setters, then `ibv_wr_complete`.
    /// All or nothing: any bad request fails the whole batch at
    /// `ibv_wr_complete` with the errno mlx5 gives, and nothing is posted.
    ///
    /// # Errors
    /// `EOPNOTSUPP` when the QP was not created with
    /// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` or its `send_ops_flags` lack a
    /// request's operation; `ENOMEM` when the batch does not fit the send
    /// queue or inline data is too long; `EINVAL` for too many SGEs or
    /// missing addressing.
    ///
    /// # Safety
    /// As [`Verbs::post_send`].
    // Declaring an `unsafe fn` trips `unsafe_code`; the contract is the
    // hardware's (see `# Safety`), kept in the simulator on purpose (R14).
    #[allow(unsafe_code)]
    unsafe fn post_wr(&mut self, qp: &Self::Qp, batch: &[WrEx<'_, Self>]) -> Result<()> {
        let _ = (qp, batch);
        Err(Error::not_implemented(Verb::PostWr, self.backend().name()))
    }

    // ------------------------------------------------------------ modern XRC

    /// `ibv_open_xrcd`.
    fn open_xrcd(&mut self, ctx: &Self::Context, attr: &XrcdInitAttr) -> Result<Self::Xrcd> {
        let _ = (ctx, attr);
        Err(Error::not_implemented(
            Verb::OpenXrcd,
            self.backend().name(),
        ))
    }

    /// `ibv_close_xrcd`.
    ///
    /// # Errors
    /// `EBUSY` while XRC SRQs or XRC_TGT QPs made through this handle exist.
    fn close_xrcd(&mut self, xrcd: &Self::Xrcd) -> Result<()> {
        let _ = xrcd;
        Err(Error::not_implemented(
            Verb::CloseXrcd,
            self.backend().name(),
        ))
    }

    // ------------------------------------------------------------ legacy XRC

    /// `ibv_open_xrc_domain(context, fd, oflag)` (legacy OFED API).
    ///
    /// # Errors
    /// `EINVAL` when `fd` is -1 ([`XrcdFile::None`]) and `oflags` is not
    /// exactly `O_CREAT` (the OFED contract: a private domain is always
    /// created); otherwise as `ibv_open_xrcd`.
    fn open_xrc_domain(
        &mut self,
        ctx: &Self::Context,
        fd: XrcdFile,
        oflags: OpenFlags,
    ) -> Result<Self::Xrcd> {
        let _ = (ctx, fd, oflags);
        Err(Error::not_implemented(
            Verb::OpenXrcDomain,
            self.backend().name(),
        ))
    }

    /// `ibv_close_xrc_domain` (legacy).
    ///
    /// # Errors
    /// Fails (`EBUSY`) while this process is registered with a receive QP of the domain.
    fn close_xrc_domain(&mut self, xrcd: &Self::Xrcd) -> Result<()> {
        let _ = xrcd;
        Err(Error::not_implemented(
            Verb::CloseXrcDomain,
            self.backend().name(),
        ))
    }

    /// `ibv_create_xrc_srq(pd, xrc_domain, xrc_cq, attr)` (legacy); `attr` written back.
    fn create_xrc_srq(
        &mut self,
        pd: &Self::Pd,
        xrcd: &Self::Xrcd,
        xrc_cq: &Self::Cq,
        attr: &mut SrqAttr,
    ) -> Result<Self::Srq> {
        let _ = (pd, xrcd, xrc_cq, attr);
        Err(Error::not_implemented(
            Verb::CreateXrcSrq,
            self.backend().name(),
        ))
    }

    /// `ibv_create_xrc_rcv_qp` (legacy): creates a receive-only XRC QP in the
    /// domain, registers the calling process, and returns its number.
    fn create_xrc_rcv_qp(&mut self, xrcd: &Self::Xrcd) -> Result<u32> {
        let _ = xrcd;
        Err(Error::not_implemented(
            Verb::CreateXrcRcvQp,
            self.backend().name(),
        ))
    }

    /// `ibv_modify_xrc_rcv_qp` (legacy).
    fn modify_xrc_rcv_qp(
        &mut self,
        xrcd: &Self::Xrcd,
        qp_num: u32,
        attr: &QpAttr,
        mask: QpAttrMask,
    ) -> Result<()> {
        let _ = (xrcd, qp_num, attr, mask);
        Err(Error::not_implemented(
            Verb::ModifyXrcRcvQp,
            self.backend().name(),
        ))
    }

    /// `ibv_query_xrc_rcv_qp` (legacy).
    fn query_xrc_rcv_qp(
        &mut self,
        xrcd: &Self::Xrcd,
        qp_num: u32,
        mask: QpAttrMask,
    ) -> Result<(QpAttr, QpInitInfo)> {
        let _ = (xrcd, qp_num, mask);
        Err(Error::not_implemented(
            Verb::QueryXrcRcvQp,
            self.backend().name(),
        ))
    }

    /// `ibv_reg_xrc_rcv_qp` (legacy): registers the calling process.
    ///
    /// # Errors
    /// `EINVAL` for an unknown number, a non-XRC QP or another domain;
    /// `EEXIST` if this process is already registered.
    fn reg_xrc_rcv_qp(&mut self, xrcd: &Self::Xrcd, qp_num: u32) -> Result<()> {
        let _ = (xrcd, qp_num);
        Err(Error::not_implemented(
            Verb::RegXrcRcvQp,
            self.backend().name(),
        ))
    }

    /// `ibv_unreg_xrc_rcv_qp` (legacy): the QP is destroyed when the last
    /// process unregisters.
    fn unreg_xrc_rcv_qp(&mut self, xrcd: &Self::Xrcd, qp_num: u32) -> Result<()> {
        let _ = (xrcd, qp_num);
        Err(Error::not_implemented(
            Verb::UnregXrcRcvQp,
            self.backend().name(),
        ))
    }

    // ----------------------------------------------------------------- mlx5dv

    /// `mlx5dv_query_device`: fills the fields asked for in `comp_mask`;
    /// the returned `comp_mask` says which were filled.
    fn mlx5dv_query_device(
        &mut self,
        ctx: &Self::Context,
        comp_mask: Mlx5ContextMask,
    ) -> Result<Mlx5Context> {
        let _ = (ctx, comp_mask);
        Err(Error::not_implemented(
            Verb::Mlx5dvQueryDevice,
            self.backend().name(),
        ))
    }

    /// `mlx5dv_create_qp` (DCI/DCT, OOO data placement and mlx5 create flags).
    fn mlx5dv_create_qp(
        &mut self,
        ctx: &Self::Context,
        attr: &mut QpInitAttrEx<'_, Self>,
        mlx5_attr: &Mlx5QpInitAttr,
    ) -> Result<Self::Qp> {
        let _ = (ctx, attr, mlx5_attr);
        Err(Error::not_implemented(
            Verb::Mlx5dvCreateQp,
            self.backend().name(),
        ))
    }

    /// `mlx5dv_dci_stream_id_reset`.
    fn mlx5dv_dci_stream_id_reset(&mut self, qp: &Self::Qp, stream_id: u16) -> Result<()> {
        let _ = (qp, stream_id);
        Err(Error::not_implemented(
            Verb::Mlx5dvDciStreamIdReset,
            self.backend().name(),
        ))
    }

    /// `mlx5dv_reserved_qpn_alloc(ctx, &qpn)`: reserves a QP number of the
    /// device that no QP has and no QP created later gets, for `rdma_cm`
    /// external QPs that need a unique number per connection (a DCI
    /// connecting to one DCT several times). The number belongs to `ctx`
    /// and is released by [`Verbs::mlx5dv_reserved_qpn_dealloc`] or when
    /// the context closes.
    ///
    /// # Errors
    /// `EOPNOTSUPP` if the device is not mlx5 (or lacks the support);
    /// another errno (`ENOMEM`) if no number is left.
    fn mlx5dv_reserved_qpn_alloc(&mut self, ctx: &Self::Context) -> Result<u32> {
        let _ = ctx;
        Err(Error::not_implemented(
            Verb::Mlx5dvReservedQpnAlloc,
            self.backend().name(),
        ))
    }

    /// `mlx5dv_reserved_qpn_dealloc(ctx, qpn)`: releases a number
    /// [`Verbs::mlx5dv_reserved_qpn_alloc`] gave `ctx`.
    ///
    /// # Errors
    /// `EINVAL` if `qpn` is not a number reserved through `ctx` (never
    /// allocated, or already released); `EOPNOTSUPP` if the device is not
    /// mlx5.
    fn mlx5dv_reserved_qpn_dealloc(&mut self, ctx: &Self::Context, qpn: u32) -> Result<()> {
        let _ = (ctx, qpn);
        Err(Error::not_implemented(
            Verb::Mlx5dvReservedQpnDealloc,
            self.backend().name(),
        ))
    }

    /// `mlx5dv_get_clock_info(ctx, &clock_info)`: the parameters that turn
    /// the device's completion timestamps into nanoseconds
    /// ([`ClockInfo::ts_to_ns`], the inline `mlx5dv_ts_to_ns`).
    ///
    /// # Errors
    /// `EOPNOTSUPP` if the device is not mlx5 or has no clock.
    fn mlx5dv_get_clock_info(&mut self, ctx: &Self::Context) -> Result<ClockInfo> {
        let _ = ctx;
        Err(Error::not_implemented(
            Verb::Mlx5dvGetClockInfo,
            self.backend().name(),
        ))
    }

    /// `ibv_query_rt_values_ex(ctx, &values)` with
    /// `IBV_VALUES_MASK_RAW_CLOCK`: the device's free-running clock now, in
    /// `hca_core_clock` ticks (`values.raw_clock.tv_nsec`; `tv_sec` is 0).
    ///
    /// # Errors
    /// `EOPNOTSUPP` if the device has no readable clock.
    fn query_rt_values_ex(&mut self, ctx: &Self::Context) -> Result<u64> {
        let _ = ctx;
        Err(Error::not_implemented(
            Verb::QueryRtValuesEx,
            self.backend().name(),
        ))
    }

    // --------------------------------------------------------------- rdma_cm

    /// `rdma_create_event_channel`.
    fn rdma_create_event_channel(&mut self) -> Result<Self::CmChannel> {
        Err(Error::not_implemented(
            Verb::RdmaCreateEventChannel,
            self.backend().name(),
        ))
    }

    /// `rdma_destroy_event_channel`.
    fn rdma_destroy_event_channel(&mut self, channel: &Self::CmChannel) -> Result<()> {
        let _ = channel;
        Err(Error::not_implemented(
            Verb::RdmaDestroyEventChannel,
            self.backend().name(),
        ))
    }

    /// `rdma_create_id`.
    fn rdma_create_id(
        &mut self,
        channel: &Self::CmChannel,
        context: u64,
        ps: PortSpace,
    ) -> Result<Self::CmId> {
        let _ = (channel, context, ps);
        Err(Error::not_implemented(
            Verb::RdmaCreateId,
            self.backend().name(),
        ))
    }

    /// `rdma_destroy_id`.
    fn rdma_destroy_id(&mut self, id: &Self::CmId) -> Result<()> {
        let _ = id;
        Err(Error::not_implemented(
            Verb::RdmaDestroyId,
            self.backend().name(),
        ))
    }

    /// The fields of `struct rdma_cm_id`.
    fn rdma_id_info(&mut self, id: &Self::CmId) -> Result<CmIdInfo<Self>> {
        let _ = id;
        Err(Error::not_implemented(
            Verb::RdmaGetLocalAddr,
            self.backend().name(),
        ))
    }

    /// `rdma_bind_addr`.
    fn rdma_bind_addr(&mut self, id: &Self::CmId, addr: SocketAddr) -> Result<()> {
        let _ = (id, addr);
        Err(Error::not_implemented(
            Verb::RdmaBindAddr,
            self.backend().name(),
        ))
    }

    /// `rdma_resolve_addr`.
    fn rdma_resolve_addr(
        &mut self,
        id: &Self::CmId,
        src: Option<SocketAddr>,
        dst: SocketAddr,
        timeout_ms: u32,
    ) -> Result<()> {
        let _ = (id, src, dst, timeout_ms);
        Err(Error::not_implemented(
            Verb::RdmaResolveAddr,
            self.backend().name(),
        ))
    }

    /// `rdma_resolve_route`.
    fn rdma_resolve_route(&mut self, id: &Self::CmId, timeout_ms: u32) -> Result<()> {
        let _ = (id, timeout_ms);
        Err(Error::not_implemented(
            Verb::RdmaResolveRoute,
            self.backend().name(),
        ))
    }

    /// `rdma_listen`.
    fn rdma_listen(&mut self, id: &Self::CmId, backlog: i32) -> Result<()> {
        let _ = (id, backlog);
        Err(Error::not_implemented(
            Verb::RdmaListen,
            self.backend().name(),
        ))
    }

    /// `rdma_connect`.
    fn rdma_connect(&mut self, id: &Self::CmId, param: &ConnParam) -> Result<()> {
        let _ = (id, param);
        Err(Error::not_implemented(
            Verb::RdmaConnect,
            self.backend().name(),
        ))
    }

    /// `rdma_accept`.
    fn rdma_accept(&mut self, id: &Self::CmId, param: &ConnParam) -> Result<()> {
        let _ = (id, param);
        Err(Error::not_implemented(
            Verb::RdmaAccept,
            self.backend().name(),
        ))
    }

    /// `rdma_reject`.
    fn rdma_reject(&mut self, id: &Self::CmId, private_data: &[u8]) -> Result<()> {
        let _ = (id, private_data);
        Err(Error::not_implemented(
            Verb::RdmaReject,
            self.backend().name(),
        ))
    }

    /// `rdma_reject_ece`: `rdma_reject` whose REJ gives the reason
    /// `IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED` (35), for a request whose
    /// ECE options the passive side refuses.
    ///
    /// # Errors
    /// As [`Verbs::rdma_reject`].
    fn rdma_reject_ece(&mut self, id: &Self::CmId, private_data: &[u8]) -> Result<()> {
        let _ = (id, private_data);
        Err(Error::not_implemented(
            Verb::RdmaRejectEce,
            self.backend().name(),
        ))
    }

    /// `rdma_disconnect`.
    fn rdma_disconnect(&mut self, id: &Self::CmId) -> Result<()> {
        let _ = id;
        Err(Error::not_implemented(
            Verb::RdmaDisconnect,
            self.backend().name(),
        ))
    }

    /// `rdma_get_cm_event`, non-blocking: `Ok(None)` when no event is pending
    /// (the simulator first advances virtual time to the next CM event).
    fn rdma_get_cm_event(&mut self, channel: &Self::CmChannel) -> Result<Option<CmEvent<Self>>> {
        let _ = channel;
        Err(Error::not_implemented(
            Verb::RdmaGetCmEvent,
            self.backend().name(),
        ))
    }

    /// `rdma_ack_cm_event`.
    fn rdma_ack_cm_event(&mut self, event: CmEvent<Self>) -> Result<()> {
        let _ = event;
        Err(Error::not_implemented(
            Verb::RdmaAckCmEvent,
            self.backend().name(),
        ))
    }

    /// `rdma_create_qp(id, pd, qp_init_attr)`: `pd == None` uses the
    /// device's default PD; missing CQs are created with channels.
    fn rdma_create_qp(
        &mut self,
        id: &Self::CmId,
        pd: Option<&Self::Pd>,
        attr: &mut QpInitAttrEx<'_, Self>,
    ) -> Result<Self::Qp> {
        let _ = (id, pd, attr);
        Err(Error::not_implemented(
            Verb::RdmaCreateQp,
            self.backend().name(),
        ))
    }

    /// `rdma_create_qp_ex(id, qp_init_attr_ex)`.
    fn rdma_create_qp_ex(
        &mut self,
        id: &Self::CmId,
        attr: &mut QpInitAttrEx<'_, Self>,
    ) -> Result<Self::Qp> {
        let _ = (id, attr);
        Err(Error::not_implemented(
            Verb::RdmaCreateQpEx,
            self.backend().name(),
        ))
    }

    /// `rdma_destroy_qp` (void in C; errors here only for a stale id).
    fn rdma_destroy_qp(&mut self, id: &Self::CmId) -> Result<()> {
        let _ = id;
        Err(Error::not_implemented(
            Verb::RdmaDestroyQp,
            self.backend().name(),
        ))
    }

    /// `rdma_init_qp_attr(id, qp_attr, qp_attr_mask)`: the attributes and
    /// mask that move a QP to `state` (INIT, RTR or RTS) for the id's
    /// connection, for QPs the application made itself (e.g. an mlx5 DCI
    /// or DCT from `mlx5dv_create_qp`) and moves with `ibv_modify_qp`.
    ///
    /// # Errors
    /// `EINVAL` for another target state, or for RTR/RTS of a connected
    /// port space on an id that has no peer QP yet (as the kernel's
    /// `rdma_init_qp_attr`).
    fn rdma_init_qp_attr(
        &mut self,
        id: &Self::CmId,
        state: QpState,
    ) -> Result<(QpAttr, QpAttrMask)> {
        let _ = (id, state);
        Err(Error::not_implemented(
            Verb::RdmaInitQpAttr,
            self.backend().name(),
        ))
    }

    /// `rdma_establish(id)`: the active side of a connection made without
    /// a QP (the application moves its own QP after `CONNECT_RESPONSE`)
    /// confirms it: the RTU leaves and the passive side gets `ESTABLISHED`.
    ///
    /// # Errors
    /// `EINVAL` when the id has a QP (librdmacm), or when it is not an
    /// active id that received the REP and has not confirmed yet (the
    /// kernel's `ib_send_cm_rtu` state check).
    fn rdma_establish(&mut self, id: &Self::CmId) -> Result<()> {
        let _ = id;
        Err(Error::not_implemented(
            Verb::RdmaEstablish,
            self.backend().name(),
        ))
    }

    /// `rdma_migrate_id(id, channel)`: the id's events from now on, and
    /// those queued and not yet fetched, go to `channel`; so do the
    /// connection requests of a listening id and the events of the ids
    /// they created that were still on the old channel.
    ///
    /// # Errors
    /// `EINVAL` for a destroyed id or channel.
    fn rdma_migrate_id(&mut self, id: &Self::CmId, channel: &Self::CmChannel) -> Result<()> {
        let _ = (id, channel);
        Err(Error::not_implemented(
            Verb::RdmaMigrateId,
            self.backend().name(),
        ))
    }

    /// `rdma_notify(id, event)`: tells the CM of an event the QP saw that
    /// the CM acts on. `IBV_EVENT_COMM_EST` (data arrived before the RTU)
    /// establishes a passive connection waiting for its RTU, as the
    /// kernel's `ib_cm_notify` does.
    ///
    /// # Errors
    /// `EINVAL` for an id without an IB CM connection or an event the CM
    /// does not act on; `EISCONN` for `COMM_EST` on an established
    /// connection.
    fn rdma_notify(&mut self, id: &Self::CmId, event: AsyncEventType) -> Result<()> {
        let _ = (id, event);
        Err(Error::not_implemented(
            Verb::RdmaNotify,
            self.backend().name(),
        ))
    }

    /// `rdma_join_multicast(id, addr, context)`: joins the group of the IP
    /// multicast address `addr` as a full member; `MULTICAST_JOIN` (or
    /// `MULTICAST_ERROR`) follows on the id's channel with `context`, and
    /// the id's QP, if any, is attached to the group.
    ///
    /// # Errors
    /// `EINVAL` for an id of a connected port space or one not bound to a
    /// device; `EADDRINUSE` when the id already joined `addr`.
    fn rdma_join_multicast(
        &mut self,
        id: &Self::CmId,
        addr: SocketAddr,
        context: u64,
    ) -> Result<()> {
        let _ = (id, addr, context);
        Err(Error::not_implemented(
            Verb::RdmaJoinMulticast,
            self.backend().name(),
        ))
    }

    /// `rdma_join_multicast_ex(id, mc_join_attr, context)`: as
    /// [`Verbs::rdma_join_multicast`] with join flags (a send-only full
    /// member's QP is not attached).
    fn rdma_join_multicast_ex(
        &mut self,
        id: &Self::CmId,
        attr: &JoinMcAttr,
        context: u64,
    ) -> Result<()> {
        let _ = (id, attr, context);
        Err(Error::not_implemented(
            Verb::RdmaJoinMulticastEx,
            self.backend().name(),
        ))
    }

    /// `rdma_leave_multicast(id, addr)`: detaches the id's QP and leaves;
    /// no event of the group is delivered after it returns.
    ///
    /// # Errors
    /// `EADDRNOTAVAIL` when the id has not joined `addr`.
    fn rdma_leave_multicast(&mut self, id: &Self::CmId, addr: SocketAddr) -> Result<()> {
        let _ = (id, addr);
        Err(Error::not_implemented(
            Verb::RdmaLeaveMulticast,
            self.backend().name(),
        ))
    }

    // ------------------------------------------------------------- simulator

    /// Simulator control (virtual time, faults); other backends return
    /// `Unsupported`.
    fn sim_control(&mut self, cmd: SimCommand<'_, Self>) -> Result<SimReply> {
        let _ = cmd;
        Err(Error::not_implemented(
            Verb::SimControl,
            self.backend().name(),
        ))
    }
}
