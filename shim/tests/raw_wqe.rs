//! `mlx5dv_wr_raw_wqe` through the drop-in libmlx5's C ABI: raw WQEs built
//! segment by segment as a C program (or pyverbs' `Wqe`) builds them, the
//! control segment through `sys::mlx5_wqe_ctrl_seg` as `mlx5dv_set_ctrl_seg`
//! fills it, posted through the `mlx5dv_qp_ex` table, completed through
//! `ibv_poll_cq` and the extended CQ's `read_opcode`.

use core::ffi::{c_int, c_void};
use core::mem::size_of;
use core::ptr;

use verbsim_shim::sys::*;

mod common;
use common::shim;

/// `MLX5DV_WC_RAW_WQE` (= `IBV_WC_DRIVER2`).
const RAW_WQE_OPCODE: u32 = IBV_WC_DRIVER2;
/// Bytes of each side's buffer.
const BUF: usize = 4096;

type Ptr = *mut c_void;

/// Looks a function up in the loaded library.
///
/// # Safety
/// `T` is the symbol's true C function type.
unsafe fn sym<T: Copy>(lib: Ptr, name: &str) -> T {
    let c = std::ffi::CString::new(name).unwrap();
    // SAFETY: a live dlopen handle and a NUL-terminated name.
    let p = unsafe { libc::dlsym(lib, c.as_ptr()) };
    assert!(!p.is_null(), "{name} is not exported");
    // SAFETY: the caller names the symbol's type, a function pointer.
    unsafe { core::mem::transmute_copy::<Ptr, T>(&p) }
}

/// One side: a context on its own simulated device, an extended CQ, a QP
/// from `mlx5dv_create_qp` (RC unless said otherwise), and an MR over
/// `buf`.
struct Side {
    ctx: *mut ibv_context,
    cq: *mut ibv_cq_ex,
    qp: *mut ibv_qp,
    qpx: *mut ibv_qp_ex,
    dv: *mut mlx5dv_qp_ex,
    mr: *mut ibv_mr,
    lid: u16,
    buf: Vec<u8>,
}

impl Side {
    fn addr(&self, off: usize) -> u64 {
        self.buf.as_ptr() as u64 + off as u64
    }
    /// The buffer as the simulator left it.
    fn bytes(&self, off: usize, len: usize) -> Vec<u8> {
        // SAFETY: inside the live buffer; nothing writes it while the
        // test reads (the simulator runs only inside verbs calls).
        unsafe { core::slice::from_raw_parts(self.buf.as_ptr().add(off), len) }.to_vec()
    }
    fn fill(&mut self, off: usize, len: usize, byte: u8) {
        // SAFETY: as in `bytes`; written through the pointer the MR names.
        unsafe { ptr::write_bytes(self.buf.as_mut_ptr().add(off), byte, len) };
    }
    fn put(&mut self, off: usize, bytes: &[u8]) {
        // SAFETY: as in `fill`.
        unsafe {
            ptr::copy_nonoverlapping(bytes.as_ptr(), self.buf.as_mut_ptr().add(off), bytes.len())
        };
    }
    fn lkey(&self) -> u32 {
        // SAFETY: a live MR of the library.
        unsafe { (*self.mr).lkey }
    }
    fn rkey(&self) -> u32 {
        // SAFETY: as above.
        unsafe { (*self.mr).rkey }
    }
    fn qpn(&self) -> u32 {
        // SAFETY: a live QP of the library.
        unsafe { (*self.qp).qp_num }
    }
}

/// The verbs the tests call, bound from the loaded library.
struct Lib {
    devices: Vec<*mut ibv_device>,
    open: unsafe extern "C" fn(*mut ibv_device) -> *mut ibv_context,
    alloc_pd: unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_pd,
    reg_mr: unsafe extern "C" fn(*mut ibv_pd, Ptr, usize, c_int) -> *mut ibv_mr,
    create_cq: unsafe extern "C" fn(
        *mut ibv_context,
        *mut ibv_cq_init_attr_ex,
        *mut mlx5dv_cq_init_attr,
    ) -> *mut ibv_cq_ex,
    create_qp: unsafe extern "C" fn(
        *mut ibv_context,
        *mut ibv_qp_init_attr_ex,
        *mut mlx5dv_qp_init_attr,
    ) -> *mut ibv_qp,
    modify_qp: unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int) -> c_int,
    query_port: unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr) -> c_int,
    to_qp_ex: unsafe extern "C" fn(*mut ibv_qp) -> *mut ibv_qp_ex,
    to_dv: unsafe extern "C" fn(*mut ibv_qp_ex) -> *mut mlx5dv_qp_ex,
}

