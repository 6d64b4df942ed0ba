//! What the library asks of its world beyond the trait's verbs: MRs over
//! the program's own memory, the pending-event counts behind its fds,
//! async events, and a few questions about devices and QPs. In process
//! they go to the [`World`]; on the shared fabric, over the wire.

use backend_sim::*;
use serde::{Deserialize, Serialize};
use verbs_api::*;

use super::client::Remote;
use super::memory::{check_mapped, needs_write, ProcessMemory};
use super::rpc::Engine;
use super::server::{Owned, Session};
use super::wire::{Handles, MwBindInfoW, SendWrW};

/// The calls beside the trait's.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum ExtraCall {
    /// `ibv_reg_mr` over the caller's `[addr, addr + len)`, named `iova`.
    RegMr {
        pd: PdHandle,
        iova: u64,
        addr: u64,
        len: u64,
        access: AccessFlags,
    },
    /// `ibv_rereg_mr` whose new translation is the caller's
    /// `[addr, addr + len)`, named `iova`.
    ReregMr {
        mr: MrHandle,
        flags: ReregMrFlags,
        pd: Option<PdHandle>,
        iova: u64,
        addr: u64,
        len: u64,
        access: AccessFlags,
    },
    /// `ibv_post_send` with type-2 window binds.
    PostSendWithBinds(
        QpHandle,
        Vec<SendWrW>,
        Vec<(usize, MwHandle, u32, MwBindInfoW)>,
    ),
    /// The device index of a context.
    ContextDevice(ContextHandle),
    /// The connection manager's context of a device (opened on first use).
    CmDeviceContext(u32),
    /// Whether device `index` models an mlx5 NIC.
    IsMlx5(usize),
    /// Completion events pending on a channel.
    CompChannelPending(CompChannelHandle),
    /// Async events pending on a context.
    AsyncPending(ContextHandle),
    /// rdma_cm events pending on a channel.
    CmChannelPending(CmChannelHandle),
    /// The next async event of a context, with its ack token.
    GetAsyncEvent(ContextHandle),
    /// Acknowledges an async event by token.
    AckAsyncEvent(u64),
    /// Whether a QP places data out of order.
    QpOutOfOrder(QpHandle),
    /// `RDMA_OPTION_ID_ACK_TIMEOUT` of an rdma_cm id.
    CmSetAckTimeout(CmIdHandle, u8),
    /// A ring in shared memory for a CQ (`true`: an extended CQ, polled in
    /// its format); its region comes with the reply (`fast`).
    AttachCq(CqHandle, bool),
    /// A QP's post-time snapshot, and the process's submission ring with
    /// its doorbell the first time (`fast`).
    AttachQp(QpHandle),
    /// An SRQ's post-time snapshot, and the process's submission ring with
    /// its doorbell the first time (`fastwr`).
    AttachSrq(SrqHandle),
}

impl ExtraCall {
    /// The verb this call serves, for errors about its transport.
    pub(crate) fn verb(&self) -> Verb {
        match self {
            Self::RegMr { .. } => Verb::RegMr,
            Self::ReregMr { .. } => Verb::ReregMr,
            Self::PostSendWithBinds(..) => Verb::PostSend,
            Self::ContextDevice(_) | Self::IsMlx5(_) | Self::CmDeviceContext(_) => Verb::OpenDevice,
            Self::CompChannelPending(_) => Verb::GetCqEvent,
            Self::CmChannelPending(_) => Verb::RdmaGetCmEvent,
            Self::AsyncPending(_) | Self::GetAsyncEvent(_) => Verb::GetAsyncEvent,
            Self::AckAsyncEvent(_) => Verb::AckAsyncEvent,
            Self::QpOutOfOrder(_) => Verb::QueryQp,
            Self::CmSetAckTimeout(..) => Verb::RdmaSetOption,
            Self::AttachCq(_, false) => Verb::PollCq,
            Self::AttachCq(_, true) => Verb::PollCqEx,
            Self::AttachQp(_) => Verb::PostSend,
            Self::AttachSrq(_) => Verb::PostSrqRecv,
        }
    }
}

