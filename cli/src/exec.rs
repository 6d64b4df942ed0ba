//! `verbsim exec`: run an unmodified RDMA program on the simulator through
//! the drop-in `libibverbs.so.1` (the `verbsim-shim` crate).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// What `verbsim exec --help` says after the options.
const AFTER_HELP: &str = "\
The program loads verbsim's libibverbs.so.1 (with libmlx5.so.1,
librdmacm.so.1 and libefa.so.1 as links to it) instead of rdma-core's,
through LD_LIBRARY_PATH; no device, kernel module or root is needed.

Examples:
  verbsim exec -- ibv_devinfo -v
  verbsim exec --seed 7 --log -- python3 run_tests.py -v
  verbsim exec --fabric demo -- ibv_rc_pingpong &
  verbsim exec --fabric demo -- ibv_rc_pingpong localhost

Exit status: the program's; 2 for a usage error or a missing shim.";

/// The command line of `verbsim exec`.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub(crate) struct ExecArgs {
    /// The simulation's root seed (VERBSIM_SEED; default 0).
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Device profiles, comma separated: cx6, cx7, rxe (VERBSIM_DEVICES;
    /// default cx6,cx6).
    #[arg(long, value_name = "LIST", value_parser = parse_devices)]
    devices: Option<String>,
    /// Write the simulator's trace to FILE when the program exits.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Write a Chrome/Perfetto trace-event JSON file when the program exits
    /// (in-process simulator; with --fabric the trace is the fabric's).
    #[arg(long, value_name = "FILE")]
    chrome_trace: Option<PathBuf>,
    /// Fabric faults: drop=PPM,dup=PPM,reorder=PPM,delay=PPM:NS (PPM: per
    /// million packets).
    #[arg(long, value_name = "SPEC", value_parser = parse_faults)]
    faults: Option<String>,
    /// Join the shared fabric NAME (a socket path, or a name for
    /// verbsim-fabric-NAME.sock in $XDG_RUNTIME_DIR or the 0700 directory
    /// /tmp/verbsim-UID), starting it if nobody has: programs
    /// run this way with the same NAME reach each other (server and client
    /// as two processes).
    #[arg(long, value_name = "NAME", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    fabric: Option<String>,
    /// Log every failing verb (name, errno, why) to stderr.
    #[arg(long)]
    log: bool,
    /// The shim to load (default: libverbsim_shim.so next to this
    /// executable, or $VERBSIM_SHIM).
    #[arg(long, value_name = "PATH")]
    shim: Option<PathBuf>,
    /// Do not show the simulated devices as files: by default the program
    /// runs in a private mount namespace (and a user namespace when not
    /// root) where /dev/infiniband/uverbsN and /sys/class/infiniband/<dev>
    /// exist, as programs such as UCX look for them.
    #[arg(long)]
    no_device_files: bool,
    /// The program and its arguments (after `--` when they start with `-`).
    #[arg(value_name = "PROGRAM", required = true, trailing_var_arg = true)]
    program: Vec<OsString>,
}

/// `--devices`: every name a profile.
fn parse_devices(v: &str) -> Result<String, String> {
    for name in v.split(',') {
        if backend_sim::DeviceProfile::by_name(name).is_none() {
            return Err(format!("unknown profile `{name}` (cx6, cx7, rxe)"));
        }
    }
    Ok(v.to_owned())
}

/// `--faults`: the library's own parser, so a typo is refused here rather
/// than ignored by the program's library.
fn parse_faults(v: &str) -> Result<String, String> {
    backend_sim::fault_spec::parse_fault_spec(v)?;
    Ok(v.to_owned())
}

/// What the library reads from the environment, from the arguments.
fn environment(a: &ExecArgs) -> Result<Vec<(&'static str, String)>, String> {
    let mut env = Vec::new();
    let path = |p: &PathBuf| p.to_string_lossy().into_owned();
    if let Some(seed) = a.seed {
        env.push(("VERBSIM_SEED", seed.to_string()));
    }
    if let Some(d) = &a.devices {
        env.push(("VERBSIM_DEVICES", d.clone()));
    }
    if let Some(t) = &a.trace {
        crate::out::check_writable(t).map_err(|e| format!("--trace {}: {e}", t.display()))?;
        env.push(("VERBSIM_TRACE", path(t)));
    }
    if let Some(t) = &a.chrome_trace {
        crate::out::check_writable(t)
            .map_err(|e| format!("--chrome-trace {}: {e}", t.display()))?;
        env.push(("VERBSIM_CHROME_TRACE", path(t)));
    }
    if let Some(f) = &a.faults {
        env.push(("VERBSIM_FAULTS", f.clone()));
    }
    if a.log {
        env.push(("VERBSIM_SHIM_LOG", "1".into()));
    }
    if let Some(v) = &a.fabric {
        env.push(("VERBSIM_FABRIC", fabric_socket(v)?));
        let exe = std::env::current_exe()
            .map_err(|e| format!("--fabric: cannot find this executable: {e}"))?;
        env.push(("VERBSIM_FABRIC_CMD", exe.to_string_lossy().into_owned()));
    }
    Ok(env)
}

