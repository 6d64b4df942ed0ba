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
//!
//! [`SendPingPong`] is `ibv_rc_pingpong -s 64` with both sides in one
//! process: the single-process rate beside `fabric_pingpong_rate`'s two
//! processes. [`VerbCost`] calls one cheap verb in a loop, for the cost of
//! a verb in process and, with `VERBSIM_FABRIC` set, over the shared
//! fabric (one RPC per verb).

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
type PostSend = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
type PostRecv = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
type PollCq = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int;

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
    post_send: PostSend,
    poll_cq: PollCq,
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

/// The verbs a client needs to set up, looked up in the loaded library.
#[derive(Clone, Copy)]
struct Lib {
    handle: *mut c_void,
    get_list: GetDeviceList,
    open: OpenDevice,
    alloc_pd: AllocPd,
    reg_mr: RegMr,
    create_cq: CreateCq,
    create_qp: CreateQp,
    modify_qp: ModifyQp,
    query_port: QueryPort,
}

impl Lib {
    /// Loads `lib` (`dlopen`, every symbol bound now) and looks the set-up
    /// verbs up.
    fn load(lib: &Path) -> Result<Self, String> {
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
            Ok(Self {
                handle: h,
                get_list: sym(h, "ibv_get_device_list")?,
                open: sym(h, "ibv_open_device")?,
                alloc_pd: sym(h, "ibv_alloc_pd")?,
                reg_mr: sym(h, "ibv_reg_mr")?,
                create_cq: sym(h, "ibv_create_cq")?,
                create_qp: sym(h, "ibv_create_qp")?,
                modify_qp: sym(h, "ibv_modify_qp")?,
                query_port: sym(h, "ibv_query_port")?,
            })
        }
    }

    /// The first `need` devices of the library's list.
    fn devices(&self, need: usize) -> Result<Vec<*mut ibv_device>, String> {
        let mut n = 0;
        // SAFETY: `n` is a valid out-pointer; the list stays allocated (the
        // clients never free it: it lives as long as the process).
        let list = unsafe { (self.get_list)(&mut n) };
        if list.is_null() || (n as usize) < need {
            return Err(format!("ibv_get_device_list: {n} devices (need {need})"));
        }
        // SAFETY: the list holds `n` ≥ `need` device pointers.
        Ok((0..need).map(|i| unsafe { *list.add(i) }).collect())
    }

    /// Opens `dev` and creates a PD, a CQ, an MR over a buffer of `bytes`
    /// and an RC QP with `cap`; returns the side and its port's LID.
    fn side(
        &self,
        dev: *mut ibv_device,
        bytes: usize,
        access: u32,
        cap: ibv_qp_cap,
    ) -> Result<(Side, u16), String> {
        // SAFETY: `dev` comes from the library's device list; every object
        // passed on was just created by the library (checked non-NULL); the
        // buffer is a live Vec moved into the returned side (its heap
        // allocation does not move).
        unsafe {
            let ctx = (self.open)(dev);
            let pd = if ctx.is_null() {
                ptr::null_mut()
            } else {
                (self.alloc_pd)(ctx)
            };
            let cq = if pd.is_null() {
                ptr::null_mut()
            } else {
                (self.create_cq)(ctx, 1024, ptr::null_mut(), ptr::null_mut(), 0)
            };
            if cq.is_null() {
                return Err("opening the device, ibv_alloc_pd or ibv_create_cq failed".into());
            }
            let mut buf = vec![0u8; bytes];
            let mr = (self.reg_mr)(pd, buf.as_mut_ptr().cast(), bytes, access as c_int);
            let mut init = ibv_qp_init_attr {
                send_cq: cq,
                recv_cq: cq,
                cap,
                qp_type: IBV_QPT_RC,
                ..Default::default()
            };
            let qp = (self.create_qp)(pd, &mut init);
            if mr.is_null() || qp.is_null() {
                return Err("ibv_reg_mr or ibv_create_qp failed".into());
            }
            let mut port = ibv_port_attr::default();
            if (self.query_port)(ctx, 1, &mut port) != 0 {
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
        }
    }

    /// Takes `qp` through INIT, RTR and RTS towards QP `dest` at `dlid`.
    fn connect(&self, qp: *mut ibv_qp, dest: u32, dlid: u16) -> Result<(), String> {
        let modify_qp = self.modify_qp;
        let mut at = ibv_qp_attr {
            qp_state: IBV_QPS_INIT,
            port_num: 1,
            qp_access_flags: IBV_ACCESS_REMOTE_WRITE,
            ..Default::default()
        };
        let m = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
        // SAFETY: a live QP of the library and an attribute struct of ours.
        let mut rc = unsafe { modify_qp(qp, &mut at, m as c_int) };
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
        // SAFETY: as above.
        rc |= unsafe { modify_qp(qp, &mut at, m as c_int) };
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
        // SAFETY: as above.
        rc |= unsafe { modify_qp(qp, &mut at, m as c_int) };
        if rc == 0 {
            Ok(())
        } else {
            Err(format!("ibv_modify_qp to RTS failed ({rc})"))
        }
    }

    /// Connects `a` and `b` to each other (RC, one QP each).
    fn pair(&self, a: &Side, lid_a: u16, b: &Side, lid_b: u16) -> Result<(), String> {
        // SAFETY: both QPs are live objects of the library.
        let (qpn_a, qpn_b) = unsafe { ((*a.qp).qp_num, (*b.qp).qp_num) };
        self.connect(a.qp, qpn_b, lid_b)?;
        self.connect(b.qp, qpn_a, lid_a)
    }
}

