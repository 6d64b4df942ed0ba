//! Leak introspection: what is alive in a world, by kind (issue #12 item
//! 12), so a test can assert that its teardown left nothing behind.

use core::fmt;

use super::World;

/// Live objects of a world, by kind. [`World::live_objects`] /
/// [`crate::SimVerbs::live_objects`] take it; [`LiveObjects::is_empty`]
/// says whether a teardown was complete.
///
/// The contexts librdmacm opened for itself (one per device an rdma_cm id
/// was bound to, `id->verbs`) and their default PDs live as long as the
/// library is loaded, as on hardware: they are counted apart
/// (`cm_contexts`, `cm_default_pds`) and do not make the world non-empty.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveObjects {
    /// Device contexts the application opened (`ibv_open_device`).
    pub contexts: usize,
    /// Protection domains (without librdmacm's default PDs).
    pub pds: usize,
    /// Completion queues (with those `rdma_create_qp` made).
    pub cqs: usize,
    /// Completion channels.
    pub comp_channels: usize,
    /// Registered memory regions.
    pub mrs: usize,
    /// Bytes the registered MRs own.
    pub mr_bytes: u64,
    /// MRs deregistered while posted requests named them, kept until those
    /// requests are released.
    pub mrs_held_by_requests: usize,
    /// Posted work requests that name an MR (pins), over all MRs.
    pub mr_pins: u64,
    /// Shared receive queues (basic and XRC).
    pub srqs: usize,
    /// Queue pairs (XRC_TGT counted once, however many handles).
    pub qps: usize,
    /// Address handles.
    pub ahs: usize,
    /// Memory windows (`ibv_alloc_mw`).
    pub mws: usize,
    /// Device memory allocations (`ibv_alloc_dm`).
    pub dms: usize,
    /// XRC domain handles (`ibv_open_xrcd`, `ibv_open_xrc_domain`).
    pub xrcd_handles: usize,
    /// XRC domains (shared by their handles).
    pub xrc_domains: usize,
    /// DC connections (DCI → DCT responder states).
    pub dc_connections: usize,
    /// rdma_cm ids.
    pub cm_ids: usize,
    /// rdma_cm event channels.
    pub cm_channels: usize,
    /// Async events handed out and not acknowledged.
    pub unacked_async_events: usize,
    /// QP numbers reserved with `mlx5dv_reserved_qpn_alloc`.
    pub reserved_qpns: usize,
    /// Entries of the world's side tables, each of which belongs to a live
    /// object and must go with it: the extended verbs' (extended-CQ
    /// flags, `send_ops_flags`, ECE options, pending binds, raw-WQE
    /// marks), the XRC tables (SRQ records and numbers, XRC_TGT records
    /// and handles, legacy registrations, domain inodes), out-of-order
    /// messages in progress, requesters parked in an RNR wait, rdma_cm
    /// multicast groups.
    pub side_entries: usize,
    /// Contexts librdmacm opened for itself (not a leak).
    pub cm_contexts: usize,
    /// librdmacm's default PDs (not a leak).
    pub cm_default_pds: usize,
}

impl LiveObjects {
    /// Whether nothing the application made is left (librdmacm's own
    /// contexts and default PDs aside).
    pub fn is_empty(&self) -> bool {
        let Self {
            cm_contexts: _,
            cm_default_pds: _,
            mr_bytes,
            mr_pins,
            ..
        } = *self;
        let counts = [
            self.contexts,
            self.pds,
            self.cqs,
            self.comp_channels,
            self.mrs,
            self.mrs_held_by_requests,
            self.srqs,
            self.qps,
            self.ahs,
            self.mws,
            self.dms,
            self.xrcd_handles,
            self.xrc_domains,
            self.dc_connections,
            self.cm_ids,
            self.cm_channels,
            self.unacked_async_events,
            self.reserved_qpns,
            self.side_entries,
        ];
        counts.iter().all(|&n| n == 0) && mr_bytes == 0 && mr_pins == 0
    }
}