/// The client's `len` bytes at `addr` as an MR's memory, read and written
/// in its process; `EINVAL` for `verb` when they do not fit this host's
/// addresses, `EFAULT` when a page of them is not mapped with the access
/// asked for (as pinning the pages fails in the kernel). ODP MRs are not
/// pinned: their pages fault when the NIC reaches them.
fn process_memory(
    session: &Session<'_>,
    verb: Verb,
    addr: u64,
    len: u64,
    access: AccessFlags,
) -> Result<Box<ProcessMemory>, Error> {
    let (Ok(addr), Ok(len)) = (usize::try_from(addr), usize::try_from(len)) else {
        return Err(Error::invalid(verb, "address or length out of range"));
    };
    if !access.contains(AccessFlags::ON_DEMAND) {
        check_mapped(Some(session.pid()), addr, len, needs_write(access))
            .map_err(|why| Error::from_errno(verb, libc::EFAULT, why))?;
    }
    Ok(Box::new(ProcessMemory::coalesced(
        session.pid(),
        addr,
        len,
        session.gone_flag(),
    )))
}

/// The handles an [`ExtraCall`] names, each of which must be the caller's.
fn handles(call: &ExtraCall) -> Vec<Owned> {
    let mut hs = Vec::new();
    match call {
        ExtraCall::RegMr { pd, .. } => hs.push(Owned::Pd(*pd)),
        ExtraCall::ReregMr { mr, pd, .. } => {
            hs.push(Owned::Mr(*mr));
            hs.extend(pd.map(Owned::Pd));
        }
        ExtraCall::PostSendWithBinds(qp, wrs, binds) => {
            hs.push(Owned::Qp(*qp));
            wrs.handles(&mut hs);
            for (_, mw, _, info) in binds {
                hs.push(Owned::Mw(*mw));
                info.handles(&mut hs);
            }
        }
        ExtraCall::ContextDevice(ctx)
        | ExtraCall::AsyncPending(ctx)
        | ExtraCall::GetAsyncEvent(ctx) => hs.push(Owned::Context(*ctx)),
        ExtraCall::CompChannelPending(ch) => hs.push(Owned::Channel(*ch)),
        ExtraCall::CmChannelPending(ch) => hs.push(Owned::CmChannel(*ch)),
        ExtraCall::QpOutOfOrder(qp) => hs.push(Owned::Qp(*qp)),
        ExtraCall::CmSetAckTimeout(id, _) => hs.push(Owned::CmId(*id)),
        ExtraCall::AttachCq(cq, _) => hs.push(Owned::Cq(*cq)),
        ExtraCall::AttachQp(qp) => hs.push(Owned::Qp(*qp)),
        ExtraCall::AttachSrq(srq) => hs.push(Owned::Srq(*srq)),
        ExtraCall::IsMlx5(_) | ExtraCall::AckAsyncEvent(_) | ExtraCall::CmDeviceContext(_) => {}
    }
    hs
}

