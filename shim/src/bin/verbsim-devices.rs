//! `verbsim-devices` (run by `verbsim exec`): runs a program where the
//! simulated devices are visible as files, as programs look for RDMA
//! devices beside `ibv_get_device_list`:
//!
//! * `/dev/infiniband/uverbsN`, a read-write character device per device
//!   (UCX keeps an IB device only where it finds one): `/dev/null` bound
//!   there; the drop-in library never opens it.
//! * `/sys/class/infiniband/<name>/` (node type, GUIDs, port state, link
//!   layer) and `/sys/class/infiniband_verbs/uverbsN/ibdev`, as sysfs gives
//!   them for a real device.
//!
//! The program gets a private mount namespace (and, for a user other than
//! root, a user namespace mapping only that user to itself, so it runs as
//! itself without privileges) in which tmpfs layers over `/dev` and
//! `/sys/class` hold every entry the originals hold (bound back) plus the
//! simulated devices'. Where the namespace cannot be had (a kernel or
//! container that refuses unprivileged user namespaces) one line on stderr
//! says so and the program runs without the files.
//!
//! Usage: `verbsim-devices -- PROGRAM [ARGS...]`, with `VERBSIM_DEVICES`
//! naming the device profiles as for the library.

use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The simulated devices' names (`sim_<profile>_<index>`), from
/// `VERBSIM_DEVICES` as the library reads it (default `cx6,cx6`).
fn device_names() -> Vec<String> {
    let list = std::env::var("VERBSIM_DEVICES").unwrap_or_default();
    let list = if list.trim().is_empty() {
        "cx6,cx6".to_owned()
    } else {
        list
    };
    list.split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .enumerate()
        .map(|(i, n)| format!("sim_{n}_{i}"))
        .collect()
}

/// An OS error with what was being done.
fn os_err(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

fn cstr(p: &Path) -> Result<CString, String> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| format!("{} has a NUL", p.display()))
}

/// `mount(2)`.
fn mount(
    src: &Path,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
) -> Result<(), String> {
    let (s, t) = (cstr(src)?, cstr(target)?);
    let f = fstype.map(|f| CString::new(f).expect("no NUL"));
    let opts = CString::new("mode=755").expect("no NUL");
    // SAFETY: NUL-terminated strings that live across the call; the data
    // argument is a NUL-terminated option string (tmpfs) or ignored (bind).
    let rc = unsafe {
        libc::mount(
            s.as_ptr(),
            t.as_ptr(),
            f.as_ref().map_or(core::ptr::null(), |f| f.as_ptr()),
            flags,
            if f.is_some() {
                opts.as_ptr().cast()
            } else {
                core::ptr::null()
            },
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(os_err(&format!(
            "mount {} on {}",
            src.display(),
            target.display()
        )))
    }
}

/// Enters a private mount namespace (with a user namespace for a user
/// other than root, mapping that user and group to themselves).
fn enter_namespace() -> Result<(), String> {
    // SAFETY: getuid/getgid/geteuid have no preconditions.
    let (uid, gid, euid) = unsafe { (libc::getuid(), libc::getgid(), libc::geteuid()) };
    let user = euid != 0;
    let flags = libc::CLONE_NEWNS | if user { libc::CLONE_NEWUSER } else { 0 };
    // SAFETY: unshare takes flags only; this process is single-threaded.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(os_err(if user {
            "unshare(CLONE_NEWUSER | CLONE_NEWNS)"
        } else {
            "unshare(CLONE_NEWNS)"
        }));
    }
    if user {
        std::fs::write("/proc/self/setgroups", "deny").map_err(|e| format!("setgroups: {e}"))?;
        std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))
            .map_err(|e| format!("uid_map: {e}"))?;
        std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))
            .map_err(|e| format!("gid_map: {e}"))?;
    }
    // Nothing mounted here leaks back to the parent namespace.
    mount(
        Path::new("none"),
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
    )
}

/// Layers a tmpfs over `dir` holding every entry `dir` holds (directories
/// and files bound back, symbolic links copied), then calls `add` to put
/// the simulated entries in.
fn overlay(dir: &Path, add: impl FnOnce(&Path) -> Result<(), String>) -> Result<(), String> {
    let entries: Vec<(OsString, std::fs::FileType)> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_type().ok().map(|t| (e.file_name(), t)))
        .collect();
    // The originals stay reachable through a descriptor of the directory
    // opened before the tmpfs hides them.
    let fd = std::fs::File::open(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let old = PathBuf::from(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&fd)
    ));
    mount(Path::new("verbsim"), dir, Some("tmpfs"), 0)?;
    let filled = fill(dir, &old, &entries).and_then(|()| add(dir));
    if filled.is_err() {
        // Half a layer is worse than none: the originals come back.
        let c = cstr(dir)?;
        // SAFETY: a NUL-terminated path living across the call.
        unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    }
    drop(fd);
    filled
}

