//! libibverbs' conversions between the kernel's ABI structs
//! (`<rdma/ib_user_verbs.h>`, `<rdma/ib_user_sa.h>`) and the library's:
//! `ibv_copy_ah_attr_from_kern`, `ibv_copy_qp_attr_from_kern`,
//! `ibv_copy_path_rec_from_kern`, `ibv_copy_path_rec_to_kern`. Field by
//! field, each value converted as C's assignment converts it (wider
//! kernel fields are cut to the library's width); fields the kernel
//! struct lacks are left as they were, as rdma-core leaves them
//! (`qp_state`, `rate_limit` of `ibv_qp_attr`). NULL pointers change
//! nothing (rdma-core would crash).

use crate::export::export;
use crate::provider::state::c;

/// `struct ib_uverbs_global_route`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct KernGlobalRoute {
    dgid: [u8; 16],
    flow_label: u32,
    sgid_index: u8,
    hop_limit: u8,
    traffic_class: u8,
    reserved: u8,
}

/// `struct ib_uverbs_ah_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct KernAhAttr {
    grh: KernGlobalRoute,
    dlid: u16,
    sl: u8,
    src_path_bits: u8,
    static_rate: u8,
    is_global: u8,
    port_num: u8,
    reserved: u8,
}

/// `struct ib_uverbs_qp_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct KernQpAttr {
    qp_attr_mask: u32,
    qp_state: u32,
    cur_qp_state: u32,
    path_mtu: u32,
    path_mig_state: u32,
    qkey: u32,
    rq_psn: u32,
    sq_psn: u32,
    dest_qp_num: u32,
    qp_access_flags: u32,
    ah_attr: KernAhAttr,
    alt_ah_attr: KernAhAttr,
    max_send_wr: u32,
    max_recv_wr: u32,
    max_send_sge: u32,
    max_recv_sge: u32,
    max_inline_data: u32,
    pkey_index: u16,
    alt_pkey_index: u16,
    en_sqd_async_notify: u8,
    sq_draining: u8,
    max_rd_atomic: u8,
    max_dest_rd_atomic: u8,
    min_rnr_timer: u8,
    port_num: u8,
    timeout: u8,
    retry_cnt: u8,
    rnr_retry: u8,
    alt_port_num: u8,
    alt_timeout: u8,
    reserved: [u8; 5],
}

/// `struct ib_user_path_rec` (big-endian fields stay as they are).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct KernPathRec {
    dgid: [u8; 16],
    sgid: [u8; 16],
    dlid: u16,
    slid: u16,
    raw_traffic: u32,
    flow_label: u32,
    reversible: u32,
    mtu: u32,
    pkey: u16,
    hop_limit: u8,
    traffic_class: u8,
    numb_path: u8,
    sl: u8,
    mtu_selector: u8,
    rate_selector: u8,
    rate: u8,
    packet_life_time_selector: u8,
    packet_life_time: u8,
    preference: u8,
}

// The kernel headers' sizes (tests/helpers.rs checks the offsets against
// the real library's conversions).
const _: () = assert!(size_of::<KernAhAttr>() == 32);
const _: () = assert!(size_of::<KernQpAttr>() == 144);
const _: () = assert!(size_of::<KernPathRec>() == 64);

fn ah_from_kern(dst: &mut c::ibv_ah_attr, src: &KernAhAttr) {
    dst.grh.dgid.raw = src.grh.dgid;
    dst.grh.flow_label = src.grh.flow_label;
    dst.grh.sgid_index = src.grh.sgid_index;
    dst.grh.hop_limit = src.grh.hop_limit;
    dst.grh.traffic_class = src.grh.traffic_class;
    dst.dlid = src.dlid;
    dst.sl = src.sl;
    dst.src_path_bits = src.src_path_bits;
    dst.static_rate = src.static_rate;
    dst.is_global = src.is_global;
    dst.port_num = src.port_num;
}

export! { "IBVERBS_1.1" fn ibv_copy_ah_attr_from_kern(dst: *mut c::ibv_ah_attr, src: *const KernAhAttr) {
    if dst.is_null() || src.is_null() {
        return;
    }
    // SAFETY: non-NULL; the caller's structs, which may alias nothing else.
    unsafe { ah_from_kern(&mut *dst, &*src) };
}}

