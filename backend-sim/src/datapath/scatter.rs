//! Receive-side scatter: where an incoming SEND's bytes land in the
//! receive WQE's scatter list (data-path §4.2 rows 6–8, the UD receive
//! layout, §3.3).
//!
//! [`scatter_plan`] validates the whole placement first (so nothing is
//! written for a message that fails) and returns a [`ScatterPlan`] whose
//! [`ScatterPlan::segments`] iterator says which bytes go where. Nothing
//! allocates: the plan borrows the WQE's SGE list and the MR lookup.

use core::iter::FusedIterator;

use verbs_api::{AccessFlags, Sge};

use super::scenario::ErrorScenario;
use super::{MrLookup, Transport};

/// Bytes of the Global Routing Header that a UD receive places in front of
/// the payload (MAN-PR; data-path §4.2 "UD receive layout").
pub const UD_GRH_BYTES: u32 = 40;

/// Which part of the incoming stream a segment carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScatterPart {
    /// The 40-byte GRH area of a UD receive (contents undefined when the
    /// packet had no GRH).
    Grh,
    /// Message payload.
    Payload,
}

/// One contiguous copy into one receive SGE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ScatterSegment {
    /// GRH area or payload.
    pub part: ScatterPart,
    /// Offset of the first byte within its part (GRH or payload).
    pub part_offset: u32,
    /// Index of the receive SGE in the WQE's list.
    pub sge_index: usize,
    /// The SGE's lkey (names the destination MR).
    pub lkey: u32,
    /// Destination address (as the SGE names it).
    pub addr: u64,
    /// Destination byte offset inside the MR.
    pub mr_offset: u64,
    /// Bytes to copy.
    pub len: u32,
}

/// A validated placement of one message into one receive WQE.
#[derive(Debug)]
pub struct ScatterPlan<'a, L: ?Sized> {
    sges: &'a [Sge],
    mrs: &'a L,
    grh_len: u32,
    payload_len: u32,
}

// Manual impls: `L` itself need not be `Clone`/`Copy` (the plan borrows it).
impl<L: ?Sized> Clone for ScatterPlan<'_, L> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<L: ?Sized> Copy for ScatterPlan<'_, L> {}

impl<'a, L: MrLookup + ?Sized> ScatterPlan<'a, L> {
    /// `wc.byte_len` of the receive completion: the payload, plus the 40
    /// GRH bytes on UD (MAN-PR; GUT-UD `byte_len == 40 + payload`).
    pub const fn byte_len(&self) -> u32 {
        self.grh_len + self.payload_len
    }

    /// The copies to perform, in stream order (GRH area first on UD).
    /// Zero-length SGEs are skipped (mlx5 `mlx5_post_recv`, §3.3).
    pub fn segments(&self) -> ScatterSegments<'a, L> {
        ScatterSegments {
            plan: *self,
            sge_index: 0,
            sge_offset: 0,
            position: 0,
        }
    }
}

/// Iterator over a [`ScatterPlan`]'s copies.
#[derive(Debug)]
pub struct ScatterSegments<'a, L: ?Sized> {
    plan: ScatterPlan<'a, L>,
    sge_index: usize,
    sge_offset: u32,
    position: u32,
}

impl<L: MrLookup + ?Sized> Iterator for ScatterSegments<'_, L> {
    type Item = ScatterSegment;

    /// # Panics
    ///
    /// If an SGE the plan validated no longer resolves (the lookup changed
    /// under a shared borrow: an invariant violation).
    fn next(&mut self) -> Option<ScatterSegment> {
        let plan = &self.plan;
        let stream_len = plan.byte_len();
        if self.position >= stream_len {
            return None;
        }
        let sge = loop {
            let sge = plan.sges.get(self.sge_index)?;
            if self.sge_offset < sge.length {
                break *sge;
            }
            self.sge_index += 1;
            self.sge_offset = 0;
        };
        let available = sge.length - self.sge_offset;
        let (part, part_offset, part_left) = if self.position < plan.grh_len {
            (
                ScatterPart::Grh,
                self.position,
                plan.grh_len - self.position,
            )
        } else {
            let at = self.position - plan.grh_len;
            (ScatterPart::Payload, at, plan.payload_len - at)
        };
        let len = available.min(part_left);
        let addr = sge.addr + u64::from(self.sge_offset);
        let mr = plan
            .mrs
            .by_lkey(sge.lkey)
            .expect("scatter_plan validated this SGE's lkey");
        let mr_offset = mr
            .offset_of(addr, u64::from(len))
            .expect("scatter_plan validated this SGE's range");
        let segment = ScatterSegment {
            part,
            part_offset,
            sge_index: self.sge_index,
            lkey: sge.lkey,
            addr,
            mr_offset,
            len,
        };
        self.sge_offset += len;
        self.position += len;
        Some(segment)
    }
}

impl<L: MrLookup + ?Sized> FusedIterator for ScatterSegments<'_, L> {}

