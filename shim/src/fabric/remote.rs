//! The shared fabric's side of the transport's hand-written half
//! ([`Extras`]): each method one [`ExtraCall`] over the socket, and what
//! this process's queues must learn of it (`fast`).

use backend_sim::datapath::protection::AccessCause;
use backend_sim::*;
use verbs_api::*;

use super::client::Remote;
use super::extra::{ExtraCall, Extras, LocalMemory};
use super::rpc::Call;
use super::wire::{MwBindInfoW, SendWrW};

impl Remote {
    /// Sends one call beside the trait's and decodes its reply.
    fn extra<T: serde::de::DeserializeOwned>(&self, call: ExtraCall) -> Result<T> {
        self.call(&Call::Extra(call))
    }
}

/// The shared fabric's world, over its socket.
impl Extras for Remote {
    fn reg_mr_app(
        &mut self,
        pd: PdHandle,
        iova: u64,
        addr: usize,
        len: usize,
        access: AccessFlags,
        _local: LocalMemory<'_>,
    ) -> Result<MrHandle> {
        let h: MrHandle = self.extra(ExtraCall::RegMr {
            pd,
            iova,
            addr: addr as u64,
            len: len as u64,
            access,
        })?;
        if iova == addr as u64 {
            self.fast.borrow_mut().mrs.insert(h, (iova, len as u64));
        }
        Ok(h)
    }

    fn rereg_mr_app(
        &mut self,
        mr: MrHandle,
        flags: ReregMrFlags,
        pd: Option<PdHandle>,
        (iova, addr, len): (u64, usize, usize),
        access: AccessFlags,
        _local: LocalMemory<'_>,
    ) -> Result<()> {
        // Its bytes are read here again only once it is known where they
        // are (not after a re-registration).
        self.fast.borrow_mut().mrs.remove(&mr);
        self.extra(ExtraCall::ReregMr {
            mr,
            flags,
            pd,
            iova,
            addr: addr as u64,
            len: len as u64,
            access,
        })
    }

    fn post_send_with_binds(
        &mut self,
        qp: &QpHandle,
        wrs: &[SendWr<'_, SimVerbs>],
        binds: &[(usize, MwHandle, u32, MwBindInfo<'_, SimVerbs>)],
    ) -> Result<()> {
        self.extra(ExtraCall::PostSendWithBinds(
            *qp,
            SendWrW::list(wrs),
            binds
                .iter()
                .map(|(i, mw, rkey, b)| (*i, *mw, *rkey, MwBindInfoW::from(b)))
                .collect(),
        ))
    }

    fn context_device(&self, ctx: ContextHandle) -> Result<u32> {
        self.extra(ExtraCall::ContextDevice(ctx))
    }

    fn cm_device_context(&mut self, dev: u32) -> Result<ContextHandle> {
        self.extra(ExtraCall::CmDeviceContext(dev))
    }

    fn is_mlx5(&self, index: usize) -> bool {
        self.extra(ExtraCall::IsMlx5(index)).unwrap_or(false)
    }

    fn comp_channel_pending(&self, ch: CompChannelHandle) -> Result<usize> {
        self.extra(ExtraCall::CompChannelPending(ch))
    }

    fn async_pending(&self, ctx: ContextHandle) -> Result<usize> {
        self.extra(ExtraCall::AsyncPending(ctx))
    }

    fn cm_channel_pending(&self, ch: CmChannelHandle) -> Result<usize> {
        self.extra(ExtraCall::CmChannelPending(ch))
    }

    fn get_async_event(
        &mut self,
        ctx: ContextHandle,
    ) -> Result<Option<(AsyncEventType, AsyncSubject, u64)>> {
        self.extra(ExtraCall::GetAsyncEvent(ctx))
    }

    fn ack_async_event(&mut self, token: u64) -> Result<()> {
        self.extra(ExtraCall::AckAsyncEvent(token))
    }

    fn qp_out_of_order(&self, qp: QpHandle) -> Result<bool> {
        self.extra(ExtraCall::QpOutOfOrder(qp))
    }

    fn rdma_set_ack_timeout(&mut self, id: CmIdHandle, timeout: u8) -> Result<()> {
        self.extra(ExtraCall::CmSetAckTimeout(id, timeout))
    }

    fn run_until_idle(&mut self) -> bool {
        true
    }

    fn advance_ns(&mut self, _ns: u64) {}

    fn advance_to_next_event(&mut self) -> bool {
        false
    }

    fn completion_cause(&self, _cq: &CqHandle, _wc: &Wc) -> Option<AccessCause> {
        None
    }
}
