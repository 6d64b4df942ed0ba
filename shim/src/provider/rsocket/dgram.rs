//! `SOCK_DGRAM` rsockets: datagrams over a UD QP.
//!
//! A datagram socket's id lives in `RDMA_PS_UDP`; binding it (explicitly,
//! or on its first `rconnect`/`rsendto`, to device 0's address and an
//! ephemeral port) creates its UD QP through `rdma_create_qp` and makes
//! the id listen, so that peers can resolve the socket's address with a
//! SIDR request: the socket answers with its QP number. A sender resolves
//! each destination once (an id per destination: address, route, SIDR)
//! and keeps the address handle. Each datagram carries a small header
//! with the sender's address, which `rrecvfrom` reports. Datagrams are
//! unreliable, as UD is: a receiver with no buffer free drops them.

use core::ffi::c_int;
use core::ptr;
use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use backend_sim::*;
use verbs_api::*;

use super::conn::RawBuf;
use crate::provider::state::{Fail, Res, Shim, SimRes};

/// Receive buffers per socket.
const RSLOTS: u32 = 64;
/// Send buffers per socket.
const SSLOTS: u32 = 32;
/// The header each datagram carries: magic, family, port, address, length.
const HDR: usize = 32;
/// The largest payload (the header and the payload fit a 4096-byte MTU).
pub(crate) const DG_MAX: usize = 4096 - HDR;
/// A receive buffer: the GRH (40 bytes) UD places first, then a datagram.
const RSLOT: usize = 40 + HDR + DG_MAX;
const SSLOT: usize = HDR + DG_MAX;
/// "VRSD".
const MAGIC: u32 = 0x5652_5344;
const TAG_SEND: u64 = 1 << 32;
const TAG_RECV: u64 = 2 << 32;

/// A destination: being resolved (its id), or ready.
#[derive(Debug)]
pub(crate) enum Dest {
    Resolving,
    Ready { ah: AhHandle, qpn: u32, qkey: u32 },
    Failed(c_int),
}

/// A datagram socket's resources.
#[derive(Debug)]
pub(crate) struct Dgram {
    pd: PdHandle,
    cq: CqHandle,
    rbuf: RawBuf,
    sbuf: RawBuf,
    mrs: [MrHandle; 2],
    lkeys: [u32; 2],
    free: Vec<u32>,
    rx: VecDeque<(u32, usize, SocketAddr)>,
    pub(crate) dests: BTreeMap<SocketAddr, Dest>,
    /// Ids of destinations being resolved → their address.
    pub(crate) resolving: BTreeMap<CmIdHandle, SocketAddr>,
    pub(crate) default_dest: Option<SocketAddr>,
    local: SocketAddr,
}

/// Device 0's address in the family of `a` (a wildcard bind's stand-in).
pub(crate) fn device0(a: SocketAddr) -> SocketAddr {
    let ip = match a.ip() {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
    };
    SocketAddr::new(ip, a.port())
}