/// Validates the placement of a `payload_len`-byte incoming SEND into the
/// receive WQE `recv_sges` of a QP of `transport` in PD `pd`.
///
/// The stream placed is the payload, preceded on UD by a 40-byte GRH area
/// (MAN-PR: "the first 40 bytes of the scatter list receive the GRH").
///
/// 1. The WQE's capacity (sum of SGE lengths) must hold the stream, else
///    [`ErrorScenario::RecvTooSmall`] (row 6; on UD the packet is then
///    dropped without consuming the WQE, GUT-UD `SendWithTooSmallRecv`).
/// 2. Every SGE the stream reaches must name, by lkey, a valid MR of `pd`
///    with `LOCAL_WRITE` that holds the bytes placed there, else
///    [`ErrorScenario::RecvSgeInvalid`] (row 7). Only placed bytes are
///    checked, so an SGE longer than its MR succeeds when the payload fits
///    in the MR (row 8, mlx5); SGEs past the end of the stream and
///    zero-length SGEs are never looked at.
///
/// SEND into a receive buffer needs no REMOTE_WRITE (§9.2).
///
/// # Errors
///
/// The scenario; feed it to [`super::error_outcome`].
///
/// # Divergence from hardware
///
/// The order (capacity before keys) is the simulator's choice: a WQE both
/// too small and holding a bad key reports row 6. On row 8 other NICs
/// report `REM_OP_ERR`/`LOC_PROT_ERR`; the simulator follows mlx5 (and
/// rxe, whose copy checks only the bytes copied).
pub fn scatter_plan<'a, L: MrLookup + ?Sized>(
    payload_len: u32,
    transport: Transport,
    recv_sges: &'a [Sge],
    mrs: &'a L,
    pd: u32,
) -> Result<ScatterPlan<'a, L>, ErrorScenario> {
    let grh_len = if transport == Transport::Ud {
        UD_GRH_BYTES
    } else {
        0
    };
    let stream_len = u64::from(grh_len) + u64::from(payload_len);
    let capacity: u64 = recv_sges.iter().map(|s| u64::from(s.length)).sum();
    if capacity < stream_len || stream_len > u64::from(u32::MAX) {
        return Err(ErrorScenario::RecvTooSmall);
    }
    let mut left = stream_len;
    for sge in recv_sges {
        if left == 0 {
            break;
        }
        if sge.length == 0 {
            continue;
        }
        let take = left.min(u64::from(sge.length));
        let ok = match mrs.by_lkey(sge.lkey) {
            Some(mr) => {
                mr.valid
                    && mr.pd == pd
                    && mr.access.contains(AccessFlags::LOCAL_WRITE)
                    && mr.offset_of(sge.addr, take).is_some()
            }
            None => false,
        };
        if !ok {
            return Err(ErrorScenario::RecvSgeInvalid);
        }
        left -= take;
    }
    Ok(ScatterPlan {
        sges: recv_sges,
        mrs,
        grh_len,
        payload_len,
    })
}

#[cfg(test)]
mod tests {
    use super::super::MrView;
    use super::*;

    const PD: u32 = 3;

    fn mrs() -> [MrView; 3] {
        let base = MrView {
            addr: 0x1000,
            length: 0x1000,
            lkey: 1,
            rkey: 101,
            access: AccessFlags::LOCAL_WRITE,
            pd: PD,
            valid: true,
        };
        [
            base,
            MrView {
                addr: 0x8000,
                length: 0x100,
                lkey: 2,
                access: AccessFlags::empty(),
                ..base
            },
            MrView {
                addr: 0x9000,
                length: 0x100,
                lkey: 3,
                valid: false,
                ..base
            },
        ]
    }

    fn sge(lkey: u32, addr: u64, length: u32) -> Sge {
        Sge { addr, length, lkey }
    }

    fn collect<L: MrLookup + ?Sized>(
        plan: &ScatterPlan<'_, L>,
    ) -> Vec<(ScatterPart, u32, usize, u64, u32)> {
        plan.segments()
            .map(|s| (s.part, s.part_offset, s.sge_index, s.mr_offset, s.len))
            .collect()
    }

    #[test]
    fn rc_send_scatters_across_sges_in_order() {
        // Goal: payload fills SGEs in order, skipping zero-length ones (mlx5
        // mlx5_post_recv), byte_len = payload on RC.
        // Method: 100 bytes into [60 @ 0x1000, 0-length bad key, 100 @ 0x1800].
        let m = mrs();
        let list = [sge(1, 0x1000, 60), sge(77, 0, 0), sge(1, 0x1800, 100)];
        let plan = scatter_plan(100, Transport::Rc, &list, &m[..], PD).expect("fits");
        assert_eq!(plan.byte_len(), 100);
        assert_eq!(
            collect(&plan),
            vec![
                (ScatterPart::Payload, 0, 0, 0, 60),
                (ScatterPart::Payload, 60, 2, 0x800, 40)
            ]
        );
    }

