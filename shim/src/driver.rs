//! A client of the drop-in library through its C ABI, for the
//! `shim_post_poll` benchmark and the shim's own end-to-end tests.
//!
//! [`WriteRate`] loads `libverbsim_shim.so` with `dlopen` (as a program
//! linked against libibverbs would load it), sets up two RC QPs on the
//! simulated devices through the exported verbs, and posts 64 B RDMA
//! WRITEs and polls their completions through the context's `post_send` /
//! `poll_cq` ops, exactly as the inline `ibv_post_send` / `ibv_poll_cq` of
//! `verbs.h` do: the `sim_rc_write_msg_rate/64` workload (lists of 16 with
//! the last signalled, 128 outstanding, polls of 16) over the C ABI.

use core::ffi::{c_char, c_int, c_void};
use core::mem::size_of;
use core::ptr;
use std::ffi::CString;
use std::path::Path;

use crate::sys::*;

/// Outstanding WRITEs, as `MessageRateConfig::rc_write_64`.
const OUTSTANDING: usize = 128;
/// WRs per list; the last of each is signalled.
const LIST: usize = 16;
/// Message size.
const MSG: usize = 64;
/// Bytes of the remote MR (1 MiB, sequential offsets).
const REMOTE: usize = 1 << 20;

type GetDeviceList = unsafe extern "C" fn(*mut c_int) -> *mut *mut ibv_device;
type OpenDevice = unsafe extern "C" fn(*mut ibv_device) -> *mut ibv_context;
type AllocPd = unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_pd;
type RegMr = unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, c_int) -> *mut ibv_mr;
type CreateCq = unsafe extern "C" fn(
    *mut ibv_context,
    c_int,
    *mut c_void,
    *mut ibv_comp_channel,
    c_int,
) -> *mut ibv_cq;
type CreateQp = unsafe extern "C" fn(*mut ibv_pd, *mut ibv_qp_init_attr) -> *mut ibv_qp;
type ModifyQp = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int) -> c_int;
type QueryPort = unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr) -> c_int;

/// One side: context, PD, CQ, QP, MR over its own buffer.
struct Side {
    ctx: *mut ibv_context,
    cq: *mut ibv_cq,
    qp: *mut ibv_qp,
    mr: *mut ibv_mr,
    buf: Vec<u8>,
}

/// The 64 B RC WRITE message-rate workload over the library's C ABI.
pub struct WriteRate {
    _lib: *mut c_void,
    a: Side,
    b: Side,
    post_send: unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int,
    poll_cq: unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int,
    in_flight: usize,
    cursor: usize,
    sges: Vec<ibv_sge>,
    wrs: Vec<ibv_send_wr>,
    wcs: Vec<ibv_wc>,
}

/// Looks a function up by name.
///
/// # Safety
/// `T` is the function's true C type.
unsafe fn sym<T: Copy>(lib: *mut c_void, name: &str) -> Result<T, String> {
    let c = CString::new(name).map_err(|e| e.to_string())?;
    // SAFETY: `lib` is a live dlopen handle; `c` is NUL-terminated.
    let p = unsafe { libc::dlsym(lib, c.as_ptr()) };
    if p.is_null() {
        return Err(format!("{name} is not exported"));
    }
    debug_assert_eq!(size_of::<T>(), size_of::<*mut c_void>());
    // SAFETY: the caller names the symbol's true type, a function pointer.
    Ok(unsafe { core::mem::transmute_copy::<*mut c_void, T>(&p) })
}

