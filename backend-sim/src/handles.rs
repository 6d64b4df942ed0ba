//! Resource handles: small `Copy` values (arena index + generation).
//!
//! A handle stays valid until its object is destroyed; after that every use
//! fails with `EINVAL` (the slot's generation has moved on), never reaching a
//! newer object that reuses the slot. Generations start at a salt of their
//! arena, so a handle of another `SimVerbs` (another world) is `EINVAL` too.

macro_rules! handle {
    ($(#[$meta:meta])* $name:ident, $tag:literal) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
        pub struct $name {
            pub(crate) index: u32,
            pub(crate) generation: u32,
        }

        impl $name {
            /// The arena index (stable while the object lives).
            pub fn index(self) -> u32 {
                self.index
            }

            /// The slot's generation when this object was made: an opaque
            /// stamp that differs between worlds and between reuses of a slot.
            pub fn generation(self) -> u32 {
                self.generation
            }

            #[allow(dead_code)] // the unmodelled handle kinds are never made
            pub(crate) fn from_parts((index, generation): (u32, u32)) -> Self {
                Self { index, generation }
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, concat!($tag, "#{}.{}"), self.index, self.generation)
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                core::fmt::Debug::fmt(self, f)
            }
        }
    };
}

handle!(
    /// An open device context (`struct ibv_context`).
    ContextHandle, "ctx"
);
handle!(
    /// A protection domain.
    PdHandle, "pd"
);
handle!(
    /// A completion queue.
    CqHandle, "cq"
);
handle!(
    /// A completion channel.
    CompChannelHandle, "channel"
);
handle!(
    /// A memory region.
    MrHandle, "mr"
);
handle!(
    /// A shared receive queue.
    SrqHandle, "srq"
);
handle!(
    /// A queue pair.
    QpHandle, "qp"
);
handle!(
    /// An address handle.
    AhHandle, "ah"
);
handle!(
    /// An XRC domain handle (`ibv_open_xrcd` / `ibv_open_xrc_domain`).
    XrcdHandle, "xrcd"
);
handle!(
    /// An rdma_cm event channel.
    CmChannelHandle, "cm_channel"
);
handle!(
    /// An rdma_cm id.
    CmIdHandle, "cm_id"
);
handle!(
    /// A memory window.
    MwHandle, "mw"
);
handle!(
    /// A device memory allocation (`ibv_alloc_dm`).
    DmHandle, "dm"
);
