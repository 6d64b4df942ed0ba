//! The drop-in library end to end through its C ABI: `dlopen`, the
//! exported verbs, and the data path through the context's ops, as a C
//! program's inline `ibv_post_send`/`ibv_poll_cq` reach it.

use std::path::PathBuf;

use verbsim_shim::driver::WriteRate;

/// `libverbsim_shim.so` of this build (cargo builds the cdylib with the tests).
fn shim() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("libverbsim_shim.so")
}

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
