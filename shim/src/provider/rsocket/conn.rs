//! One connected rsocket's verbs resources and its stream protocol.
//!
//! The protocol (verbsim's own; both ends run it):
//!
//! * Each side posts `SLOTS` receive buffers of `SLOT` bytes. A message is
//!   one SEND with immediate data (the message kind); its bytes are at most
//!   one slot. A sender holds one *credit* per receive buffer the peer has
//!   posted and not yet had filled, and sends only with a credit: no
//!   receive ever finds the queue empty (no RNR).
//! * Credits come back without messages: each side owns a small control
//!   area (`CTRL_WORDS` words, registered for remote write) and the peer RDMA-writes
//!   its running count of reposted buffers into it. The count only grows,
//!   so the sender's credits are `SLOTS - (sent - reposted)` read from its
//!   own memory; returning credits never needs a credit.
//! * Orderly shutdown writes the number of messages sent into the
//!   peer's control area (`fin`): once the reader has received that many
//!   and drained them, reads return 0. RC keeps the order.
//! * `riomap` writes the mapping (offset, address, rkey, length) into the
//!   peer's control area; `riowrite` is an RDMA WRITE from a send slot
//!   into the peer's mapped buffer, ordered before later messages.
//!
//! The connect and accept private data carry the control area's address
//! and rkey and the slot geometry ([`Hello`]).

use core::ffi::c_int;
use core::ptr;
use std::collections::VecDeque;

use backend_sim::*;
use verbs_api::*;

use crate::provider::state::{Fail, Res, Shim, SimRes};

/// Receive (and send) buffers per connection.
pub(crate) const SLOTS: u32 = 16;
/// Bytes per buffer: one message carries at most this much.
pub(crate) const SLOT: usize = 64 * 1024;
/// Remote IO mappings a control area holds.
pub(crate) const MAX_IOMAP: usize = 8;
/// Send queue depth: every send slot, plus control writes and spare.
const SQ_DEPTH: u32 = SLOTS + 16;

/// The message kind a SEND's immediate data names.
const KIND_DATA: u32 = 1;

/// wr_id tags (high bits) and the slot (low bits).
const TAG_SEND: u64 = 1 << 32;
const TAG_RECV: u64 = 2 << 32;
const TAG_CTRL: u64 = 3 << 32;

/// The words of a control area: `[reposted, fin, (valid, offset, addr,
/// len, rkey) × MAX_IOMAP]`.
const CTRL_WORDS: usize = 2 + 5 * MAX_IOMAP;

/// What a connect or accept carries in its private data.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Hello {
    pub(crate) slots: u32,
    pub(crate) slot: u32,
    pub(crate) ctrl_addr: u64,
    pub(crate) ctrl_rkey: u32,
}

/// "VRS1": marks verbsim's rsocket private data.
const MAGIC: u32 = 0x5652_5331;

impl Hello {
    /// The private data bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(24);
        v.extend_from_slice(&MAGIC.to_le_bytes());
        v.extend_from_slice(&self.slots.to_le_bytes());
        v.extend_from_slice(&self.slot.to_le_bytes());
        v.extend_from_slice(&self.ctrl_rkey.to_le_bytes());
        v.extend_from_slice(&self.ctrl_addr.to_le_bytes());
        v
    }

    /// Parses private data (padding after it is ignored); `None` if it is
    /// not an rsocket's.
    pub(crate) fn decode(b: &[u8]) -> Option<Self> {
        let w = |i: usize| -> Option<u32> {
            Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?))
        };
        if w(0)? != MAGIC {
            return None;
        }
        let h = Self {
            slots: w(4)?,
            slot: w(8)?,
            ctrl_rkey: w(12)?,
            ctrl_addr: u64::from_le_bytes(b.get(16..24)?.try_into().ok()?),
        };
        (h.slots > 0 && h.slot > 0 && h.ctrl_addr != 0).then_some(h)
    }
}

/// Zeroed memory from the C heap, lent to the simulator through MRs (the
/// NIC model writes it while Rust code may hold the struct, so it is
/// only ever touched through raw pointers).
#[derive(Debug)]
pub(crate) struct RawBuf {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
}

