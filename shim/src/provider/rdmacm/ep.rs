//! librdmacm's devices and options, `rdma_getaddrinfo` for numeric
//! addresses, and endpoints (`rdma_create_ep`, `rdma_get_request`).

use core::ffi::{c_char, c_int, c_void};
use core::mem::size_of;
use core::ptr;
use std::ffi::CStr;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use verbs_api::*;

use super::addr::{malloc_copy_ib, malloc_sockaddr, read_sockaddr, AF_IB};
use super::event::{c_event, rdma_ack_cm_event_inner};
use super::extra::destroy_id_srq;
use super::qp::{rdma_create_qp_impl, rdma_destroy_qp_impl};
use super::{
    create_id, id_entry, rdma_bind_addr_impl, rdma_destroy_id_impl, rdma_resolve_addr_impl,
    rdma_resolve_route_impl, ret, wait_sync, RAI_NUMERICHOST, RAI_PASSIVE,
};
use crate::export::export;
use crate::guard::set_errno;
use crate::provider::state::{self, c, with, Fail, Res, SimRes};

// --------------------------------------------------- devices and options

export! { "RDMACM_1.0" fn rdma_get_devices(num_devices: *mut c_int) -> *mut *mut c::ibv_context {
    with(|shim| {
        let v = "rdma_get_devices";
        if shim.cm.devices.is_empty() {
            for i in 0..shim.devices.len() {
                match shim.sim.cm_device_context(i as u32).at(v).and_then(|h| crate::provider::context::context_ptr(shim, v, h)) {
                    Ok(p) => shim.cm.devices.push(p as usize),
                    Err(f) => {
                        set_errno(f.errno);
                        return ptr::null_mut();
                    }
                }
            }
        }
        let n = shim.cm.devices.len();
        // SAFETY: calloc of n+1 pointers; freed by rdma_free_devices.
        let list = unsafe { libc::calloc(n + 1, size_of::<*mut c::ibv_context>()) }.cast::<*mut c::ibv_context>();
        if list.is_null() {
            set_errno(libc::ENOMEM);
            return ptr::null_mut();
        }
        for (i, &p) in shim.cm.devices.iter().enumerate() {
            // SAFETY: i < n; the array has n+1 slots.
            unsafe { *list.add(i) = p as *mut c::ibv_context };
        }
        shim.cm.device_lists.insert(list as usize, ());
        if !num_devices.is_null() {
            // SAFETY: the caller's int.
            unsafe { *num_devices = n as c_int };
        }
        list
    })
}}

export! { "RDMACM_1.0" fn rdma_free_devices(list: *mut *mut c::ibv_context) {
    with(|shim| {
        if shim.cm.device_lists.remove(&(list as usize)).is_some() {
            // SAFETY: calloc'd by rdma_get_devices, freed once.
            unsafe { libc::free(list.cast()) };
        }
    })
}}

export! { "RDMACM_1.0" fn rdma_set_option(id: *mut c::rdma_cm_id, level: c_int, optname: c_int, optval: *mut c_void, optlen: usize) -> c_int {
    ret(with(|shim| {
        let v = "rdma_set_option";
        let h = id_entry(shim, v, id)?.handle;
        // The options librdmacm knows: ACK_TIMEOUT sets the timeout the CM's
        // RTS transition uses; TOS, REUSEADDR, AFONLY and the IB path are
        // accepted, and the simulator's CM has no use for them.
        match (level as u32, optname as u32) {
            (c::RDMA_OPTION_ID, 3) => {
                if optval.is_null() || optlen != 1 {
                    return Err(Fail::new(v, libc::EINVAL, "RDMA_OPTION_ID_ACK_TIMEOUT takes one u8"));
                }
                // SAFETY: non-NULL, one byte long (checked above).
                let t = unsafe { *optval.cast::<u8>() };
                shim.sim.rdma_set_ack_timeout(h, t).at(v)
            }
            (c::RDMA_OPTION_ID, 0..=2) | (c::RDMA_OPTION_IB, 1) => Ok(()),
            _ => Err(Fail::new(v, libc::ENOSYS, format!("unknown option level {level} name {optname}"))),
        }
    }))
}}

// ------------------------------------------------------ addrinfo and eps