/// The socket of fabric `name`: a path as given, a bare name in this
/// user's own directory ([`user_dir`]).
pub(crate) fn fabric_socket(name: &str) -> Result<String, String> {
    if name.contains('/') {
        return Ok(name.to_owned());
    }
    let dir = user_dir()?;
    Ok(dir
        .join(format!("verbsim-fabric-{name}.sock"))
        .to_string_lossy()
        .into_owned())
}

/// A directory only this user can enter, for the fabric's sockets:
/// `$XDG_RUNTIME_DIR` when it is set, ours and closed to others, else
/// `/tmp/verbsim-UID`, made with mode 0700 and refused unless it is a
/// directory (not a link) of ours that no one else can enter.
pub(crate) fn user_dir() -> Result<PathBuf, String> {
    use std::os::unix::fs::MetadataExt;
    // This process's effective uid: the owner the kernel gives
    // /proc/self (no FFI needed in this crate).
    let me = std::fs::metadata("/proc/self")
        .map_err(|e| format!("--fabric: cannot tell this user's uid from /proc/self: {e}"))?
        .uid();
    let private = |p: &Path| -> Result<(), String> {
        let m = std::fs::symlink_metadata(p).map_err(|e| format!("{}: {e}", p.display()))?;
        if !m.file_type().is_dir() {
            return Err(format!("{} is not a directory", p.display()));
        }
        if m.uid() != me {
            return Err(format!(
                "{} belongs to uid {}, not to this user (uid {me})",
                p.display(),
                m.uid()
            ));
        }
        if m.mode() & 0o077 != 0 {
            return Err(format!(
                "{} has mode {:o}: others may enter it (it must be 0700)",
                p.display(),
                m.mode() & 0o777
            ));
        }
        Ok(())
    };
    user_dir_in(
        std::env::var_os("XDG_RUNTIME_DIR"),
        &std::env::temp_dir(),
        me,
        private,
    )
}

/// [`user_dir`] with its inputs given: the runtime directory, the
/// temporary one, our uid and the check that a directory is ours alone.
fn user_dir_in(
    xdg: Option<OsString>,
    tmp: &Path,
    me: u32,
    private: impl Fn(&Path) -> Result<(), String>,
) -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    if let Some(x) = xdg.filter(|x| !x.is_empty()) {
        let x = PathBuf::from(x);
        if x.is_absolute() && private(&x).is_ok() {
            return Ok(x);
        }
    }
    let dir = tmp.join(format!("verbsim-{me}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("--fabric: cannot make {}: {e}", dir.display())),
    }
    private(&dir).map_err(|why| format!("--fabric: refusing the socket directory: {why}"))?;
    Ok(dir)
}

/// Where the shim is: `--shim`, `$VERBSIM_SHIM`, or next to this executable.
fn find_shim(explicit: Option<PathBuf>) -> Result<PathBuf, String> {
    if let Some(p) = explicit.or_else(|| std::env::var_os("VERBSIM_SHIM").map(PathBuf::from)) {
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("the shim {} does not exist", p.display()))
        };
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    for cand in [
        dir.join("libverbsim_shim.so"),
        dir.join("../libverbsim_shim.so"),
    ] {
        if cand.is_file() {
            return Ok(cand);
        }
    }
    Err(format!(
        "libverbsim_shim.so is not next to {}: build it with `cargo build -p verbsim-shim` (same profile), or pass --shim PATH",
        exe.display()
    ))
}

/// A directory holding the four library names as links to the shim.
///
/// One file under four names: glibc maps it once, so one world serves
/// libibverbs, libmlx5, librdmacm and libefa calls alike.
pub(crate) fn lib_dir(shim: &Path) -> Result<PathBuf, String> {
    let shim = shim
        .canonicalize()
        .map_err(|e| format!("{}: {e}", shim.display()))?;
    let dir = shim.with_file_name("verbsim-lib");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for name in [
        "libibverbs.so.1",
        "libmlx5.so.1",
        "librdmacm.so.1",
        "libefa.so.1",
    ] {
        let link = dir.join(name);
        let ok = std::fs::read_link(&link).is_ok_and(|t| t == shim);
        if !ok {
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&shim, &link)
                .map_err(|e| format!("{}: {e}", link.display()))?;
        }
    }
    Ok(dir)
}

