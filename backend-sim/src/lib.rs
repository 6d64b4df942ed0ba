//! # backend-sim
//!
//! A deterministic, seeded software model of RDMA NICs behind the
//! [`verbs_api::Verbs`] trait: [`SimVerbs`]. No kernel module, no root, no
//! threads, no wall clock — code written generic over `V: Verbs` runs here in
//! `cargo test` and unchanged on a ConnectX NIC through `backend-hw`.
//!
//! ## Quick start
//!
//! ```
//! use backend_sim::{SimConfig, SimVerbs};
//! use verbs_api::*;
//!
//! let mut sim = SimVerbs::new(SimConfig::with_seed(7));
//! let ctx = sim.open_device(0, ProcessId(0))?;
//! let pd = sim.alloc_pd(&ctx)?;
//! let cq = sim.create_cq(&ctx, &CqInit { cqe: 16, ..CqInit::default() })?;
//! let mut attr = QpInitAttrEx::<SimVerbs> {
//!     qp_type: QpType::Rc,
//!     send_cq: Some(&cq),
//!     recv_cq: Some(&cq),
//!     cap: QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
//!     ..QpInitAttrEx::default()
//! };
//! let qp = sim.create_qp(&pd, &mut attr)?;
//! assert!(attr.cap.max_send_wr >= 16);
//!
//! // INIT needs PKEY_INDEX | PORT | ACCESS_FLAGS for RC; anything less is EINVAL.
//! let init = QpAttr { qp_state: QpState::Init, port_num: 1, ..QpAttr::default() };
//! let err = sim.modify_qp(&qp, &init, QpAttrMask::STATE | QpAttrMask::PORT).unwrap_err();
//! assert_eq!(err.errno(), errno::EINVAL);
//! sim.modify_qp(&qp, &init, QpAttrMask::STATE | QpAttrMask::PORT | QpAttrMask::PKEY_INDEX | QpAttrMask::ACCESS_FLAGS)?;
//! println!("{}", sim.trace());
//! # Ok::<(), verbs_api::Error>(())
//! ```
//!
//! ## Ownership & cleanup
//!
//! Handles are small `Copy` values (arena index + generation). Destroying an
//! object makes every copy of its handle stale: using it is `EINVAL`, never a
//! different object. Parents count their users: `ibv_dealloc_pd` while a QP,
//! MR, SRQ or AH uses the PD, `ibv_destroy_cq` while a QP or SRQ uses the CQ,
//! `ibv_destroy_srq` while a QP uses it, `ibv_destroy_comp_channel` while a
//! CQ uses it, `ibv_destroy_qp` while multicast groups are attached and
//! `ibv_close_device` while anything of the context lives are all `EBUSY`.
//!
//! ## Thread safety
//!
//! `SimVerbs` is an ordinary single-threaded value (`Send`, not shared).
//! Nothing inside it spawns threads.
//!
//! ## Determinism contract
//!
//! * One root seed ([`SimConfig::seed`]); every consumer of randomness draws
//!   from its own named ChaCha8 stream ([`rng::Stream`]), so adding a
//!   consumer never changes another's sequence. Range helpers are our own.
//! * No `HashMap`/`HashSet` (`BTreeMap` and arena `Vec`s only), no
//!   `Instant::now`, no threads — enforced by `backend-sim/.clippy.toml`.
//! * Virtual time is a `u64` of nanoseconds ([`World::now_ns`]).
//! * The same configuration and the same verb calls give the same handles,
//!   QP numbers, memory keys, addresses and [`Trace`], byte for byte.
//!   QP numbers are cyclic from [`SimConfig::qpn_start`]; lkeys/rkeys are
//!   `(MR index << 8) | byte` with the byte from the `rkey_alloc` stream.
//!
//! ## What is supported
//!
//! Devices from profiles ([`DeviceProfile::connectx6`], `connectx7`, `rxe`)
//! with `ibv_query_device`/`port`/`gid`/`pkey`; PDs; CQs with the drivers'
//! size rounding and completion channels, `req_notify_cq`, `get_cq_event`,
//! `ack_cq_events`; MRs that own zeroed bytes, with the access-flag rules;
//! QP creation with every `ibv_qp_init_attr_ex` field, `comp_mask`,
//! `create_flags` and `send_ops_flags` bit validated and mlx5/rxe capability
//! rounding; `ibv_modify_qp` exactly as the kernel validates it (table,
//! masks, ranges, mlx5 gaps) with the state-entry side effects; query and
//! destroy of QPs; basic SRQs (create, modify `LIMIT`/`MAX_WR`, query,
//! destroy); AHs; multicast attach/detach; async events; posting with every
//! post-time check, and flushing with `IBV_WC_WR_FLUSH_ERR` in ERR;
//! device memory on the mlx5 profiles ([`World::alloc_dm`], the copies and
//! zero-based MRs on it, `world/dm.rs`).
//! Supported QP types: RC, UC, UD, XRC_SEND (creation and modify only) and
//! RAW_PACKET (with [`SimConfig::cap_net_raw`]).
//!
//! ## What is rejected
//!
//! Not modelled yet, so returned as errors rather than faked: executing work
//! requests (posted requests stay outstanding until the QP enters ERR or
//! RESET), XRC domains and XRC_RECV QPs (`EINVAL`: no XRCD handle can
//! exist), RSS QPs (`EOPNOTSUPP`), `IBV_QPT_DRIVER` through `ibv_create_qp_ex`
//! (`EINVAL`, it needs `mlx5dv_create_qp`), and — `ENOSYS` through
//! `Error::not_implemented` — `create_srq_ex`, `open_qp`, the legacy XRC
//! calls, `mlx5dv_*`, `rdma_cm` and the fault-injection `sim_control`
//! commands.
//!
//! ## What is divergent
//!
//! Each knowing difference from a real HCA is documented in a
//! `# Divergence from hardware` section where it is implemented
//! ([`World::modify_qp`], [`World::reg_mr`], [`World::destroy_cq`],
//! [`World::destroy_qp`]); in short: out-of-range retry/timer fields are
//! `EINVAL` (mlx5 truncates), ODP is accepted without page faults, blocking
//! destroys become errors, and there is no stale cached QP state.
#![deny(unsafe_code)]