impl Lib {
    fn load() -> Self {
        let path = std::ffi::CString::new(shim().into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: dlopen of the library this build made.
        let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!h.is_null());
        // SAFETY: every symbol is bound with its rdma-core 44 signature; the
        // device list is the library's and lives as long as the process.
        unsafe {
            let get_list: unsafe extern "C" fn(*mut c_int) -> *mut *mut ibv_device =
                sym(h, "ibv_get_device_list");
            let mut n = 0;
            let list = get_list(&mut n);
            assert!(!list.is_null() && n >= 2, "two simulated devices");
            Self {
                devices: (0..2).map(|i| *list.add(i)).collect(),
                open: sym(h, "ibv_open_device"),
                alloc_pd: sym(h, "ibv_alloc_pd"),
                reg_mr: sym(h, "ibv_reg_mr"),
                create_cq: sym(h, "mlx5dv_create_cq"),
                create_qp: sym(h, "mlx5dv_create_qp"),
                modify_qp: sym(h, "ibv_modify_qp"),
                query_port: sym(h, "ibv_query_port"),
                to_qp_ex: sym(h, "ibv_qp_to_qp_ex"),
                to_dv: sym(h, "mlx5dv_qp_ex_from_ibv_qp_ex"),
            }
        }
    }

    /// An RC side on device `dev`; `dv_ops` are the mlx5dv
    /// `send_ops_flags`.
    fn side(&self, dev: usize, dv_ops: u64, sq_sig_all: bool) -> Side {
        self.side_of(dev, IBV_QPT_RC, dv_ops, sq_sig_all)
    }

    /// A side on device `dev` whose QP is of `qp_type`.
    fn side_of(&self, dev: usize, qp_type: u32, dv_ops: u64, sq_sig_all: bool) -> Side {
        // SAFETY: every object passed on was just made by the library
        // (checked non-NULL); the buffer is a Vec moved into the side,
        // whose heap allocation does not move.
        unsafe {
            let ctx = (self.open)(self.devices[dev]);
            assert!(!ctx.is_null());
            let pd = (self.alloc_pd)(ctx);
            assert!(!pd.is_null());
            let mut cq_attr = ibv_cq_init_attr_ex {
                cqe: 64,
                wc_flags: IBV_WC_STANDARD_FLAGS as u64,
                ..Default::default()
            };
            let cq = (self.create_cq)(ctx, &mut cq_attr, ptr::null_mut());
            assert!(!cq.is_null());
            let mut buf = vec![0u8; BUF];
            let access = IBV_ACCESS_LOCAL_WRITE
                | IBV_ACCESS_REMOTE_WRITE
                | IBV_ACCESS_REMOTE_READ
                | IBV_ACCESS_REMOTE_ATOMIC;
            let mr = (self.reg_mr)(pd, buf.as_mut_ptr().cast(), BUF, access as c_int);
            assert!(!mr.is_null());
            // The pyverbs test's QP: only SEND among the ibv_wr builders.
            let mut init = ibv_qp_init_attr_ex {
                send_cq: cq.cast(),
                recv_cq: cq.cast(),
                cap: ibv_qp_cap {
                    max_send_wr: 8,
                    max_recv_wr: 8,
                    max_send_sge: 2,
                    max_recv_sge: 2,
                    max_inline_data: 0,
                },
                qp_type,
                sq_sig_all: c_int::from(sq_sig_all),
                comp_mask: IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
                pd,
                send_ops_flags: IBV_QP_EX_WITH_SEND as u64,
                ..Default::default()
            };
            let mut dv = mlx5dv_qp_init_attr {
                comp_mask: if dv_ops == 0 {
                    0
                } else {
                    MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS as u64
                },
                send_ops_flags: dv_ops,
                ..Default::default()
            };
            let qp = (self.create_qp)(ctx, &mut init, &mut dv);
            assert!(!qp.is_null(), "mlx5dv_create_qp");
            let qpx = (self.to_qp_ex)(qp);
            assert!(!qpx.is_null());
            let dv = (self.to_dv)(qpx);
            assert!(!dv.is_null());
            let mut port = ibv_port_attr::default();
            assert_eq!((self.query_port)(ctx, 1, &mut port), 0);
            Side {
                ctx,
                cq,
                qp,
                qpx,
                dv,
                mr,
                lid: port.lid,
                buf,
            }
        }
    }