/// Parses a numeric host and a numeric service.
pub(super) fn parse_addr(node: *const c_char, service: *const c_char) -> Res<Option<SocketAddr>> {
    let v = "rdma_getaddrinfo";
    let text = |p: *const c_char| -> Option<String> {
        // SAFETY: NULL or a NUL-terminated string of the caller.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    };
    let port = match text(service) {
        Some(s) => s.parse::<u16>().map_err(|_| {
            Fail::new(
                v,
                libc::EINVAL,
                format!("service {s:?} is not a port number"),
            )
        })?,
        None => 0,
    };
    match text(node) {
        None => Ok(None),
        Some(n) => {
            let ip: IpAddr = if n == "localhost" {
                IpAddr::V4(Ipv4Addr::LOCALHOST)
            } else {
                n.parse().map_err(|_| {
                    Fail::new(
                        v,
                        libc::EINVAL,
                        format!("node {n:?}: only numeric addresses resolve in the simulator"),
                    )
                })?
            };
            Ok(Some(SocketAddr::new(ip, port)))
        }
    }
}

/// The QP type and port space of an answer: the hints' where they give
/// them, else each follows the other as librdmacm's socket mapping makes
/// them (a UDP or IPoIB port space means UD, UD means the UDP port space;
/// RC and TCP otherwise).
pub(super) fn qp_type_and_port_space(h: &c::rdma_addrinfo) -> (c_int, c_int) {
    let ud_ps = |ps: c_int| ps == c::RDMA_PS_UDP as c_int || ps == c::RDMA_PS_IPOIB as c_int;
    let qp_type = match h.ai_qp_type {
        0 if ud_ps(h.ai_port_space) => c::IBV_QPT_UD as c_int,
        0 => c::IBV_QPT_RC as c_int,
        t => t,
    };
    let port_space = match h.ai_port_space {
        0 if qp_type == c::IBV_QPT_UD as c_int => c::RDMA_PS_UDP as c_int,
        0 => c::RDMA_PS_TCP as c_int,
        ps => ps,
    };
    (qp_type, port_space)
}

export! { "RDMACM_1.0" fn rdma_getaddrinfo(node: *const c_char, service: *const c_char, hints: *const c::rdma_addrinfo, res: *mut *mut c::rdma_addrinfo) -> c_int {
    ret((|| {
        let v = "rdma_getaddrinfo";
        // SAFETY: NULL or the caller's hints.
        let h = if hints.is_null() { c::rdma_addrinfo::default() } else { unsafe { hints.read() } };
        // SAFETY: the hints' own sockaddrs, of the family they say (or NULL).
        let (hs, hd) = unsafe { (read_sockaddr(h.ai_src_addr), read_sockaddr(h.ai_dst_addr)) };
        // SAFETY: the hints' own sockaddrs, of the family they say (or NULL).
        let (ibs, ibd) = unsafe { (malloc_copy_ib(h.ai_src_addr), malloc_copy_ib(h.ai_dst_addr)) };
        if !res.is_null() && node.is_null() && service.is_null() && (!ibs.0.is_null() || !ibd.0.is_null()) {
            // AF_IB hints and no name: the answer carries the hints' own
            // struct sockaddr_ib (libfabric's verbs provider asks so before
            // it binds a passive endpoint).
            let ai = state::alloc_zeroed::<c::rdma_addrinfo>();
            // SAFETY: just allocated.
            let r = unsafe { &mut *ai };
            r.ai_flags = h.ai_flags;
            r.ai_family = AF_IB;
            (r.ai_qp_type, r.ai_port_space) = qp_type_and_port_space(&h);
            (r.ai_src_addr, r.ai_src_len) = ibs;
            (r.ai_dst_addr, r.ai_dst_len) = ibd;
            // SAFETY: non-NULL out-pointer.
            unsafe { *res = ai };
            return Ok(());
        }
        // SAFETY: the copies above were malloc'd here and are not kept.
        unsafe {
            libc::free(ibs.0.cast());
            libc::free(ibd.0.cast());
        }
        if !res.is_null() && node.is_null() && service.is_null() && (hs.is_some() || hd.is_some()) {
            // No name to resolve: librdmacm answers with the hints' own
            // addresses (pyverbs' multicast tests pass a source this way).
            let ai = state::alloc_zeroed::<c::rdma_addrinfo>();
            // SAFETY: just allocated.
            let r = unsafe { &mut *ai };
            r.ai_flags = h.ai_flags;
            let fam = hs.or(hd).is_some_and(|a| a.is_ipv4());
            r.ai_family = if fam { libc::AF_INET } else { libc::AF_INET6 };
            (r.ai_qp_type, r.ai_port_space) = qp_type_and_port_space(&h);
            if let Some(a) = hs {
                (r.ai_src_addr, r.ai_src_len) = malloc_sockaddr(a);
            }
            if let Some(a) = hd {
                (r.ai_dst_addr, r.ai_dst_len) = malloc_sockaddr(a);
            }
            // SAFETY: non-NULL out-pointer.
            unsafe { *res = ai };
            return Ok(());
        }
        if res.is_null() || (node.is_null() && service.is_null()) {
            return Err(Fail::new(v, libc::EINVAL, "res is NULL, or neither node nor service (nor an address in the hints) is given"));
        }
        if h.ai_flags & RAI_NUMERICHOST == 0 && !node.is_null() {
            // Names other than numeric ones and "localhost" fail in parse_addr.
        }
        let passive = h.ai_flags & RAI_PASSIVE != 0;
        let mut a = parse_addr(node, service)?;
        if a.is_none() && passive {
            let port = parse_addr(c"0.0.0.0".as_ptr(), service)?.map_or(0, |s| s.port());
            a = Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port));
        }
        let a = a.ok_or_else(|| Fail::new(v, libc::EINVAL, "no address"))?;
        let ai = state::alloc_zeroed::<c::rdma_addrinfo>();
        // SAFETY: just allocated.
        let r = unsafe { &mut *ai };
        r.ai_flags = h.ai_flags;
        r.ai_family = if a.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
        (r.ai_qp_type, r.ai_port_space) = qp_type_and_port_space(&h);
        let (p, len) = malloc_sockaddr(a);
        if passive {
            r.ai_src_addr = p;
            r.ai_src_len = len;
        } else {
            r.ai_dst_addr = p;
            r.ai_dst_len = len;
            // librdmacm keeps the source address the hints give (an active
            // side that binds before it resolves, as pyverbs' multicast
            // tests do, passes it in `ai_src_addr`).
            // SAFETY: the hints' own sockaddr, of the family it says (or NULL).
            if let Some(src) = unsafe { read_sockaddr(h.ai_src_addr) } {
                let (sp, slen) = malloc_sockaddr(src);
                r.ai_src_addr = sp;
                r.ai_src_len = slen;
            }
        }
        // SAFETY: non-NULL out-pointer.
        unsafe { *res = ai };
        Ok(())
    })())
}}

