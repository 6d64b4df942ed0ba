//! Addresses from what a program holds: an address handle from a received
//! completion and its GRH (`ibv_init_ah_from_wc`, `ibv_create_ah_from_wc`),
//! a P_Key's table index (`ibv_get_pkey_index`) and a RoCE destination's
//! Ethernet address (`ibv_resolve_eth_l2_from_gid`).

use core::ffi::c_int;

use backend_sim::ContextHandle;
use verbs_api::*;

use crate::export::export;
use crate::guard::set_errno;
use crate::provider::state::{c, handle_of, ret_ptr, with, Fail, Obj, Res, Shim, SimRes};

/// The sysfs GID types `ibv_init_ah_from_wc` searches by: IB and RoCE v1
/// share 0, RoCE v2 is 1.
const SYSFS_IB_ROCE_V1: u32 = 0;
const SYSFS_ROCE_V2: u32 = 1;
/// The GRH's next header for IB transport (RoCE v1 and IB).
const NEXT_HDR_IB: u8 = 0x1b;

/// The first index of the port's GID table that holds `gid` with the
/// sysfs type `kind`; the error of the first index past the table when
/// none does (rdma-core's `ibv_find_gid_index`).
fn find_gid_index(
    shim: &mut Shim,
    v: &str,
    ctx: &ContextHandle,
    port: u8,
    gid: [u8; 16],
    kind: u32,
) -> Res<u8> {
    for i in 0u32.. {
        let g = shim.sim.query_gid(ctx, port, i).at(v)?;
        let t = crate::provider::device::gid_type(shim, ctx, port, i)?;
        let sysfs = if t == c::IBV_GID_TYPE_ROCE_V2 {
            SYSFS_ROCE_V2
        } else {
            SYSFS_IB_ROCE_V1
        };
        if g.0 == gid && sysfs == kind {
            return u8::try_from(i).map_err(|_| Fail::new(v, libc::EINVAL, "GID index above 255"));
        }
    }
    unreachable!("the GID table ends before u32::MAX")
}

