//! Conversions between the trait's types and libibverbs' C structs, and the
//! zero-initialised C structs they start from.

// Handles wrap `Arc`s although their inners are `!Send`; see `hw.rs`.
#![allow(clippy::arc_with_non_send_sync)]

use core::ffi::c_int;

use rdma_sys as sys;
use verbs_api::*;

pub(crate) fn c_to_string(s: &[core::ffi::c_char]) -> String {
    let bytes: Vec<u8> = s
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

pub(crate) fn u(v: c_int) -> u32 {
    u32::try_from(v).unwrap_or(0)
}

pub(crate) fn to_gid(g: &sys::ibv_gid) -> Gid {
    // SAFETY: both union members are plain 16-byte data; `raw` covers all.
    Gid(unsafe { g.raw })
}

pub(crate) fn from_gid(g: &Gid) -> sys::ibv_gid {
    sys::ibv_gid { raw: g.0 }
}

pub(crate) fn ah_to_c(a: &AhAttr) -> sys::ibv_ah_attr {
    sys::ibv_ah_attr {
        grh: sys::ibv_global_route {
            dgid: from_gid(&a.grh.dgid),
            flow_label: a.grh.flow_label,
            sgid_index: a.grh.sgid_index,
            hop_limit: a.grh.hop_limit,
            traffic_class: a.grh.traffic_class,
        },
        dlid: a.dlid,
        sl: a.sl,
        src_path_bits: a.src_path_bits,
        static_rate: a.static_rate,
        is_global: u8::from(a.is_global),
        port_num: a.port_num,
    }
}

pub(crate) fn ah_from_c(a: &sys::ibv_ah_attr) -> AhAttr {
    AhAttr {
        grh: GlobalRoute {
            dgid: to_gid(&a.grh.dgid),
            flow_label: a.grh.flow_label,
            sgid_index: a.grh.sgid_index,
            hop_limit: a.grh.hop_limit,
            traffic_class: a.grh.traffic_class,
        },
        dlid: a.dlid,
        sl: a.sl,
        src_path_bits: a.src_path_bits,
        static_rate: a.static_rate,
        is_global: a.is_global != 0,
        port_num: a.port_num,
    }
}

pub(crate) fn cap_to_c(c: &QpCap) -> sys::ibv_qp_cap {
    sys::ibv_qp_cap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

pub(crate) fn cap_from_c(c: &sys::ibv_qp_cap) -> QpCap {
    QpCap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

pub(crate) fn qp_attr_to_c(a: &QpAttr) -> sys::ibv_qp_attr {
    sys::ibv_qp_attr {
        qp_state: a.qp_state.to_raw(),
        cur_qp_state: a.cur_qp_state.to_raw(),
        path_mtu: a.path_mtu.to_raw(),
        path_mig_state: a.path_mig_state.to_raw(),
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qp_num: a.dest_qp_num,
        qp_access_flags: a.qp_access_flags.bits(),
        cap: cap_to_c(&a.cap),
        ah_attr: ah_to_c(&a.ah_attr),
        alt_ah_attr: ah_to_c(&a.alt_ah_attr),
        pkey_index: a.pkey_index,
        alt_pkey_index: a.alt_pkey_index,
        en_sqd_async_notify: a.en_sqd_async_notify,
        sq_draining: a.sq_draining,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
        port_num: a.port_num,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        alt_port_num: a.alt_port_num,
        alt_timeout: a.alt_timeout,
        rate_limit: a.rate_limit,
    }
}

pub(crate) fn qp_attr_from_c(a: &sys::ibv_qp_attr) -> QpAttr {
    QpAttr {
        qp_state: QpState::from_raw(a.qp_state),
        cur_qp_state: QpState::from_raw(a.cur_qp_state),
        path_mtu: Mtu::from_raw(a.path_mtu),
        path_mig_state: PathMigState::from_raw(a.path_mig_state),
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qp_num: a.dest_qp_num,
        qp_access_flags: AccessFlags(a.qp_access_flags),
        cap: cap_from_c(&a.cap),
        ah_attr: ah_from_c(&a.ah_attr),
        alt_ah_attr: ah_from_c(&a.alt_ah_attr),
        pkey_index: a.pkey_index,
        alt_pkey_index: a.alt_pkey_index,
        en_sqd_async_notify: a.en_sqd_async_notify,
        sq_draining: a.sq_draining,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
        port_num: a.port_num,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        alt_port_num: a.alt_port_num,
        alt_timeout: a.alt_timeout,
        rate_limit: a.rate_limit,
    }
}

/// C structs for which the all-zero bit pattern is a valid value: each is
/// made only of integers, raw pointers, `Option<fn>`s, byte arrays and
/// unions of those.
pub(crate) trait ZeroValid {}
impl ZeroValid for sys::ibv_qp_attr {}
impl ZeroValid for sys::ibv_qp_init_attr {}
impl ZeroValid for sys::ibv_qp_init_attr_ex {}
impl ZeroValid for sys::ibv_wc {}
impl ZeroValid for sys::ibv_send_wr {}
impl ZeroValid for sys::ibv_device_attr {}
impl ZeroValid for sys::ibv_port_attr {}
impl ZeroValid for sys::ibv_srq_attr {}
impl ZeroValid for sys::ibv_srq_init_attr {}
impl ZeroValid for sys::ibv_srq_init_attr_ex {}
impl ZeroValid for sys::ibv_qp_open_attr {}
impl ZeroValid for sys::ibv_xrcd_init_attr {}
impl ZeroValid for sys::rdma_conn_param {}
impl ZeroValid for sys::ibv_device_attr_ex {}
impl ZeroValid for sys::ibv_cq_init_attr_ex {}
impl ZeroValid for sys::ibv_gid_entry {}
impl ZeroValid for sys::ibv_ece {}
impl ZeroValid for sys::ibv_poll_cq_attr {}
impl ZeroValid for sys::ibv_values_ex {}

/// `struct ibv_device_attr` as the API's [`DeviceAttr`].
pub(crate) fn device_attr_from_c(a: &sys::ibv_device_attr) -> DeviceAttr {
    DeviceAttr {
        fw_ver: c_to_string(&a.fw_ver),
        node_guid: u64::from_be(a.node_guid),
        sys_image_guid: u64::from_be(a.sys_image_guid),
        max_mr_size: a.max_mr_size,
        page_size_cap: a.page_size_cap,
        vendor_id: a.vendor_id,
        vendor_part_id: a.vendor_part_id,
        hw_ver: a.hw_ver,
        max_qp: u(a.max_qp),
        max_qp_wr: u(a.max_qp_wr),
        device_cap_flags: DeviceCapFlags(u64::from(a.device_cap_flags)),
        max_sge: u(a.max_sge),
        max_sge_rd: u(a.max_sge_rd),
        max_cq: u(a.max_cq),
        max_cqe: u(a.max_cqe),
        max_mr: u(a.max_mr),
        max_pd: u(a.max_pd),
        max_qp_rd_atom: u(a.max_qp_rd_atom),
        max_ee_rd_atom: u(a.max_ee_rd_atom),
        max_res_rd_atom: u(a.max_res_rd_atom),
        max_qp_init_rd_atom: u(a.max_qp_init_rd_atom),
        max_ee_init_rd_atom: u(a.max_ee_init_rd_atom),
        atomic_cap: AtomicCap::from_raw(a.atomic_cap),
        max_ee: u(a.max_ee),
        max_rdd: u(a.max_rdd),
        max_mw: u(a.max_mw),
        max_raw_ipv6_qp: u(a.max_raw_ipv6_qp),
        max_raw_ethy_qp: u(a.max_raw_ethy_qp),
        max_mcast_grp: u(a.max_mcast_grp),
        max_mcast_qp_attach: u(a.max_mcast_qp_attach),
        max_total_mcast_qp_attach: u(a.max_total_mcast_qp_attach),
        max_ah: u(a.max_ah),
        max_fmr: u(a.max_fmr),
        max_map_per_fmr: u(a.max_map_per_fmr),
        max_srq: u(a.max_srq),
        max_srq_wr: u(a.max_srq_wr),
        max_srq_sge: u(a.max_srq_sge),
        max_pkeys: a.max_pkeys,
        local_ca_ack_delay: a.local_ca_ack_delay,
        phys_port_cnt: a.phys_port_cnt,
    }
}

/// A zero-initialised C struct.
pub(crate) fn zeroed<T: ZeroValid>() -> T {
    // SAFETY: `ZeroValid` is implemented only for types whose all-zero bit
    // pattern is a valid value (see the trait).
    unsafe { core::mem::MaybeUninit::<T>::zeroed().assume_init() }
}

pub(crate) fn sges_to_c(s: &[Sge]) -> Vec<sys::ibv_sge> {
    s.iter()
        .map(|s| sys::ibv_sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        })
        .collect()
}