export! { "RDMACM_1.0" fn rdma_freeaddrinfo(res: *mut c::rdma_addrinfo) {
    let mut p = res;
    while !p.is_null() {
        // SAFETY: a list rdma_getaddrinfo built: each node and its addresses
        // were allocated there (Box and malloc) and are freed once.
        unsafe {
            let next = (*p).ai_next;
            libc::free((*p).ai_src_addr.cast());
            libc::free((*p).ai_dst_addr.cast());
            state::free(p);
            p = next;
        }
    }
}}

export! { "RDMACM_1.0" fn rdma_create_ep(id: *mut *mut c::rdma_cm_id, res: *mut c::rdma_addrinfo, pd: *mut c::ibv_pd, qp_init_attr: *mut c::ibv_qp_init_attr) -> c_int {
    let v = "rdma_create_ep";
    if id.is_null() || res.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: non-NULL; the caller's addrinfo.
    let r = unsafe { &*res };
    let mut new = ptr::null_mut();
    if with(|shim| create_id(shim, ptr::null_mut(), &mut new, ptr::null_mut(), r.ai_port_space as u32)).is_err() {
        return -1;
    }
    let rc = if r.ai_flags & RAI_PASSIVE != 0 {
        // SAFETY: the exported function with the caller's addresses.
        unsafe { rdma_bind_addr_impl(new, r.ai_src_addr) }
    } else {
        // SAFETY: as above.
        let rc = unsafe { rdma_resolve_addr_impl(new, r.ai_src_addr, r.ai_dst_addr, 2000) };
        // SAFETY: as above.
        if rc == 0 { unsafe { rdma_resolve_route_impl(new, 2000) } } else { rc }
    };
    let passive = r.ai_flags & RAI_PASSIVE != 0;
    let rc = if rc == 0 && passive && !qp_init_attr.is_null() {
        // SAFETY: non-NULL; the caller's struct, copied as librdmacm does,
        // with the QP type of the address.
        let attr = c::ibv_qp_init_attr { qp_type: r.ai_qp_type as u32, ..unsafe { *qp_init_attr } };
        with(|shim| match shim.cm.ids.get_mut(&(new as usize)) {
            Some(e) => {
                e.passive_qp = Some((pd as usize, attr));
                0
            }
            None => -1,
        })
    } else if rc == 0 && !qp_init_attr.is_null() {
        // librdmacm writes the address's QP type into the caller's struct.
        // SAFETY: non-NULL; the caller's struct.
        unsafe { (*qp_init_attr).qp_type = r.ai_qp_type as u32 };
        // SAFETY: as above.
        unsafe { rdma_create_qp_impl(new, pd, qp_init_attr) }
    } else {
        rc
    };
    if rc != 0 {
        // SAFETY: errno of this thread.
        let e = unsafe { *libc::__errno_location() };
        // SAFETY: the id created above.
        unsafe { rdma_destroy_id_impl(new) };
        crate::guard::log_err(v, e, &"a step of rdma_create_ep failed");
        set_errno(e);
        return -1;
    }
    // SAFETY: non-NULL out-pointer.
    unsafe { *id = new };
    0
}}