export! { "IBVERBS_1.0" fn ibv_copy_qp_attr_from_kern(dst: *mut c::ibv_qp_attr, src: *const KernQpAttr) {
    if dst.is_null() || src.is_null() {
        return;
    }
    // SAFETY: non-NULL; the caller's structs.
    let (d, s) = unsafe { (&mut *dst, &*src) };
    d.cur_qp_state = s.cur_qp_state;
    d.path_mtu = s.path_mtu;
    d.path_mig_state = s.path_mig_state;
    d.qkey = s.qkey;
    d.rq_psn = s.rq_psn;
    d.sq_psn = s.sq_psn;
    d.dest_qp_num = s.dest_qp_num;
    d.qp_access_flags = s.qp_access_flags;
    d.cap.max_send_wr = s.max_send_wr;
    d.cap.max_recv_wr = s.max_recv_wr;
    d.cap.max_send_sge = s.max_send_sge;
    d.cap.max_recv_sge = s.max_recv_sge;
    d.cap.max_inline_data = s.max_inline_data;
    ah_from_kern(&mut d.ah_attr, &s.ah_attr);
    ah_from_kern(&mut d.alt_ah_attr, &s.alt_ah_attr);
    d.pkey_index = s.pkey_index;
    d.alt_pkey_index = s.alt_pkey_index;
    d.en_sqd_async_notify = s.en_sqd_async_notify;
    d.sq_draining = s.sq_draining;
    d.max_rd_atomic = s.max_rd_atomic;
    d.max_dest_rd_atomic = s.max_dest_rd_atomic;
    d.min_rnr_timer = s.min_rnr_timer;
    d.port_num = s.port_num;
    d.timeout = s.timeout;
    d.retry_cnt = s.retry_cnt;
    d.rnr_retry = s.rnr_retry;
    d.alt_port_num = s.alt_port_num;
    d.alt_timeout = s.alt_timeout;
}}

export! { "IBVERBS_1.0" fn ibv_copy_path_rec_from_kern(dst: *mut c::ibv_sa_path_rec, src: *const KernPathRec) {
    if dst.is_null() || src.is_null() {
        return;
    }
    // SAFETY: non-NULL; the caller's structs.
    let (d, s) = unsafe { (&mut *dst, &*src) };
    d.dgid.raw = s.dgid;
    d.sgid.raw = s.sgid;
    d.dlid = s.dlid;
    d.slid = s.slid;
    d.raw_traffic = s.raw_traffic as i32;
    d.flow_label = s.flow_label;
    d.hop_limit = s.hop_limit;
    d.traffic_class = s.traffic_class;
    d.reversible = s.reversible as i32;
    d.numb_path = s.numb_path;
    d.pkey = s.pkey;
    d.sl = s.sl;
    d.mtu_selector = s.mtu_selector;
    d.mtu = s.mtu as u8;
    d.rate_selector = s.rate_selector;
    d.rate = s.rate;
    d.packet_life_time = s.packet_life_time;
    d.preference = s.preference;
    d.packet_life_time_selector = s.packet_life_time_selector;
}}

export! { "IBVERBS_1.0" fn ibv_copy_path_rec_to_kern(dst: *mut KernPathRec, src: *const c::ibv_sa_path_rec) {
    if dst.is_null() || src.is_null() {
        return;
    }
    // SAFETY: non-NULL; the caller's structs.
    let (d, s) = unsafe { (&mut *dst, &*src) };
    // SAFETY: every bit pattern of the 16-byte unions is a valid [u8; 16].
    unsafe {
        d.dgid = s.dgid.raw;
        d.sgid = s.sgid.raw;
    }
    d.dlid = s.dlid;
    d.slid = s.slid;
    d.raw_traffic = s.raw_traffic as u32;
    d.flow_label = s.flow_label;
    d.hop_limit = s.hop_limit;
    d.traffic_class = s.traffic_class;
    d.reversible = s.reversible as u32;
    d.numb_path = s.numb_path;
    d.pkey = s.pkey;
    d.sl = s.sl;
    d.mtu_selector = s.mtu_selector;
    d.mtu = u32::from(s.mtu);
    d.rate_selector = s.rate_selector;
    d.rate = s.rate;
    d.packet_life_time = s.packet_life_time;
    d.preference = s.preference;
    d.packet_life_time_selector = s.packet_life_time_selector;
}}
