//! The library's side of the shared fabric: one connection per process,
//! a blocking call per verb, the fabric started on demand.

use std::cell::RefCell;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use verbs_api::Result;

use super::rpc::Call;
use super::{lost, read_frame, write_frame, Hello, PROTOCOL};

/// How long a process waits for a fabric it started to listen.
const START_WAIT: Duration = Duration::from_secs(10);

/// The connection to the fabric.
#[derive(Debug)]
pub(crate) struct Remote {
    path: PathBuf,
    /// The stream and the pid that opened it: a forked child opens its own
    /// (the parent's stream carries the parent's calls).
    conn: RefCell<Option<(UnixStream, libc::pid_t)>>,
    /// The family's token the fabric gave: a forked child inherits it with
    /// this memory and presents it to reach its parent's objects (after
    /// `exec` it is gone, as a uverbs fd opened `O_CLOEXEC` is).
    family: RefCell<Option<[u8; 16]>>,
    /// The queues this process shares with the fabric (`fast`).
    pub(crate) fast: RefCell<Box<super::queues::Queues>>,
}

impl Remote {
    /// Connects to the fabric at `path`, starting it with `start` (the
    /// `verbsim` command, `VERBSIM_FABRIC_CMD`) if nobody listens yet.
    pub(crate) fn connect(path: PathBuf, start: Option<&str>) -> std::io::Result<Self> {
        let stream = match open(&path) {
            Ok(s) => s,
            Err(first) => {
                let Some(cmd) = start else {
                    return Err(first);
                };
                if first.kind() == std::io::ErrorKind::PermissionDenied {
                    return Err(first);
                }
                spawn_fabric(cmd, &path)?;
                let t0 = Instant::now();
                loop {
                    match open(&path) {
                        Ok(s) => break s,
                        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                            return Err(e)
                        }
                        Err(e) if t0.elapsed() > START_WAIT => return Err(e),
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            }
        };
        let mut stream = stream;
        let token = greet(&mut stream, None)?;
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        super::queues::watch_forks();
        Ok(Self {
            path,
            conn: RefCell::new(Some((stream, pid))),
            family: RefCell::new(Some(token)),
            fast: RefCell::default(),
        })
    }

    /// [`Remote::connect`], or a connection whose every call fails with
    /// `EIO` saying why (said once on stderr too): the library cannot
    /// refuse to load.
    pub(crate) fn new(path: PathBuf, start: Option<&str>) -> Self {
        super::REMOTE.store(true, std::sync::atomic::Ordering::Relaxed);
        match Self::connect(path.clone(), start) {
            Ok(r) => r,
            Err(e) => {
                eprintln!(
                    "verbsim shim: cannot reach the shared fabric at {} ({}): {e}",
                    path.display(),
                    super::FABRIC_ENV
                );
                Self {
                    path,
                    conn: RefCell::new(None),
                    family: RefCell::new(None),
                    fast: RefCell::default(),
                }
            }
        }
    }

    /// One call: the verb's result as the fabric gives it, or `EIO` when
    /// the fabric is gone.
    pub(crate) fn call<T: DeserializeOwned>(&self, call: &Call) -> Result<T> {
        let verb = call.verb();
        let (reply, _) = self.call_raw(call)?;
        postcard::from_bytes::<Result<T>>(&reply)
            .unwrap_or_else(|e| Err(lost(verb, &format!("a reply it could not read: {e}"))))
    }

    /// [`Remote::call`] whose reply may carry a descriptor (a shared
    /// region the fabric made).
    pub(crate) fn call_fd<T: DeserializeOwned>(&self, call: &Call) -> Result<(T, Vec<OwnedFd>)> {
        let verb = call.verb();
        let (reply, fds) = self.call_raw(call)?;
        let r = postcard::from_bytes::<Result<T>>(&reply)
            .unwrap_or_else(|e| Err(lost(verb, &format!("a reply it could not read: {e}"))))?;
        Ok((r, fds))
    }

    /// Sends `call` and reads its reply frame, with any descriptors that
    /// came with it.
    fn call_raw(&self, call: &Call) -> Result<(Vec<u8>, Vec<OwnedFd>)> {
        let verb = call.verb();
        if super::queues::stales_snapshots(call) {
            self.fast.borrow_mut().forget_snapshots();
        }
        let bytes = super::encode(call);
        let mut conn = self.conn.borrow_mut();
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        if conn.as_ref().is_none_or(|(_, pid)| *pid != me) {
            let mut s = open(&self.path)
                .map_err(|e| lost(verb, &format!("{}: {e}", self.path.display())))?;
            let parent = *self.family.borrow();
            let token = greet(&mut s, parent).map_err(|e| lost(verb, &e.to_string()))?;
            *self.family.borrow_mut() = Some(token);
            *conn = Some((s, me));
        }
        let Some((stream, _)) = conn.as_mut() else {
            return Err(lost(verb, "no connection"));
        };
        write_frame(stream, &bytes)
            .and_then(|()| read_frame_fds(stream))
            .map_err(|e| {
                let err = lost(verb, &e.to_string());
                *conn = None;
                err
            })
    }
}

/// Reads one frame and the descriptors sent with it.
fn read_frame_fds(s: &mut UnixStream) -> std::io::Result<(Vec<u8>, Vec<OwnedFd>)> {
    use std::io::Read;
    let mut len = [0u8; 4];
    let mut got = 0;
    let mut fds = Vec::new();
    while got < 4 {
        let (n, more) = super::shm::recv_with_fds(s.as_raw_fd(), &mut len[got..])?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        got += n;
        fds.extend(more);
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > super::MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("frame of {len} bytes (at most {})", super::MAX_FRAME),
        ));
    }
    let mut buf = vec![0u8; len];
    s.read_exact(&mut buf)?;
    Ok((buf, fds))
}