    /// Takes `a`'s QP through INIT, RTR and RTS towards `b`'s.
    fn connect(&self, a: &Side, b: &Side) {
        let access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        let steps = [
            (
                ibv_qp_attr {
                    qp_state: IBV_QPS_INIT,
                    port_num: 1,
                    qp_access_flags: access,
                    ..Default::default()
                },
                IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
            ),
            (
                {
                    let mut at = ibv_qp_attr {
                        qp_state: IBV_QPS_RTR,
                        path_mtu: IBV_MTU_1024,
                        dest_qp_num: b.qpn(),
                        max_dest_rd_atomic: 4,
                        min_rnr_timer: 12,
                        ..Default::default()
                    };
                    at.ah_attr.dlid = b.lid;
                    at.ah_attr.port_num = 1;
                    at
                },
                IBV_QP_STATE
                    | IBV_QP_AV
                    | IBV_QP_PATH_MTU
                    | IBV_QP_DEST_QPN
                    | IBV_QP_RQ_PSN
                    | IBV_QP_MAX_DEST_RD_ATOMIC
                    | IBV_QP_MIN_RNR_TIMER,
            ),
            (
                ibv_qp_attr {
                    qp_state: IBV_QPS_RTS,
                    timeout: 14,
                    retry_cnt: 7,
                    rnr_retry: 7,
                    max_rd_atomic: 4,
                    ..Default::default()
                },
                IBV_QP_STATE
                    | IBV_QP_TIMEOUT
                    | IBV_QP_RETRY_CNT
                    | IBV_QP_RNR_RETRY
                    | IBV_QP_SQ_PSN
                    | IBV_QP_MAX_QP_RD_ATOMIC,
            ),
        ];
        for (mut at, mask) in steps {
            // SAFETY: a live QP of the library and an attribute struct of ours.
            let rc = unsafe { (self.modify_qp)(a.qp, &mut at, mask as c_int) };
            assert_eq!(rc, 0, "ibv_modify_qp to state {}", at.qp_state);
        }
    }

    /// A connected client/server pair, each with `dv_ops` and `sq_sig_all`.
    fn pair(&self, dv_ops: u64, sq_sig_all: bool) -> (Side, Side) {
        let (client, server) = (
            self.side(0, dv_ops, sq_sig_all),
            self.side(1, dv_ops, sq_sig_all),
        );
        self.connect(&client, &server);
        self.connect(&server, &client);
        (client, server)
    }
}

/// A WQE as bytes, segment by segment (the layouts of mlx5dv.h).
#[derive(Default)]
struct Wqe(Vec<u8>);

impl Wqe {
    /// The control segment `mlx5dv_set_ctrl_seg` writes (WQE index 0, no
    /// opmod, no signature; the immediate's bytes as given), through the
    /// library's `struct mlx5_wqe_ctrl_seg`.
    fn ctrl(opcode: u32, qpn: u32, ds: u32, fm_ce_se: u32, imm: [u8; 4]) -> Self {
        let seg = mlx5_wqe_ctrl_seg {
            opmod_idx_opcode: opcode.to_be(),
            qpn_ds: ((qpn << 8) | ds).to_be(),
            signature: 0,
            dci_stream_channel_id: 0,
            fm_ce_se: fm_ce_se as u8,
            imm: u32::from_ne_bytes(imm),
        };
        let n = size_of::<mlx5_wqe_ctrl_seg>();
        // SAFETY: `seg` is a live plain-data struct of `n` bytes.
        let b = unsafe { core::slice::from_raw_parts(ptr::from_ref(&seg).cast::<u8>(), n) };
        Self(b.to_vec())
    }
    /// `struct mlx5_wqe_raddr_seg`.
    fn raddr(mut self, addr: u64, rkey: u32) -> Self {
        self.0.extend_from_slice(&addr.to_be_bytes());
        self.0.extend_from_slice(&rkey.to_be_bytes());
        self.0.extend_from_slice(&[0; 4]);
        self
    }
    /// `struct mlx5_wqe_atomic_seg`.
    fn atomic(mut self, swap_add: u64, compare: u64) -> Self {
        self.0.extend_from_slice(&swap_add.to_be_bytes());
        self.0.extend_from_slice(&compare.to_be_bytes());
        self
    }
    /// `struct mlx5_wqe_data_seg`.
    fn data(mut self, byte_count: u32, lkey: u32, addr: u64) -> Self {
        self.0.extend_from_slice(&byte_count.to_be_bytes());
        self.0.extend_from_slice(&lkey.to_be_bytes());
        self.0.extend_from_slice(&addr.to_be_bytes());
        self
    }
}

/// `ibv_wr_start`, then for each `(wr_id, wqe)` `qpx->wr_id = wr_id` and
/// `mlx5dv_wr_raw_wqe` (a NULL WQE for `None`), then `ibv_wr_complete`'s
/// return value. `wr_flags` is set to SIGNALED before each raw WQE: the
/// provider ignores it, and so must the library.
fn post_raw(s: &Side, wqes: &[(u64, Option<&Wqe>)]) -> c_int {
    // SAFETY: the QP's own tables (the inline wrappers of verbs.h and
    // mlx5dv.h call exactly these); each WQE is a live buffer of `ds`
    // segments.
    unsafe {
        let x = &mut *s.qpx;
        (x.wr_start.unwrap())(s.qpx);
        for (wr_id, w) in wqes {
            x.wr_id = *wr_id;
            x.wr_flags = IBV_SEND_SIGNALED;
            let p = w.map_or(ptr::null(), |w| w.0.as_ptr().cast::<c_void>());
            ((*s.dv).wr_raw_wqe.unwrap())(s.dv, p);
        }
        (x.wr_complete.unwrap())(s.qpx)
    }
}

