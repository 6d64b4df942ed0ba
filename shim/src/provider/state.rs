//! The one simulated world of this process, and the C objects handed out
//! over it.
//!
//! Every object the library gives to C is a heap allocation with the exact
//! layout of rdma-core's headers ([`crate::sys`]); its address is the key
//! of [`Shim::objects`], which maps it to the simulator's handle. A pointer
//! C passes back is looked up there before anything reads through it, so an
//! unknown, freed or NULL pointer is `EINVAL`, never a crash.

use core::ffi::c_char;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::{Mutex, MutexGuard};

use backend_sim::*;
use verbs_api::*;

use crate::config::ShimConfig;
use crate::provider::fds::set_fd;

/// What a pointer handed to C stands for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Obj {
    /// `struct ibv_context` (inside its `verbs_context`).
    Context(ContextHandle),
    /// `struct ibv_pd`.
    Pd(PdHandle),
    /// `struct ibv_mr`.
    Mr(MrHandle),
    /// `struct ibv_cq` / `struct ibv_cq_ex` (one allocation).
    Cq(CqHandle),
    /// `struct ibv_comp_channel`.
    Channel(CompChannelHandle),
    /// `struct ibv_srq`.
    Srq(SrqHandle),
    /// `struct ibv_qp` / `struct ibv_qp_ex` (one allocation).
    Qp(QpHandle),
    /// `struct ibv_ah`.
    Ah(AhHandle),
    /// `struct ibv_xrcd`.
    Xrcd(XrcdHandle),
    /// `struct ibv_mw`.
    Mw(MwHandle),
    /// A parent domain (`ibv_alloc_parent_domain`): a `struct ibv_pd` of
    /// its own that stands for the protection domain it contains.
    ParentDomain(PdHandle),
    /// `struct ibv_dm`.
    Dm(DmHandle),
}

/// Per-object data the shim keeps beside the C struct.
#[derive(Debug, Default)]
pub(crate) struct Extra {
    /// For a context: its command fd (a real fd, as rdma-core's `cmd_fd`).
    pub(crate) fd: i32,
    /// For a context: its async-event eventfd.
    pub(crate) async_fd: i32,
    /// For a DM: its length in bytes (the copy functions check their
    /// range against it before they touch the caller's buffer).
    pub(crate) dm_len: u64,
}

/// A live object: what it is and the shim's data about it.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) obj: Obj,
    pub(crate) extra: Extra,
}

/// The process's world and the registry of handed-out pointers.
pub(crate) struct Shim {
    /// The world: this process's own, or the shared fabric's.
    pub(crate) sim: crate::fabric::engine::Engine,
    pub(crate) config: ShimConfig,
    /// Live C objects, by address.
    pub(crate) objects: BTreeMap<usize, Entry>,
    /// `struct ibv_device`s: allocated once, alive for the process.
    pub(crate) devices: Vec<usize>,
    /// Arrays `ibv_get_device_list` returned and `ibv_free_device_list` has not freed.
    pub(crate) device_lists: BTreeMap<usize, usize>,
    /// The C pointer of each simulator handle, for completions and events.
    pub(crate) qp_ptrs: BTreeMap<QpHandle, usize>,
    pub(crate) cq_ptrs: BTreeMap<CqHandle, usize>,
    pub(crate) srq_ptrs: BTreeMap<SrqHandle, usize>,
    pub(crate) ctx_ptrs: BTreeMap<ContextHandle, usize>,
    pub(crate) pd_ptrs: BTreeMap<PdHandle, usize>,
    /// Contexts, PDs and MRs handed out by `ibv_import_*`: further handles
    /// on objects that live on (closing them frees only the handle).
    pub(crate) aliases: std::collections::BTreeSet<usize>,
    /// rdma_cm ids and event channels (librdmacm), by simulator handle.
    pub(crate) cm: crate::provider::records::CmState,
    /// The fds kept readable while events are pending.
    pub(crate) fds: crate::provider::fds::Fds,
    /// Async events handed out and not yet acknowledged.
    pub(crate) async_unacked: crate::provider::records::AsyncLedger,
    /// Reused by `ibv_poll_cq`.
    pub(crate) wc_scratch: Vec<Wc>,
    /// Reused by `ibv_post_send`, `ibv_post_recv` and `ibv_post_srq_recv`.
    pub(crate) post_scratch: crate::provider::records::PostScratch,
    /// Inline-data bounce MRs, by QP pointer.
    pub(crate) bounces: BTreeMap<usize, crate::provider::records::Bounce>,
    /// Parent domains: the `ibv_pd` the program got → the protection
    /// domain's `ibv_pd` it contains.
    pub(crate) parents: BTreeMap<usize, usize>,
    /// QPs and CQs created on a parent domain: object → parent domain.
    pub(crate) parent_users: BTreeMap<usize, usize>,
}

