//! `rdma_get_cm_event` (non-blocking, the event copied out, a new id for a
//! `CONNECT_REQUEST`) and `rdma_ack_cm_event`.

use core::ptr::{self};

use rdma_sys as sys;
use verbs_api::errno::EINVAL;
use verbs_api::*;

use crate::backend::HwVerbs;
use crate::convert::ah_from_c;
use crate::errors::{c_error, foreign};
use crate::ffi::posix::EAGAIN;
use crate::ffi::verbs::last_errno;

use super::*;

impl HwVerbs {
    pub(crate) fn cm_get_event(&mut self, ch: &HwCmChannel) -> Result<Option<CmEvent<Self>>> {
        let verb = Verb::RdmaGetCmEvent;
        let c = ch.0.get(verb, self.id)?;
        let mut ev: *mut sys::rdma_cm_event = ptr::null_mut();
        // SAFETY: live, non-blocking channel; `ev` is a valid out-parameter.
        if unsafe { sys::rdma_get_cm_event(c, &mut ev) } != 0 {
            return match last_errno() {
                EAGAIN => Ok(None),
                e => Err(c_error(verb, e, "rdma_get_cm_event")),
            };
        }
        // SAFETY: on success `ev` points to an event librdmacm keeps until
        // `rdma_ack_cm_event`; its `id` (and `listen_id`, if set) are live
        // ids until then. Everything is copied out here.
        let (event, status, id_p, listen_p, is_ud) = unsafe {
            let e = &*ev;
            let ud = (*e.id).qp_type == sys::ibv_qp_type::IBV_QPT_UD;
            (e.event, e.status, e.id, e.listen_id, ud)
        };
        let mut ud = None;
        let mut context = 0;
        let (private_data, conn) = if event == MULTICAST_JOIN || event == MULTICAST_ERROR {
            // SAFETY: for multicast events librdmacm fills `param.ud`: the
            // group's address vector, and the join's context in
            // `private_data` (a user value, never dereferenced here).
            let (u, ctx) = unsafe {
                let u = &(*ev).param.ud;
                (
                    UdParam {
                        ah_attr: ah_from_c(&u.ah_attr),
                        qp_num: u.qp_num,
                        qkey: u.qkey,
                    },
                    u.private_data as usize as u64,
                )
            };
            if event == MULTICAST_JOIN {
                ud = Some(u);
            }
            context = ctx;
            (Vec::new(), ConnParam::default())
        } else if is_ud {
            // SAFETY: for UD ids librdmacm fills `param.ud`; its private data
            // points into the event (`private_data_len` bytes).
            let (data, qp_num) = unsafe {
                let u = &(*ev).param.ud;
                (copy_bytes(u.private_data, u.private_data_len), u.qp_num)
            };
            let conn = ConnParam {
                private_data: data.clone(),
                qp_num,
                ..ConnParam::default()
            };
            (data, conn)
        } else {
            // SAFETY: for connected ids librdmacm fills `param.conn`; its
            // private data points into the event (`private_data_len` bytes).
            let (data, c) = unsafe {
                let c = (*ev).param.conn;
                (copy_bytes(c.private_data, c.private_data_len), c)
            };
            let conn = ConnParam {
                private_data: data.clone(),
                responder_resources: c.responder_resources,
                initiator_depth: c.initiator_depth,
                flow_control: c.flow_control,
                retry_count: c.retry_count,
                rnr_retry_count: c.rnr_retry_count,
                srq: c.srq,
                qp_num: c.qp_num,
            };
            (data, conn)
        };
        let ack_now = |why: String| {
            // SAFETY: the event just fetched, acknowledged once.
            unsafe { sys::rdma_ack_cm_event(ev) };
            Error::new(verb, ErrorKind::NotFound, why)
        };
        let known = ch.0.ids.borrow().get(id_p as usize);
        let id = match known {
            Some(inner) => HwCmId(inner),
            None if event == CONNECT_REQUEST => Self::new_id_handle(&ch.0, id_p),
            None => {
                return Err(ack_now(format!(
                    "{} for an rdma_cm id this backend does not know (acknowledged and dropped)",
                    CmEventType::from_raw(event)
                )))
            }
        };
        let listen_id = if listen_p.is_null() {
            None
        } else {
            let l = ch.0.ids.borrow().get(listen_p as usize);
            match l {
                Some(l) => Some(HwCmId(l)),
                None => {
                    return Err(ack_now(
                        "CONNECT_REQUEST on a listening id this backend does not know".into(),
                    ))
                }
            }
        };
        let counted = listen_id.as_ref().unwrap_or(&id);
        counted.0.pending.borrow_mut().push(PendingEvent {
            raw: ev,
            event,
            id_addr: id_p as usize,
        });
        Ok(Some(CmEvent {
            event: CmEventType::from_raw(event),
            id,
            listen_id,
            status,
            private_data,
            conn,
            // The event's own address identifies it until it is acked.
            token: ev as usize as u64,
            ud,
            context,
        }))
    }

    pub(crate) fn cm_ack_event(&mut self, event: CmEvent<Self>) -> Result<()> {
        let verb = Verb::RdmaAckCmEvent;
        let counted = event.listen_id.as_ref().unwrap_or(&event.id);
        if counted.0.channel.owner != self.id {
            return Err(foreign(verb, "rdma_cm id"));
        }
        let raw_type = event.event.to_raw();
        let id_addr = event.id.0.addr;
        let mut pending = counted.0.pending.borrow_mut();
        let Some(i) = pending.iter().position(|p| {
            p.raw as usize as u64 == event.token && p.event == raw_type && p.id_addr == id_addr
        }) else {
            return Err(Error::from_errno(
                verb,
                EINVAL,
                format!("no unacknowledged {} event for this id", event.event),
            ));
        };
        let p = pending.remove(i);
        // SAFETY: `p.raw` came from `rdma_get_cm_event` and is acknowledged
        // once (removed from the list just now).
        if unsafe { sys::rdma_ack_cm_event(p.raw) } != 0 {
            return Err(c_error(verb, last_errno(), "rdma_ack_cm_event"));
        }
        Ok(())
    }
}
