//! What the library asks of its world beyond the trait's verbs: MRs over
//! the program's own memory, the pending-event counts behind its fds,
//! async events, virtual time, and a few questions about devices and QPs.
//!
//! [`Extras`] is that half of the transport (the generated
//! `rpc::Transport` builds on it); this file holds its in-process
//! implementation, on the [`World`], and the messages that carry it to
//! the shared fabric ([`ExtraCall`]): `remote.rs` sends them,
//! `serve_extra.rs` serves them.

use backend_sim::datapath::protection::AccessCause;
use backend_sim::*;
use serde::{Deserialize, Serialize};
use verbs_api::*;

use super::memory::{check_mapped, needs_write};
use super::wire::{MwBindInfoW, SendWrW};

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

/// What makes the in-process form of a program's buffer for an MR (the
/// fabric reaches the buffer by pid instead and never calls it).
pub(crate) type LocalMemory<'a> = Box<dyn FnOnce() -> Box<dyn ExternalMemory> + 'a>;

/// The transport's methods beyond the `Verbs` trait's verbs, written by
/// hand: the generated `rpc::Transport` requires them, so both the world
/// in this process and the shared fabric answer every one.
pub(crate) trait Extras {
    /// `ibv_reg_mr` over the program's buffer `[addr, addr + len)`,
    /// named `iova`; `local` makes the in-process form of that memory.
    fn reg_mr_app(
        &mut self,
        pd: PdHandle,
        iova: u64,
        addr: usize,
        len: usize,
        access: AccessFlags,
        local: LocalMemory<'_>,
    ) -> Result<MrHandle>;

    /// `ibv_rereg_mr` with `CHANGE_TRANSLATION` over the program's new
    /// buffer: `(iova, addr, len)` names `[addr, addr + len)` as `iova`
    /// (and, with their flags, a new PD and access). `local` makes the
    /// in-process form of that memory.
    fn rereg_mr_app(
        &mut self,
        mr: MrHandle,
        flags: ReregMrFlags,
        pd: Option<PdHandle>,
        at: (u64, usize, usize),
        access: AccessFlags,
        local: LocalMemory<'_>,
    ) -> Result<()>;