// SAFETY: the raw addresses the shim keeps are plain integers; the
// simulator's external memories promise Send themselves.
unsafe impl Send for Shim {}

static SHIM: Mutex<Option<Shim>> = Mutex::new(None);

thread_local! {
    /// The lock `fork_prepare` took, held across `fork()` by the forking thread.
    static FORK_GUARD: core::cell::RefCell<Option<MutexGuard<'static, Option<Shim>>>> =
        const { core::cell::RefCell::new(None) };
}

/// Before `fork()`: take the shim's lock, so no other thread is inside a
/// verb when the address space is copied (a child would otherwise inherit
/// a lock nobody releases). The child gets a copy of the world as it was.
extern "C" fn fork_prepare() {
    let g = lock();
    FORK_GUARD.with(|f| *f.borrow_mut() = Some(g));
}

/// After `fork()`, in the parent and in the child: release the lock.
extern "C" fn fork_release() {
    FORK_GUARD.with(|f| drop(f.borrow_mut().take()));
}

/// Runs `f` on the process's shim, creating the world on first use.
pub(crate) fn with<R>(f: impl FnOnce(&mut Shim) -> R) -> R {
    let mut g = lock();
    let shim = g.get_or_insert_with(Shim::new);
    f(shim)
}

/// The lock (a panic caught at the boundary poisons it; the state is still
/// the best there is, so the poison is cleared).
pub(crate) fn lock() -> MutexGuard<'static, Option<Shim>> {
    SHIM.lock().unwrap_or_else(|p| {
        SHIM.clear_poison();
        p.into_inner()
    })
}

impl Shim {
    fn new() -> Self {
        let config = ShimConfig::from_env();
        let sim = match std::env::var_os(crate::fabric::FABRIC_ENV) {
            Some(path) if !path.is_empty() => {
                crate::fabric::engine::Engine::Remote(crate::fabric::client::Remote::new(
                    path.into(),
                    std::env::var("VERBSIM_FABRIC_CMD").ok().as_deref(),
                ))
            }
            _ => crate::fabric::engine::Engine::Local(Box::new(SimVerbs::new(config.sim.clone()))),
        };
        let mut shim = Self {
            sim,
            config,
            objects: BTreeMap::new(),
            devices: Vec::new(),
            device_lists: BTreeMap::new(),
            qp_ptrs: BTreeMap::new(),
            cq_ptrs: BTreeMap::new(),
            srq_ptrs: BTreeMap::new(),
            ctx_ptrs: BTreeMap::new(),
            pd_ptrs: BTreeMap::new(),
            aliases: std::collections::BTreeSet::new(),
            cm: crate::provider::records::CmState::default(),
            fds: crate::provider::fds::Fds::default(),
            async_unacked: Vec::new(),
            wc_scratch: Vec::new(),
            post_scratch: Default::default(),
            bounces: BTreeMap::new(),
            parents: BTreeMap::new(),
            parent_users: BTreeMap::new(),
        };
        // On the shared fabric, the fabric's own environment sets faults.
        for &(action, ppm) in &shim.config.faults {
            if shim.sim.is_remote() {
                break;
            }
            let _ = shim.sim.sim_control(SimCommand::Fault {
                scope: FaultScope::All,
                action,
                when: FaultWhen::RatePpm(ppm),
            });
        }
        if shim.config.trace_file.is_some() || shim.config.sim.chrome_trace.is_some() {
            // SAFETY: registers a plain extern "C" fn with no arguments.
            unsafe { libc::atexit(write_trace_at_exit) };
        }
        // SAFETY: registers plain extern "C" fns with no arguments; they
        // only take and release the shim's lock (see `fork_prepare`).
        unsafe { libc::pthread_atfork(Some(fork_prepare), Some(fork_release), Some(fork_release)) };
        shim.devices = make_devices(&mut shim);
        start_watcher();
        shim
    }

    /// Registers a C object.
    pub(crate) fn add(&mut self, ptr: *mut c_void, obj: Obj) {
        self.objects.insert(
            ptr as usize,
            Entry {
                obj,
                extra: Extra::default(),
            },
        );
    }

    /// The entry of a pointer C passed, if the shim handed it out and it lives.
    pub(crate) fn get(&self, ptr: *const c_void) -> Option<&Entry> {
        self.objects.get(&(ptr as usize))
    }