/// Puts every original entry into the new layer over `dir`.
fn fill(dir: &Path, old: &Path, entries: &[(OsString, std::fs::FileType)]) -> Result<(), String> {
    for (name, t) in entries {
        let (src, dst) = (old.join(name), dir.join(name));
        if t.is_symlink() {
            let to = std::fs::read_link(&src).map_err(|e| format!("{}: {e}", src.display()))?;
            symlink(&to, &dst).map_err(|e| format!("{}: {e}", dst.display()))?;
        } else if t.is_dir() {
            std::fs::create_dir(&dst).map_err(|e| format!("{}: {e}", dst.display()))?;
            mount(&src, &dst, None, libc::MS_BIND | libc::MS_REC)?;
        } else {
            std::fs::write(&dst, b"").map_err(|e| format!("{}: {e}", dst.display()))?;
            mount(&src, &dst, None, libc::MS_BIND)?;
        }
    }
    Ok(())
}

/// Writes `text` to `dir/rel`, making the directories on the way.
fn put(dir: &Path, rel: &str, text: &str) -> Result<(), String> {
    let p = dir.join(rel);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))
}

/// Makes the simulated devices visible as files.
fn make_files(names: &[String]) -> Result<(), String> {
    overlay(Path::new("/dev"), |dev| {
        let ib = dev.join("infiniband");
        if !ib.exists() {
            std::fs::create_dir(&ib).map_err(|e| format!("{}: {e}", ib.display()))?;
        }
        for i in 0..names.len() {
            let node = ib.join(format!("uverbs{i}"));
            if !node.exists() {
                std::fs::write(&node, b"").map_err(|e| format!("{}: {e}", node.display()))?;
            }
            mount(&dev.join("null"), &node, None, libc::MS_BIND)?;
        }
        Ok(())
    })?;
    // A tree someone already made for these devices (CI's namespaces give
    // them a netdev) is kept as it is.
    let class = Path::new("/sys/class");
    if names
        .iter()
        .all(|n| class.join("infiniband").join(n).exists())
    {
        return Ok(());
    }
    overlay(class, |class| {
        let ib = class.join("infiniband");
        let verbs = class.join("infiniband_verbs");
        for d in [&ib, &verbs] {
            if d.exists() {
                // A real device's tree: hidden behind an empty one.
                mount(Path::new("verbsim"), d, Some("tmpfs"), 0)?;
            } else {
                std::fs::create_dir(d).map_err(|e| format!("{}: {e}", d.display()))?;
            }
        }
        put(&verbs, "abi_version", "6\n")?;
        for (i, n) in names.iter().enumerate() {
            let d = ib.join(n);
            put(&d, "node_type", "1: CA\n")?;
            put(&d, "node_desc", &format!("verbsim {n}\n"))?;
            put(&d, "ports/1/state", "4: ACTIVE\n")?;
            put(&d, "ports/1/phys_state", "5: LinkUp\n")?;
            put(&d, "ports/1/link_layer", "InfiniBand\n")?;
            std::fs::create_dir_all(d.join("device"))
                .map_err(|e| format!("{}: {e}", d.display()))?;
            let u = verbs.join(format!("uverbs{i}"));
            put(&u, "ibdev", &format!("{n}\n"))?;
            put(&u, "abi_version", "1\n")?;
        }
        Ok(())
    })
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let prog: Vec<&OsStr> = match args.iter().position(|a| a == "--") {
        Some(i) => args[i + 1..].iter().map(OsString::as_os_str).collect(),
        None => args.iter().map(OsString::as_os_str).collect(),
    };
    let Some((first, rest)) = prog.split_first() else {
        eprintln!("usage: verbsim-devices -- PROGRAM [ARGS...]");
        return ExitCode::from(2);
    };
    let names = device_names();
    if let Err(why) = enter_namespace().and_then(|()| make_files(&names)) {
        eprintln!(
            "verbsim exec: the simulated devices are not visible as /dev/infiniband/uverbsN and /sys/class/infiniband ({why}); programs that look for those files (UCX) will find no RDMA device"
        );
    }
    let err = Command::new(first).args(rest).exec();
    eprintln!(
        "verbsim exec: cannot run {}: {err}",
        first.to_string_lossy()
    );
    ExitCode::from(127)
}