/// One line, only the non-zero kinds: `qps=2 mrs=1 (4096 bytes)`, or
/// `nothing`.
impl fmt::Display for LiveObjects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kinds: [(&str, u64); 23] = [
            ("contexts", self.contexts as u64),
            ("pds", self.pds as u64),
            ("cqs", self.cqs as u64),
            ("comp_channels", self.comp_channels as u64),
            ("mrs", self.mrs as u64),
            ("mr_bytes", self.mr_bytes),
            ("mrs_held_by_requests", self.mrs_held_by_requests as u64),
            ("mr_pins", self.mr_pins),
            ("srqs", self.srqs as u64),
            ("qps", self.qps as u64),
            ("ahs", self.ahs as u64),
            ("mws", self.mws as u64),
            ("dms", self.dms as u64),
            ("xrcd_handles", self.xrcd_handles as u64),
            ("xrc_domains", self.xrc_domains as u64),
            ("dc_connections", self.dc_connections as u64),
            ("cm_ids", self.cm_ids as u64),
            ("cm_channels", self.cm_channels as u64),
            ("unacked_async_events", self.unacked_async_events as u64),
            ("reserved_qpns", self.reserved_qpns as u64),
            ("side_entries", self.side_entries as u64),
            ("cm_contexts", self.cm_contexts as u64),
            ("cm_default_pds", self.cm_default_pds as u64),
        ];
        let mut any = false;
        for (name, n) in kinds {
            if n != 0 {
                if any {
                    f.write_str(" ")?;
                }
                write!(f, "{name}={n}")?;
                any = true;
            }
        }
        if !any {
            f.write_str("nothing")?;
        }
        Ok(())
    }
}

impl World {
    /// What is alive, by kind (see [`LiveObjects`]).
    pub fn live_objects(&self) -> LiveObjects {
        let cm_ctx: Vec<_> = self.cm.devs.values().map(|d| d.ctx).collect();
        let cm_pds: Vec<_> = self.cm.devs.values().filter_map(|d| d.pd).collect();
        let contexts = self
            .contexts
            .iter()
            .filter(|(i, g, _)| !cm_ctx.iter().any(|c| c.index == *i && c.generation == *g))
            .count();
        let pds = self
            .pds
            .iter()
            .filter(|(i, g, _)| !cm_pds.iter().any(|p| p.index == *i && p.generation == *g))
            .count();
        let (mut mrs, mut held, mut mr_bytes, mut mr_pins) = (0, 0, 0u64, 0u64);
        for (_, _, m) in self.mrs.iter() {
            mr_pins += u64::from(m.pins);
            if m.deregistered {
                held += 1;
            } else {
                mrs += 1;
                mr_bytes += m.bytes.len() as u64;
            }
        }
        LiveObjects {
            contexts,
            pds,
            cqs: self.cqs.len(),
            comp_channels: self.channels.len(),
            mrs,
            mr_bytes,
            mrs_held_by_requests: held,
            mr_pins,
            srqs: self.srqs.len(),
            qps: self.qps.len(),
            ahs: self.ahs.len(),
            mws: self.ext.mws.len(),
            dms: self.dm_count(),
            xrcd_handles: self.xrc_handle_count(),
            xrc_domains: self.xrc_domain_count(),
            dc_connections: self.dc_connection_count(),
            cm_ids: self.cm.ids.len(),
            cm_channels: self.cm.channels.len(),
            unacked_async_events: self
                .contexts
                .iter()
                .map(|(_, _, c)| c.async_unacked.len())
                .sum(),
            reserved_qpns: self.rqpn.len(),
            side_entries: self.ext_entries()
                + self.xrc_entries()
                + self.dc.ooo.len()
                + self.rnr_parked.len()
                + self.cm.groups.len(),
            cm_contexts: cm_ctx.len(),
            cm_default_pds: cm_pds.len(),
        }
    }
}