    /// Mutable [`Shim::get`].
    pub(crate) fn get_mut(&mut self, ptr: *const c_void) -> Option<&mut Entry> {
        self.objects.get_mut(&(ptr as usize))
    }
}

/// Whether any completion channel exists (then the world runs to idle
/// after posts, so channel fds reflect what the NIC would have delivered).
pub(crate) fn any_channel(shim: &Shim) -> bool {
    shim.fds.any_channel() || !shim.cm.channels.is_empty()
}

/// Writes the trace to `VERBSIM_TRACE` and the Chrome trace-event JSON to
/// `VERBSIM_CHROME_TRACE` when the process exits. The world lives in a
/// static that is never dropped, so `SimConfig::chrome_trace` (written
/// when a `SimVerbs` drops) would never be written without this.
extern "C" fn write_trace_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        let g = lock();
        if let Some(shim) = g.as_ref() {
            let Some(sim) = shim.sim.local() else { return };
            let files = [
                (&shim.config.trace_file, false),
                (&shim.config.sim.chrome_trace, true),
            ];
            for (path, chrome) in files {
                let Some(path) = path else { continue };
                let text = if chrome {
                    sim.trace().to_chrome_json()
                } else {
                    sim.trace().to_string()
                };
                if let Err(e) = std::fs::write(path, text) {
                    eprintln!(
                        "verbsim shim: cannot write the trace to {}: {e}",
                        path.display()
                    );
                }
            }
        }
    });
}

/// A failed verb: its name, errno and why (logged if asked).
#[derive(Debug)]
pub(crate) struct Fail {
    pub(crate) errno: i32,
}

impl Fail {
    /// A failure with `errno`, logged under `verb` with `why`.
    pub(crate) fn new(verb: &str, errno: i32, why: impl core::fmt::Display) -> Self {
        crate::guard::log_err(verb, errno, &why);
        Self { errno }
    }

    /// A simulator error, logged under `verb`.
    pub(crate) fn sim(verb: &str, e: &Error) -> Self {
        let errno = e.errno();
        crate::guard::log_err(verb, errno, e);
        Self { errno }
    }

    /// `EINVAL` for a pointer the shim never handed out (or already freed).
    pub(crate) fn bad_ptr(verb: &str, what: &str, p: *const c_void) -> Self {
        Self::new(
            verb,
            libc::EINVAL,
            format!("{what} {p:p} is not a live object of this library"),
        )
    }
}

/// A verb's result at the boundary.
pub(crate) type Res<T> = core::result::Result<T, Fail>;

/// The libibverbs convention for `int` verbs: 0 or a positive errno,
/// which is also left in `errno`: libibverbs' verbs fail through a system
/// call (the provider's command to the kernel) that sets it, and programs
/// `perror` after a failed verb.
pub(crate) fn ret_int(r: Res<()>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(f) => {
            crate::guard::set_errno(f.errno);
            f.errno
        }
    }
}

/// The convention for pointer verbs: the object, or NULL with `errno` set.
pub(crate) fn ret_ptr<T>(r: Res<*mut T>) -> *mut T {
    match r {
        Ok(p) => p,
        Err(f) => {
            crate::guard::set_errno(f.errno);
            core::ptr::null_mut()
        }
    }
}

/// Extension: map a simulator result into a boundary result under `verb`.
pub(crate) trait SimRes<T> {
    /// See the trait.
    fn at(self, verb: &str) -> Res<T>;
}

impl<T> SimRes<T> for Result<T> {
    fn at(self, verb: &str) -> Res<T> {
        self.map_err(|e| Fail::sim(verb, &e))
    }
}

/// Allocates a zeroed C struct on the heap and leaks it to C.
pub(crate) fn alloc_zeroed<T: Default>() -> *mut T {
    Box::into_raw(Box::<T>::default())
}

/// Frees what [`alloc_zeroed`] made.
///
/// # Safety
/// `p` came from `alloc_zeroed::<T>` and is freed once.
pub(crate) unsafe fn free<T>(p: *mut T) {
    // SAFETY: the caller's contract: `p` is a live Box allocation of T.
    drop(unsafe { Box::from_raw(p) });
}

/// `sys` re-exported for the verb modules.
pub(crate) use crate::sys as c;

/// Sets every CM channel fd from the simulator's pending events.
pub(crate) fn sync_fds(shim: &mut Shim) {
    let world = &shim.sim;
    for ch in shim.cm.channels.values_mut() {
        let on = world.cm_channel_pending(ch.handle).unwrap_or(0) > 0;
        set_fd(ch.fd, &mut ch.signaled, on);
    }
}

