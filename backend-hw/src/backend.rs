//! [`HwVerbs`] itself: construction, the device list, ownership checks and
//! the QP creation helpers the verbs share.

// Handles wrap `Arc`s although their inners are `!Send`; see `hw.rs`.
#![allow(clippy::arc_with_non_send_sync)]

use core::cell::RefCell;
use core::ffi::c_int;
use core::fmt;
use core::ptr::NonNull;
use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rdma_sys as sys;
use verbs_api::errno::EINVAL;
use verbs_api::*;

use crate::convert::*;
use crate::errors::{c_error, foreign, no_device_error};
use crate::ffi::verbs as fv;
use crate::ffi::verbs::last_errno;
use crate::handles::*;
use crate::xrc_legacy::LegacyXrcRegistry;

// ---------------------------------------------------------------------------
// HwVerbs
// ---------------------------------------------------------------------------

/// The hardware backend: libibverbs (and libmlx5) through rdma-sys and the
/// hand-written `ffi` layer.
///
/// Handles are `Arc`s; each keeps the objects it depends on alive, so C never
/// sees a child outlive its parent. Handles from one `HwVerbs` are refused by
/// another (so two instances cannot hand out aliasing MR slices).
pub struct HwVerbs {
    pub(crate) id: u64,
    /// Legacy XRC receive-QP registrations, kept in the library.
    pub(crate) legacy_xrc: RefCell<LegacyXrcRegistry<HwQp>>,
    /// The device contexts librdmacm opened, by address, as handles
    /// (`rdma_id_info`'s `verbs`).
    pub(crate) cm_contexts: RefCell<std::collections::BTreeMap<usize, HwContext>>,
    /// The device `VERBS_TEST_DEVICE` (or [`HwVerbs::with_device`]) named:
    /// it is index 0 of this backend, the others follow in
    /// `ibv_get_device_list` order.
    pub(crate) preferred: Option<String>,
}

/// The order a backend sees devices in: `preferred` first, the rest in
/// list order; `Err` (naming the devices there are) when `preferred` is
/// not among `names`.
pub(crate) fn device_order(names: &[String], preferred: Option<&str>) -> Result<Vec<usize>> {
    let Some(want) = preferred else {
        return Ok((0..names.len()).collect());
    };
    let Some(first) = names.iter().position(|n| n == want) else {
        return Err(Error::new(
            Verb::GetDeviceList,
            ErrorKind::NoDevice,
            format!("VERBS_TEST_DEVICE={want} names no device here; the devices are {names:?}"),
        ));
    };
    Ok(std::iter::once(first)
        .chain((0..names.len()).filter(|&i| i != first))
        .collect())
}

impl fmt::Debug for HwVerbs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HwVerbs")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Calls `ibv_get_device_list`, runs `f` on the array, frees it.
pub(crate) fn with_device_list<R>(f: impl FnOnce(&[*mut sys::ibv_device]) -> R) -> Result<R> {
    let mut n: c_int = 0;
    // SAFETY: `n` is a valid out-parameter.
    let list = unsafe { sys::ibv_get_device_list(&mut n) };
    if list.is_null() {
        return Err(no_device_error(last_errno()));
    }
    let len = usize::try_from(n).unwrap_or(0);
    // SAFETY: on success the list holds `n` device pointers (NULL-terminated
    // after them) and stays valid until `ibv_free_device_list`.
    let devices = unsafe { core::slice::from_raw_parts(list, len) };
    let r = f(devices);
    // SAFETY: `list` came from `ibv_get_device_list` and is freed once; no
    // borrow of it (`devices`) survives this point.
    unsafe { sys::ibv_free_device_list(list) };
    Ok(r)
}