impl RawBuf {
    pub(crate) fn new(len: usize) -> Option<Self> {
        // SAFETY: calloc of `len` bytes (len > 0); freed once in Drop.
        let ptr = unsafe { libc::calloc(1, len) }.cast::<u8>();
        (!ptr.is_null()).then_some(Self { ptr, len })
    }
    pub(crate) fn addr(&self) -> u64 {
        self.ptr as u64
    }
    /// Reads word `i` of a control area (the peer's RDMA writes land here).
    fn word(&self, i: usize) -> u64 {
        debug_assert!((i + 1) * 8 <= self.len);
        // SAFETY: in bounds (callers index below CTRL_WORDS); volatile, as
        // the fabric writes this memory from outside the program.
        unsafe { ptr::read_volatile(self.ptr.cast::<u64>().add(i)) }
    }
    fn set_word(&self, i: usize, v: u64) {
        debug_assert!((i + 1) * 8 <= self.len);
        // SAFETY: as `word`; only this library writes its source area.
        unsafe { ptr::write_volatile(self.ptr.cast::<u64>().add(i), v) }
    }
}

impl Drop for RawBuf {
    fn drop(&mut self) {
        // SAFETY: calloc'd in `new`, freed once.
        unsafe { libc::free(self.ptr.cast()) };
    }
}

// SAFETY: plain heap memory; every access holds the rsocket table's lock.
unsafe impl Send for RawBuf {}

/// A local mapping made by `riomap`.
#[derive(Debug)]
pub(crate) struct IoMap {
    pub(crate) addr: usize,
    pub(crate) len: usize,
    pub(crate) mr: MrHandle,
    /// Its entry in the peer's table (remote-write mappings only).
    pub(crate) index: Option<usize>,
}

/// A connection's resources and protocol state.
#[derive(Debug)]
pub(crate) struct Conn {
    pub(crate) pd: PdHandle,
    pub(crate) cq: CqHandle,
    pub(crate) qp: Option<QpHandle>,
    rbuf: RawBuf,
    rmr: MrHandle,
    sbuf: RawBuf,
    smr: MrHandle,
    /// This side's control area (the peer writes it).
    ctrl: RawBuf,
    cmr: MrHandle,
    /// What this side writes into the peer's area (source of the writes).
    csrc: RawBuf,
    csmr: MrHandle,
    /// The lkeys of rbuf, sbuf and csrc, and the rkey of ctrl (asked
    /// once: on the shared fabric each question is a round trip).
    keys: [u32; 4],
    pub(crate) peer: Hello,
    /// Received messages not yet read: (slot, offset, end).
    rx: VecDeque<(u32, usize, usize)>,
    tx_msgs: u64,
    rx_msgs: u64,
    /// Receive buffers reposted (the count the peer learns).
    reposted: u64,
    /// The count last written to the peer.
    reported: u64,
    free_slots: Vec<u32>,
    sq_out: u32,
    pub(crate) fin_sent: bool,
    /// A completion failed or the peer left: no more traffic.
    pub(crate) broken: bool,
    pub(crate) iomaps: Vec<IoMap>,
}

fn mr(shim: &mut Shim, v: &str, pd: PdHandle, b: &RawBuf, access: AccessFlags) -> Res<MrHandle> {
    let (addr, len) = (b.ptr as usize, b.len);
    shim.sim
        .reg_mr_app(pd, addr as u64, addr, len, access, || {
            Box::new(crate::appmem::AppMemory::new(addr, len))
        })
        .at(v)
}

