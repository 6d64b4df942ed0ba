//! Moving an id to another event channel (`rdma_migrate_id`) and the
//! events a program reports to the CM (`rdma_notify`).

use verbs_api::errno::{EINVAL, EISCONN};
use verbs_api::{AsyncEventType, CmEventType, Error, Result, Verb};

use super::{invalid, Conn, IdState};
use crate::handles::*;
use crate::world::World;

impl World {
    /// `rdma_migrate_id`: `id`'s events go to `to` from now on. What is
    /// queued on its old channel and not fetched moves too, in order: its
    /// own events and, for a listening id, its connection requests, whose
    /// new ids move with them (the kernel's `ucma_move_events`).
    pub fn rdma_migrate_id(&mut self, id: CmIdHandle, to: CmChannelHandle) -> Result<()> {
        let v = Verb::RdmaMigrateId;
        let from = self.cm_id(id, v)?.channel;
        if self.cm.channels.get(to.index, to.generation).is_none() {
            return Err(invalid(
                v,
                format!("invalid or destroyed rdma_cm event channel {to:?}"),
            ));
        }
        if from == to {
            return Ok(());
        }
        let mut moved = std::collections::VecDeque::new();
        if let Some(c) = self.cm.channels.get_mut(from.index, from.generation) {
            let (go, stay): (std::collections::VecDeque<_>, _) = std::mem::take(&mut c.events)
                .into_iter()
                .partition(|e| e.listen_id.unwrap_or(e.id) == id);
            c.events = stay;
            moved = go;
        }
        // The ids connection requests brought live on the listener's
        // channel until the program has them: they move with their event.
        let mut ids = vec![id];
        ids.extend(
            moved
                .iter()
                .filter(|e| e.event == CmEventType::ConnectRequest && e.id != id)
                .map(|e| e.id),
        );
        for i in ids {
            let Some(x) = self.cm.ids.get_mut(i.index, i.generation) else {
                continue;
            };
            if x.channel != from {
                continue;
            }
            x.channel = to;
            if let Some(c) = self.cm.channels.get_mut(from.index, from.generation) {
                c.ids = c.ids.saturating_sub(1);
            }
            if let Some(c) = self.cm.channels.get_mut(to.index, to.generation) {
                c.ids += 1;
            }
        }
        if let Some(c) = self.cm.channels.get_mut(to.index, to.generation) {
            c.events.extend(moved);
        }
        self.stop_epoch = self.stop_epoch.wrapping_add(1);
        Ok(())
    }

    /// `rdma_notify`: `COMM_EST` (the QP received data before the RTU)
    /// establishes a passive connection waiting for its RTU, and the id
    /// gets `ESTABLISHED` at once (the late RTU then changes nothing);
    /// `PATH_MIG` on an established connection is accepted (the simulator
    /// models one path, so there is nothing to switch to).
    pub fn rdma_notify(&mut self, id: CmIdHandle, event: AsyncEventType) -> Result<()> {
        let v = Verb::RdmaNotify;
        let state = self.cm_id(id, v)?.state;
        match (event, state) {
            (AsyncEventType::CommEst, IdState::Connect(Conn::RepSent)) => {
                self.cm_id_mut(id, v)?.state = IdState::Connect(Conn::Established);
                self.cm_simple_event(id, CmEventType::Established, 0);
                Ok(())
            }
            (AsyncEventType::CommEst, IdState::Connect(Conn::Established)) => Err(
                Error::from_errno(v, EISCONN, "the connection is already established"),
            ),
            (AsyncEventType::PathMig, IdState::Connect(Conn::Established)) => Ok(()),
            (AsyncEventType::CommEst | AsyncEventType::PathMig, s) => Err(Error::from_errno(
                v,
                EINVAL,
                format!("the id has no IB CM connection in a state {event} applies to ({s:?})"),
            )),
            _ => Err(Error::from_errno(
                v,
                EINVAL,
                format!("the CM does not act on {event} (COMM_EST and PATH_MIG only)"),
            )),
        }
    }
}
