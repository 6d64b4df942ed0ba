//! The rest of librdmacm's (non-rsocket) API: moving an id to another
//! event channel (`rdma_migrate_id`), the ports of its addresses
//! (`rdma_get_src_port`, `rdma_get_dst_port`), an SRQ owned by the id
//! (`rdma_create_srq(_ex)`, `rdma_destroy_srq`, used by `rdma_create_qp`),
//! `rdma_notify` and `rdma_reject_ece`.

use core::ffi::{c_int, c_void};
use core::ptr;

use verbs_api::*;

use super::addr::AF_IB;
use super::{id_entry, refresh, ret, verb_then_wait};
use crate::export::export;
use crate::guard::set_errno;
use crate::provider::state::{c, sync_fds, with, Fail, Res, Shim, SimRes};

// `port_of` reads the storage as its 128 bytes.
const _: () = assert!(size_of::<c::sockaddr_storage>() == 128);

fn migrate(
    shim: &mut Shim,
    id: *mut c::rdma_cm_id,
    channel: *mut c::rdma_event_channel,
) -> Res<()> {
    let v = "rdma_migrate_id";
    let (h, was_sync, owned, old) = {
        let e = id_entry(shim, v, id)?;
        (e.handle, e.sync, e.owns_channel, e.channel)
    };
    if was_sync && channel.is_null() {
        return Err(Fail::new(
            v,
            libc::EINVAL,
            "the id is already synchronous (created or migrated with a NULL channel)",
        ));
    }
    // A NULL channel makes the id synchronous: its own internal channel.
    let (to, sync) = if channel.is_null() {
        (shim.sim.rdma_create_event_channel().at(v)?, true)
    } else {
        match shim.cm.channels.get(&(channel as usize)) {
            Some(e) => (e.handle, false),
            None => return Err(Fail::bad_ptr(v, "event channel", channel.cast())),
        }
    };
    if let Err(e) = shim.sim.rdma_migrate_id(&h, &to) {
        if sync {
            let _ = shim.sim.rdma_destroy_event_channel(&to);
        }
        return Err(Fail::sim(v, &e));
    }
    if was_sync && owned {
        // The internal channel of the synchronous id goes with it (an id a
        // connection request brought still on it keeps it, and is logged;
        // a sync listener's request shares its listener's, which stays).
        if let Err(e) = shim.sim.rdma_destroy_event_channel(&old) {
            Fail::sim(v, &e);
        }
    }
    if let Some(e) = shim.cm.ids.get_mut(&(id as usize)) {
        e.channel = to;
        e.sync = sync;
        e.owns_channel = sync;
    }
    // SAFETY: a live id of ours (checked above).
    unsafe { (*id).channel = channel };
    sync_fds(shim);
    Ok(())
}