/// Serves one [`ExtraCall`].
pub(crate) fn dispatch(sim: &mut SimVerbs, session: &mut Session<'_>, call: ExtraCall) -> Vec<u8> {
    use super::encode;
    if let Err(e) = session.check(call.verb(), &handles(&call)) {
        return encode(&Err::<(), _>(e));
    }
    match call {
        ExtraCall::RegMr {
            pd,
            iova,
            addr,
            len,
            access,
        } => {
            let mem = match process_memory(session, Verb::RegMr, addr, len, access) {
                Ok(mem) => mem,
                Err(e) => return encode(&Err::<MrHandle, _>(e)),
            };
            let r = sim.world_mut().reg_mr_external(pd, iova, mem, access);
            if let Ok(h) = &r {
                session.own(Owned::Mr(*h));
            }
            encode(&r)
        }
        ExtraCall::ReregMr {
            mr,
            flags,
            pd,
            iova,
            addr,
            len,
            access,
        } => {
            // The new translation is pinned with the access the MR will
            // have: the new one with CHANGE_ACCESS, else its current one.
            let pinned = if flags.contains(ReregMrFlags::CHANGE_ACCESS) {
                access
            } else {
                match sim.world().mr_info(mr) {
                    Ok(i) => i.access,
                    Err(e) => return encode(&Err::<(), _>(e)),
                }
            };
            let mem = match process_memory(session, Verb::ReregMr, addr, len, pinned) {
                Ok(mem) => mem,
                Err(e) => return encode(&Err::<(), _>(e)),
            };
            encode(
                &sim.world_mut()
                    .rereg_mr_external(mr, flags, pd, iova, mem, access),
            )
        }
        ExtraCall::PostSendWithBinds(qp, wrs, binds) => {
            let views = SendWrW::views(&wrs);
            let binds: Vec<_> = binds
                .iter()
                .map(|(i, mw, rkey, b)| (*i, *mw, *rkey, b.view()))
                .collect();
            encode(&sim.post_send_with_binds(&qp, &views, &binds))
        }
        ExtraCall::ContextDevice(ctx) => encode(&sim.world().context_device(ctx)),
        ExtraCall::CmDeviceContext(dev) => {
            // rdma_get_devices: the connection manager's context of the
            // device, made by the world; the family reaches it from now on
            // (as librdmacm hands every process the contexts it opened).
            let r = sim.world_mut().cm_device_context_of(session.process(), dev);
            if let Ok(h) = &r {
                session.adopt(Owned::Context(*h));
            }
            encode(&r)
        }
        ExtraCall::IsMlx5(i) => encode(&Ok::<_, Error>(is_mlx5(sim.world(), i))),
        ExtraCall::CompChannelPending(ch) => encode(&sim.world().comp_channel_pending(ch)),
        ExtraCall::AsyncPending(ctx) => encode(&sim.world().async_pending(ctx)),
        ExtraCall::CmChannelPending(ch) => encode(&sim.world().cm_channel_pending(ch)),
        ExtraCall::GetAsyncEvent(ctx) => {
            let r = sim.world_mut().get_async_event(ctx);
            if let Ok(Some((_, _, token))) = &r {
                session.note_async_token(*token);
            }
            encode(&r)
        }
        ExtraCall::AckAsyncEvent(token) => {
            // An event another process was handed is not this one's to
            // acknowledge: the same answer as for one never handed out.
            if !session.take_async_token(token) {
                return encode(&Err::<(), _>(Error::invalid(
                    Verb::AckAsyncEvent,
                    format!("async event #{token} was never handed out or is already acknowledged"),
                )));
            }
            encode(&sim.world_mut().ack_async_event(token))
        }
        ExtraCall::QpOutOfOrder(qp) => encode(&sim.world().qp_out_of_order(qp)),
        ExtraCall::CmSetAckTimeout(id, t) => encode(&sim.world_mut().rdma_set_ack_timeout(id, t)),
        ExtraCall::AttachCq(cq, ex) => super::fast::attach_cq(sim, session, cq, ex),
        ExtraCall::AttachQp(qp) => super::fast::attach_qp(sim, session, qp),
        ExtraCall::AttachSrq(srq) => super::fastwr::attach_srq(sim, session, srq),
    }
}

fn is_mlx5(world: &World, index: usize) -> bool {
    world
        .device_profile(index)
        .is_some_and(|p| p.mlx5.is_some())
}

/// `ibv_reg_mr`'s check in this process: `EFAULT` unless every page of
/// `[addr, addr + len)` is mapped with the access asked for (ODP MRs
/// excepted: the kernel does not pin them).
fn local_check(verb: Verb, addr: usize, len: usize, access: AccessFlags) -> Result<()> {
    if access.contains(AccessFlags::ON_DEMAND) {
        return Ok(());
    }
    check_mapped(None, addr, len, needs_write(access))
        .map_err(|why| Error::from_errno(verb, libc::EFAULT, why))
}

