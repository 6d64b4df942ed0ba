//! Links the cdylib as `libibverbs.so.1` with the version nodes of
//! libibverbs, libmlx5, librdmacm and libefa (`verbsim.map`).

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=verbsim.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/verbsim.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libibverbs.so.1");
}
