//! `export!`: one C entry point of the drop-in libraries, at its symbol
//! version, with panics caught at the boundary.
//!
//! ```text
//! export! { "IBVERBS_1.1" fn ibv_get_device_name(device: *mut ibv_device) -> *const c_char { … } }
//! ```
//!
//! defines `vsim_ibv_get_device_name` (exported at the linker's `Base`)
//! and a `.symver` alias that gives the public name its node,
//! `ibv_get_device_name@@IBVERBS_1.1`, exactly as rdma-core's library
//! exports it (`dlvsym` lookups, NCCL's among them, need the exact node).
//! Never call an exported function from Rust: a release build may then
//! place its definition in another codegen unit than its `.symver`, and the
//! assembler refuses the alias ("default version symbol … must be
//! defined"). Put the body in an ordinary function both can call.
//!
//! The body runs inside [`crate::guard::catch`]: a panic becomes the
//! function's failure value (an errno, NULL with `errno`, …) and a log
//! line, never an unwind into C.

/// See the module documentation.
macro_rules! export {
    ($node:literal fn $name:ident($($arg:ident : $ty:ty),* $(,)?) -> $ret:ty $body:block) => {
        #[doc = concat!("`", stringify!($name), "@@", $node, "`.")]
        ///
        /// # Safety
        /// Called from C with the arguments libibverbs' contract gives.
        #[export_name = concat!("vsim_", stringify!($name))]
        pub(crate) unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            $crate::guard::catch(stringify!($name), move || -> $ret { $body })
        }
        core::arch::global_asm!(concat!(
            ".symver vsim_", stringify!($name), ", ", stringify!($name), "@@", $node
        ));
    };
    ($node:literal fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $body:block) => {
        export! { $node fn $name($($arg: $ty),*) -> () $body }
    };
}
pub(crate) use export;

/// A non-default (compat) version of a public name, for programs linked
/// against an older ABI of the same function:
///
/// ```text
/// export_compat! { "IBVERBS_1.0" fn ibv_alloc_pd as compat_ibv_alloc_pd_ibverbs_1_0() -> … { … } }
/// ```
///
/// defines `vsim_compat_ibv_alloc_pd_ibverbs_1_0` and binds
/// `ibv_alloc_pd@IBVERBS_1.0` (one `@`: the loader gives it only to a
/// program that asks for that node by name, as rdma-core's compat symbols).
macro_rules! export_compat {
    ($node:literal fn $name:ident as $alias:ident($($arg:ident : $ty:ty),* $(,)?) -> $ret:ty $body:block) => {
        #[doc = concat!("`", stringify!($name), "@", $node, "` (compat version).")]
        ///
        /// # Safety
        /// Called from C with the arguments of the older ABI.
        #[export_name = concat!("vsim_", stringify!($alias))]
        pub(crate) unsafe extern "C" fn $alias($($arg: $ty),*) -> $ret {
            $crate::guard::catch(stringify!($name), move || -> $ret { $body })
        }
        core::arch::global_asm!(concat!(
            ".symver vsim_", stringify!($alias), ", ", stringify!($name), "@", $node
        ));
    };
    ($node:literal fn $name:ident as $alias:ident($($arg:ident : $ty:ty),* $(,)?) $body:block) => {
        export_compat! { $node fn $name as $alias($($arg: $ty),*) -> () $body }
    };
}
pub(crate) use export_compat;