impl WriteRate {
    /// Loads `lib` and connects two RC QPs, one on each simulated device.
    ///
    /// # Errors
    /// The library cannot be loaded, or a verb fails (its name and errno).
    pub fn new(lib: &Path) -> Result<Self, String> {
        let path = CString::new(lib.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
        // SAFETY: dlopen of a path; RTLD_NOW binds every symbol now.
        let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if h.is_null() {
            // SAFETY: dlerror returns a NUL-terminated message or NULL.
            let e = unsafe { libc::dlerror() };
            let msg = if e.is_null() {
                "unknown".into()
            } else {
                // SAFETY: non-NULL, NUL-terminated (dlerror's contract).
                unsafe { std::ffi::CStr::from_ptr(e as *const c_char) }
                    .to_string_lossy()
                    .into_owned()
            };
            return Err(format!("dlopen {}: {msg}", lib.display()));
        }
        // SAFETY: every name is looked up with its rdma-core 44 signature.
        unsafe {
            let get_list: GetDeviceList = sym(h, "ibv_get_device_list")?;
            let open: OpenDevice = sym(h, "ibv_open_device")?;
            let alloc_pd: AllocPd = sym(h, "ibv_alloc_pd")?;
            let reg_mr: RegMr = sym(h, "ibv_reg_mr")?;
            let create_cq: CreateCq = sym(h, "ibv_create_cq")?;
            let create_qp: CreateQp = sym(h, "ibv_create_qp")?;
            let modify_qp: ModifyQp = sym(h, "ibv_modify_qp")?;
            let query_port: QueryPort = sym(h, "ibv_query_port")?;
            let mut n = 0;
            let list = get_list(&mut n);
            if list.is_null() || n < 2 {
                return Err(format!("ibv_get_device_list: {n} devices (need 2)"));
            }
            let side = |dev: *mut ibv_device,
                        bytes: usize,
                        access: u32|
             -> Result<(Side, u16), String> {
                let ctx = open(dev);
                let pd = if ctx.is_null() {
                    ptr::null_mut()
                } else {
                    alloc_pd(ctx)
                };
                let cq = if pd.is_null() {
                    ptr::null_mut()
                } else {
                    create_cq(ctx, 1024, ptr::null_mut(), ptr::null_mut(), 0)
                };
                if cq.is_null() {
                    return Err("opening the device, ibv_alloc_pd or ibv_create_cq failed".into());
                }
                let mut buf = vec![0u8; bytes];
                let mr = reg_mr(pd, buf.as_mut_ptr().cast(), bytes, access as c_int);
                let mut init = ibv_qp_init_attr {
                    send_cq: cq,
                    recv_cq: cq,
                    cap: ibv_qp_cap {
                        max_send_wr: OUTSTANDING as u32,
                        max_recv_wr: 1,
                        max_send_sge: 1,
                        max_recv_sge: 1,
                        max_inline_data: 0,
                    },
                    qp_type: IBV_QPT_RC,
                    ..Default::default()
                };
                let qp = create_qp(pd, &mut init);
                if mr.is_null() || qp.is_null() {
                    return Err("ibv_reg_mr or ibv_create_qp failed".into());
                }
                let mut port = ibv_port_attr::default();
                if query_port(ctx, 1, &mut port) != 0 {
                    return Err("ibv_query_port failed".into());
                }
                Ok((
                    Side {
                        ctx,
                        cq,
                        qp,
                        mr,
                        buf,
                    },
                    port.lid,
                ))
            };
            let (a, lid_a) = side(*list, 1 << 20, IBV_ACCESS_LOCAL_WRITE)?;
            let (b, lid_b) = side(
                *list.add(1),
                REMOTE,
                IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
            )?;
            let connect = |qp: *mut ibv_qp, dest: u32, dlid: u16| -> Result<(), String> {
                let mut at = ibv_qp_attr {
                    qp_state: IBV_QPS_INIT,
                    port_num: 1,
                    qp_access_flags: IBV_ACCESS_REMOTE_WRITE,
                    ..Default::default()
                };
                let m = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
                let mut rc = modify_qp(qp, &mut at, m as c_int);
                let mut at = ibv_qp_attr {
                    qp_state: IBV_QPS_RTR,
                    path_mtu: IBV_MTU_4096,
                    dest_qp_num: dest,
                    max_dest_rd_atomic: 1,
                    min_rnr_timer: 12,
                    ..Default::default()
                };
                at.ah_attr.dlid = dlid;
                at.ah_attr.port_num = 1;
                let m = IBV_QP_STATE
                    | IBV_QP_AV
                    | IBV_QP_PATH_MTU
                    | IBV_QP_DEST_QPN
                    | IBV_QP_RQ_PSN
                    | IBV_QP_MAX_DEST_RD_ATOMIC
                    | IBV_QP_MIN_RNR_TIMER;
                rc |= modify_qp(qp, &mut at, m as c_int);
                let mut at = ibv_qp_attr {
                    qp_state: IBV_QPS_RTS,
                    timeout: 14,
                    retry_cnt: 7,
                    rnr_retry: 7,
                    max_rd_atomic: 1,
                    ..Default::default()
                };
                let m = IBV_QP_STATE
                    | IBV_QP_TIMEOUT
                    | IBV_QP_RETRY_CNT
                    | IBV_QP_RNR_RETRY
                    | IBV_QP_SQ_PSN
                    | IBV_QP_MAX_QP_RD_ATOMIC;
                rc |= modify_qp(qp, &mut at, m as c_int);
                if rc == 0 {
                    Ok(())
                } else {
                    Err(format!("ibv_modify_qp to RTS failed ({rc})"))
                }
            };
            connect(a.qp, (*b.qp).qp_num, lid_b)?;
            connect(b.qp, (*a.qp).qp_num, lid_a)?;
            let ops = &(*a.ctx).ops;
            let (Some(post_send), Some(poll_cq)) = (ops.post_send, ops.poll_cq) else {
                return Err("the context has no post_send or poll_cq op".into());
            };
            let _ = b.ctx;
            Ok(Self {
                _lib: h,
                a,
                b,
                post_send,
                poll_cq,
                in_flight: 0,
                cursor: 0,
                sges: vec![ibv_sge::default(); LIST],
                wrs: vec![ibv_send_wr::default(); LIST],
                wcs: vec![ibv_wc::default(); LIST],
            })
        }
    }

    /// Posts `requests` WRITEs (in lists of 16) and reaps their completions.
    ///
    /// # Errors
    /// A post fails, or a completion is not SUCCESS.
    pub fn run(&mut self, requests: u64) -> Result<(), String> {
        let (lkey, laddr) = (self.mr_key(true), self.a.buf.as_ptr() as u64);
        let (rkey, raddr) = (self.mr_key(false), self.b.buf.as_ptr() as u64);
        let mut left = requests;
        while left > 0 || self.in_flight > 0 {
            if left > 0 && self.in_flight + LIST <= OUTSTANDING {
                let n = (left as usize).min(LIST);
                for k in 0..n {
                    let off = (self.cursor * MSG) % REMOTE;
                    self.cursor = self.cursor.wrapping_add(1);
                    self.sges[k] = ibv_sge {
                        addr: laddr + (off % (1 << 20)) as u64,
                        length: MSG as u32,
                        lkey,
                    };
                    let next = if k + 1 < n {
                        &raw mut self.wrs[k + 1]
                    } else {
                        ptr::null_mut()
                    };
                    let w = &mut self.wrs[k];
                    w.wr_id = k as u64;
                    w.next = next;
                    w.sg_list = &raw mut self.sges[k];
                    w.num_sge = 1;
                    w.opcode = IBV_WR_RDMA_WRITE;
                    w.send_flags = if k + 1 == n { IBV_SEND_SIGNALED } else { 0 };
                    w.wr.rdma = ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
                        remote_addr: raddr + off as u64,
                        rkey,
                    };
                }
                let mut bad = ptr::null_mut();
                // SAFETY: a live QP of the library; the list and SGEs are
                // ours and outlive the call; the memory is registered.
                let rc = unsafe { (self.post_send)(self.a.qp, self.wrs.as_mut_ptr(), &mut bad) };
                if rc != 0 {
                    return Err(format!("ibv_post_send: {rc}"));
                }
                self.in_flight += n;
                left -= n as u64;
                continue;
            }
            // SAFETY: a live CQ; room for LIST completions.
            let got = unsafe { (self.poll_cq)(self.a.cq, LIST as c_int, self.wcs.as_mut_ptr()) };
            if got < 0 {
                return Err(format!("ibv_poll_cq: {got}"));
            }
            for w in &self.wcs[..got as usize] {
                if w.status != IBV_WC_SUCCESS {
                    return Err(format!("completion status {}", w.status));
                }
                // Each signalled completion covers its list.
                self.in_flight = self.in_flight.saturating_sub(w.wr_id as usize + 1);
            }
        }
        Ok(())
    }

    /// The requester's buffer (the source of every WRITE).
    pub fn local_mut(&mut self) -> &mut [u8] {
        &mut self.a.buf
    }

    /// The responder's buffer (where the WRITEs land).
    pub fn remote(&self) -> &[u8] {
        &self.b.buf
    }

    fn mr_key(&self, local: bool) -> u32 {
        let mr = if local { self.a.mr } else { self.b.mr };
        // SAFETY: a live MR of the library.
        unsafe {
            if local {
                (*mr).lkey
            } else {
                (*mr).rkey
            }
        }
    }
}