/// Every completion `ibv_poll_cq` gives on `s`'s CQ, polling until it has
/// been empty a few times (virtual time runs on while it is).
fn poll_all(s: &Side) -> Vec<ibv_wc> {
    let mut out = Vec::new();
    let mut empty = 0;
    while empty < 8 {
        let mut wc = [ibv_wc::default(); 4];
        // SAFETY: the context's poll op on its own live CQ (the CQ of an
        // ibv_cq_ex is its first member); `wc` has room for 4.
        let n = unsafe { ((*s.ctx).ops.poll_cq.unwrap())(s.cq.cast(), 4, wc.as_mut_ptr()) };
        assert!(n >= 0, "ibv_poll_cq failed: {n}");
        if n == 0 {
            empty += 1;
        }
        out.extend_from_slice(&wc[..n as usize]);
    }
    out
}

/// Posts one receive of `len` bytes at `s`'s offset 0.
fn post_recv(s: &Side, wr_id: u64, len: u32) {
    let mut sge = ibv_sge {
        addr: s.addr(0),
        length: len,
        lkey: s.lkey(),
    };
    let mut wr = ibv_recv_wr {
        wr_id,
        sg_list: &mut sge,
        num_sge: 1,
        ..Default::default()
    };
    let mut bad = ptr::null_mut();
    // SAFETY: the context's post_recv op on its live QP; the buffer
    // outlives the receive (the side owns it).
    let rc = unsafe { ((*s.ctx).ops.post_recv.unwrap())(s.qp, &mut wr, &mut bad) };
    assert_eq!(rc, 0, "ibv_post_recv");
}

const SEND: u32 = MLX5_OPCODE_SEND;
const WRITE: u32 = MLX5_OPCODE_RDMA_WRITE;
const CQ_UPDATE: u32 = MLX5_WQE_CTRL_CQ_UPDATE;

// Goal: raw SEND, RDMA_WRITE, RDMA_READ and ATOMIC_FA WQEs move the data
// they describe and complete with MLX5DV_WC_RAW_WQE (136), through
// ibv_poll_cq and through the extended CQ's read_opcode, on a QP whose
// ibv send_ops_flags name only SEND.
// Method: build each WQE segment by segment, post it alone, reap its CQE, read
// the peer's memory.
#[test]
fn raw_wqes_move_data_and_complete_as_driver2() {
    let lib = Lib::load();
    let (mut client, mut server) = lib.pair(MLX5DV_QP_EX_WITH_RAW_WQE as u64, false);
    let (lkey, qpn) = (client.lkey(), client.qpn());

    // SEND of two data segments, as pyverbs' test builds it.
    client.fill(0, 64, b'a');
    client.fill(64, 64, b'b');
    post_recv(&server, 100, 256);
    let send = Wqe::ctrl(SEND, qpn, 3, CQ_UPDATE, [0; 4])
        .data(64, lkey, client.addr(0))
        .data(64, lkey, client.addr(64));
    assert_eq!(post_raw(&client, &[(1, Some(&send))]), 0);
    let wc = poll_all(&client);
    assert_eq!(wc.len(), 1, "one CQE for the signalled raw SEND");
    assert_eq!(
        (wc[0].wr_id, wc[0].status, wc[0].opcode),
        (1, IBV_WC_SUCCESS, RAW_WQE_OPCODE)
    );
    let rwc = poll_all(&server);
    assert_eq!(rwc.len(), 1);
    assert_eq!(
        (rwc[0].wr_id, rwc[0].opcode, rwc[0].byte_len),
        (100, IBV_WC_RECV, 128),
        "the receiver sees an ordinary SEND"
    );
    let mut want = vec![b'a'; 64];
    want.extend_from_slice(&[b'b'; 64]);
    assert_eq!(server.bytes(0, 128), want);

    // RDMA_WRITE (not in the QP's ibv send_ops_flags), reaped through the
    // extended CQ's start_poll / read_opcode.
    client.fill(128, 32, b'c');
    let write = Wqe::ctrl(WRITE, qpn, 3, CQ_UPDATE, [0; 4])
        .raddr(server.addr(1024), server.rkey())
        .data(32, lkey, client.addr(128));
    assert_eq!(post_raw(&client, &[(2, Some(&write))]), 0);
    // SAFETY: the CQ's own callbacks, as ibv_start_poll and friends call
    // them; `attr` is a zeroed ibv_poll_cq_attr.
    unsafe {
        let cq = &mut *client.cq;
        let mut attr = ibv_poll_cq_attr::default();
        let mut rc = libc::ENOENT;
        for _ in 0..64 {
            rc = (cq.start_poll.unwrap())(client.cq, &mut attr);
            if rc != libc::ENOENT {
                break;
            }
        }
        assert_eq!(rc, 0, "ibv_start_poll finds the WRITE's CQE");
        assert_eq!((cq.wr_id, cq.status), (2, IBV_WC_SUCCESS));
        assert_eq!((cq.read_opcode.unwrap())(client.cq), RAW_WQE_OPCODE);
        (cq.end_poll.unwrap())(client.cq);
    }
    assert_eq!(server.bytes(1024, 32), vec![b'c'; 32]);

    // RDMA_READ of the server's first 16 bytes, and ATOMIC_FA on an
    // 8-byte word of the server's.
    let read = Wqe::ctrl(MLX5_OPCODE_RDMA_READ, qpn, 3, CQ_UPDATE, [0; 4])
        .raddr(server.addr(0), server.rkey())
        .data(16, lkey, client.addr(512));
    let word = 2048;
    server.put(word, &37u64.to_ne_bytes());
    let fa = Wqe::ctrl(MLX5_OPCODE_ATOMIC_FA, qpn, 4, CQ_UPDATE, [0; 4])
        .raddr(server.addr(word), server.rkey())
        .atomic(5, 0)
        .data(8, lkey, client.addr(600));
    assert_eq!(post_raw(&client, &[(3, Some(&read)), (4, Some(&fa))]), 0);
    let wc = poll_all(&client);
    let got: Vec<_> = wc.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect();
    assert_eq!(
        got,
        [
            (3, IBV_WC_SUCCESS, RAW_WQE_OPCODE),
            (4, IBV_WC_SUCCESS, RAW_WQE_OPCODE)
        ]
    );
    assert_eq!(client.bytes(512, 16), vec![b'a'; 16]);
    assert_eq!(
        client.bytes(600, 8),
        37u64.to_ne_bytes(),
        "the word's old value"
    );
    assert_eq!(server.bytes(word, 8), 42u64.to_ne_bytes(), "37 + 5");
}

