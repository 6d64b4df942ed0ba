//! The fabric's side of the submission ring: one record a process wrote
//! (`ibv_post_send`, `ibv_post_recv`, an `ibv_wr_*` batch, SRQ receives),
//! checked against the process's objects and posted to the world, or
//! refused the way a NIC refuses a malformed WQE.

use backend_sim::*;
use verbs_api::*;

use super::family::{Owned, Session};
use super::fast::Served;
use super::sqring::{KIND_RECV, KIND_SEND, KIND_SRQ_RECV, KIND_WR};
use super::wire::{Handles, RecvWrW, SendWrW};

/// Serves one record of a process's submission ring.
pub(crate) fn serve_record(
    sim: &mut SimVerbs,
    session: &mut Session<'_>,
    kind: u32,
    body: &[u8],
) -> Served {
    if kind == KIND_SRQ_RECV {
        return super::fastwr::serve_srq_record(sim, session, body);
    }
    let Ok((qp, rest)) = postcard::take_from_bytes::<QpHandle>(body) else {
        return Served::Dropped(format!("a record of {} bytes naming no QP", body.len()));
    };
    let verb = match kind {
        KIND_RECV => Verb::PostRecv,
        KIND_WR => Verb::PostWr,
        _ => Verb::PostSend,
    };
    if let Err(e) = session.check(verb, &[Owned::Qp(qp)]) {
        return Served::Dropped(e.to_string());
    }
    let r = match kind {
        KIND_SEND => match postcard::from_bytes::<(Vec<SendWrW>, Vec<Vec<u8>>)>(rest) {
            Ok((wrs, carried)) => {
                let mut hs = Vec::new();
                wrs.handles(&mut hs);
                if let Err(e) = session.check(verb, &hs) {
                    Err(e.to_string())
                } else if carried.len() != wrs.len() {
                    Err(format!(
                        "{} requests with {} inline buffers",
                        wrs.len(),
                        carried.len()
                    ))
                } else {
                    let views = SendWrW::views(&wrs);
                    let c: Vec<&[u8]> = carried.iter().map(Vec::as_slice).collect();
                    sim.post_send_carrying(&qp, &views, &c)
                        .map_err(|e| e.to_string())
                }
            }
            Err(e) => Err(format!("send requests that do not decode ({e})")),
        },
        KIND_RECV => match postcard::from_bytes::<Vec<RecvWrW>>(rest) {
            Ok(wrs) => {
                let views = RecvWrW::views(&wrs);
                // SAFETY: the simulator owns or copies every byte a request
                // names (the client's memory is reached by pid).
                unsafe { Verbs::post_recv(sim, &qp, &views) }.map_err(|e| e.to_string())
            }
            Err(e) => Err(format!("receive requests that do not decode ({e})")),
        },
        KIND_WR => super::fastwr::serve_wr_body(sim, session, qp, rest),
        k => Err(format!("a record of unknown kind {k}")),
    };
    match r {
        Ok(()) => Served::Posted,
        Err(why) => {
            sim.world_mut().malformed_wqe(qp);
            Served::Malformed(qp, why)
        }
    }
}
