//! The drop-in library end to end through its C ABI: `dlopen`, the
//! exported verbs, and the data path through the context's ops, as a C
//! program's inline `ibv_post_send`/`ibv_poll_cq` reach it.

use verbsim_shim::driver::{SendPingPong, VerbCost, WriteRate};

mod common;
use common::shim;

#[test]
fn writes_land_in_the_applications_memory() {
    let mut w = WriteRate::new(&shim()).expect("set up over the C ABI");
    w.local_mut().fill(0xab);
    assert!(
        w.remote()[..64].iter().all(|&b| b == 0),
        "the remote buffer starts zeroed"
    );
    w.run(1000).expect("1000 WRITEs complete with SUCCESS");
    // 1000 sequential 64 B WRITEs cover the first 64 000 bytes of the
    // responder's own Vec: the simulator wrote the caller's memory.
    assert!(w.remote()[..64_000].iter().all(|&b| b == 0xab));
    assert!(
        w.remote()[64_000..64_064].iter().all(|&b| b == 0),
        "nothing past the last WRITE"
    );
}

#[test]
fn pingpong_sends_each_sides_message_to_the_other() {
    // Goal: the single-process ping-pong of `fabric_pingpong_rate` really
    // moves each side's 64 bytes into the other's RECV buffer.
    let mut p = SendPingPong::new(&shim()).expect("set up the ping-pong");
    p.message_mut(0).fill(0x11);
    p.message_mut(1).fill(0x22);
    p.run(100).expect("100 round trips complete with SUCCESS");
    assert!(
        p.received(1).iter().all(|&b| b == 0x11),
        "B got A's message"
    );
    assert!(
        p.received(0).iter().all(|&b| b == 0x22),
        "A got B's message"
    );
}

#[test]
fn verb_cost_polls_an_empty_cq_and_queries_the_port() {
    let mut v = VerbCost::new(&shim()).expect("open a device and create a CQ");
    v.poll_empty(1000).expect("an empty CQ polls 0");
    v.query_port(1000).expect("port 1 answers");
}

/// Looks a function up in the loaded library.
fn sym(lib: *mut core::ffi::c_void, name: &str) -> *mut core::ffi::c_void {
    let c = std::ffi::CString::new(name).unwrap();
    // SAFETY: a live dlopen handle and a NUL-terminated name.
    let p = unsafe { libc::dlsym(lib, c.as_ptr()) };
    assert!(!p.is_null(), "{name} is not exported");
    p
}

#[test]
fn null_and_unknown_pointers_are_einval_not_a_crash() {
    let path = std::ffi::CString::new(shim().into_os_string().into_encoded_bytes()).unwrap();
    // SAFETY: dlopen of the library this build made.
    let lib = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!lib.is_null());
    type Ptr = *mut core::ffi::c_void;
    // SAFETY: each symbol is called with its rdma-core signature; the
    // pointers are NULL or addresses the library never handed out, which it
    // must refuse without reading them.
    unsafe {
        let alloc_pd: unsafe extern "C" fn(Ptr) -> Ptr =
            core::mem::transmute(sym(lib, "ibv_alloc_pd"));
        let dealloc_pd: unsafe extern "C" fn(Ptr) -> i32 =
            core::mem::transmute(sym(lib, "ibv_dealloc_pd"));
        let destroy_qp: unsafe extern "C" fn(Ptr) -> i32 =
            core::mem::transmute(sym(lib, "ibv_destroy_qp"));
        let dereg_mr: unsafe extern "C" fn(Ptr) -> i32 =
            core::mem::transmute(sym(lib, "ibv_dereg_mr"));
        let close_device: unsafe extern "C" fn(Ptr) -> i32 =
            core::mem::transmute(sym(lib, "ibv_close_device"));
        let rdma_destroy_id: unsafe extern "C" fn(Ptr) -> i32 =
            core::mem::transmute(sym(lib, "rdma_destroy_id"));
        let bogus = 0x1234_5678usize as Ptr;
        *libc::__errno_location() = 0;
        assert!(alloc_pd(core::ptr::null_mut()).is_null());
        assert_eq!(*libc::__errno_location(), libc::EINVAL);
        assert!(alloc_pd(bogus).is_null());
        assert_eq!(dealloc_pd(bogus), libc::EINVAL);
        assert_eq!(dealloc_pd(core::ptr::null_mut()), libc::EINVAL);
        assert_eq!(destroy_qp(bogus), libc::EINVAL);
        assert_eq!(dereg_mr(bogus), libc::EINVAL);
        assert_eq!(close_device(bogus), libc::EINVAL);
        // librdmacm's convention: -1 and errno.
        assert_eq!(rdma_destroy_id(bogus), -1);
        assert_eq!(*libc::__errno_location(), libc::EINVAL);
        // An unmodelled verb fails cleanly instead of crashing.
        let devx: unsafe extern "C" fn(Ptr, Ptr, usize, Ptr, usize) -> i32 =
            core::mem::transmute(sym(lib, "mlx5dv_devx_general_cmd"));
        assert_eq!(
            devx(bogus, core::ptr::null_mut(), 0, core::ptr::null_mut(), 0),
            libc::EOPNOTSUPP
        );
    }
}

#[test]
fn reserved_qp_numbers_through_libmlx5() {
    let path = std::ffi::CString::new(shim().into_os_string().into_encoded_bytes()).unwrap();
    // SAFETY: dlopen of the library this build made.
    let lib = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!lib.is_null());
    type Ptr = *mut core::ffi::c_void;
    // SAFETY: each symbol is called with its rdma-core signature, on a
    // context the library opened (or a pointer it never handed out).
    unsafe {
        let get_list: unsafe extern "C" fn(*mut i32) -> *mut Ptr =
            core::mem::transmute(sym(lib, "ibv_get_device_list"));
        let free_list: unsafe extern "C" fn(*mut Ptr) =
            core::mem::transmute(sym(lib, "ibv_free_device_list"));
        let open: unsafe extern "C" fn(Ptr) -> Ptr =
            core::mem::transmute(sym(lib, "ibv_open_device"));
        let close: unsafe extern "C" fn(Ptr) -> i32 =
            core::mem::transmute(sym(lib, "ibv_close_device"));
        let alloc: unsafe extern "C" fn(Ptr, *mut u32) -> i32 =
            core::mem::transmute(sym(lib, "mlx5dv_reserved_qpn_alloc"));
        let dealloc: unsafe extern "C" fn(Ptr, u32) -> i32 =
            core::mem::transmute(sym(lib, "mlx5dv_reserved_qpn_dealloc"));
        let mut n = 0;
        let list = get_list(&mut n);
        assert!(!list.is_null() && n > 0);
        let ctx = open(*list);
        assert!(!ctx.is_null());
        let (mut a, mut b) = (0u32, 0u32);
        assert_eq!(alloc(ctx, &mut a), 0);
        assert_eq!(alloc(ctx, &mut b), 0);
        assert!(a > 1 && b > 1 && a != b);
        assert_eq!(alloc(ctx, core::ptr::null_mut()), libc::EINVAL);
        assert_eq!(dealloc(ctx, 0x00ab_cdef), libc::EINVAL);
        assert_eq!(dealloc(ctx, a), 0);
        assert_eq!(dealloc(ctx, a), libc::EINVAL);
        assert_eq!(alloc(0x1234_5678usize as Ptr, &mut a), libc::EINVAL);
        // b is still held: closing the context releases it.
        assert_eq!(close(ctx), 0);
        free_list(list);
    }
}