/// The ones' complement checksum of a 20-byte IPv4 header with its
/// checksum field taken as zero.
fn ipv4_header_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for (i, w) in h[..20].chunks_exact(2).enumerate() {
        if i != 5 {
            sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Which header the 40 bytes in front of a UD receive hold: 6 (an IB or
/// RoCE GRH, or RoCE v2 over IPv6) or 4 (RoCE v2 over IPv4: the IPv4
/// header sits in the last 20 bytes), decided as rdma-core decides it (a
/// version-6 first byte still counts as IPv4 when bytes 20..40 are an
/// IPv4 header with a correct checksum).
fn grh_version(g: &[u8; 40]) -> Option<u8> {
    let ip4 = &g[20..40];
    if g[0] >> 4 != 6 {
        return (ip4[0] >> 4 == 4).then_some(4);
    }
    if ip4[0] & 0x0f != 5 {
        return Some(6);
    }
    let stored = u16::from_be_bytes([ip4[10], ip4[11]]);
    Some(if ipv4_header_checksum(ip4) == stored {
        4
    } else {
        6
    })
}

/// `::ffff:a.b.c.d`.
fn v4_mapped(ip: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&ip);
    g
}

/// The address handle attributes that answer the sender of `wc`
/// (rdma-core's `ibv_init_ah_from_wc`).
pub(crate) fn init_ah_from_wc(
    shim: &mut Shim,
    v: &str,
    context: *mut c::ibv_context,
    port_num: u8,
    wc: *const c::ibv_wc,
    grh: *const c::ibv_grh,
) -> Res<c::ibv_ah_attr> {
    let ctx = crate::provider::device::ctx_of(shim, v, context)?;
    if wc.is_null() {
        return Err(Fail::new(v, libc::EINVAL, "wc is NULL"));
    }
    // SAFETY: non-NULL; the caller's completion.
    let w = unsafe { &*wc };
    // SAFETY: a GRH is 40 plain bytes; NULL is checked.
    let g: Option<[u8; 40]> =
        (!grh.is_null()).then(|| unsafe { grh.cast::<[u8; 40]>().read_unaligned() });
    let flow = g.map_or(0, |g| u32::from_be_bytes([g[0], g[1], g[2], g[3]]));
    let mut a = c::ibv_ah_attr {
        dlid: w.slid,
        sl: w.sl,
        src_path_bits: w.dlid_path_bits,
        port_num,
        ..Default::default()
    };
    a.grh.flow_label = flow & 0xf_ffff;
    if w.wc_flags & c::IBV_WC_GRH == 0 {
        return Ok(a);
    }
    let Some(g) = g else {
        return Err(Fail::new(
            v,
            libc::EINVAL,
            "the completion has a GRH (IBV_WC_GRH) but grh is NULL",
        ));
    };
    a.is_global = 1;
    match grh_version(&g) {
        Some(4) => {
            let ip4 = &g[20..40];
            let (saddr, daddr) = (
                [ip4[12], ip4[13], ip4[14], ip4[15]],
                [ip4[16], ip4[17], ip4[18], ip4[19]],
            );
            if daddr[0] >> 4 == 0xe {
                return Err(Fail::new(
                    v,
                    libc::EINVAL,
                    "the IPv4 destination is multicast: no GID of ours to answer from",
                ));
            }
            a.grh.sgid_index =
                find_gid_index(shim, v, &ctx, port_num, v4_mapped(daddr), SYSFS_ROCE_V2)?;
            a.grh.dgid.raw = v4_mapped(saddr);
            a.grh.hop_limit = ip4[8];
            a.grh.traffic_class = ip4[1];
        }
        Some(_) => {
            let mut sgid = [0u8; 16];
            let mut dgid = [0u8; 16];
            sgid.copy_from_slice(&g[8..24]);
            dgid.copy_from_slice(&g[24..40]);
            if dgid[0] == 0xff {
                return Err(Fail::new(
                    v,
                    libc::EINVAL,
                    "the GRH's destination is a multicast GID: no GID of ours to answer from",
                ));
            }
            let kind = match g[6] {
                n if n == libc::IPPROTO_UDP as u8 => SYSFS_ROCE_V2,
                NEXT_HDR_IB => SYSFS_IB_ROCE_V1,
                n => {
                    return Err(Fail::new(
                        v,
                        libc::EPROTONOSUPPORT,
                        format!("GRH next header {n:#x} is neither IB (0x1b) nor UDP"),
                    ))
                }
            };
            a.grh.dgid.raw = sgid;
            a.grh.sgid_index = find_gid_index(shim, v, &ctx, port_num, dgid, kind)?;
            a.grh.hop_limit = g[7];
            a.grh.traffic_class = ((flow >> 20) & 0xff) as u8;
        }
        None => {
            return Err(Fail::new(
                v,
                libc::EPROTONOSUPPORT,
                "the 40 bytes before the payload are neither a GRH nor an IPv4 header",
            ));
        }
    }
    Ok(a)
}

export! { "IBVERBS_1.1" fn ibv_init_ah_from_wc(context: *mut c::ibv_context, port_num: u8, wc: *mut c::ibv_wc, grh: *mut c::ibv_grh, ah_attr: *mut c::ibv_ah_attr) -> c_int {
    let r = with(|shim| {
        let v = "ibv_init_ah_from_wc";
        if ah_attr.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "ah_attr is NULL"));
        }
        let a = init_ah_from_wc(shim, v, context, port_num, wc, grh)?;
        // SAFETY: non-NULL; the caller's struct.
        unsafe { ah_attr.write(a) };
        Ok(())
    });
    // librdmacm-style: -1 with errno, as rdma-core's returns.
    match r {
        Ok(()) => 0,
        Err(f) => {
            set_errno(f.errno);
            -1
        }
    }
}}

export! { "IBVERBS_1.1" fn ibv_create_ah_from_wc(pd: *mut c::ibv_pd, wc: *mut c::ibv_wc, grh: *mut c::ibv_grh, port_num: u8) -> *mut c::ibv_ah {
    ret_ptr(with(|shim| {
        let v = "ibv_create_ah_from_wc";
        handle_of!(shim, v, pd, Pd, "PD")?;
        // SAFETY: `pd` is a live PD of ours.
        let context = unsafe { (*pd).context };
        let a = init_ah_from_wc(shim, v, context, port_num, wc, grh)?;
        crate::provider::objects::create_ah(shim, v, pd, &a)
    }))
}}

export! { "IBVERBS_1.5" fn ibv_get_pkey_index(context: *mut c::ibv_context, port_num: u8, pkey: u16) -> c_int {
    let r = with(|shim| {
        let v = "ibv_get_pkey_index";
        let ctx = crate::provider::device::ctx_of(shim, v, context)?;
        let len = shim.sim.query_port(&ctx, port_num).at(v)?.pkey_tbl_len;
        for i in 0..len {
            // The table holds host order; the caller's P_Key is big-endian.
            if shim.sim.query_pkey(&ctx, port_num, i).at(v)?.to_be() == pkey {
                return Ok(c_int::from(i));
            }
        }
        Err(Fail::new(v, libc::ENOENT, format!("P_Key {:#06x} is not in the port's table of {len}", u16::from_be(pkey))))
    });
    match r {
        Ok(i) => i,
        Err(f) => {
            set_errno(f.errno);
            -1
        }
    }
}}

/// The MAC address an EUI-64 interface id (bytes 8..16 of a link-local
/// GID) was built from: the universal/local bit flipped back, the
/// `ff:fe` in the middle dropped.
fn mac_of_eui64(g: &[u8; 16]) -> [u8; 6] {
    [g[8] ^ 0x02, g[9], g[10], g[13], g[14], g[15]]
}