// Goal: the control segment's CQ_UPDATE alone decides whether a raw WQE
// completes (qpx->wr_flags and the QP's sq_sig_all are ignored), and raw
// and ordinary requests mix in one batch, the ordinary one completing as
// IBV_WC_SEND.
// Method: a batch of an unsignalled raw WRITE (wr_flags SIGNALED all the
// same), a signalled raw WRITE and a signalled ibv_wr_send; reap,
// compare; then an unsignalled raw WRITE and an unsignalled ibv_wr_send
// on a QP created with sq_sig_all.
#[test]
fn cq_update_alone_signals_and_raw_mixes_with_ordinary_requests() {
    let lib = Lib::load();
    let (mut client, server) = lib.pair(MLX5DV_QP_EX_WITH_RAW_WQE as u64, false);
    let (lkey, qpn) = (client.lkey(), client.qpn());
    client.fill(0, 16, b'x');
    client.fill(16, 16, b'y');
    let quiet = Wqe::ctrl(WRITE, qpn, 3, 0, [0; 4])
        .raddr(server.addr(3000), server.rkey())
        .data(16, lkey, client.addr(0));
    let loud = Wqe::ctrl(WRITE, qpn, 3, CQ_UPDATE, [0; 4])
        .raddr(server.addr(3100), server.rkey())
        .data(16, lkey, client.addr(16));
    post_recv(&server, 200, 64);
    // SAFETY: the QP's own ibv_wr_* and mlx5dv tables; the WQEs and the
    // SGE's buffer are live.
    let rc = unsafe {
        let x = &mut *client.qpx;
        (x.wr_start.unwrap())(client.qpx);
        for (id, w) in [(10, &quiet), (11, &loud)] {
            x.wr_id = id;
            x.wr_flags = IBV_SEND_SIGNALED;
            ((*client.dv).wr_raw_wqe.unwrap())(client.dv, w.0.as_ptr().cast());
        }
        x.wr_id = 12;
        x.wr_flags = IBV_SEND_SIGNALED;
        (x.wr_send.unwrap())(client.qpx);
        (x.wr_set_sge.unwrap())(client.qpx, lkey, client.addr(0), 32);
        (x.wr_complete.unwrap())(client.qpx)
    };
    assert_eq!(rc, 0);
    let wc = poll_all(&client);
    let got: Vec<_> = wc.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect();
    assert_eq!(
        got,
        [
            (11, IBV_WC_SUCCESS, RAW_WQE_OPCODE),
            (12, IBV_WC_SUCCESS, IBV_WC_SEND)
        ],
        "no CQE for the raw WQE without CQ_UPDATE"
    );
    assert_eq!(
        server.bytes(3000, 16),
        vec![b'x'; 16],
        "it ran all the same"
    );
    assert_eq!(server.bytes(3100, 16), vec![b'y'; 16]);
    assert_eq!(poll_all(&server).len(), 1, "the ordinary SEND arrived");

    // sq_sig_all signals the ordinary requests, not the raw WQE without
    // CQ_UPDATE; the raw WQE with it completes as ever.
    let (mut client, server) = lib.pair(MLX5DV_QP_EX_WITH_RAW_WQE as u64, true);
    let (lkey, qpn) = (client.lkey(), client.qpn());
    client.fill(0, 16, b'z');
    client.fill(16, 16, b'w');
    let quiet = Wqe::ctrl(WRITE, qpn, 3, 0, [0; 4])
        .raddr(server.addr(3200), server.rkey())
        .data(16, lkey, client.addr(0));
    let loud = Wqe::ctrl(WRITE, qpn, 3, CQ_UPDATE, [0; 4])
        .raddr(server.addr(3300), server.rkey())
        .data(16, lkey, client.addr(16));
    post_recv(&server, 201, 64);
    // SAFETY: as above.
    let rc = unsafe {
        let x = &mut *client.qpx;
        (x.wr_start.unwrap())(client.qpx);
        x.wr_id = 20;
        x.wr_flags = 0;
        ((*client.dv).wr_raw_wqe.unwrap())(client.dv, quiet.0.as_ptr().cast());
        x.wr_id = 21;
        (x.wr_send.unwrap())(client.qpx);
        (x.wr_set_sge.unwrap())(client.qpx, lkey, client.addr(0), 16);
        x.wr_id = 22;
        ((*client.dv).wr_raw_wqe.unwrap())(client.dv, loud.0.as_ptr().cast());
        (x.wr_complete.unwrap())(client.qpx)
    };
    assert_eq!(rc, 0);
    let wc = poll_all(&client);
    let got: Vec<_> = wc.iter().map(|w| (w.wr_id, w.opcode)).collect();
    assert_eq!(
        got,
        [(21, IBV_WC_SEND), (22, RAW_WQE_OPCODE)],
        "sq_sig_all does not reach the raw WQE without CQ_UPDATE"
    );
    assert_eq!(
        server.bytes(3200, 16),
        vec![b'z'; 16],
        "it ran all the same"
    );
    assert_eq!(server.bytes(3300, 16), vec![b'w'; 16]);

    // And sq_sig_all still signals an unsignalled ordinary request posted
    // after the raw batch.
    // SAFETY: as above.
    let rc = unsafe {
        let x = &mut *client.qpx;
        (x.wr_start.unwrap())(client.qpx);
        x.wr_id = 23;
        x.wr_flags = 0;
        (x.wr_rdma_write.unwrap())(client.qpx, server.rkey(), server.addr(3400));
        (x.wr_set_sge.unwrap())(client.qpx, lkey, client.addr(0), 16);
        (x.wr_complete.unwrap())(client.qpx)
    };
    // The QP's ibv send_ops_flags name only SEND: the WRITE is refused,
    // nothing posted.
    assert_eq!(rc, libc::EOPNOTSUPP);
    post_recv(&server, 202, 64);
    // SAFETY: as above.
    let rc = unsafe {
        let x = &mut *client.qpx;
        (x.wr_start.unwrap())(client.qpx);
        x.wr_id = 24;
        x.wr_flags = 0;
        (x.wr_send.unwrap())(client.qpx);
        (x.wr_set_sge.unwrap())(client.qpx, lkey, client.addr(0), 16);
        (x.wr_complete.unwrap())(client.qpx)
    };
    assert_eq!(rc, 0);
    let wc = poll_all(&client);
    assert_eq!(
        wc.iter().map(|w| (w.wr_id, w.opcode)).collect::<Vec<_>>(),
        [(24, IBV_WC_SEND)]
    );
}

