//! One simulated fabric shared by processes (issue #15).
//!
//! With `VERBSIM_FABRIC=<socket path>` the library keeps no world of its
//! own: its verbs go to the fabric process (`verbsim fabric`), which owns
//! the only [`backend_sim::World`] and serves each connected process as a
//! session, as the kernel serves a uverbs file:
//!
//! * **Calls** (`rpc`, `transport`, `dispatch`; `extra` beside the
//!   trait's verbs): one message per control verb over a Unix stream
//!   socket, framed as a little-endian `u32` length and postcard bytes;
//!   the reply is the verb's `Result` with what the verb writes back (and,
//!   for the calls that set up shared queues, descriptors by SCM_RIGHTS).
//! * **Queues in shared memory** (`fast`, `queues`, `cqring`, `sqring`,
//!   `shm`): `ibv_poll_cq` reads a ring the fabric fills with the CQ's
//!   completions; `ibv_post_send` / `ibv_post_recv` are checked in the
//!   program's process with the world's own post-time rules, written into
//!   a submission ring and announced by an eventfd doorbell, with no reply.
//! * **Memory**: MRs name the client's own buffers; the fabric reads and
//!   writes them with `process_vm_readv`/`process_vm_writev` when the NIC
//!   model touches them, whatever the client is doing (a receiver spinning
//!   on its buffer sees the WRITE land).
//! * **Time**: the fabric caps virtual time at the wall-clock time since it
//!   started, so timers take as long as on a wire while peers catch up.
//! * **Sessions**: everything a process creates belongs to its connection
//!   and is destroyed when the connection closes (exit, crash or kill), so
//!   its peers see what a vanished node gives on hardware: their requests
//!   time out with `IBV_WC_RETRY_EXC_ERR`.
//! * **Isolation**: a process and the children it forks (which present the
//!   family token it was given, inherited in memory) reach only their own
//!   objects: any other handle is `EINVAL` (`Session::check` in `server`);
//!   registration checks the pages (`EFAULT`); the socket is the user's
//!   own and peers of another uid are refused; no client can stall another
//!   (non-blocking reads, a deadline per frame). docs/drop-in.md
//!   ("Isolation and failure model") states the guarantees.
//!
//! docs/architecture.md ("One fabric across processes") gives the design,
//! its cost per verb, and where runs stop being reproducible.

pub(crate) mod client;
pub(crate) mod cqring;
pub(crate) mod dispatch;
pub(crate) mod engine;
pub(crate) mod extra;
pub(crate) mod family;
pub(crate) mod fast;
pub(crate) mod fastwr;
pub mod floor;
#[cfg(test)]
mod hostile;
pub(crate) mod memory;
pub(crate) mod pace;
pub(crate) mod poller;
pub(crate) mod queues;
pub(crate) mod remote;
pub(crate) mod rpc;
pub(crate) mod serve_extra;
pub(crate) mod serve_posts;
pub mod server;
pub(crate) mod shm;
pub(crate) mod sqring;
pub(crate) mod transport;
pub(crate) mod wire;

use serde::{Deserialize, Serialize};
use verbs_api::{Error, ErrorKind, Verb};

/// The environment variable naming the fabric's socket.
pub const FABRIC_ENV: &str = "VERBSIM_FABRIC";

static REMOTE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this process's verbs go to a shared fabric.
pub(crate) fn is_remote() -> bool {
    REMOTE.load(std::sync::atomic::Ordering::Relaxed)
}

/// The first frame a process sends: which family it belongs to.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Hello {
    /// [`PROTOCOL`].
    pub(crate) protocol: u32,
    /// The family token of the process this one was forked from, if any.
    pub(crate) family: Option<[u8; 16]>,
}

/// The wire protocol's version: a process and a fabric of different
/// builds refuse each other at the first frame.
pub(crate) const PROTOCOL: u32 = 2;

/// The largest message either side accepts (a longer length prefix is
/// garbage: the connection is closed).
pub(crate) const MAX_FRAME: usize = 64 << 20;

/// Encodes a value as postcard bytes (encoding our own types cannot fail;
/// if it ever did, the bytes are empty and the reader reports garbage).
pub(crate) fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    postcard::to_allocvec(v).unwrap_or_default()
}

/// The error for a verb the shared fabric does not serve.
pub(crate) fn not_served(verb: Verb) -> Error {
    Error::new(
        verb,
        ErrorKind::Unsupported,
        format!(
            "{} is not served over the shared fabric ({FABRIC_ENV}) yet; run without it for an in-process world",
            verb.c_name()
        ),
    )
}

/// The error for a broken connection to the fabric.
pub(crate) fn lost(verb: Verb, why: &str) -> Error {
    Error::from_errno(
        verb,
        libc::EIO,
        format!("the shared fabric ({FABRIC_ENV}) is unreachable: {why}"),
    )
}

/// Writes one frame.
pub(crate) fn write_frame(w: &mut impl std::io::Write, bytes: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(bytes.len())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "frame too long"))?;
    let mut buf = Vec::with_capacity(4 + bytes.len());
    buf.extend_from_slice(&len.to_le_bytes());
    buf.extend_from_slice(bytes);
    w.write_all(&buf)
}

/// Reads one frame (refusing lengths over [`MAX_FRAME`]).
pub(crate) fn read_frame(r: &mut impl std::io::Read) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("frame of {len} bytes (at most {MAX_FRAME})"),
        ));
    }
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf)?;
    Ok(buf)
}
