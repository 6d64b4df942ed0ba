//! `verbsim fabric`: runs `verbsim-fabric`, the shared fabric's server,
//! from the directory of this executable (`cargo build` puts both there).
//! The server lives in the drop-in library's package and is a binary of its
//! own: linking it into this command would give it the library's `ibv_*`
//! definitions, and backend-hw's calls here would bind to those.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

/// Where `verbsim-fabric` is: `$VERBSIM_FABRIC_BIN`, or next to this executable.
fn server() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("VERBSIM_FABRIC_BIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let p = exe.with_file_name("verbsim-fabric");
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!(
            "{} does not exist: build it with `cargo build -p verbsim-shim` (same profile)",
            p.display()
        ))
    }
}

/// The command line of `verbsim fabric`: handed to `verbsim-fabric` as it
/// is (`verbsim fabric --help` prints the server's options).
#[derive(Debug, clap::Args)]
#[command(disable_help_flag = true)]
pub(crate) struct FabricArgs {
    /// The server's arguments: --socket PATH [--exit-when-idle] [--pace wall|virtual].
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    args: Vec<std::ffi::OsString>,
}

/// Runs `verbsim fabric ARGS` (`--help` for its options).
pub(crate) fn main(a: FabricArgs) -> ExitCode {
    match server() {
        Ok(p) => {
            let err = Command::new(&p).args(&a.args).exec();
            eprintln!("verbsim fabric: cannot run {}: {err}", p.display());
            ExitCode::from(127)
        }
        Err(why) => {
            eprintln!("verbsim fabric: {why}");
            ExitCode::from(crate::EXIT_USAGE)
        }
    }
}