export! { "RDMACM_1.0" fn rdma_migrate_id(id: *mut c::rdma_cm_id, channel: *mut c::rdma_event_channel) -> c_int {
    let r = with(|shim| migrate(shim, id, channel));
    if r.is_ok() {
        // As librdmacm: the call returns once the events of the id already
        // handed out (on the old channel) are acknowledged, so none of
        // them is worked on after the id has moved.
        while with(|shim| {
            shim.cm.ids.get(&(id as usize)).is_some_and(|e| super::ledger::handed_out(shim, e.handle) > 0)
        }) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    ret(r)
}}

/// The port of a C `sockaddr` in network byte order, as librdmacm reads
/// it: `sin_port`, `sin6_port`, or for `AF_IB` the low 16 bits of the
/// service id; 0 for another family.
fn port_of(sa: &c::sockaddr_storage) -> u16 {
    // SAFETY: sockaddr_storage is 128 plain bytes.
    let bytes: &[u8; 128] = unsafe { &*(ptr::from_ref(sa).cast()) };
    let family = u16::from_ne_bytes([bytes[0], bytes[1]]);
    match i32::from(family) {
        libc::AF_INET | libc::AF_INET6 => u16::from_ne_bytes([bytes[2], bytes[3]]),
        AF_IB => {
            // sockaddr_ib: family, pkey, flowinfo, 16-byte address, then
            // the big-endian service id at offset 24.
            let mut sid = [0u8; 8];
            sid.copy_from_slice(&bytes[24..32]);
            (u64::from_be_bytes(sid) as u16).to_be()
        }
        _ => 0,
    }
}

/// The port of the id's source (`src`) or destination address.
fn id_port(v: &str, id: *mut c::rdma_cm_id, src: bool) -> u16 {
    let r: Res<u16> = with(|shim| {
        id_entry(shim, v, id)?;
        refresh(shim, v, id)?;
        // SAFETY: a live id of ours; the storage members of the unions.
        let a = unsafe {
            if src {
                (*id).route.addr.__bindgen_anon_1.src_storage
            } else {
                (*id).route.addr.__bindgen_anon_2.dst_storage
            }
        };
        Ok(port_of(&a))
    });
    match r {
        Ok(p) => p,
        Err(f) => {
            set_errno(f.errno);
            0
        }
    }
}

export! { "RDMACM_1.0" fn rdma_get_src_port(id: *mut c::rdma_cm_id) -> u16 {
    id_port("rdma_get_src_port", id, true)
}}

export! { "RDMACM_1.0" fn rdma_get_dst_port(id: *mut c::rdma_cm_id) -> u16 {
    id_port("rdma_get_dst_port", id, false)
}}

/// `rdma_create_srq_ex`: an SRQ on the id's device, on the id's PD unless
/// the attributes name one; `rdma_create_qp` then uses it.
fn create_srq_ex(
    shim: &mut Shim,
    v: &str,
    id: *mut c::rdma_cm_id,
    attr: *mut c::ibv_srq_init_attr_ex,
) -> Res<()> {
    id_entry(shim, v, id)?;
    if attr.is_null() {
        return Err(Fail::new(v, libc::EINVAL, "srq_init_attr is NULL"));
    }
    // SAFETY: non-NULL; the caller's struct.
    let a = unsafe { &mut *attr };
    if a.comp_mask & c::IBV_SRQ_INIT_ATTR_TYPE == 0 {
        return Err(Fail::new(
            v,
            libc::EINVAL,
            "comp_mask lacks IBV_SRQ_INIT_ATTR_TYPE",
        ));
    }
    // SAFETY: a live id of ours.
    let (verbs, id_pd, has_srq) = unsafe { ((*id).verbs, (*id).pd, !(*id).srq.is_null()) };
    if has_srq {
        return Err(Fail::new(v, libc::EINVAL, "the id already has an SRQ"));
    }
    if verbs.is_null() {
        return Err(Fail::new(
            v,
            libc::EINVAL,
            "the id is not bound to a device yet",
        ));
    }
    if a.comp_mask & c::IBV_SRQ_INIT_ATTR_PD == 0 || a.pd.is_null() {
        a.pd = id_pd;
        a.comp_mask |= c::IBV_SRQ_INIT_ATTR_PD;
    }
    if a.srq_type == c::IBV_SRQT_XRC
        && (a.comp_mask & c::IBV_SRQ_INIT_ATTR_XRCD == 0
            || a.xrcd.is_null()
            || a.comp_mask & c::IBV_SRQ_INIT_ATTR_CQ == 0
            || a.cq.is_null())
    {
        return Err(Fail::new(
            v,
            libc::EOPNOTSUPP,
            "an XRC SRQ needs the caller's XRCD and CQ here (librdmacm would open a device XRCD and create the CQ itself; not modelled)",
        ));
    }
    let srq = crate::provider::objects::create_srq(shim, v, verbs, a)?;
    // SAFETY: a live id of ours.
    unsafe {
        (*id).srq = srq;
        if (*id).pd.is_null() {
            (*id).pd = a.pd;
        }
    }
    Ok(())
}

export! { "RDMACM_1.0" fn rdma_create_srq_ex(id: *mut c::rdma_cm_id, attr: *mut c::ibv_srq_init_attr_ex) -> c_int {
    ret(with(|shim| create_srq_ex(shim, "rdma_create_srq_ex", id, attr)))
}}

export! { "RDMACM_1.0" fn rdma_create_srq(id: *mut c::rdma_cm_id, pd: *mut c::ibv_pd, attr: *mut c::ibv_srq_init_attr) -> c_int {
    ret(with(|shim| {
        let v = "rdma_create_srq";
        id_entry(shim, v, id)?;
        if attr.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "srq_init_attr is NULL"));
        }
        // SAFETY: non-NULL; the caller's struct; a live id of ours.
        let (init, qp_type) = unsafe { (&mut *attr, (*id).qp_type) };
        let mut ex = c::ibv_srq_init_attr_ex {
            srq_context: init.srq_context,
            attr: init.attr,
            comp_mask: c::IBV_SRQ_INIT_ATTR_TYPE | c::IBV_SRQ_INIT_ATTR_PD,
            srq_type: if qp_type == c::IBV_QPT_XRC_RECV { c::IBV_SRQT_XRC } else { c::IBV_SRQT_BASIC },
            pd,
            ..Default::default()
        };
        let r = create_srq_ex(shim, v, id, &mut ex);
        // librdmacm copies the attributes back either way.
        init.srq_context = ex.srq_context;
        init.attr = ex.attr;
        r
    }))
}}

/// Destroys the SRQ `rdma_create_srq` gave the id (`rdma_destroy_srq`,
/// and `rdma_destroy_ep` for an id that has one).
pub(super) fn destroy_id_srq(shim: &mut Shim, v: &str, id: *mut c::rdma_cm_id) -> Res<()> {
    id_entry(shim, v, id)?;
    // SAFETY: a live id of ours.
    let srq = unsafe { (*id).srq };
    if srq.is_null() {
        return Err(Fail::new(v, libc::EINVAL, "the id has no SRQ"));
    }
    crate::provider::objects::destroy_srq(shim, v, srq)?;
    // SAFETY: as above.
    unsafe { (*id).srq = ptr::null_mut() };
    Ok(())
}

export! { "RDMACM_1.0" fn rdma_destroy_srq(id: *mut c::rdma_cm_id) {
    let _ = ret(with(|shim| destroy_id_srq(shim, "rdma_destroy_srq", id)));
}}

export! { "RDMACM_1.0" fn rdma_notify(id: *mut c::rdma_cm_id, event: u32) -> c_int {
    let ev = AsyncEventType::from_raw(event);
    ret(verb_then_wait("rdma_notify", id, |s, h| s.sim.rdma_notify(h, ev).at("rdma_notify").map(|()| None)))
}}

export! { "RDMACM_1.3" fn rdma_reject_ece(id: *mut c::rdma_cm_id, private_data: *const c_void, private_data_len: u8) -> c_int {
    let data = if private_data.is_null() {
        Vec::new()
    } else {
        // SAFETY: private_data_len readable bytes.
        unsafe { core::slice::from_raw_parts(private_data.cast::<u8>(), usize::from(private_data_len)) }.to_vec()
    };
    ret(verb_then_wait("rdma_reject_ece", id, |s, h| s.sim.rdma_reject_ece(h, &data).at("rdma_reject_ece").map(|()| None)))
}}