/// The caps of a QP: `send` and `recv` WRs, one SGE each, no inline data.
fn caps(send: usize, recv: usize) -> ibv_qp_cap {
    ibv_qp_cap {
        max_send_wr: send as u32,
        max_recv_wr: recv as u32,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    }
}

impl WriteRate {
    /// Loads `lib` and connects two RC QPs, one on each simulated device.
    ///
    /// # Errors
    /// The library cannot be loaded, or a verb fails (its name and errno).
    pub fn new(lib: &Path) -> Result<Self, String> {
        let lib = Lib::load(lib)?;
        let devs = lib.devices(2)?;
        let (a, lid_a) = lib.side(
            devs[0],
            1 << 20,
            IBV_ACCESS_LOCAL_WRITE,
            caps(OUTSTANDING, 1),
        )?;
        let (b, lid_b) = lib.side(
            devs[1],
            REMOTE,
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
            caps(OUTSTANDING, 1),
        )?;
        lib.pair(&a, lid_a, &b, lid_b)?;
        // SAFETY: a live context of the library.
        let ops = unsafe { &(*a.ctx).ops };
        let (Some(post_send), Some(poll_cq)) = (ops.post_send, ops.poll_cq) else {
            return Err("the context has no post_send or poll_cq op".into());
        };
        let _ = b.ctx;
        Ok(Self {
            _lib: lib.handle,
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

/// RECVs each side keeps posted in [`SendPingPong`].
const PINGPONG_RECVS: usize = 16;
/// Polls without a completion before [`SendPingPong`] gives up.
const SPIN_LIMIT: u64 = 1 << 24;

/// 64 B RC SEND ping-pong between two QPs of one process through the C
/// ABI, as `ibv_rc_pingpong -s 64` does it between two processes: every
/// SEND signalled, one CQ per side for sends and receives, a RECV reposted
/// as soon as its completion is reaped. One round trip is A's SEND
/// received by B, then B's SEND received by A.
pub struct SendPingPong {
    _lib: *mut c_void,
    sides: [Side; 2],
    post_send: PostSend,
    post_recv: PostRecv,
    poll_cq: PollCq,
    /// SENDs posted and not yet completed, per side.
    sends_out: [usize; 2],
    wcs: Vec<ibv_wc>,
}

impl SendPingPong {
    /// Loads `lib`, connects an RC QP on each simulated device to the
    /// other and posts their RECVs.
    ///
    /// # Errors
    /// The library cannot be loaded, or a verb fails.
    pub fn new(lib: &Path) -> Result<Self, String> {
        let lib = Lib::load(lib)?;
        let devs = lib.devices(2)?;
        let cap = caps(PINGPONG_RECVS, PINGPONG_RECVS);
        let (a, lid_a) = lib.side(devs[0], 4096, IBV_ACCESS_LOCAL_WRITE, cap)?;
        let (b, lid_b) = lib.side(devs[1], 4096, IBV_ACCESS_LOCAL_WRITE, cap)?;
        lib.pair(&a, lid_a, &b, lid_b)?;
        // SAFETY: a live context of the library.
        let ops = unsafe { &(*a.ctx).ops };
        let (Some(post_send), Some(post_recv), Some(poll_cq)) =
            (ops.post_send, ops.post_recv, ops.poll_cq)
        else {
            return Err("the context has no post_send, post_recv or poll_cq op".into());
        };
        let mut w = Self {
            _lib: lib.handle,
            sides: [a, b],
            post_send,
            post_recv,
            poll_cq,
            sends_out: [0; 2],
            wcs: vec![ibv_wc::default(); PINGPONG_RECVS],
        };
        for side in 0..2 {
            for _ in 0..PINGPONG_RECVS {
                w.post_recv(side)?;
            }
        }
        Ok(w)
    }

    /// Runs `round_trips` round trips.
    ///
    /// # Errors
    /// A post fails, a completion is not SUCCESS, or no completion comes.
    pub fn run(&mut self, round_trips: u64) -> Result<(), String> {
        for _ in 0..round_trips {
            self.send(0)?;
            self.await_recv(1)?;
            self.send(1)?;
            self.await_recv(0)?;
        }
        Ok(())
    }

    /// The first 64 bytes of `side`'s buffer: what it SENDs.
    pub fn message_mut(&mut self, side: usize) -> &mut [u8] {
        &mut self.sides[side % 2].buf[..MSG]
    }

    /// The 64 bytes where `side` RECEIVEs.
    pub fn received(&self, side: usize) -> &[u8] {
        &self.sides[side % 2].buf[MSG..2 * MSG]
    }

    fn sge(&self, side: usize, offset: usize) -> ibv_sge {
        let s = &self.sides[side];
        ibv_sge {
            addr: s.buf.as_ptr() as u64 + offset as u64,
            length: MSG as u32,
            // SAFETY: a live MR of the library.
            lkey: unsafe { (*s.mr).lkey },
        }
    }

    fn post_recv(&mut self, side: usize) -> Result<(), String> {
        let mut sge = self.sge(side, MSG);
        let mut wr = ibv_recv_wr {
            wr_id: 1,
            next: ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
        };
        let mut bad = ptr::null_mut();
        // SAFETY: a live QP; the WR and SGE outlive the call.
        let rc = unsafe { (self.post_recv)(self.sides[side].qp, &mut wr, &mut bad) };
        if rc == 0 {
            Ok(())
        } else {
            Err(format!("ibv_post_recv: {rc}"))
        }
    }

    fn send(&mut self, side: usize) -> Result<(), String> {
        while self.sends_out[side] >= PINGPONG_RECVS {
            self.reap(side)?;
        }
        let mut sge = self.sge(side, 0);
        let mut wr = ibv_send_wr {
            wr_id: 0,
            sg_list: &mut sge,
            num_sge: 1,
            opcode: IBV_WR_SEND,
            send_flags: IBV_SEND_SIGNALED,
            ..Default::default()
        };
        let mut bad = ptr::null_mut();
        // SAFETY: a live QP; the WR and SGE outlive the call; the buffer
        // is registered.
        let rc = unsafe { (self.post_send)(self.sides[side].qp, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(format!("ibv_post_send: {rc}"));
        }
        self.sends_out[side] += 1;
        Ok(())
    }

    /// Polls `side`'s CQ until a RECV completes (reposting it).
    fn await_recv(&mut self, side: usize) -> Result<(), String> {
        let mut spins = 0u64;
        loop {
            let recvs = self.reap(side)?;
            if recvs > 0 {
                for _ in 0..recvs {
                    self.post_recv(side)?;
                }
                return Ok(());
            }
            spins += 1;
            if spins > SPIN_LIMIT {
                return Err(format!(
                    "no RECV completed on side {side} in {SPIN_LIMIT} polls"
                ));
            }
        }
    }

    /// One poll of `side`'s CQ; returns the RECVs completed.
    fn reap(&mut self, side: usize) -> Result<usize, String> {
        // SAFETY: a live CQ; room for the completions asked for.
        let got = unsafe {
            (self.poll_cq)(
                self.sides[side].cq,
                PINGPONG_RECVS as c_int,
                self.wcs.as_mut_ptr(),
            )
        };
        if got < 0 {
            return Err(format!("ibv_poll_cq: {got}"));
        }
        let mut recvs = 0;
        for w in &self.wcs[..got as usize] {
            if w.status != IBV_WC_SUCCESS {
                return Err(format!("completion status {}", w.status));
            }
            if w.opcode == IBV_WC_RECV {
                recvs += 1;
            } else {
                self.sends_out[side] = self.sends_out[side].saturating_sub(1);
            }
        }
        Ok(recvs)
    }
}

/// One cheap verb called in a loop through the C ABI: `ibv_poll_cq` on an
/// empty CQ (the context's op, as the inline `ibv_poll_cq` calls it) and
/// `ibv_query_port`. In process each is a call into the library; with
/// `VERBSIM_FABRIC` set, each is one RPC to the fabric process.
pub struct VerbCost {
    _lib: *mut c_void,
    ctx: *mut ibv_context,
    cq: *mut ibv_cq,
    poll_cq: PollCq,
    query_port: QueryPort,
}

impl VerbCost {
    /// Loads `lib`, opens the first device and creates a PD and a CQ.
    ///
    /// # Errors
    /// The library cannot be loaded, or a verb fails.
    pub fn new(lib: &Path) -> Result<Self, String> {
        let lib = Lib::load(lib)?;
        let dev = lib.devices(1)?[0];
        // SAFETY: `dev` is from the library's list; the context is checked
        // before it is used.
        let (ctx, cq) = unsafe {
            let ctx = (lib.open)(dev);
            if ctx.is_null() {
                return Err("ibv_open_device failed".into());
            }
            let cq = (lib.create_cq)(ctx, 16, ptr::null_mut(), ptr::null_mut(), 0);
            (ctx, cq)
        };
        if cq.is_null() {
            return Err("ibv_create_cq failed".into());
        }
        // SAFETY: a live context of the library.
        let Some(poll_cq) = (unsafe { (*ctx).ops.poll_cq }) else {
            return Err("the context has no poll_cq op".into());
        };
        Ok(Self {
            _lib: lib.handle,
            ctx,
            cq,
            poll_cq,
            query_port: lib.query_port,
        })
    }

    /// `n` polls of the empty CQ.
    ///
    /// # Errors
    /// A poll fails or finds a completion.
    pub fn poll_empty(&mut self, n: u64) -> Result<(), String> {
        let mut wc = ibv_wc::default();
        for _ in 0..n {
            // SAFETY: a live CQ; room for one completion.
            let got = unsafe { (self.poll_cq)(self.cq, 1, &mut wc) };
            if got != 0 {
                return Err(format!("ibv_poll_cq on an empty CQ returned {got}"));
            }
        }
        Ok(())
    }

    /// `n` queries of port 1.
    ///
    /// # Errors
    /// A query fails.
    pub fn query_port(&mut self, n: u64) -> Result<(), String> {
        let mut attr = ibv_port_attr::default();
        for _ in 0..n {
            // SAFETY: a live context; `attr` is ours.
            let rc = unsafe { (self.query_port)(self.ctx, 1, &mut attr) };
            if rc != 0 {
                return Err(format!("ibv_query_port: {rc}"));
            }
        }
        Ok(())
    }
}
