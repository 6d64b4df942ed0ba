//! The drop-in library end to end through its C ABI: `dlopen`, the
//! exported verbs, and the data path through the context's ops, as a C
//! program's inline `ibv_post_send`/`ibv_poll_cq` reach it.

use std::path::PathBuf;
use std::process::Command;

use verbsim_shim::driver::WriteRate;

/// `libverbsim_shim.so` of this build. `cargo test` builds the crate as an
/// rlib for its tests but does not refresh the cdylib, so the test asks
/// cargo for it (a no-op when it is current) and uses the file cargo names.
fn shim() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["build", "-q", "-p", "verbsim-shim", "--message-format=json"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo build -p verbsim-shim");
    assert!(
        out.status.success(),
        "cargo build -p verbsim-shim: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    // The compiler-artifact message of the shim's lib lists its files.
    let line = text
        .lines()
        .find(|l| {
            l.contains("\"reason\":\"compiler-artifact\"") && l.contains("libverbsim_shim.so")
        })
        .expect("cargo reported the cdylib");
    let at = line.find("libverbsim_shim.so").unwrap();
    let start = line[..at].rfind('"').unwrap() + 1;
    PathBuf::from(&line[start..at + "libverbsim_shim.so".len()])
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