impl Conn {
    /// PD, CQ, buffers and MRs on `ctx`, and the QP on the id; receive
    /// buffers posted. On failure everything made here is gone again.
    pub(crate) fn new(shim: &mut Shim, v: &str, ctx: ContextHandle, id: CmIdHandle) -> Res<Self> {
        let nomem = || Fail::new(v, libc::ENOMEM, "no memory for the rsocket's buffers");
        let rbuf = RawBuf::new(SLOTS as usize * SLOT).ok_or_else(nomem)?;
        let sbuf = RawBuf::new(SLOTS as usize * SLOT).ok_or_else(nomem)?;
        let ctrl = RawBuf::new(CTRL_WORDS * 8).ok_or_else(nomem)?;
        let csrc = RawBuf::new(CTRL_WORDS * 8).ok_or_else(nomem)?;
        let pd = shim.sim.alloc_pd(&ctx).at(v)?;
        let cq = match shim.sim.create_cq(
            &ctx,
            &CqInit {
                cqe: 2 * SQ_DEPTH + SLOTS,
                ..Default::default()
            },
        ) {
            Ok(c) => c,
            Err(e) => {
                let _ = shim.sim.dealloc_pd(&pd);
                return Err(Fail::sim(v, &e));
            }
        };
        let mut made: Vec<MrHandle> = Vec::new();
        let undo = |shim: &mut Shim, made: &[MrHandle]| {
            for m in made {
                let _ = shim.sim.dereg_mr(m);
            }
            let _ = shim.sim.destroy_cq(&cq);
            let _ = shim.sim.dealloc_pd(&pd);
        };
        let lw = AccessFlags::LOCAL_WRITE;
        for (b, a) in [
            (&rbuf, lw),
            (&sbuf, lw),
            (&ctrl, lw | AccessFlags::REMOTE_WRITE),
            (&csrc, lw),
        ] {
            match mr(shim, v, pd, b, a) {
                Ok(m) => made.push(m),
                Err(f) => {
                    undo(shim, &made);
                    return Err(f);
                }
            }
        }
        let mut attr = QpInitAttrEx::<SimVerbs> {
            send_cq: Some(&cq),
            recv_cq: Some(&cq),
            cap: QpCap {
                max_send_wr: SQ_DEPTH,
                max_recv_wr: SLOTS,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: QpType::Rc,
            ..Default::default()
        };
        let qp = match shim.sim.rdma_create_qp(&id, Some(&pd), &mut attr) {
            Ok(q) => q,
            Err(e) => {
                undo(shim, &made);
                return Err(Fail::sim(v, &e));
            }
        };
        let mut keys = [0u32; 4];
        for (k, (m, remote)) in [
            (made[0], false),
            (made[1], false),
            (made[3], false),
            (made[2], true),
        ]
        .into_iter()
        .enumerate()
        {
            match shim.sim.mr_info(&m) {
                Ok(i) => keys[k] = if remote { i.rkey } else { i.lkey },
                Err(e) => {
                    let _ = shim.sim.rdma_destroy_qp(&id);
                    undo(shim, &made);
                    return Err(Fail::sim(v, &e));
                }
            }
        }
        let mut c = Self {
            pd,
            cq,
            qp: Some(qp),
            rbuf,
            rmr: made[0],
            sbuf,
            smr: made[1],
            ctrl,
            cmr: made[2],
            csrc,
            csmr: made[3],
            keys,
            peer: Hello::default(),
            rx: VecDeque::new(),
            tx_msgs: 0,
            rx_msgs: 0,
            reposted: 0,
            reported: 0,
            free_slots: (0..SLOTS).rev().collect(),
            sq_out: 0,
            fin_sent: false,
            broken: false,
            iomaps: Vec::new(),
        };
        let slots: Vec<u32> = (0..SLOTS).collect();
        if let Err(f) = c.post_recvs(shim, v, &slots) {
            c.destroy(shim, id);
            return Err(f);
        }
        Ok(c)
    }

    /// This side's hello (for the private data).
    pub(crate) fn hello(&self) -> Hello {
        Hello {
            slots: SLOTS,
            slot: SLOT as u32,
            ctrl_addr: self.ctrl.addr(),
            ctrl_rkey: self.keys[3],
        }
    }

    fn post_recvs(&mut self, shim: &mut Shim, v: &str, slots: &[u32]) -> Res<()> {
        let Some(qp) = self.qp else { return Ok(()) };
        let lkey = self.keys[0];
        let sges: Vec<Sge> = slots
            .iter()
            .map(|&s| Sge {
                addr: self.rbuf.addr() + s as u64 * SLOT as u64,
                length: SLOT as u32,
                lkey,
            })
            .collect();
        let wrs: Vec<RecvWr<'_>> = slots
            .iter()
            .zip(&sges)
            .map(|(&s, g)| RecvWr {
                wr_id: TAG_RECV | u64::from(s),
                sg_list: core::slice::from_ref(g),
            })
            .collect();
        // SAFETY: the buffers are this connection's, registered, and live
        // until the QP is destroyed.
        unsafe { shim.sim.post_recv(&qp, &wrs) }.at(v)
    }

    /// Credits: peer buffers free for a message.
    pub(crate) fn credits(&self) -> u64 {
        let reposted = self.ctrl.word(0);
        (u64::from(self.peer.slots) + reposted).saturating_sub(self.tx_msgs)
    }

    /// Whether a message can go now.
    pub(crate) fn can_send(&self) -> bool {
        !self.broken
            && !self.fin_sent
            && self.credits() > 0
            && !self.free_slots.is_empty()
            && self.sq_out < SQ_DEPTH
    }

    /// Whether an RDMA write (riowrite) can go now.
    pub(crate) fn can_write(&self) -> bool {
        !self.broken && !self.fin_sent && !self.free_slots.is_empty() && self.sq_out < SQ_DEPTH
    }

    /// Whether a read would return at once (data, EOF or a broken link).
    pub(crate) fn readable(&self) -> bool {
        !self.rx.is_empty() || self.eof() || self.broken
    }

    /// The peer shut down writing and every message before it is read.
    pub(crate) fn eof(&self) -> bool {
        let fin = self.ctrl.word(1);
        fin != 0 && self.rx_msgs >= fin - 1 && self.rx.is_empty()
    }

    /// Takes completions; returns whether anything happened.
    pub(crate) fn progress(&mut self, shim: &mut Shim, v: &str) -> bool {
        let mut wc = [Wc::default(); 32];
        let mut any = false;
        loop {
            let n = match shim.sim.poll_cq(&self.cq, &mut wc) {
                Ok(n) => n,
                Err(e) => {
                    Fail::sim(v, &e);
                    self.broken = true;
                    return any;
                }
            };
            let mut empties = Vec::new();
            for w in &wc[..n] {
                any = true;
                let slot = (w.wr_id & 0xffff_ffff) as u32;
                match w.wr_id & !0xffff_ffff {
                    TAG_RECV => {
                        if w.status != WcStatus::Success {
                            self.broken = true;
                            continue;
                        }
                        self.rx_msgs += 1;
                        let len = w.byte_len as usize;
                        if len == 0 || w.imm_data != KIND_DATA {
                            empties.push(slot);
                        } else {
                            self.rx.push_back((slot, 0, len));
                        }
                    }
                    tag => {
                        self.sq_out = self.sq_out.saturating_sub(1);
                        if tag == TAG_SEND {
                            self.free_slots.push(slot);
                        }
                        if w.status != WcStatus::Success {
                            crate::guard::log_err(
                                v,
                                libc::ECONNRESET,
                                &format_args!("a send completed with {}", w.status.name()),
                            );
                            self.broken = true;
                        }
                    }
                }
            }
            if !empties.is_empty() {
                let _ = self.repost(shim, v, &empties);
            }
            if n < wc.len() {
                break;
            }
        }
        if self.reported != self.reposted {
            self.report(shim, v);
        }
        any
    }

    /// Reposts consumed buffers and tells the peer.
    fn repost(&mut self, shim: &mut Shim, v: &str, slots: &[u32]) -> Res<()> {
        if self.broken {
            return Ok(());
        }
        self.post_recvs(shim, v, slots)?;
        self.reposted += slots.len() as u64;
        self.report(shim, v);
        Ok(())
    }

    /// RDMA-writes words `[first, first + n)` of the source area into the
    /// peer's control area.
    fn write_ctrl(&mut self, shim: &mut Shim, v: &str, first: usize, n: usize) -> Res<()> {
        let Some(qp) = self.qp else { return Ok(()) };
        if self.sq_out >= SQ_DEPTH {
            return Err(Fail::new(v, libc::EAGAIN, "send queue full"));
        }
        let lkey = self.keys[2];
        let sge = Sge {
            addr: self.csrc.addr() + 8 * first as u64,
            length: 8 * n as u32,
            lkey,
        };
        let wr = SendWr::<SimVerbs> {
            wr_id: TAG_CTRL,
            sg_list: core::slice::from_ref(&sge),
            opcode: WrOpcode::RdmaWrite,
            send_flags: SendFlags::SIGNALED,
            rdma: RdmaInfo {
                remote_addr: self.peer.ctrl_addr + 8 * first as u64,
                rkey: self.peer.ctrl_rkey,
            },
            ..Default::default()
        };
        // SAFETY: the source area is this connection's, registered, live.
        unsafe { shim.sim.post_send(&qp, core::slice::from_ref(&wr)) }.at(v)?;
        self.sq_out += 1;
        Ok(())
    }

    /// Writes the reposted count to the peer (retried at the next
    /// progress if the send queue is full).
    fn report(&mut self, shim: &mut Shim, v: &str) {
        if self.broken || self.peer.ctrl_addr == 0 {
            return;
        }
        self.csrc.set_word(0, self.reposted);
        if self.write_ctrl(shim, v, 0, 1).is_ok() {
            self.reported = self.reposted;
        }
    }

    /// Copies up to `out.len()` bytes of received data (consumed unless
    /// `peek`); the count.
    pub(crate) fn read(&mut self, shim: &mut Shim, v: &str, out: &mut [u8], peek: bool) -> usize {
        let mut done = 0;
        let mut freed = Vec::new();
        let mut i = 0;
        while done < out.len() && i < self.rx.len() {
            let (slot, off, end) = self.rx[i];
            let n = (end - off).min(out.len() - done);
            // SAFETY: [off, off+n) lies within slot `slot` of rbuf (end ≤
            // SLOT, the completion's byte count); out has n bytes left.
            unsafe {
                ptr::copy_nonoverlapping(
                    self.rbuf.ptr.add(slot as usize * SLOT + off),
                    out.as_mut_ptr().add(done),
                    n,
                )
            };
            done += n;
            if peek {
                i += 1;
                continue;
            }
            if off + n == end {
                self.rx.pop_front();
                freed.push(slot);
            } else {
                self.rx[0].1 = off + n;
                i += 1;
            }
        }
        if !freed.is_empty() {
            let _ = self.repost(shim, v, &freed);
        }
        done
    }

    /// Sends one message of up to `SLOT` bytes from `data` (the caller
    /// checked [`Conn::can_send`]); the bytes sent.
    pub(crate) fn send(&mut self, shim: &mut Shim, v: &str, data: &[u8]) -> Res<usize> {
        let n = data.len().min(SLOT);
        let sge = self.stage(v, &data[..n])?;
        let slot = (sge.0 - self.sbuf.addr()) / SLOT as u64;
        let wr = SendWr::<SimVerbs> {
            wr_id: TAG_SEND | slot,
            sg_list: core::slice::from_ref(&sge.1),
            opcode: WrOpcode::SendWithImm,
            send_flags: SendFlags::SIGNALED,
            imm_data: KIND_DATA,
            ..Default::default()
        };
        self.post(shim, v, &wr, slot as u32)?;
        self.tx_msgs += 1;
        Ok(n)
    }

    /// RDMA-writes up to `SLOT` bytes of `data` to the peer's address
    /// (`raddr`, `rkey`); the bytes written.
    pub(crate) fn write(
        &mut self,
        shim: &mut Shim,
        v: &str,
        data: &[u8],
        raddr: u64,
        rkey: u32,
    ) -> Res<usize> {
        let n = data.len().min(SLOT);
        let sge = self.stage(v, &data[..n])?;
        let slot = (sge.0 - self.sbuf.addr()) / SLOT as u64;
        let wr = SendWr::<SimVerbs> {
            wr_id: TAG_SEND | slot,
            sg_list: core::slice::from_ref(&sge.1),
            opcode: WrOpcode::RdmaWrite,
            send_flags: SendFlags::SIGNALED,
            rdma: RdmaInfo {
                remote_addr: raddr,
                rkey,
            },
            ..Default::default()
        };
        self.post(shim, v, &wr, slot as u32)?;
        Ok(n)
    }

    /// Copies `data` into a free send slot: (slot address, its SGE).
    fn stage(&mut self, v: &str, data: &[u8]) -> Res<(u64, Sge)> {
        let lkey = self.keys[1];
        let slot = *self
            .free_slots
            .last()
            .ok_or_else(|| Fail::new(v, libc::EAGAIN, "no free send buffer"))?;
        let at = slot as usize * SLOT;
        // SAFETY: data.len() ≤ SLOT bytes into slot `slot` of sbuf.
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), self.sbuf.ptr.add(at), data.len()) };
        let addr = self.sbuf.addr() + at as u64;
        Ok((
            addr,
            Sge {
                addr,
                length: data.len() as u32,
                lkey,
            },
        ))
    }

    fn post(&mut self, shim: &mut Shim, v: &str, wr: &SendWr<'_, SimVerbs>, slot: u32) -> Res<()> {
        let qp = self
            .qp
            .ok_or_else(|| Fail::new(v, libc::ENOTCONN, "no QP"))?;
        // SAFETY: the SGE names this connection's registered send slot.
        if let Err(e) = unsafe { shim.sim.post_send(&qp, core::slice::from_ref(wr)) } {
            self.broken = true;
            return Err(Fail::new(v, libc::ECONNRESET, format!("post_send: {e}")));
        }
        self.free_slots.retain(|&s| s != slot);
        self.sq_out += 1;
        Ok(())
    }

    /// Orderly shutdown of the sending direction: tells the peer how many
    /// messages precede the end.
    pub(crate) fn send_fin(&mut self, shim: &mut Shim, v: &str) -> Res<()> {
        if self.fin_sent || self.broken {
            self.fin_sent = true;
            return Ok(());
        }
        self.csrc.set_word(1, self.tx_msgs + 1);
        self.write_ctrl(shim, v, 1, 1)?;
        self.fin_sent = true;
        Ok(())
    }

    /// Publishes mapping `index` to the peer (`None` clears it).
    pub(crate) fn write_iomap(
        &mut self,
        shim: &mut Shim,
        v: &str,
        index: usize,
        m: Option<(u64, u64, u64, u32)>,
    ) -> Res<()> {
        let base = 2 + 5 * index;
        let (valid, off, addr, len, rkey) = match m {
            Some((off, addr, len, rkey)) => (1, off, addr, len, u64::from(rkey)),
            None => (0, 0, 0, 0, 0),
        };
        for (k, w) in [valid, off, addr, len, rkey].into_iter().enumerate() {
            self.csrc.set_word(base + k, w);
        }
        self.write_ctrl(shim, v, base, 5)
    }

    /// The peer's mapping covering `offset`: (remote address there, bytes
    /// left in the mapping, rkey).
    pub(crate) fn peer_iomap(&self, offset: u64) -> Option<(u64, u64, u32)> {
        (0..MAX_IOMAP).find_map(|i| {
            let base = 2 + 5 * i;
            if self.ctrl.word(base) != 1 {
                return None;
            }
            let (off, addr, len) = (
                self.ctrl.word(base + 1),
                self.ctrl.word(base + 2),
                self.ctrl.word(base + 3),
            );
            (offset >= off && offset < off.saturating_add(len)).then(|| {
                (
                    addr + (offset - off),
                    off + len - offset,
                    self.ctrl.word(base + 4) as u32,
                )
            })
        })
    }

    /// Whether all sent work has completed (nothing in flight).
    pub(crate) fn idle(&self) -> bool {
        self.sq_out == 0
    }

    /// Destroys the QP (through the id), MRs, CQ and PD (a failure is
    /// logged: it would leave an object behind).
    pub(crate) fn destroy(&mut self, shim: &mut Shim, id: CmIdHandle) {
        let v = "rclose";
        let log = |r: Result<()>| {
            if let Err(e) = r {
                crate::guard::log_err(v, e.errno(), &e);
            }
        };
        if self.qp.take().is_some() {
            log(shim.sim.rdma_destroy_qp(&id));
        }
        for m in self.iomaps.drain(..) {
            log(shim.sim.dereg_mr(&m.mr));
        }
        for m in [self.rmr, self.smr, self.cmr, self.csmr] {
            log(shim.sim.dereg_mr(&m));
        }
        log(shim.sim.destroy_cq(&self.cq));
        log(shim.sim.dealloc_pd(&self.pd));
    }
}