    #[test]
    fn zero_length_send_consumes_wqe_without_segments_section_3_3() {
        // Goal: §3.3: a zero-length SEND is valid, byte_len 0, even into a WQE
        // with no SGEs or an invalid one (no byte is placed).
        // Method: plan 0 bytes into an empty list and into a bad-key list.
        let m = mrs();
        let plan = scatter_plan(0, Transport::Rc, &[], &m[..], PD).expect("empty");
        assert_eq!((plan.byte_len(), plan.segments().count()), (0, 0));
        let bad = [sge(77, 0, 16)];
        assert!(scatter_plan(0, Transport::Rc, &bad, &m[..], PD).is_ok());
    }

    #[test]
    fn recv_too_small_row_6() {
        // Goal: §4.2 row 6: a receive WQE smaller than the SEND → RecvTooSmall
        // (requester REM_INV_REQ_ERR, responder LOC_LEN_ERR via error_outcome).
        // Method: 101 bytes into 100 bytes of SGEs; exactly 100 fits.
        let m = mrs();
        let list = [sge(1, 0x1000, 60), sge(1, 0x1800, 40)];
        assert_eq!(
            scatter_plan(101, Transport::Rc, &list, &m[..], PD).err(),
            Some(ErrorScenario::RecvTooSmall)
        );
        assert!(scatter_plan(100, Transport::Rc, &list, &m[..], PD).is_ok());
    }

    #[test]
    fn recv_sge_invalid_row_7() {
        // Goal: §4.2 row 7: bad lkey, address outside the MR, deregistered MR,
        // payload exceeding the MR, MR without LOCAL_WRITE, other PD →
        // RecvSgeInvalid.
        // Method: one bad receive SGE per case, 16-byte payload.
        let m = mrs();
        let cases = [
            sge(77, 0x1000, 64), // bad lkey
            sge(1, 0x3000, 64),  // outside the MR
            sge(3, 0x9000, 64),  // deregistered
            sge(1, 0x1ff8, 64),  // payload (16) exceeds the MR end (8 left)
            sge(2, 0x8000, 64),  // no LOCAL_WRITE (GUT-ACC MissingDstLocalWrite)
        ];
        for c in cases {
            assert_eq!(
                scatter_plan(16, Transport::Rc, &[c], &m[..], PD).err(),
                Some(ErrorScenario::RecvSgeInvalid),
                "{c:?}"
            );
        }
        assert_eq!(
            scatter_plan(16, Transport::Rc, &[sge(1, 0x1000, 64)], &m[..], PD + 1).err(),
            Some(ErrorScenario::RecvSgeInvalid),
            "other PD"
        );
    }

    #[test]
    fn recv_sge_longer_than_mr_but_payload_fits_row_8() {
        // Goal: §4.2 row 8: an SGE extending past its MR succeeds when the
        // payload fits inside the MR (mlx5).
        // Method: SGE of 4096 bytes starting 16 bytes before the MR end; 16-byte payload.
        let m = mrs();
        let list = [sge(1, 0x1ff0, 4096)];
        let plan = scatter_plan(16, Transport::Rc, &list, &m[..], PD).expect("payload fits");
        assert_eq!(
            collect(&plan),
            vec![(ScatterPart::Payload, 0, 0, 0xff0, 16)]
        );
    }

    #[test]
    fn ud_grh_occupies_first_40_bytes_ud_receive_layout() {
        // Goal: UD receive layout: the first 40 bytes of the scatter list get
        // the GRH, byte_len = 40 + payload (MAN-PR, GUT-UD CheckClassDFaults);
        // a segment never straddles GRH and payload.
        // Method: 30-byte payload into SGEs of 32 and 64 bytes.
        let m = mrs();
        let list = [sge(1, 0x1000, 32), sge(1, 0x1100, 64)];
        let plan = scatter_plan(30, Transport::Ud, &list, &m[..], PD).expect("fits");
        assert_eq!(plan.byte_len(), 70);
        assert_eq!(
            collect(&plan),
            vec![
                (ScatterPart::Grh, 0, 0, 0, 32),
                (ScatterPart::Grh, 32, 1, 0x100, 8),
                (ScatterPart::Payload, 0, 1, 0x108, 30),
            ]
        );
    }

    #[test]
    fn ud_recv_too_small_counts_the_grh() {
        // Goal: UD "receive WQE too small (incl. 40-byte GRH)" → RecvTooSmall,
        // which error_outcome turns into a silent drop with no WQE consumed.
        // Method: 25-byte payload into a 64-byte WQE (needs 65); 24 fits.
        let m = mrs();
        let list = [sge(1, 0x1000, 64)];
        assert_eq!(
            scatter_plan(25, Transport::Ud, &list, &m[..], PD).err(),
            Some(ErrorScenario::RecvTooSmall)
        );
        assert!(scatter_plan(24, Transport::Ud, &list, &m[..], PD).is_ok());
        let o = super::super::error_outcome(ErrorScenario::RecvTooSmall, Transport::Ud);
        assert!(o.dropped && o.responder_status.is_none());
    }
}
