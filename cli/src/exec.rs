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
                      for /tmp/verbsim-fabric-NAME.sock), starting it if
                      nobody has: programs run this way with the same NAME
                      reach each other (server and client as two processes)
  --log               log every failing verb (name, errno, why) to stderr
  --shim PATH         the shim to load (default: libverbsim_shim.so next to
                      this executable, or $VERBSIM_SHIM)
  --no-device-files   do not show the simulated devices as files: by default
                      the program runs in a private mount namespace (and a
                      user namespace when not root) where /dev/infiniband/
                      uverbsN and /sys/class/infiniband/<dev> exist, as
                      programs such as UCX look for them
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
    no_device_files: bool,
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
                a.env.push(("VERBSIM_FABRIC", fabric_socket(&v)));
                let exe = std::env::current_exe()
                    .map_err(|e| format!("--fabric: cannot find this executable: {e}"))?;
                a.env
                    .push(("VERBSIM_FABRIC_CMD", exe.to_string_lossy().into_owned()));
            }
            "--shim" => a.shim = Some(value("--shim")?.into()),
            "--no-device-files" => a.no_device_files = true,
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

/// The socket of fabric `name`: a path as given, a bare name under /tmp.
pub(crate) fn fabric_socket(name: &str) -> String {
    if name.contains('/') {
        name.to_owned()
    } else {
        format!("/tmp/verbsim-fabric-{name}.sock")
    }
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
        assert!(a
            .env
            .contains(&("VERBSIM_FABRIC", "/tmp/verbsim-fabric-ci.sock".into())));
        assert!(a.env.iter().any(|(k, _)| *k == "VERBSIM_FABRIC_CMD"));
        assert!(!a.no_device_files, "device files are on by default");
        let a = parse(&["--no-device-files".to_string(), "p".into()])
            .unwrap()
            .unwrap();
        assert!(a.no_device_files);
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
