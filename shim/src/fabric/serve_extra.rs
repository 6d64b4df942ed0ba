//! The fabric's side of the calls beside the trait's verbs
//! ([`ExtraCall`], sent by `remote.rs`): each handle checked against the
//! caller's family, MRs over the caller's memory reached by pid, the
//! shared queues attached (`fast`).

use backend_sim::*;
use verbs_api::*;

use super::extra::{is_mlx5, ExtraCall};
use super::family::{Owned, Session};
use super::memory::{check_mapped, needs_write, ProcessMemory};
use super::wire::{Handles, SendWrW};

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