pub(crate) fn device_info(dev: *mut sys::ibv_device) -> DeviceInfo {
    // SAFETY: `dev` is an entry of a live device list; the name is a
    // NUL-terminated string inside the device struct.
    let name = unsafe { CStr::from_ptr(sys::ibv_get_device_name(dev)) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: as above; returns the GUID in network order.
    let guid = u64::from_be(unsafe { sys::ibv_get_device_guid(dev) });
    DeviceInfo { name, guid }
}

static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

impl HwVerbs {
    /// Opens the hardware backend, checking that the machine has at least
    /// one RDMA device.
    ///
    /// # Errors
    /// [`ErrorKind::NoDevice`] naming the cause: on a machine without the
    /// kernel RDMA subsystem `ibv_get_device_list` fails with `ENOSYS`; on
    /// one without a device it returns an empty list.
    pub fn new() -> Result<Self> {
        let hw = Self::unprobed();
        let n = with_device_list(|d| d.len())?;
        if n == 0 {
            return Err(no_device_error(0));
        }
        Ok(hw)
    }

    /// [`HwVerbs::new`] with the device `name` (as `ibv_devices` lists it)
    /// at index 0: `open_device(0)` opens it, the other devices follow.
    ///
    /// # Errors
    /// As [`HwVerbs::new`]; [`ErrorKind::NoDevice`] listing the devices
    /// when none is called `name`.
    pub fn with_device(name: &str) -> Result<Self> {
        let mut hw = Self::new()?;
        let names = with_device_list(|d| {
            d.iter()
                .map(|&dev| device_info(dev).name)
                .collect::<Vec<_>>()
        })?;
        device_order(&names, Some(name))?;
        hw.preferred = Some(name.to_owned());
        Ok(hw)
    }

    /// The backend `VERBS_TEST_DEVICE` asks for: [`HwVerbs::with_device`]
    /// of `NAME` when it is set (`NAME` or `NAME:1`; only port 1 is used by
    /// the corpus and the workloads, so another port is refused), else
    /// [`HwVerbs::new`].
    ///
    /// # Errors
    /// As those; `EINVAL` for a port other than 1.
    pub fn from_env() -> Result<Self> {
        match std::env::var("VERBS_TEST_DEVICE") {
            Ok(v) if !v.is_empty() => {
                let (name, port) = match v.split_once(':') {
                    Some((n, p)) => (n, Some(p)),
                    None => (v.as_str(), None),
                };
                if let Some(p) = port {
                    if p != "1" {
                        return Err(Error::new(
                            Verb::OpenDevice,
                            ErrorKind::InvalidArgument,
                            format!("VERBS_TEST_DEVICE={v}: port {p}; the corpus and the workloads use port 1 (give NAME or NAME:1)"),
                        ));
                    }
                }
                Self::with_device(name)
            }
            _ => Self::new(),
        }
    }

    /// A backend that has not looked for devices yet (every verb then
    /// reports the missing device itself).
    pub fn unprobed() -> Self {
        Self {
            id: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
            legacy_xrc: RefCell::default(),
            cm_contexts: RefCell::default(),
            preferred: None,
        }
    }

    /// This backend's device order over the live list (`preferred` first).
    pub(crate) fn order(&self, devices: &[*mut sys::ibv_device]) -> Result<Vec<usize>> {
        let names: Vec<String> = if self.preferred.is_some() {
            devices.iter().map(|&d| device_info(d).name).collect()
        } else {
            vec![String::new(); devices.len()]
        };
        device_order(&names, self.preferred.as_deref())
    }

    pub(crate) fn ctx<'a>(
        &self,
        c: &'a HwContext,
        verb: Verb,
    ) -> Result<(*mut sys::ibv_context, &'a Arc<ContextInner>)> {
        Ok((c.0.get(verb, self.id)?, &c.0))
    }

    pub(crate) fn check_owner(&self, ctx: &ContextInner, verb: Verb, what: &str) -> Result<()> {
        if ctx.owner == self.id {
            Ok(())
        } else {
            Err(foreign(verb, what))
        }
    }

    pub(crate) fn make_qp(
        &self,
        verb: Verb,
        p: NonNull<sys::ibv_qp>,
        ctx: &Arc<ContextInner>,
        attr: &QpInitAttrEx<'_, Self>,
        dc_type: Option<DcType>,
    ) -> HwQp {
        // SAFETY: `p` is a QP just returned by the library.
        let qp_num = unsafe { (*p.as_ptr()).qp_num };
        let _ = verb;
        let qp = HwQp(Arc::new(QpInner {
            obj: Owned::new(p, ctx),
            qp_num,
            qp_type: attr.qp_type,
            dc_type,
            _send_cq: attr.send_cq.cloned(),
            _recv_cq: attr.recv_cq.cloned(),
            _srq: attr.srq.cloned(),
            _pd: attr.pd.cloned(),
            _xrcd: attr.xrcd.cloned(),
        }));
        register_qp(&qp);
        qp
    }

    /// Builds the C `ibv_qp_init_attr_ex`, checking every handle.
    pub(crate) fn qp_init_to_c(
        &self,
        verb: Verb,
        attr: &QpInitAttrEx<'_, Self>,
    ) -> Result<sys::ibv_qp_init_attr_ex> {
        let mut c: sys::ibv_qp_init_attr_ex = zeroed();
        c.qp_context = attr.qp_context as usize as *mut _;
        if let Some(cq) = attr.send_cq {
            self.check_owner(&cq.0.obj.ctx, verb, "CQ")?;
            c.send_cq = cq.0.obj.get(verb)?;
        }
        if let Some(cq) = attr.recv_cq {
            self.check_owner(&cq.0.obj.ctx, verb, "CQ")?;
            c.recv_cq = cq.0.obj.get(verb)?;
        }
        if let Some(srq) = attr.srq {
            self.check_owner(&srq.0.obj.ctx, verb, "SRQ")?;
            c.srq = srq.0.obj.get(verb)?;
        }
        if let Some(pd) = attr.pd {
            self.check_owner(&pd.0.obj.ctx, verb, "PD")?;
            c.pd = pd.0.obj.get(verb)?;
        }
        if let Some(x) = attr.xrcd {
            self.check_owner(&x.0.obj.ctx, verb, "XRCD")?;
            c.xrcd = x.0.obj.get(verb)?;
        }
        c.cap = cap_to_c(&attr.cap);
        c.qp_type = attr.qp_type.to_raw();
        c.sq_sig_all = c_int::from(attr.sq_sig_all);
        c.comp_mask = attr.comp_mask.bits();
        c.create_flags = attr.create_flags.bits();
        c.max_tso_header = attr.max_tso_header;
        c.source_qpn = attr.source_qpn;
        c.send_ops_flags = attr.send_ops_flags.bits();
        Ok(c)
    }

    pub(crate) fn qp_ptr(&self, qp: &HwQp, verb: Verb) -> Result<*mut sys::ibv_qp> {
        self.check_owner(&qp.0.obj.ctx, verb, "QP")?;
        qp.0.obj.get(verb)
    }

    /// Turns an `EINVAL` from `ibv_modify_qp` into the diagnosed kind.
    pub(crate) fn diagnose_einval(
        &self,
        qp: &HwQp,
        p: *mut sys::ibv_qp,
        attr: &QpAttr,
        mask: QpAttrMask,
    ) -> Error {
        let mut cur: sys::ibv_qp_attr = zeroed();
        let mut init: sys::ibv_qp_init_attr = zeroed();
        // SAFETY: `p` is a live QP; both out-parameters are valid for writes.
        let rc =
            unsafe { sys::ibv_query_qp(p, &mut cur, QpAttrMask::STATE.bits() as c_int, &mut init) };
        let class = QpClass::from_qp_type(qp.0.qp_type, qp.0.dc_type);
        let flavor = if qp.0.obj.ctx.name.starts_with("mlx5") {
            TableFlavor::Mlx5
        } else {
            TableFlavor::Kernel
        };
        match (rc, class) {
            (0, Some(class)) => {
                let state = QpState::from_raw(cur.qp_state);
                let msg =
                    diagnose_modify(class, flavor, state, mask, attr.qp_state, attr.cur_qp_state);
                match check_modify(class, flavor, state, mask, attr.qp_state, attr.cur_qp_state) {
                    Err(kind) => Error::new(Verb::ModifyQp, kind, msg).with_errno(EINVAL),
                    Ok(_) => Error::invalid(
                        Verb::ModifyQp,
                        format!("ibv_modify_qp failed: EINVAL: transition and mask are legal, so an attribute value is out of range for the device ({msg})"),
                    ),
                }
            }
            _ => c_error(Verb::ModifyQp, EINVAL, "ibv_modify_qp"),
        }
    }
}