/// Connects to the fabric's socket after checking that it is this user's:
/// the socket file is owned by us, and the process listening on it runs
/// as us (another user could have made either first). Then gives that
/// process, and only it, leave to reach our memory.
pub(crate) fn open(path: &Path) -> std::io::Result<UnixStream> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let meta = std::fs::symlink_metadata(path)?;
    if meta.uid() != me {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} belongs to uid {}, not to this user (uid {me}): refusing it",
                path.display(),
                meta.uid()
            ),
        ));
    }
    let s = UnixStream::connect(path)?;
    let Some(cred) = super::family::peer_cred(&s) else {
        return Err(std::io::Error::other(
            "the fabric's credentials are unknown",
        ));
    };
    if cred.uid != me {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "the fabric at {} runs as uid {}, not as this user (uid {me}): refusing it",
                path.display(),
                cred.uid
            ),
        ));
    }
    allow_fabric_access(cred.pid);
    // A stalled fabric is as good as gone: a call waits at most this.
    s.set_read_timeout(Some(CALL_WAIT))?;
    s.set_write_timeout(Some(CALL_WAIT))?;
    Ok(s)
}

/// How long a call waits for the fabric before calling it lost.
const CALL_WAIT: Duration = Duration::from_secs(120);

/// The first frame: which family this process joins (`parent`: the token
/// it inherited over fork); the family's token.
fn greet(s: &mut UnixStream, parent: Option<[u8; 16]>) -> std::io::Result<[u8; 16]> {
    let hello = Hello {
        protocol: PROTOCOL,
        family: parent,
    };
    write_frame(s, &super::encode(&hello))?;
    let reply = read_frame(s)?;
    match postcard::from_bytes::<Result<[u8; 16]>>(&reply) {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => Err(std::io::Error::other(e.to_string())),
        Err(e) => Err(std::io::Error::other(format!(
            "the fabric's greeting is unreadable ({e})"
        ))),
    }
}

/// Lets the fabric process (`fabric`, and no other) read and write this
/// process's memory under Yama's `ptrace_scope` 1, where a process that is
/// not our ancestor needs our leave; a no-op elsewhere, and harmless when
/// it fails (root, scope 0).
fn allow_fabric_access(fabric: libc::pid_t) {
    // SAFETY: PR_SET_PTRACER takes an integer (a pid); no memory is passed.
    unsafe { libc::prctl(libc::PR_SET_PTRACER, fabric as libc::c_ulong, 0, 0, 0) };
}

/// Starts `cmd fabric --socket PATH --exit-when-idle` detached (its own
/// session, no inherited stdio), inheriting the environment's
/// `VERBSIM_SEED`, `VERBSIM_DEVICES` and `VERBSIM_FAULTS`.
fn spawn_fabric(cmd: &str, path: &Path) -> std::io::Result<()> {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let log = std::env::var_os("VERBSIM_FABRIC_LOG");
    let mut c = Command::new(cmd);
    c.arg("fabric")
        .arg("--socket")
        .arg(path)
        .arg("--exit-when-idle")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    match log {
        Some(l) => {
            c.stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(l)?,
            );
        }
        None => {
            c.stderr(Stdio::null());
        }
    }
    // SAFETY: setsid is async-signal-safe and touches no memory: the
    // fabric leaves our session, so a signal to our group spares it.
    unsafe {
        c.pre_exec(|| {
            libc::setsid();
            Ok(())
        })
    };
    let mut child = c.spawn()?;
    // Reap it from a thread so it never lingers as a zombie of ours.
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    Ok(())
}