    /// `ibv_post_send` of a chain with type-2 window binds.
    fn post_send_with_binds(
        &mut self,
        qp: &QpHandle,
        wrs: &[SendWr<'_, SimVerbs>],
        binds: &[(usize, MwHandle, u32, MwBindInfo<'_, SimVerbs>)],
    ) -> Result<()>;

    /// The device index of a context.
    fn context_device(&self, ctx: ContextHandle) -> Result<u32>;

    /// The connection manager's context of device `dev`, opened on first
    /// use: the one `rdma_get_devices` lists and every id's `verbs` is.
    fn cm_device_context(&mut self, dev: u32) -> Result<ContextHandle>;

    /// Whether device `index` models an mlx5 NIC.
    fn is_mlx5(&self, index: usize) -> bool;

    /// Completion events pending on a channel.
    fn comp_channel_pending(&self, ch: CompChannelHandle) -> Result<usize>;

    /// Async events pending on a context.
    fn async_pending(&self, ctx: ContextHandle) -> Result<usize>;

    /// rdma_cm events pending on a channel.
    fn cm_channel_pending(&self, ch: CmChannelHandle) -> Result<usize>;

    /// The next async event of a context, with its ack token.
    fn get_async_event(
        &mut self,
        ctx: ContextHandle,
    ) -> Result<Option<(AsyncEventType, AsyncSubject, u64)>>;

    /// Acknowledges an async event by token.
    fn ack_async_event(&mut self, token: u64) -> Result<()>;

    /// Whether a QP places data out of order.
    fn qp_out_of_order(&self, qp: QpHandle) -> Result<bool>;

    /// `rdma_set_option(RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT)`.
    fn rdma_set_ack_timeout(&mut self, id: CmIdHandle, timeout: u8) -> Result<()>;

    /// Runs the world until it is idle (false if a bound was hit first);
    /// the shared fabric runs its own world, so there it does nothing.
    fn run_until_idle(&mut self) -> bool;

    /// Moves virtual time on by `ns` (the rsockets' CM tick); the shared
    /// fabric keeps its own time, so there it does nothing.
    fn advance_ns(&mut self, ns: u64);

    /// Moves virtual time to the next due event; false when nothing is
    /// due, and always on the shared fabric, which runs time itself.
    fn advance_to_next_event(&mut self) -> bool;

    /// Which check refused the remote access a failed completion of `cq`
    /// reports, when this process's world knows (`None` on the fabric).
    fn completion_cause(&self, cq: &CqHandle, wc: &Wc) -> Option<AccessCause>;
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

/// Whether device `index` of `world` models an mlx5 NIC.
pub(crate) fn is_mlx5(world: &World, index: usize) -> bool {
    world
        .device_profile(index)
        .is_some_and(|p| p.mlx5.is_some())
}

/// The world in this process.
impl Extras for SimVerbs {
    fn reg_mr_app(
        &mut self,
        pd: PdHandle,
        iova: u64,
        addr: usize,
        len: usize,
        access: AccessFlags,
        local: LocalMemory<'_>,
    ) -> Result<MrHandle> {
        local_check(Verb::RegMr, addr, len, access)?;
        self.world_mut().reg_mr_external(pd, iova, local(), access)
    }

    fn rereg_mr_app(
        &mut self,
        mr: MrHandle,
        flags: ReregMrFlags,
        pd: Option<PdHandle>,
        (iova, addr, len): (u64, usize, usize),
        access: AccessFlags,
        local: LocalMemory<'_>,
    ) -> Result<()> {
        let pinned = if flags.contains(ReregMrFlags::CHANGE_ACCESS) {
            access
        } else {
            Verbs::mr_info(self, &mr)?.access
        };
        local_check(Verb::ReregMr, addr, len, pinned)?;
        self.world_mut()
            .rereg_mr_external(mr, flags, pd, iova, local(), access)
    }

    fn post_send_with_binds(
        &mut self,
        qp: &QpHandle,
        wrs: &[SendWr<'_, SimVerbs>],
        binds: &[(usize, MwHandle, u32, MwBindInfo<'_, SimVerbs>)],
    ) -> Result<()> {
        // The simulator's own (inherent) method.
        Self::post_send_with_binds(self, qp, wrs, binds)
    }

    fn context_device(&self, ctx: ContextHandle) -> Result<u32> {
        self.world().context_device(ctx)
    }

    fn cm_device_context(&mut self, dev: u32) -> Result<ContextHandle> {
        self.world_mut().cm_device_context(dev)
    }

    fn is_mlx5(&self, index: usize) -> bool {
        is_mlx5(self.world(), index)
    }

    fn comp_channel_pending(&self, ch: CompChannelHandle) -> Result<usize> {
        self.world().comp_channel_pending(ch)
    }

    fn async_pending(&self, ctx: ContextHandle) -> Result<usize> {
        self.world().async_pending(ctx)
    }

    fn cm_channel_pending(&self, ch: CmChannelHandle) -> Result<usize> {
        self.world().cm_channel_pending(ch)
    }

    fn get_async_event(
        &mut self,
        ctx: ContextHandle,
    ) -> Result<Option<(AsyncEventType, AsyncSubject, u64)>> {
        self.world_mut().get_async_event(ctx)
    }

    fn ack_async_event(&mut self, token: u64) -> Result<()> {
        self.world_mut().ack_async_event(token)
    }

    fn qp_out_of_order(&self, qp: QpHandle) -> Result<bool> {
        self.world().qp_out_of_order(qp)
    }

    fn rdma_set_ack_timeout(&mut self, id: CmIdHandle, timeout: u8) -> Result<()> {
        self.world_mut().rdma_set_ack_timeout(id, timeout)
    }

    fn run_until_idle(&mut self) -> bool {
        self.world_mut().run_until_idle()
    }

    fn advance_ns(&mut self, ns: u64) {
        self.world_mut().advance_ns(ns);
    }

    fn advance_to_next_event(&mut self) -> bool {
        let w = self.world_mut();
        let Some(t) = w.next_event_ns() else {
            return false;
        };
        let now = w.now_ns();
        w.advance_ns(t.saturating_sub(now));
        true
    }

    fn completion_cause(&self, cq: &CqHandle, wc: &Wc) -> Option<AccessCause> {
        // The simulator's own (inherent) method.
        Self::completion_cause(self, cq, wc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A handle no world gave out, in the wire form a garbage message
    /// would carry.
    fn stale<H: serde::de::DeserializeOwned>() -> H {
        postcard::from_bytes(&crate::fabric::encode(&(u32::MAX - 3, u32::MAX - 5)))
            .expect("a handle's wire form")
    }

    #[test]
    fn in_process_extras_reach_the_simulator() {
        // Goal: the world in this process answers the trait's extras with
        // the simulator's own methods (a method named as the trait's must
        // not call itself), and moves its own virtual time. Method: call
        // each through the trait on a fresh simulator.
        let mut sim = SimVerbs::new(SimConfig::default());
        let qp: QpHandle = stale();
        let e =
            Extras::post_send_with_binds(&mut sim, &qp, &[], &[]).expect_err("a QP no world made");
        assert_eq!(e.errno(), libc::EINVAL, "{e}");
        let wc = Wc {
            status: WcStatus::RemAccessErr,
            ..Wc::default()
        };
        let cq: CqHandle = stale();
        assert!(Extras::completion_cause(&sim, &cq, &wc).is_none());
        let t0 = sim.now_ns();
        Extras::advance_ns(&mut sim, 1_000);
        assert_eq!(sim.now_ns(), t0 + 1_000);
        assert!(
            !Extras::advance_to_next_event(&mut sim),
            "a world with nothing in it has nothing due"
        );
        assert!(Extras::run_until_idle(&mut sim));
        assert!(!Extras::is_mlx5(&sim, 1 << 20), "no such device");
    }
}