impl HwVerbs {
    /// The body of `Verbs::capabilities`.
    pub(crate) fn capabilities_impl(&mut self) -> Capabilities {
        // Only what this backend implements and the device can do; without a
        // device nothing is claimed.
        let Ok(n) = with_device_list(|d| d.len()) else {
            return Capabilities::empty();
        };
        if n == 0 {
            return Capabilities::empty();
        }
        let mut caps = Capabilities::RC
            | Capabilities::UC
            | Capabilities::UD
            | Capabilities::SRQ
            | Capabilities::DATA_PATH
            | Capabilities::MCAST
            | Capabilities::XRC
            | Capabilities::LEGACY_XRC
            | Capabilities::MULTI_PROCESS;
        if n >= 2 {
            caps |= Capabilities::TWO_DEVICES;
        }
        if cfg!(feature = "mlx5") {
            caps |= Capabilities::MLX5DV;
        }
        caps
    }

    /// The body of `Verbs::open_device`.
    pub(crate) fn open_device_impl(
        &mut self,
        index: usize,
        process: ProcessId,
    ) -> Result<HwContext> {
        let order = match with_device_list(|d| self.order(d)) {
            Ok(Ok(o)) => o,
            Ok(Err(e)) | Err(e) => {
                return Err(
                    Error::new(Verb::OpenDevice, e.kind(), e.message().to_string())
                        .with_errno(e.errno()),
                )
            }
        };
        let real = order.get(index).copied();
        let opened = with_device_list(|d| match real.and_then(|r| d.get(r)) {
            None => Err(Error::new(
                Verb::OpenDevice,
                ErrorKind::NoDevice,
                format!("no RDMA device at index {index} ({} found)", d.len()),
            )),
            Some(&dev) => {
                let info = device_info(dev);
                // SAFETY: `dev` is an entry of the live list; the opened
                // context holds its own reference to the device, so freeing
                // the list afterwards is allowed.
                let ctx = unsafe { sys::ibv_open_device(dev) };
                if ctx.is_null() {
                    Err(c_error(Verb::OpenDevice, last_errno(), "ibv_open_device"))
                } else {
                    Ok((ctx, info.name))
                }
            }
        });
        let (raw, name) = match opened {
            Ok(r) => r?,
            Err(e) => {
                return Err(
                    Error::new(Verb::OpenDevice, e.kind(), e.message().to_string())
                        .with_errno(e.errno()),
                )
            }
        };
        Ok(HwContext(Arc::new(ContextInner::new(
            raw, self.id, process, name, false,
        ))))
    }