mod adapter;
mod arena;
mod config;
pub mod datapath;
pub mod fabric;
pub mod fault_spec;
mod handles;
mod link;
mod memory;
mod perfetto;
mod profile;
pub mod rng;
mod sim;
mod trace;
mod world;

pub use adapter::AdapterModel;
pub use config::{CqOverrunQp, DcKeyViolation, ErrnoFlavor, MwConfig, SimConfig};
pub use handles::{
    AhHandle, CmChannelHandle, CmIdHandle, CompChannelHandle, ContextHandle, CqHandle, DmHandle,
    MrHandle, MwHandle, PdHandle, QpHandle, SrqHandle, XrcdHandle,
};
pub use link::{link_mbps, parse_cpu_mhz, parse_switch_hops, LinkSpeed, ProfileChoice, Setup};
pub use memory::ExternalMemory;
pub use profile::{DeviceProfile, DriverModel, Mlx5Limits};
pub use sim::SimVerbs;
pub use trace::{Trace, TraceEvent, TraceRecord};
pub use world::cm::{
    device_ipv4, device_ipv6, mcast_mgid, reject_reason, CmConfig, MLID_FIRST, MLID_LAST,
    RDMA_UDP_QKEY,
};
pub use world::ext::{MLX5_ECE_OPTIONS, MLX5_HCA_CORE_CLOCK_KHZ};
pub use world::{wc_ex_of, CqMirror, MirroredCqe, MirroredQueue};
pub use world::{AsyncSubject, LiveObjects, World, XrcUnknownSrqn, TIME_HORIZON_NS};
pub use world::{PostSnapshot, SrqPostSnapshot};