fn encode_addr(buf: *mut u8, a: SocketAddr, len: usize) {
    let mut h = [0u8; HDR];
    h[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    let (fam, ip): (u16, [u8; 16]) = match a.ip() {
        IpAddr::V4(v) => {
            let mut b = [0u8; 16];
            b[..4].copy_from_slice(&v.octets());
            (4, b)
        }
        IpAddr::V6(v) => (6, v.octets()),
    };
    h[4..6].copy_from_slice(&fam.to_le_bytes());
    h[6..8].copy_from_slice(&a.port().to_le_bytes());
    h[8..24].copy_from_slice(&ip);
    h[24..28].copy_from_slice(&(len as u32).to_le_bytes());
    // SAFETY: `buf` has HDR bytes (the start of a send slot).
    unsafe { ptr::copy_nonoverlapping(h.as_ptr(), buf, HDR) };
}

fn decode_addr(h: &[u8]) -> Option<(SocketAddr, usize)> {
    if u32::from_le_bytes(h[0..4].try_into().ok()?) != MAGIC {
        return None;
    }
    let port = u16::from_le_bytes(h[6..8].try_into().ok()?);
    let ip: [u8; 16] = h[8..24].try_into().ok()?;
    let ip = match u16::from_le_bytes(h[4..6].try_into().ok()?) {
        4 => IpAddr::V4(Ipv4Addr::new(ip[0], ip[1], ip[2], ip[3])),
        6 => IpAddr::V6(Ipv6Addr::from(ip)),
        _ => return None,
    };
    let len = u32::from_le_bytes(h[24..28].try_into().ok()?) as usize;
    Some((SocketAddr::new(ip, port), len))
}

impl Dgram {
    /// The QP (on the bound id), buffers, receives posted; the id listens.
    pub(crate) fn new(shim: &mut Shim, v: &str, id: CmIdHandle, local: SocketAddr) -> Res<Self> {
        let nomem = || Fail::new(v, libc::ENOMEM, "no memory for the rsocket's buffers");
        let rbuf = RawBuf::new(RSLOTS as usize * RSLOT).ok_or_else(nomem)?;
        let sbuf = RawBuf::new(SSLOTS as usize * SSLOT).ok_or_else(nomem)?;
        let info = shim.sim.rdma_id_info(&id).at(v)?;
        let ctx = info.verbs.ok_or_else(|| {
            Fail::new(
                v,
                libc::EADDRNOTAVAIL,
                format!("the bound address {local} has no device"),
            )
        })?;
        let pd = shim.sim.alloc_pd(&ctx).at(v)?;
        let cq = match shim.sim.create_cq(
            &ctx,
            &CqInit {
                cqe: RSLOTS + SSLOTS,
                ..Default::default()
            },
        ) {
            Ok(c) => c,
            Err(e) => {
                let _ = shim.sim.dealloc_pd(&pd);
                return Err(Fail::sim(v, &e));
            }
        };
        let mut mrs = Vec::new();
        let mut lkeys = [0u32; 2];
        let undo = |shim: &mut Shim, mrs: &[MrHandle]| {
            for m in mrs {
                let _ = shim.sim.dereg_mr(m);
            }
            let _ = shim.sim.destroy_cq(&cq);
            let _ = shim.sim.dealloc_pd(&pd);
        };
        for (k, b) in [&rbuf, &sbuf].into_iter().enumerate() {
            let (addr, len) = (b.ptr as usize, b.len);
            let r = shim
                .sim
                .reg_mr_app(pd, addr as u64, addr, len, AccessFlags::LOCAL_WRITE, || {
                    Box::new(crate::appmem::AppMemory::new(addr, len))
                })
                .and_then(|m| shim.sim.mr_info(&m).map(|i| (m, i.lkey)));
            match r {
                Ok((m, l)) => {
                    mrs.push(m);
                    lkeys[k] = l;
                }
                Err(e) => {
                    undo(shim, &mrs);
                    return Err(Fail::sim(v, &e));
                }
            }
        }
        let mut attr = QpInitAttrEx::<SimVerbs> {
            send_cq: Some(&cq),
            recv_cq: Some(&cq),
            cap: QpCap {
                max_send_wr: SSLOTS,
                max_recv_wr: RSLOTS,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: QpType::Ud,
            ..Default::default()
        };
        if let Err(e) = shim.sim.rdma_create_qp(&id, Some(&pd), &mut attr) {
            undo(shim, &mrs);
            return Err(Fail::sim(v, &e));
        }
        let d = Self {
            pd,
            cq,
            rbuf,
            sbuf,
            mrs: [mrs[0], mrs[1]],
            lkeys,
            free: (0..SSLOTS).rev().collect(),
            rx: VecDeque::new(),
            dests: BTreeMap::new(),
            resolving: BTreeMap::new(),
            default_dest: None,
            local,
        };
        let all: Vec<u32> = (0..RSLOTS).collect();
        let r = d
            .post_recvs(shim, v, id, &all)
            .and_then(|()| shim.sim.rdma_listen(&id, 64).at(v));
        if let Err(f) = r {
            let mut d = d;
            d.destroy(shim, id);
            return Err(f);
        }
        Ok(d)
    }

    fn post_recvs(&self, shim: &mut Shim, v: &str, id: CmIdHandle, slots: &[u32]) -> Res<()> {
        let qp = shim
            .sim
            .rdma_id_info(&id)
            .at(v)?
            .qp
            .ok_or_else(|| Fail::new(v, libc::ENOTCONN, "no QP"))?;
        let sges: Vec<Sge> = slots
            .iter()
            .map(|&s| Sge {
                addr: self.rbuf.addr() + u64::from(s) * RSLOT as u64,
                length: RSLOT as u32,
                lkey: self.lkeys[0],
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
        // SAFETY: this socket's registered receive buffers, live until the QP goes.
        unsafe { shim.sim.post_recv(&qp, &wrs) }.at(v)
    }

    /// Takes completions.
    pub(crate) fn progress(&mut self, shim: &mut Shim, v: &str, id: CmIdHandle) {
        let mut wc = [Wc::default(); 32];
        loop {
            let Ok(n) = shim.sim.poll_cq(&self.cq, &mut wc) else {
                return;
            };
            let mut again = Vec::new();
            for w in &wc[..n] {
                let slot = (w.wr_id & 0xffff_ffff) as u32;
                if w.wr_id & !0xffff_ffff == TAG_SEND {
                    self.free.push(slot);
                    continue;
                }
                if w.status != WcStatus::Success {
                    continue;
                }
                let base = slot as usize * RSLOT + 40;
                let got = (w.byte_len as usize).saturating_sub(40);
                // SAFETY: the header lies inside this receive slot.
                let h = unsafe { core::slice::from_raw_parts(self.rbuf.ptr.add(base), HDR) };
                match decode_addr(h) {
                    Some((src, len)) if got >= HDR && len <= got - HDR => {
                        self.rx.push_back((slot, len, src))
                    }
                    _ => again.push(slot),
                }
            }
            if !again.is_empty() {
                let _ = self.post_recvs(shim, v, id, &again);
            }
            if n < wc.len() {
                return;
            }
        }
    }

    /// Whether a datagram waits.
    pub(crate) fn readable(&self) -> bool {
        !self.rx.is_empty()
    }

    /// Whether a send buffer is free.
    pub(crate) fn writable(&self) -> bool {
        !self.free.is_empty()
    }

    /// Takes the next datagram into `out` (the rest of it is dropped, as
    /// a datagram socket does; kept with `peek`): its length and sender.
    pub(crate) fn recv(
        &mut self,
        shim: &mut Shim,
        v: &str,
        id: CmIdHandle,
        out: &mut [u8],
        peek: bool,
    ) -> Option<(usize, SocketAddr)> {
        let &(slot, len, src) = self.rx.front()?;
        let n = len.min(out.len());
        // SAFETY: the payload lies inside this receive slot; out has n bytes.
        unsafe {
            ptr::copy_nonoverlapping(
                self.rbuf.ptr.add(slot as usize * RSLOT + 40 + HDR),
                out.as_mut_ptr(),
                n,
            )
        };
        if !peek {
            self.rx.pop_front();
            let _ = self.post_recvs(shim, v, id, &[slot]);
        }
        Some((n, src))
    }

    /// Sends `data` to a resolved destination.
    pub(crate) fn send(
        &mut self,
        shim: &mut Shim,
        v: &str,
        id: CmIdHandle,
        to: SocketAddr,
        data: &[u8],
    ) -> Res<usize> {
        if data.len() > DG_MAX {
            return Err(Fail::new(
                v,
                libc::EMSGSIZE,
                format!("{} bytes: a datagram holds at most {DG_MAX}", data.len()),
            ));
        }
        let Some(Dest::Ready { ah, qpn, qkey }) = self.dests.get(&to) else {
            return Err(Fail::new(
                v,
                libc::EDESTADDRREQ,
                "the destination is not resolved",
            ));
        };
        let (ah, qpn, qkey) = (*ah, *qpn, *qkey);
        let slot = self
            .free
            .pop()
            .ok_or_else(|| Fail::new(v, libc::EAGAIN, "no free send buffer"))?;
        let at = slot as usize * SSLOT;
        // SAFETY: header and payload fit the slot (len ≤ DG_MAX).
        unsafe {
            encode_addr(self.sbuf.ptr.add(at), self.local, data.len());
            ptr::copy_nonoverlapping(data.as_ptr(), self.sbuf.ptr.add(at + HDR), data.len());
        }
        let sge = Sge {
            addr: self.sbuf.addr() + at as u64,
            length: (HDR + data.len()) as u32,
            lkey: self.lkeys[1],
        };
        let wr = SendWr::<SimVerbs> {
            wr_id: TAG_SEND | u64::from(slot),
            sg_list: core::slice::from_ref(&sge),
            opcode: WrOpcode::Send,
            send_flags: SendFlags::SIGNALED,
            ud: Some(UdInfo {
                ah: &ah,
                remote_qpn: qpn,
                remote_qkey: qkey,
            }),
            ..Default::default()
        };
        let qp = shim
            .sim
            .rdma_id_info(&id)
            .at(v)?
            .qp
            .ok_or_else(|| Fail::new(v, libc::ENOTCONN, "no QP"))?;
        // SAFETY: the SGE names this socket's registered send slot.
        if let Err(e) = unsafe { shim.sim.post_send(&qp, core::slice::from_ref(&wr)) } {
            self.free.push(slot);
            return Err(Fail::sim(v, &e));
        }
        Ok(data.len())
    }

    /// Starts resolving `to` on channel `ch` (an id of its own).
    pub(crate) fn start_resolve(
        &mut self,
        shim: &mut Shim,
        v: &str,
        ch: CmChannelHandle,
        to: SocketAddr,
    ) -> Res<CmIdHandle> {
        let id = shim.sim.rdma_create_id(&ch, 0, PortSpace::Udp).at(v)?;
        if let Err(e) =
            shim.sim
                .rdma_resolve_addr(&id, Some(SocketAddr::new(self.local.ip(), 0)), to, 2000)
        {
            let _ = shim.sim.rdma_destroy_id(&id);
            return Err(Fail::sim(v, &e));
        }
        self.dests.insert(to, Dest::Resolving);
        self.resolving.insert(id, to);
        Ok(id)
    }

    /// One CM event for a destination id.
    pub(crate) fn dest_event(
        &mut self,
        shim: &mut Shim,
        id: CmIdHandle,
        kind: CmEventType,
        ud: Option<UdParam>,
    ) {
        let Some(&to) = self.resolving.get(&id) else {
            return;
        };
        let done = |d: &mut Self, shim: &mut Shim, dest: Dest| {
            if let Dest::Failed(e) = dest {
                crate::guard::log_err(
                    "rsendto",
                    e,
                    &format_args!("{to} does not resolve ({})", kind.name()),
                );
            }
            d.resolving.remove(&id);
            d.dests.insert(to, dest);
            let _ = shim.sim.rdma_destroy_id(&id);
        };
        match kind {
            CmEventType::AddrResolved if shim.sim.rdma_resolve_route(&id, 2000).is_err() => {
                done(self, shim, Dest::Failed(libc::EHOSTUNREACH));
            }
            CmEventType::RouteResolved
                if shim.sim.rdma_connect(&id, &ConnParam::default()).is_err() =>
            {
                done(self, shim, Dest::Failed(libc::EHOSTUNREACH));
            }
            CmEventType::Established => match ud {
                Some(u) => match shim.sim.create_ah(&self.pd, &u.ah_attr) {
                    Ok(ah) => done(
                        self,
                        shim,
                        Dest::Ready {
                            ah,
                            qpn: u.qp_num,
                            qkey: u.qkey,
                        },
                    ),
                    Err(_) => done(self, shim, Dest::Failed(libc::EHOSTUNREACH)),
                },
                None => done(self, shim, Dest::Failed(libc::EHOSTUNREACH)),
            },
            CmEventType::Rejected | CmEventType::Unreachable | CmEventType::ConnectError => {
                done(self, shim, Dest::Failed(libc::ECONNREFUSED))
            }
            CmEventType::AddrError | CmEventType::RouteError => {
                done(self, shim, Dest::Failed(libc::EHOSTUNREACH))
            }
            _ => {}
        }
    }

    /// Answers a peer's SIDR request with this socket's QP number.
    pub(crate) fn answer(&self, shim: &mut Shim, id: CmIdHandle, req: CmIdHandle) {
        let qpn = shim
            .sim
            .rdma_id_info(&id)
            .ok()
            .and_then(|i| i.qp)
            .and_then(|q| shim.sim.qp_num(&q).ok());
        match qpn {
            Some(n) => {
                let p = ConnParam {
                    qp_num: n,
                    ..Default::default()
                };
                let _ = shim.sim.rdma_accept(&req, &p);
            }
            None => {
                let _ = shim.sim.rdma_reject(&req, &[]);
            }
        }
        let _ = shim.sim.rdma_destroy_id(&req);
    }

    /// Destroys everything.
    pub(crate) fn destroy(&mut self, shim: &mut Shim, id: CmIdHandle) {
        for (rid, _) in core::mem::take(&mut self.resolving) {
            let _ = shim.sim.rdma_destroy_id(&rid);
        }
        for (_, d) in core::mem::take(&mut self.dests) {
            if let Dest::Ready { ah, .. } = d {
                let _ = shim.sim.destroy_ah(&ah);
            }
        }
        let _ = shim.sim.rdma_destroy_qp(&id);
        for m in self.mrs {
            let _ = shim.sim.dereg_mr(&m);
        }
        let _ = shim.sim.destroy_cq(&self.cq);
        let _ = shim.sim.dealloc_pd(&self.pd);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_datagram_header_carries_the_senders_address_of_either_family() {
        for a in ["10.0.1.1:32768", "[fd00::1:1]:7174"] {
            let a: SocketAddr = a.parse().unwrap();
            let mut h = [0u8; HDR];
            encode_addr(h.as_mut_ptr(), a, 1234);
            assert_eq!(decode_addr(&h), Some((a, 1234)));
            h[0] ^= 0xff;
            assert_eq!(decode_addr(&h), None, "not a datagram of ours");
        }
    }
}