export! { "RDMACM_1.0" fn rdma_destroy_ep(id: *mut c::rdma_cm_id) {
    // SAFETY: the exported functions, on the caller's id.
    unsafe {
        let ours = with(|shim| shim.cm.ids.contains_key(&(id as usize)));
        if ours && !(*id).qp.is_null() {
            rdma_destroy_qp_impl(id);
        }
        // As librdmacm: the id's SRQ (rdma_create_srq) goes too.
        if ours && !(*id).srq.is_null() {
            let _ = ret(with(|shim| destroy_id_srq(shim, "rdma_destroy_ep", id)));
        }
        rdma_destroy_id_impl(id);
    }
}}

export! { "RDMACM_1.0" fn rdma_get_request(listen: *mut c::rdma_cm_id, id: *mut *mut c::rdma_cm_id) -> c_int {
    let v = "rdma_get_request";
    let rc = ret((|| {
        if id.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "id is NULL"));
        }
        if !with(|shim| id_entry(shim, v, listen).map(|e| e.sync))? {
            return Err(Fail::new(v, libc::EINVAL, "the listening id has an event channel (rdma_get_request is for synchronous ids)"));
        }
        // Blocks until a request comes, as librdmacm's read of the
        // listener's channel does.
        let ev = wait_sync(v, listen, CmEventType::ConnectRequest)?
            .ok_or_else(|| Fail::new(v, libc::EINVAL, "not a synchronous id"))?;
        with(|shim| {
            let e = c_event(shim, v, ev)?;
            // SAFETY: the event just built.
            let new = unsafe { (*e).id };
            // SAFETY: the exported function on our own event.
            unsafe { rdma_ack_cm_event_inner(shim, e) };
            // SAFETY: non-NULL out-pointer.
            unsafe { *id = new };
            Ok(())
        })
    })());
    if rc != 0 {
        return rc;
    }
    // A passive endpoint's QP, made for each request (librdmacm does so
    // after the lock-free part; the id is the caller's now).
    let recipe = with(|shim| shim.cm.ids.get(&(listen as usize)).and_then(|e| e.passive_qp));
    if let Some((pd, mut attr)) = recipe {
        // SAFETY: `*id` was set above to a live id of ours; `attr` is our copy.
        let rc = unsafe { rdma_create_qp_impl(*id, pd as *mut c::ibv_pd, &mut attr) };
        if rc != 0 {
            return rc;
        }
    }
    0
}}