impl Remote {
    fn extra<T: serde::de::DeserializeOwned>(&self, call: ExtraCall) -> Result<T> {
        self.call(&super::rpc::Call::Extra(call))
    }
}

impl Engine {
    /// `ibv_reg_mr` over the program's buffer `[addr, addr + len)`.
    ///
    /// `local` makes the in-process form of that memory; the fabric reaches
    /// it by pid instead.
    pub(crate) fn reg_mr_app(
        &mut self,
        pd: PdHandle,
        iova: u64,
        addr: usize,
        len: usize,
        access: AccessFlags,
        local: impl FnOnce() -> Box<dyn ExternalMemory>,
    ) -> Result<MrHandle> {
        match self {
            Self::Local(s) => {
                local_check(Verb::RegMr, addr, len, access)?;
                s.world_mut().reg_mr_external(pd, iova, local(), access)
            }
            Self::Remote(r) => {
                let h: MrHandle = r.extra(ExtraCall::RegMr {
                    pd,
                    iova,
                    addr: addr as u64,
                    len: len as u64,
                    access,
                })?;
                if iova == addr as u64 {
                    r.fast.borrow_mut().mrs.insert(h, (iova, len as u64));
                }
                Ok(h)
            }
        }
    }

    /// `ibv_rereg_mr` with `CHANGE_TRANSLATION` over the program's new
    /// buffer: `(iova, addr, len)` names `[addr, addr + len)` as `iova`
    /// (and, with their flags, a new PD and access). `local` makes the
    /// in-process form of that memory.
    pub(crate) fn rereg_mr_app(
        &mut self,
        mr: MrHandle,
        flags: ReregMrFlags,
        pd: Option<PdHandle>,
        (iova, addr, len): (u64, usize, usize),
        access: AccessFlags,
        local: impl FnOnce() -> Box<dyn ExternalMemory>,
    ) -> Result<()> {
        match self {
            Self::Local(s) => {
                let pinned = if flags.contains(ReregMrFlags::CHANGE_ACCESS) {
                    access
                } else {
                    Verbs::mr_info(&mut **s, &mr)?.access
                };
                local_check(Verb::ReregMr, addr, len, pinned)?;
                s.world_mut()
                    .rereg_mr_external(mr, flags, pd, iova, local(), access)
            }
            Self::Remote(r) => {
                // Its bytes are read here again only once it is known
                // where they are (not after a re-registration).
                r.fast.borrow_mut().mrs.remove(&mr);
                r.extra(ExtraCall::ReregMr {
                    mr,
                    flags,
                    pd,
                    iova,
                    addr: addr as u64,
                    len: len as u64,
                    access,
                })
            }
        }
    }