// Goal: a WQE the library cannot decode fails its whole batch at
// ibv_wr_complete with the documented errno, and nothing of the batch is
// posted; the QP stays usable.
// Method: each bad WQE after a good raw WRITE in one batch; check the
// errno, that no CQE appears and the good WRITE's target is untouched;
// then a good batch succeeds.
#[test]
fn malformed_raw_wqes_fail_the_batch_and_post_nothing() {
    let lib = Lib::load();
    let (mut client, server) = lib.pair(MLX5DV_QP_EX_WITH_RAW_WQE as u64, false);
    let (lkey, qpn) = (client.lkey(), client.qpn());
    client.fill(0, 16, b'g');
    let good = Wqe::ctrl(WRITE, qpn, 3, CQ_UPDATE, [0; 4])
        .raddr(server.addr(0), server.rkey())
        .data(16, lkey, client.addr(0));
    let data = |w: Wqe| w.data(16, lkey, client.addr(0));
    let cases: [(&str, Option<Wqe>, c_int); 8] = [
        (
            "ds 1: a WRITE without its remote-address segment",
            Some(Wqe::ctrl(WRITE, qpn, 1, CQ_UPDATE, [0; 4])),
            libc::EINVAL,
        ),
        (
            "ds 0",
            Some(data(Wqe::ctrl(SEND, qpn, 0, CQ_UPDATE, [0; 4]))),
            libc::EINVAL,
        ),
        (
            "ds 3 for an atomic (one segment short)",
            Some(
                Wqe::ctrl(MLX5_OPCODE_ATOMIC_FA, qpn, 3, CQ_UPDATE, [0; 4])
                    .raddr(server.addr(8), server.rkey())
                    .atomic(1, 0),
            ),
            libc::EINVAL,
        ),
        ("a NULL WQE", None, libc::EINVAL),
        (
            "an inline data segment",
            Some(Wqe::ctrl(SEND, qpn, 2, CQ_UPDATE, [0; 4]).data(
                MLX5_INLINE_SEG | 4,
                u32::from_ne_bytes(*b"abcd"),
                0,
            )),
            libc::EINVAL,
        ),
        (
            "opmod 1 (a masked atomic's)",
            Some(data(Wqe::ctrl(SEND | (1 << 24), qpn, 2, CQ_UPDATE, [0; 4]))),
            libc::EOPNOTSUPP,
        ),
        (
            "opcode NOP",
            Some(Wqe::ctrl(MLX5_OPCODE_NOP, qpn, 1, CQ_UPDATE, [0; 4])),
            libc::EOPNOTSUPP,
        ),
        (
            "opcode TSO",
            Some(data(Wqe::ctrl(MLX5_OPCODE_TSO, qpn, 2, CQ_UPDATE, [0; 4]))),
            libc::EOPNOTSUPP,
        ),
    ];
    for (what, bad, errno) in &cases {
        let rc = post_raw(&client, &[(1, Some(&good)), (2, bad.as_ref())]);
        assert_eq!(rc, *errno, "{what}");
        assert!(poll_all(&client).is_empty(), "{what}: nothing completes");
        assert_eq!(server.bytes(0, 16), [0; 16], "{what}: nothing was posted");
    }
    // The QP is intact: the good WRITE alone goes through.
    assert_eq!(post_raw(&client, &[(3, Some(&good))]), 0);
    let wc = poll_all(&client);
    assert_eq!(
        (wc.len(), wc[0].wr_id, wc[0].opcode),
        (1, 3, RAW_WQE_OPCODE)
    );
    assert_eq!(server.bytes(0, 16), vec![b'g'; 16]);
}