/// The errno for an I/O call on a connection that cannot carry it.
pub(crate) fn closed_errno(c: &Conn) -> c_int {
    if c.broken {
        libc::ECONNRESET
    } else {
        libc::EPIPE
    }
}

#[cfg(test)]
mod tests {
    use super::Hello;

    #[test]
    fn hello_survives_the_cms_padding_and_refuses_foreign_data() {
        let h = Hello {
            slots: 16,
            slot: 65536,
            ctrl_addr: 0x7f00_1234_5000,
            ctrl_rkey: 0xabcd,
        };
        // The simulated CM pads private data to the message's size.
        let mut b = h.encode();
        b.resize(196, 0);
        let d = Hello::decode(&b).expect("our own hello");
        assert_eq!(
            (d.slots, d.slot, d.ctrl_addr, d.ctrl_rkey),
            (16, 65536, 0x7f00_1234_5000, 0xabcd)
        );
        // rdma-core's rsockets (or any other peer) send other bytes: refused.
        let mut foreign = b.clone();
        foreign[0] ^= 1;
        assert!(Hello::decode(&foreign).is_none());
        assert!(Hello::decode(&b[..20]).is_none(), "truncated");
        let zero = Hello { slots: 0, ..h }.encode();
        assert!(Hello::decode(&zero).is_none(), "no receive buffers");
    }
}