    /// `ibv_post_send` of a chain with type-2 window binds.
    pub(crate) fn post_send_with_binds(
        &mut self,
        qp: &QpHandle,
        wrs: &[SendWr<'_, SimVerbs>],
        binds: &[(usize, MwHandle, u32, MwBindInfo<'_, SimVerbs>)],
    ) -> Result<()> {
        match self {
            Self::Local(s) => s.post_send_with_binds(qp, wrs, binds),
            Self::Remote(r) => r.extra(ExtraCall::PostSendWithBinds(
                *qp,
                SendWrW::list(wrs),
                binds
                    .iter()
                    .map(|(i, mw, rkey, b)| (*i, *mw, *rkey, MwBindInfoW::from(b)))
                    .collect(),
            )),
        }
    }

    /// The device index of a context.
    pub(crate) fn context_device(&self, ctx: ContextHandle) -> Result<u32> {
        match self {
            Self::Local(s) => s.world().context_device(ctx),
            Self::Remote(r) => r.extra(ExtraCall::ContextDevice(ctx)),
        }
    }

    /// The connection manager's context of device `dev`, opened on first
    /// use: the one `rdma_get_devices` lists and every id's `verbs` is.
    pub(crate) fn cm_device_context(&mut self, dev: u32) -> Result<ContextHandle> {
        match self {
            Self::Local(s) => s.world_mut().cm_device_context(dev),
            Self::Remote(r) => r.extra(ExtraCall::CmDeviceContext(dev)),
        }
    }

    /// Whether device `index` models an mlx5 NIC.
    pub(crate) fn is_mlx5(&self, index: usize) -> bool {
        match self {
            Self::Local(s) => is_mlx5(s.world(), index),
            Self::Remote(r) => r.extra(ExtraCall::IsMlx5(index)).unwrap_or(false),
        }
    }

    /// Completion events pending on a channel.
    pub(crate) fn comp_channel_pending(&self, ch: CompChannelHandle) -> Result<usize> {
        match self {
            Self::Local(s) => s.world().comp_channel_pending(ch),
            Self::Remote(r) => r.extra(ExtraCall::CompChannelPending(ch)),
        }
    }

    /// Async events pending on a context.
    pub(crate) fn async_pending(&self, ctx: ContextHandle) -> Result<usize> {
        match self {
            Self::Local(s) => s.world().async_pending(ctx),
            Self::Remote(r) => r.extra(ExtraCall::AsyncPending(ctx)),
        }
    }

    /// rdma_cm events pending on a channel.
    pub(crate) fn cm_channel_pending(&self, ch: CmChannelHandle) -> Result<usize> {
        match self {
            Self::Local(s) => s.world().cm_channel_pending(ch),
            Self::Remote(r) => r.extra(ExtraCall::CmChannelPending(ch)),
        }
    }

    /// The next async event of a context, with its ack token.
    pub(crate) fn get_async_event(
        &mut self,
        ctx: ContextHandle,
    ) -> Result<Option<(AsyncEventType, AsyncSubject, u64)>> {
        match self {
            Self::Local(s) => s.world_mut().get_async_event(ctx),
            Self::Remote(r) => r.extra(ExtraCall::GetAsyncEvent(ctx)),
        }
    }

    /// Acknowledges an async event by token.
    pub(crate) fn ack_async_event(&mut self, token: u64) -> Result<()> {
        match self {
            Self::Local(s) => s.world_mut().ack_async_event(token),
            Self::Remote(r) => r.extra(ExtraCall::AckAsyncEvent(token)),
        }
    }

    /// Whether a QP places data out of order.
    pub(crate) fn qp_out_of_order(&self, qp: QpHandle) -> Result<bool> {
        match self {
            Self::Local(s) => s.world().qp_out_of_order(qp),
            Self::Remote(r) => r.extra(ExtraCall::QpOutOfOrder(qp)),
        }
    }

    /// `rdma_set_option(RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT)`.
    pub(crate) fn rdma_set_ack_timeout(&mut self, id: CmIdHandle, timeout: u8) -> Result<()> {
        match self {
            Self::Local(s) => s.world_mut().rdma_set_ack_timeout(id, timeout),
            Self::Remote(r) => r.extra(ExtraCall::CmSetAckTimeout(id, timeout)),
        }
    }

    /// Runs an in-process world until it is idle (false if a bound was
    /// hit first); the fabric runs its own world, so there it is a no-op.
    pub(crate) fn run_until_idle(&mut self) -> bool {
        match self {
            Self::Local(s) => s.world_mut().run_until_idle(),
            Self::Remote(_) => true,
        }
    }

    /// Whether verbs go to the shared fabric.
    pub(crate) fn is_remote(&self) -> bool {
        matches!(self, Self::Remote(_))
    }

    /// The in-process simulator, if this is one.
    pub(crate) fn local(&self) -> Option<&SimVerbs> {
        match self {
            Self::Local(s) => Some(s),
            Self::Remote(_) => None,
        }
    }
}
