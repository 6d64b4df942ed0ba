//! The library's engine: the [`Transport`] its verbs go to, the world in
//! this process or the shared fabric. The one place that tells the two
//! apart; every verb reaches either through [`Engine::transport`] (the
//! generated methods per verb are in `transport.rs`).

use backend_sim::datapath::protection::AccessCause;
use backend_sim::*;
use verbs_api::*;

use super::client::Remote;
use super::rpc::Transport;

/// The world the library's verbs run on: this process's own, or the
/// shared fabric's (`VERBSIM_FABRIC`).
pub(crate) enum Engine {
    /// The world in this process.
    Local(Box<SimVerbs>),
    /// The shared fabric's world, over its socket.
    Remote(Remote),
}

impl Engine {
    /// The transport under this engine.
    pub(crate) fn transport(&mut self) -> &mut dyn Transport {
        match self {
            Self::Local(s) => &mut **s,
            Self::Remote(r) => r,
        }
    }

    /// The transport under this engine, for the questions that change
    /// nothing.
    pub(crate) fn transport_ref(&self) -> &dyn Transport {
        match self {
            Self::Local(s) => &**s,
            Self::Remote(r) => r,
        }
    }

    /// Whether verbs go to the shared fabric.
    pub(crate) fn is_remote(&self) -> bool {
        matches!(self, Self::Remote(_))
    }

    /// The in-process simulator, if this is one (its trace, written at
    /// exit).
    pub(crate) fn local(&self) -> Option<&SimVerbs> {
        match self {
            Self::Local(s) => Some(s),
            Self::Remote(_) => None,
        }
    }

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
        self.transport()
            .reg_mr_app(pd, iova, addr, len, access, Box::new(local))
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
        at: (u64, usize, usize),
        access: AccessFlags,
        local: impl FnOnce() -> Box<dyn ExternalMemory>,
    ) -> Result<()> {
        self.transport()
            .rereg_mr_app(mr, flags, pd, at, access, Box::new(local))
    }

    /// `ibv_post_send` of a chain with type-2 window binds.
    pub(crate) fn post_send_with_binds(
        &mut self,
        qp: &QpHandle,
        wrs: &[SendWr<'_, SimVerbs>],
        binds: &[(usize, MwHandle, u32, MwBindInfo<'_, SimVerbs>)],
    ) -> Result<()> {
        self.transport().post_send_with_binds(qp, wrs, binds)
    }

    /// The device index of a context.
    pub(crate) fn context_device(&self, ctx: ContextHandle) -> Result<u32> {
        self.transport_ref().context_device(ctx)
    }

    /// The connection manager's context of device `dev`, opened on first
    /// use: the one `rdma_get_devices` lists and every id's `verbs` is.
    pub(crate) fn cm_device_context(&mut self, dev: u32) -> Result<ContextHandle> {
        self.transport().cm_device_context(dev)
    }

    /// Whether device `index` models an mlx5 NIC.
    pub(crate) fn is_mlx5(&self, index: usize) -> bool {
        self.transport_ref().is_mlx5(index)
    }

    /// Completion events pending on a channel.
    pub(crate) fn comp_channel_pending(&self, ch: CompChannelHandle) -> Result<usize> {
        self.transport_ref().comp_channel_pending(ch)
    }

    /// Async events pending on a context.
    pub(crate) fn async_pending(&self, ctx: ContextHandle) -> Result<usize> {
        self.transport_ref().async_pending(ctx)
    }

    /// rdma_cm events pending on a channel.
    pub(crate) fn cm_channel_pending(&self, ch: CmChannelHandle) -> Result<usize> {
        self.transport_ref().cm_channel_pending(ch)
    }

    /// The next async event of a context, with its ack token.
    pub(crate) fn get_async_event(
        &mut self,
        ctx: ContextHandle,
    ) -> Result<Option<(AsyncEventType, AsyncSubject, u64)>> {
        self.transport().get_async_event(ctx)
    }

    /// Acknowledges an async event by token.
    pub(crate) fn ack_async_event(&mut self, token: u64) -> Result<()> {
        self.transport().ack_async_event(token)
    }

    /// Whether a QP places data out of order.
    pub(crate) fn qp_out_of_order(&self, qp: QpHandle) -> Result<bool> {
        self.transport_ref().qp_out_of_order(qp)
    }

    /// `rdma_set_option(RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT)`.
    pub(crate) fn rdma_set_ack_timeout(&mut self, id: CmIdHandle, timeout: u8) -> Result<()> {
        self.transport().rdma_set_ack_timeout(id, timeout)
    }

    /// Runs an in-process world until it is idle (false if a bound was
    /// hit first); the fabric runs its own world, so there it is a no-op.
    pub(crate) fn run_until_idle(&mut self) -> bool {
        self.transport().run_until_idle()
    }

    /// Moves an in-process world's virtual time on by `ns`.
    pub(crate) fn advance_ns(&mut self, ns: u64) {
        self.transport().advance_ns(ns);
    }

    /// Moves an in-process world's virtual time to its next due event;
    /// false when none is due (always on the fabric).
    pub(crate) fn advance_to_next_event(&mut self) -> bool {
        self.transport().advance_to_next_event()
    }

    /// Which check refused the remote access a failed completion of `cq`
    /// reports, when the world is this process's.
    pub(crate) fn completion_cause(&self, cq: &CqHandle, wc: &Wc) -> Option<AccessCause> {
        self.transport_ref().completion_cause(cq, wc)
    }
}