    /// The body of `Verbs::query_port`.
    pub(crate) fn query_port_impl(&mut self, ctx: &HwContext, port_num: u8) -> Result<PortAttr> {
        let (c, _) = self.ctx(ctx, Verb::QueryPort)?;
        let mut a: sys::ibv_port_attr = zeroed();
        // SAFETY: live context from `ibv_open_device`; `a` is writable.
        let rc = unsafe { fv::ibv_query_port(c, port_num, &mut a) };
        if rc != 0 {
            return Err(c_error(Verb::QueryPort, rc, "ibv_query_port"));
        }
        Ok(PortAttr {
            state: PortState::from_raw(a.state),
            max_mtu: Mtu::from_raw(a.max_mtu),
            active_mtu: Mtu::from_raw(a.active_mtu),
            gid_tbl_len: a.gid_tbl_len,
            port_cap_flags: a.port_cap_flags,
            max_msg_sz: a.max_msg_sz,
            bad_pkey_cntr: a.bad_pkey_cntr,
            qkey_viol_cntr: a.qkey_viol_cntr,
            pkey_tbl_len: a.pkey_tbl_len,
            lid: a.lid,
            sm_lid: a.sm_lid,
            lmc: a.lmc,
            max_vl_num: a.max_vl_num,
            sm_sl: a.sm_sl,
            subnet_timeout: a.subnet_timeout,
            init_type_reply: a.init_type_reply,
            active_width: a.active_width,
            active_speed: u32::from(a.active_speed),
            phys_state: a.phys_state,
            link_layer: LinkLayer::from_raw(u32::from(a.link_layer)),
            flags: a.flags,
        })
    }
}
