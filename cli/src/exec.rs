//! `verbsim exec`: run an unmodified RDMA program on the simulator through
//! the drop-in `libibverbs.so.1` (the `verbsim-shim` crate).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// `verbsim exec --help`.
pub(crate) const HELP: &str = "\
verbsim exec: run an unmodified RDMA program on the simulator

Usage:
  verbsim exec [OPTIONS] -- PROGRAM [ARGS...]

The program loads verbsim's libibverbs.so.1 (with libmlx5.so.1,
librdmacm.so.1 and libefa.so.1 as links to it) instead of rdma-core's,
through LD_LIBRARY_PATH; no device, kernel module or root is needed.

Options:
  --seed N            the simulation's root seed (VERBSIM_SEED; default 0)
  --devices LIST      device profiles, comma separated: cx6, cx7, rxe
                      (VERBSIM_DEVICES; default cx6,cx6)
  --trace FILE        write the simulator's trace to FILE when the program exits
  --chrome-trace FILE write a Chrome/Perfetto JSON trace to FILE
  --faults SPEC       fabric faults: drop=PPM,dup=PPM,reorder=PPM,delay=PPM:NS
  --fabric NAME       join the shared fabric NAME (a socket path, or a name
                      for verbsim-fabric-NAME.sock in $XDG_RUNTIME_DIR or
                      the 0700 directory /tmp/verbsim-UID), starting it if
                      nobody has: programs run this way with the same NAME
                      reach each other (server and client as two processes)
  --log               log every failing verb (name, errno, why) to stderr
  --shim PATH         the shim to load (default: libverbsim_shim.so next to
                      this executable, or $VERBSIM_SHIM)
  -h, --help          this text

Examples:
  verbsim exec -- ibv_devinfo -v
  verbsim exec --seed 7 --log -- python3 run_tests.py -v

Exit status: the program's; 2 for a usage error or a missing shim.
";

#[derive(Debug, Default)]
struct Args {
    env: Vec<(&'static str, String)>,
    shim: Option<PathBuf>,
    program: Vec<OsString>,
}

fn parse(args: &[String]) -> Result<Option<Args>, String> {
    let mut a = Args::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--seed" => {
                let v = value("--seed")?;
                v.parse::<u64>()
                    .map_err(|_| format!("--seed {v:?} is not a number"))?;
                a.env.push(("VERBSIM_SEED", v));
            }
            "--devices" => {
                let v = value("--devices")?;
                for name in v.split(',') {
                    if backend_sim::DeviceProfile::by_name(name).is_none() {
                        return Err(format!(
                            "--devices: unknown profile {name:?} (cx6, cx7, rxe)"
                        ));
                    }
                }
                a.env.push(("VERBSIM_DEVICES", v));
            }
            "--trace" => a.env.push(("VERBSIM_TRACE", value("--trace")?)),
            "--chrome-trace" => a
                .env
                .push(("VERBSIM_CHROME_TRACE", value("--chrome-trace")?)),
            "--faults" => a.env.push(("VERBSIM_FAULTS", value("--faults")?)),
            "--log" => a.env.push(("VERBSIM_SHIM_LOG", "1".into())),
            "--fabric" => {
                let v = value("--fabric")?;
                if v.is_empty() {
                    return Err("--fabric needs a name or a socket path".into());
                }
                a.env.push(("VERBSIM_FABRIC", fabric_socket(&v)?));
                let exe = std::env::current_exe()
                    .map_err(|e| format!("--fabric: cannot find this executable: {e}"))?;
                a.env
                    .push(("VERBSIM_FABRIC_CMD", exe.to_string_lossy().into_owned()));
            }
            "--shim" => a.shim = Some(value("--shim")?.into()),
            "--" => {
                a.program = it.map(OsString::from).collect();
                break;
            }
            other if other.starts_with('-') => return Err(format!("unknown option {other}")),
            other => {
                a.program.push(other.into());
                a.program.extend(it.map(OsString::from));
                break;
            }
        }
    }
    if a.program.is_empty() {
        return Err("no program given (verbsim exec [OPTIONS] -- PROGRAM [ARGS...])".into());
    }
    Ok(Some(a))
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

pub(crate) fn main(args: &[String]) -> ExitCode {
    let a = match crate::parsed_or_exit("exec", HELP, parse(args)) {
        Ok(a) => a,
        Err(code) => return code,
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
    let mut cmd = Command::new(&a.program[0]);
    cmd.args(&a.program[1..]).env("LD_LIBRARY_PATH", path);
    for (k, v) in &a.env {
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

    #[test]
    fn parses_options_and_program() {
        let args: Vec<String> = [
            "--seed",
            "7",
            "--devices",
            "cx6,rxe",
            "--log",
            "--",
            "prog",
            "-x",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let a = parse(&args).unwrap().unwrap();
        assert_eq!(
            a.program,
            vec![OsString::from("prog"), OsString::from("-x")]
        );
        assert!(a.env.contains(&("VERBSIM_SEED", "7".into())));
        assert!(a.env.contains(&("VERBSIM_DEVICES", "cx6,rxe".into())));
        assert!(a.env.contains(&("VERBSIM_SHIM_LOG", "1".into())));
        let a = parse(&["--fabric".to_string(), "ci".into(), "p".into()])
            .unwrap()
            .unwrap();
        let want = user_dir().unwrap().join("verbsim-fabric-ci.sock");
        assert!(a
            .env
            .contains(&("VERBSIM_FABRIC", want.to_string_lossy().into_owned())));
        assert!(a.env.iter().any(|(k, _)| *k == "VERBSIM_FABRIC_CMD"));
    }

    /// Goal: the socket directory is one only this user can enter. Method:
    /// a runtime directory others may enter is passed over for
    /// `TMP/verbsim-UID` (made 0700); a private one is taken; a
    /// `TMP/verbsim-UID` others may enter, or a link, is refused.
    #[test]
    fn the_socket_directory_is_the_users_alone() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = std::env::temp_dir().join(format!("verbsim-exec-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        let me = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap());
        let private = |p: &Path| {
            let m = std::fs::symlink_metadata(p).map_err(|e| e.to_string())?;
            let mode = std::os::unix::fs::MetadataExt::mode(&m);
            if m.file_type().is_dir() && mode & 0o077 == 0 {
                Ok(())
            } else {
                Err(format!("{} is open to others or no directory", p.display()))
            }
        };
        let runtime = tmp.join("run");
        std::fs::create_dir(&runtime).unwrap();
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o755)).unwrap();
        let d = user_dir_in(Some(runtime.clone().into()), &tmp, me, private).unwrap();
        assert_eq!(d, tmp.join(format!("verbsim-{me}")));
        let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(
            user_dir_in(Some(runtime.clone().into()), &tmp, me, private).unwrap(),
            runtime
        );
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(user_dir_in(None, &tmp, me, private).is_err());
        std::fs::remove_dir(&d).unwrap();
        std::os::unix::fs::symlink(&runtime, &d).unwrap();
        assert!(user_dir_in(None, &tmp, me, private).is_err());
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn rejects_bad_input() {
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(parse(&s(&["--seed", "x", "--", "p"]))
            .unwrap_err()
            .contains("--seed"));
        assert!(parse(&s(&["--devices", "cx9", "--", "p"]))
            .unwrap_err()
            .contains("cx9"));
        assert!(parse(&s(&["--"])).unwrap_err().contains("no program"));
        assert!(parse(&s(&["--bogus"])).unwrap_err().contains("--bogus"));
        assert!(parse(&s(&["--fabric", "", "p"]))
            .unwrap_err()
            .contains("--fabric"));
    }
}