/// Sets every watched fd from the simulator's pending events.
pub(crate) fn sync(shim: &mut Shim) {
    let world = &shim.sim;
    for w in shim.fds.channels.values_mut() {
        let on = world.comp_channel_pending(w.handle).unwrap_or(0) > 0;
        set_fd(w.fd, &mut w.signaled, on);
    }
    for w in shim.fds.contexts.values_mut() {
        let on = world.async_pending(w.handle).unwrap_or(0) > 0;
        set_fd(w.fd, &mut w.signaled, on);
    }
    sync_fds(shim);
}

/// How often [`start_watcher`]'s thread brings the fds in step.
const WATCH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(10);

/// Starts (once per process) a thread that keeps every watched fd in step
/// with the world, so a program that `poll`s, `select`s or `epoll`s an fd
/// (a context's `async_fd` above all, which no other call of the program
/// refreshes when it has no completion channel) learns of an event without
/// calling the library: on the shared fabric another process's verbs or
/// the fabric's timers make events, and in process the program's own verbs
/// do. The thread only reads pending counts and sets the eventfds; it
/// never moves the world (in process, time still moves only in verbs, so
/// runs stay reproducible). A forked child has no such thread.
pub(crate) fn start_watcher() {
    static STARTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if STARTED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("verbsim-fds".into())
        .spawn(|| loop {
            std::thread::sleep(WATCH_INTERVAL);
            // A panic here must not end the thread with the lock held
            // poisoned for the program: it is caught, and the next turn
            // tries again (lock() clears a poison).
            let _ = std::panic::catch_unwind(|| {
                let mut g = lock();
                if let Some(shim) = g.as_mut() {
                    if !shim.fds.channels.is_empty()
                        || !shim.fds.contexts.is_empty()
                        || !shim.cm.channels.is_empty()
                    {
                        sync(shim);
                    }
                }
            });
        });
    if spawned.is_err() {
        STARTED.store(false, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Allocates one `struct ibv_device` per simulated device.
pub(crate) fn make_devices(shim: &mut Shim) -> Vec<usize> {
    let list = shim.sim.get_device_list().unwrap_or_default();
    list.iter()
        .enumerate()
        .map(|(i, d)| {
            let dev = alloc_zeroed::<c::ibv_device>();
            // SAFETY: `dev` was just allocated, zeroed, and is not shared yet.
            let r = unsafe { &mut *dev };
            r.node_type = c::IBV_NODE_CA;
            r.transport_type = c::IBV_TRANSPORT_IB;
            put_str(&mut r.name, &d.name);
            put_str(&mut r.dev_name, &format!("uverbs{i}"));
            put_str(
                &mut r.dev_path,
                &format!("/sys/class/infiniband_verbs/uverbs{i}"),
            );
            put_str(
                &mut r.ibdev_path,
                &format!("/sys/class/infiniband/{}", d.name),
            );
            dev as usize
        })
        .collect()
}

/// Copies `s` into a C char array, NUL-terminated and truncated to fit.
pub(crate) fn put_str(dst: &mut [c_char], s: &str) {
    let n = s.len().min(dst.len().saturating_sub(1));
    for (d, b) in dst.iter_mut().zip(s.as_bytes()[..n].iter()) {
        *d = *b as c_char;
    }
    if let Some(end) = dst.get_mut(n) {
        *end = 0;
    }
}

/// The handle behind a C pointer, if it is a live object of kind `$kind`.
/// A PD may also be a parent domain: it stands for the PD it contains.
macro_rules! handle_of {
    ($shim:expr, $verb:expr, $ptr:expr, Pd, $what:literal) => {
        match $shim.get(($ptr) as *const core::ffi::c_void).map(|e| e.obj) {
            Some(Obj::Pd(h) | Obj::ParentDomain(h)) => Ok(h),
            _ => Err(Fail::bad_ptr(
                $verb,
                $what,
                ($ptr) as *const core::ffi::c_void,
            )),
        }
    };
    ($shim:expr, $verb:expr, $ptr:expr, $kind:ident, $what:literal) => {
        match $shim.get(($ptr) as *const core::ffi::c_void).map(|e| e.obj) {
            Some(Obj::$kind(h)) => Ok(h),
            _ => Err(Fail::bad_ptr(
                $verb,
                $what,
                ($ptr) as *const core::ffi::c_void,
            )),
        }
    };
}
pub(crate) use handle_of;