/// The Ethernet address of `dgid` on the simulated fabric: multicast
/// GIDs map to their multicast MAC; a link-local GID carries its MAC; an
/// IP-based GID is looked up among the simulated devices' GID tables (the
/// neighbour table a real host would ask) and answers with the MAC of the
/// port that holds it.
fn mac_of(shim: &mut Shim, v: &str, dgid: [u8; 16]) -> Res<[u8; 6]> {
    let ipv4_mcast =
        (dgid[..10] == [0; 10] && dgid[10..12] == [0xff, 0xff] && dgid[12] >> 4 == 0xe)
            || (dgid[..4] == [0xff, 0x0e, 0, 0]
                && dgid[4..10] == [0; 6]
                && dgid[10..12] == [0xff, 0xff]);
    if ipv4_mcast {
        return Ok([0x01, 0x00, 0x5e, dgid[13] & 0x7f, dgid[14], dgid[15]]);
    }
    if dgid[0] == 0xff {
        return Ok([0x33, 0x33, dgid[12], dgid[13], dgid[14], dgid[15]]);
    }
    if dgid[..8] == [0xfe, 0x80, 0, 0, 0, 0, 0, 0] {
        return Ok(mac_of_eui64(&dgid));
    }
    let devices = shim.sim.get_device_list().at(v)?;
    for index in 0..devices.len() {
        let ctx = shim.sim.open_device(index, ProcessId(0)).at(v)?;
        let found = port_mac_holding(shim, &ctx, dgid);
        let _ = shim.sim.close_device(&ctx);
        if let Some(mac) = found {
            return Ok(mac);
        }
    }
    Err(Fail::new(
        v,
        libc::EHOSTUNREACH,
        "no simulated port holds the destination GID (no neighbour answers)",
    ))
}

/// The MAC of the port of `ctx` whose GID table holds `gid`.
fn port_mac_holding(shim: &mut Shim, ctx: &ContextHandle, gid: [u8; 16]) -> Option<[u8; 6]> {
    let ports = shim.sim.query_device(ctx).ok()?.phys_port_cnt;
    for port in 1..=ports {
        let len = shim.sim.query_port(ctx, port).ok()?.gid_tbl_len.max(0) as u32;
        if (0..len).any(|i| shim.sim.query_gid(ctx, port, i).is_ok_and(|g| g.0 == gid)) {
            let ll = shim.sim.query_gid(ctx, port, 0).ok()?;
            return Some(mac_of_eui64(&ll.0));
        }
    }
    None
}

export! { "IBVERBS_1.1" fn ibv_resolve_eth_l2_from_gid(context: *mut c::ibv_context, attr: *mut c::ibv_ah_attr, eth_mac: *mut u8, vid: *mut u16) -> c_int {
    let r = with(|shim| {
        let v = "ibv_resolve_eth_l2_from_gid";
        let ctx = crate::provider::device::ctx_of(shim, v, context)?;
        if attr.is_null() || eth_mac.is_null() {
            return Err(Fail::new(v, libc::EINVAL, "attr or eth_mac is NULL"));
        }
        // SAFETY: non-NULL; the caller's struct.
        let a = unsafe { &*attr };
        // The source GID must exist (rdma-core asks ibv_query_gid first
        // and returns its -1).
        if let Err(e) = shim.sim.query_gid(&ctx, a.port_num, u32::from(a.grh.sgid_index)) {
            let f = Fail::sim(v, &e);
            return Ok(Err((f.errno, -1)));
        }
        if shim.sim.query_port(&ctx, a.port_num).at(v)?.link_layer != LinkLayer::Ethernet {
            let f = Fail::new(v, libc::EINVAL, "the port is not Ethernet: there is no L2 address to resolve");
            return Ok(Err((f.errno, -f.errno)));
        }
        // SAFETY: every bit pattern of the 16-byte union is a valid [u8; 16].
        let dgid = unsafe { a.grh.dgid.raw };
        let mac = match mac_of(shim, v, dgid) {
            Ok(m) => m,
            Err(f) => return Ok(Err((f.errno, -f.errno))),
        };
        // SAFETY: non-NULL; the caller's 6-byte array.
        unsafe { core::ptr::copy_nonoverlapping(mac.as_ptr(), eth_mac, 6) };
        if !vid.is_null() {
            // No VLAN on the simulated links (rdma-core's 0xffff).
            // SAFETY: non-NULL; the caller's u16.
            unsafe { *vid = 0xffff };
        }
        Ok(Ok(()))
    });
    // rdma-core returns 0, a negative errno, or ibv_query_gid's -1.
    match r {
        Ok(Ok(())) => 0,
        Ok(Err((errno, ret))) => {
            set_errno(errno);
            ret
        }
        Err(f) => {
            set_errno(f.errno);
            -f.errno
        }
    }
}}