// Goal: mlx5dv_wr_raw_wqe needs a QP created with mlx5dv send_ops_flags:
// libmlx5's mlx5_qp_fill_wr_pfns installs the builder with any of them
// (mlx5dv_wr_post(3) asks for MLX5DV_QP_EX_WITH_RAW_WQE; the library
// follows the code, so programs that work on hardware work here); without
// any, where libmlx5 would call a NULL slot, the batch fails at
// ibv_wr_complete with EOPNOTSUPP and nothing of it is posted. A QP type
// whose WQEs carry more than RC's segments (UD) is refused likewise.
// Method: the same good raw WRITE beside an ordinary SEND on an RC QP
// created without mlx5dv send_ops_flags, one created with MR_LIST only,
// and one with RAW_WQE; a raw SEND on a UD QP with RAW_WQE.
#[test]
fn raw_wqes_need_a_qp_created_with_raw_wqe() {
    let lib = Lib::load();
    for (what, dv_ops, want) in [
        ("no mlx5dv send_ops_flags", 0, libc::EOPNOTSUPP),
        (
            "MLX5DV_QP_EX_WITH_MR_LIST only",
            MLX5DV_QP_EX_WITH_MR_LIST as u64,
            0,
        ),
        (
            "MLX5DV_QP_EX_WITH_RAW_WQE",
            MLX5DV_QP_EX_WITH_RAW_WQE as u64,
            0,
        ),
    ] {
        let (mut client, server) = lib.pair(dv_ops, false);
        let (lkey, qpn) = (client.lkey(), client.qpn());
        client.fill(0, 16, b'r');
        let write = Wqe::ctrl(WRITE, qpn, 3, CQ_UPDATE, [0; 4])
            .raddr(server.addr(0), server.rkey())
            .data(16, lkey, client.addr(0));
        post_recv(&server, 300, 64);
        // SAFETY: the QP's own tables; the WQE and the SGE's buffer are
        // live.
        let rc = unsafe {
            let x = &mut *client.qpx;
            (x.wr_start.unwrap())(client.qpx);
            x.wr_id = 30;
            x.wr_flags = IBV_SEND_SIGNALED;
            (x.wr_send.unwrap())(client.qpx);
            (x.wr_set_sge.unwrap())(client.qpx, lkey, client.addr(0), 16);
            x.wr_id = 31;
            ((*client.dv).wr_raw_wqe.unwrap())(client.dv, write.0.as_ptr().cast());
            (x.wr_complete.unwrap())(client.qpx)
        };
        assert_eq!(rc, want, "{what}");
        let got: Vec<_> = poll_all(&client)
            .iter()
            .map(|w| (w.wr_id, w.status, w.opcode))
            .collect();
        if want == 0 {
            assert_eq!(
                got,
                [
                    (30, IBV_WC_SUCCESS, IBV_WC_SEND),
                    (31, IBV_WC_SUCCESS, RAW_WQE_OPCODE)
                ],
                "{what}"
            );
            assert_eq!(server.bytes(0, 16), vec![b'r'; 16], "{what}");
        } else {
            assert!(got.is_empty(), "{what}: nothing completes");
            assert!(
                poll_all(&server).is_empty(),
                "{what}: the SEND was not posted"
            );
            assert_eq!(server.bytes(0, 16), [0; 16], "{what}: nor the WRITE");
        }
    }

    // UD, created with the flag and taken to RTS: its WQEs carry an
    // address vector.
    let ud = lib.side_of(0, IBV_QPT_UD, MLX5DV_QP_EX_WITH_RAW_WQE as u64, false);
    for (mut at, mask) in [
        (
            ibv_qp_attr {
                qp_state: IBV_QPS_INIT,
                port_num: 1,
                qkey: 0x1111,
                ..Default::default()
            },
            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY,
        ),
        (
            ibv_qp_attr {
                qp_state: IBV_QPS_RTR,
                ..Default::default()
            },
            IBV_QP_STATE,
        ),
        (
            ibv_qp_attr {
                qp_state: IBV_QPS_RTS,
                ..Default::default()
            },
            IBV_QP_STATE | IBV_QP_SQ_PSN,
        ),
    ] {
        // SAFETY: a live QP of the library and an attribute struct of ours.
        let rc = unsafe { (lib.modify_qp)(ud.qp, &mut at, mask as c_int) };
        assert_eq!(rc, 0, "UD QP to state {}", at.qp_state);
    }
    let send = Wqe::ctrl(SEND, ud.qpn(), 2, CQ_UPDATE, [0; 4]).data(16, ud.lkey(), ud.addr(0));
    assert_eq!(post_raw(&ud, &[(40, Some(&send))]), libc::EOPNOTSUPP);
    assert!(poll_all(&ud).is_empty());
}

