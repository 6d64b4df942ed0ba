//! What the shim's integration tests share.

use std::path::PathBuf;
use std::process::Command;

/// `libverbsim_shim.so` of this build. `cargo test` builds the crate as an
/// rlib for its tests but does not refresh the cdylib, so the test asks
/// cargo for it (a no-op when it is current) and uses the file cargo names.
pub(crate) fn shim() -> PathBuf {
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