pub(crate) fn main(a: ExecArgs) -> ExitCode {
    let env = match environment(&a) {
        Ok(e) => e,
        Err(why) => return crate::usage_error(Some("exec"), &why),
    };
    let dir = match find_shim(a.shim).and_then(|s| lib_dir(&s)) {
        Ok(d) => d,
        Err(why) => {
            eprintln!("verbsim exec: {why}");
            return ExitCode::from(crate::EXIT_USAGE);
        }
    };
    let mut path = OsString::from(&dir);
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|o| !o.is_empty()) {
        path.push(":");
        path.push(old);
    }
    // The simulated devices as files (/dev/infiniband/uverbsN,
    // /sys/class/infiniband), through `verbsim-devices` next to this
    // executable, unless asked not to or it is not built.
    let devices = (!a.no_device_files)
        .then(|| std::env::current_exe().ok())
        .flatten()
        .map(|e| e.with_file_name("verbsim-devices"))
        .filter(|p| p.is_file());
    let mut cmd = match &devices {
        Some(d) => {
            let mut c = Command::new(d);
            c.arg("--").args(&a.program);
            c
        }
        None => {
            let mut c = Command::new(&a.program[0]);
            c.args(&a.program[1..]);
            c
        }
    };
    cmd.env("LD_LIBRARY_PATH", path);
    for (k, v) in &env {
        cmd.env(k, v);
    }
    let err = cmd.exec();
    eprintln!(
        "verbsim exec: cannot run {}: {err}",
        a.program[0].to_string_lossy()
    );
    ExitCode::from(127)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cmd {
        #[command(flatten)]
        exec: ExecArgs,
    }

    fn parse(args: &[&str]) -> Result<ExecArgs, String> {
        Cmd::try_parse_from(std::iter::once("exec").chain(args.iter().copied()))
            .map(|c| c.exec)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn parses_options_and_program() {
        let a = parse(&[
            "--seed",
            "7",
            "--devices",
            "cx6,rxe",
            "--log",
            "--",
            "prog",
            "-x",
        ])
        .unwrap();
        assert_eq!(
            a.program,
            vec![OsString::from("prog"), OsString::from("-x")]
        );
        let env = environment(&a).unwrap();
        assert!(env.contains(&("VERBSIM_SEED", "7".into())));
        assert!(env.contains(&("VERBSIM_DEVICES", "cx6,rxe".into())));
        assert!(env.contains(&("VERBSIM_SHIM_LOG", "1".into())));
        let a = parse(&["--fabric", "ci", "p", "--seed", "3"]).unwrap();
        assert_eq!(
            a.program,
            vec![OsString::from("p"), "--seed".into(), "3".into()]
        );
        let env = environment(&a).unwrap();
        let want = user_dir().unwrap().join("verbsim-fabric-ci.sock");
        assert!(env.contains(&("VERBSIM_FABRIC", want.to_string_lossy().into_owned())));
        assert!(env.iter().any(|(k, _)| *k == "VERBSIM_FABRIC_CMD"));
        assert!(!a.no_device_files, "device files are on by default");
        let a = parse(&["--no-device-files", "p"]).unwrap();
        assert!(a.no_device_files);
        let a = parse(&["--faults", "drop=1000,delay=5:100", "p"]).unwrap();
        assert!(environment(&a)
            .unwrap()
            .contains(&("VERBSIM_FAULTS", "drop=1000,delay=5:100".into())));
    }

    // Goal: bad input is a usage error naming the flag; `--faults bogus`
    // was handed to the program's library, which ignored it (exit 0, the
    // run without faults).
    #[test]
    fn rejects_bad_input() {
        for (args, want) in [
            (&["--seed", "x", "--", "p"][..], "--seed"),
            (&["--devices", "cx9", "--", "p"], "cx9"),
            (&["--"], "PROGRAM"),
            (&["--bogus"], "--bogus"),
            (&["--fabric", "", "p"], "--fabric"),
            (&["--faults", "bogus", "p"], "bogus"),
            (&["--faults", "drop=5,delay=1", "p"], "delay"),
        ] {
            let e = parse(args).unwrap_err();
            assert!(e.contains(want), "{args:?}: {e}");
        }
        let a = parse(&["--chrome-trace", "/nonexistent-dir/t.json", "p"]).unwrap();
        assert!(environment(&a).unwrap_err().contains("--chrome-trace"));
    }
}