// Goal: the immediate of a raw SEND_IMM or RDMA_WRITE_IMM reaches the
// receiver as the __be32 the WQE carries, and a raw ATOMIC_CS swaps on a
// match, each completing as MLX5DV_WC_RAW_WQE.
// Method: a batch of SEND_IMM, WRITE_IMM and CS (compare 9 against a word
// holding 9, swap 77); read the receiver's CQEs and memory and the
// requester's fetched word.
#[test]
fn raw_imm_and_compare_and_swap_reach_the_responder() {
    let lib = Lib::load();
    let (mut client, mut server) = lib.pair(MLX5DV_QP_EX_WITH_RAW_WQE as u64, false);
    let (lkey, qpn) = (client.lkey(), client.qpn());
    client.fill(0, 32, b'i');
    post_recv(&server, 500, 64);
    post_recv(&server, 501, 64);
    let word = 2048;
    server.put(word, &9u64.to_ne_bytes());
    let send_imm = Wqe::ctrl(MLX5_OPCODE_SEND_IMM, qpn, 2, CQ_UPDATE, [1, 2, 3, 4]).data(
        8,
        lkey,
        client.addr(0),
    );
    let write_imm = Wqe::ctrl(MLX5_OPCODE_RDMA_WRITE_IMM, qpn, 3, CQ_UPDATE, [5, 6, 7, 8])
        .raddr(server.addr(1024), server.rkey())
        .data(32, lkey, client.addr(0));
    let cs = Wqe::ctrl(MLX5_OPCODE_ATOMIC_CS, qpn, 4, CQ_UPDATE, [0; 4])
        .raddr(server.addr(word), server.rkey())
        .atomic(77, 9)
        .data(8, lkey, client.addr(600));
    assert_eq!(
        post_raw(
            &client,
            &[
                (50, Some(&send_imm)),
                (51, Some(&write_imm)),
                (52, Some(&cs))
            ]
        ),
        0
    );
    let got: Vec<_> = poll_all(&client)
        .iter()
        .map(|w| (w.wr_id, w.status, w.opcode))
        .collect();
    assert_eq!(
        got,
        [
            (50, IBV_WC_SUCCESS, RAW_WQE_OPCODE),
            (51, IBV_WC_SUCCESS, RAW_WQE_OPCODE),
            (52, IBV_WC_SUCCESS, RAW_WQE_OPCODE)
        ]
    );
    let rwc = poll_all(&server);
    let got: Vec<_> = rwc
        .iter()
        .map(|w| {
            // SAFETY: a plain-data union of two u32s, either read is
            // defined; both receives carry an immediate (IBV_WC_WITH_IMM,
            // checked), so imm_data is the member written.
            let imm = unsafe { w.__bindgen_anon_1.imm_data };
            (w.wr_id, w.opcode, w.wc_flags & IBV_WC_WITH_IMM, imm)
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                500,
                IBV_WC_RECV,
                IBV_WC_WITH_IMM,
                u32::from_ne_bytes([1, 2, 3, 4])
            ),
            (
                501,
                IBV_WC_RECV_RDMA_WITH_IMM,
                IBV_WC_WITH_IMM,
                u32::from_ne_bytes([5, 6, 7, 8])
            ),
        ],
        "the immediates as the WQEs carried them"
    );
    assert_eq!(server.bytes(0, 8), vec![b'i'; 8], "the SEND_IMM's payload");
    assert_eq!(server.bytes(1024, 32), vec![b'i'; 32], "the WRITE_IMM's");
    assert_eq!(server.bytes(word, 8), 77u64.to_ne_bytes(), "swapped");
    assert_eq!(client.bytes(600, 8), 9u64.to_ne_bytes(), "the old value");
}
