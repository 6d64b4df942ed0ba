#!/usr/bin/env python3
"""Writes the verbs the drop-in library sends to the shared fabric, in
three files of src/fabric/ whose imports point one way:

* rpc.rs: the message type (`Call`) and the `Transport` trait (over the
  hand-written `Extras` of extra.rs);
* transport.rs: the trait's two implementations, the world in this process
  and the shared fabric (`Remote`'s calls over its socket), and the
  engine's (`Engine`, engine.rs) method per verb;
* dispatch.rs: the fabric's side (`dispatch`).

Each line of VERBS is a `Verbs` method with the simulator's types; the
argument kinds below say how each crosses the wire. Verbs in LOCAL_ONLY
exist only with an in-process world (the fabric answers EOPNOTSUPP, and
says so). Run it after changing either list; do not edit the files it
writes."""
import pathlib, re

root = pathlib.Path(__file__).parent

VERBS = """
get_device_list() -> Vec<DeviceInfo>
open_device(index: usize, process: ProcessId) -> ContextHandle
close_device(ctx: &ContextHandle) -> ()
query_device(ctx: &ContextHandle) -> DeviceAttr
query_port(ctx: &ContextHandle, port_num: u8) -> PortAttr
query_gid(ctx: &ContextHandle, port_num: u8, index: u32) -> Gid
query_pkey(ctx: &ContextHandle, port_num: u8, index: u16) -> u16
query_device_ex(ctx: &ContextHandle) -> DeviceAttrEx
alloc_pd(ctx: &ContextHandle) -> PdHandle
dealloc_pd(pd: &PdHandle) -> ()
create_comp_channel(ctx: &ContextHandle) -> CompChannelHandle
destroy_comp_channel(channel: &CompChannelHandle) -> ()
create_cq(ctx: &ContextHandle, init: &CqInit<'_, SimVerbs>) -> CqHandle
cq_info(cq: &CqHandle) -> CqInfo
destroy_cq(cq: &CqHandle) -> ()
req_notify_cq(cq: &CqHandle, solicited_only: bool) -> ()
get_cq_event(channel: &CompChannelHandle) -> Option<CqHandle>
ack_cq_events(cq: &CqHandle, nevents: u32) -> ()
poll_cq(cq: &CqHandle, wc: &mut [Wc]) -> usize
resize_cq(cq: &CqHandle, cqe: u32) -> ()
create_cq_ex(ctx: &ContextHandle, attr: &CqInitAttrEx<'_, SimVerbs>) -> CqHandle
poll_cq_ex(cq: &CqHandle, wc: &mut [WcEx]) -> usize
mr_info(mr: &MrHandle) -> MrInfo
dereg_mr(mr: &MrHandle) -> ()
rereg_mr(mr: &MrHandle, args: &ReregMr<'_, SimVerbs>) -> ()
alloc_mw(pd: &PdHandle, mw_type: MwType) -> MwHandle
dealloc_mw(mw: &MwHandle) -> ()
mw_info(mw: &MwHandle) -> MwInfo
bind_mw(qp: &QpHandle, mw: &MwHandle, bind: &MwBind<'_, SimVerbs>) -> ()
alloc_dm(ctx: &ContextHandle, attr: &AllocDmAttr) -> DmHandle
free_dm(dm: &DmHandle) -> ()
memcpy_to_dm(dm: &DmHandle, offset: u64, host: &[u8]) -> ()
memcpy_from_dm(dm: &DmHandle, offset: u64, host: &mut [u8]) -> ()
reg_dm_mr(pd: &PdHandle, dm: &DmHandle, offset: u64, length: usize, access: AccessFlags) -> MrHandle
create_srq_ex(ctx: &ContextHandle, attr: &mut SrqInitAttrEx<'_, SimVerbs>) -> SrqHandle
modify_srq(srq: &SrqHandle, attr: &SrqAttr, mask: SrqAttrMask) -> ()
query_srq(srq: &SrqHandle) -> SrqAttr
destroy_srq(srq: &SrqHandle) -> ()
get_srq_num(srq: &SrqHandle) -> u32
create_qp_ex(ctx: &ContextHandle, attr: &mut QpInitAttrEx<'_, SimVerbs>) -> QpHandle
qp_num(qp: &QpHandle) -> u32
modify_qp(qp: &QpHandle, attr: &QpAttr, mask: QpAttrMask) -> ()
query_qp(qp: &QpHandle, mask: QpAttrMask) -> (QpAttr, QpInitInfo)
destroy_qp(qp: &QpHandle) -> ()
open_qp(ctx: &ContextHandle, xrcd: &XrcdHandle, attr: &QpOpenAttr) -> QpHandle
attach_mcast(qp: &QpHandle, gid: &Gid, lid: u16) -> ()
detach_mcast(qp: &QpHandle, gid: &Gid, lid: u16) -> ()
query_qp_data_in_order(qp: &QpHandle, op: WrOpcode, flags: DataInOrderFlags) -> DataInOrderCaps
query_ece(qp: &QpHandle) -> Ece
set_ece(qp: &QpHandle, ece: &mut Ece) -> ()
create_ah(pd: &PdHandle, attr: &AhAttr) -> AhHandle
destroy_ah(ah: &AhHandle) -> ()
unsafe post_send(qp: &QpHandle, wrs: &[SendWr<'_, SimVerbs>]) -> ()
unsafe post_recv(qp: &QpHandle, wrs: &[RecvWr<'_>]) -> ()
unsafe post_srq_recv(srq: &SrqHandle, wrs: &[RecvWr<'_>]) -> ()
unsafe post_wr(qp: &QpHandle, batch: &[WrEx<'_, SimVerbs>]) -> ()
open_xrcd(ctx: &ContextHandle, attr: &XrcdInitAttr) -> XrcdHandle
close_xrcd(xrcd: &XrcdHandle) -> ()
mlx5dv_query_device(ctx: &ContextHandle, comp_mask: Mlx5ContextMask) -> Mlx5Context
mlx5dv_create_qp(ctx: &ContextHandle, attr: &mut QpInitAttrEx<'_, SimVerbs>, mlx5_attr: &Mlx5QpInitAttr) -> QpHandle
mlx5dv_dci_stream_id_reset(qp: &QpHandle, stream_id: u16) -> ()
mlx5dv_reserved_qpn_alloc(ctx: &ContextHandle) -> u32
mlx5dv_reserved_qpn_dealloc(ctx: &ContextHandle, qpn: u32) -> ()
mlx5dv_get_clock_info(ctx: &ContextHandle) -> ClockInfo
query_rt_values_ex(ctx: &ContextHandle) -> u64
advise_mr(pd: &PdHandle, advice: AdviseMrAdvice, flags: u32, sg_list: &[Sge]) -> ()
rdma_create_event_channel() -> CmChannelHandle
rdma_destroy_event_channel(channel: &CmChannelHandle) -> ()
rdma_create_id(channel: &CmChannelHandle, context: u64, ps: PortSpace) -> CmIdHandle
rdma_destroy_id(id: &CmIdHandle) -> ()
rdma_id_info(id: &CmIdHandle) -> CmIdInfo<SimVerbs>
rdma_bind_addr(id: &CmIdHandle, addr: SocketAddr) -> ()
rdma_resolve_addr(id: &CmIdHandle, src: Option<SocketAddr>, dst: SocketAddr, timeout_ms: u32) -> ()
rdma_resolve_route(id: &CmIdHandle, timeout_ms: u32) -> ()
rdma_listen(id: &CmIdHandle, backlog: i32) -> ()
rdma_connect(id: &CmIdHandle, param: &ConnParam) -> ()
rdma_accept(id: &CmIdHandle, param: &ConnParam) -> ()
rdma_reject(id: &CmIdHandle, private_data: &[u8]) -> ()
rdma_reject_ece(id: &CmIdHandle, private_data: &[u8]) -> ()
rdma_disconnect(id: &CmIdHandle) -> ()
rdma_get_cm_event(channel: &CmChannelHandle) -> Option<CmEvent<SimVerbs>>
rdma_ack_cm_event(event: CmEvent<SimVerbs>) -> ()
rdma_create_qp(id: &CmIdHandle, pd: Option<&PdHandle>, attr: &mut QpInitAttrEx<'_, SimVerbs>) -> QpHandle
rdma_create_qp_ex(id: &CmIdHandle, attr: &mut QpInitAttrEx<'_, SimVerbs>) -> QpHandle
rdma_destroy_qp(id: &CmIdHandle) -> ()
rdma_init_qp_attr(id: &CmIdHandle, state: QpState) -> (QpAttr, QpAttrMask)
rdma_establish(id: &CmIdHandle) -> ()
rdma_migrate_id(id: &CmIdHandle, channel: &CmChannelHandle) -> ()
rdma_notify(id: &CmIdHandle, event: AsyncEventType) -> ()
rdma_join_multicast(id: &CmIdHandle, addr: SocketAddr, context: u64) -> ()
rdma_join_multicast_ex(id: &CmIdHandle, attr: &JoinMcAttr, context: u64) -> ()
rdma_leave_multicast(id: &CmIdHandle, addr: SocketAddr) -> ()
"""

LOCAL_ONLY = """
sim_control(cmd: SimCommand<'_, SimVerbs>) -> SimReply
"""

# Borrowing argument types and their owned wire forms (src/fabric/wire.rs).
WIRE = {
    "&CqInit<'_, SimVerbs>": ("CqInitW", "CqInitW::from({a})", "&{a}.view()", None),
    "&CqInitAttrEx<'_, SimVerbs>": ("CqInitAttrExW", "CqInitAttrExW::from({a})", "&{a}.view()", None),
    "&ReregMr<'_, SimVerbs>": ("ReregMrW", "ReregMrW::from({a})", "&{a}.view()", None),
    "&MwBind<'_, SimVerbs>": ("MwBindW", "MwBindW::from({a})", "&{a}.view()", None),
    "&mut SrqInitAttrEx<'_, SimVerbs>": ("SrqInitAttrExW", "SrqInitAttrExW::from({a})", None, "attr"),
    "&mut QpInitAttrEx<'_, SimVerbs>": ("QpInitAttrExW", "QpInitAttrExW::from({a})", None, "cap"),
    "&[SendWr<'_, SimVerbs>]": ("Vec<SendWrW>", "SendWrW::list({a})", "&SendWrW::views(&{a})", None),
    "&[RecvWr<'_>]": ("Vec<RecvWrW>", "RecvWrW::list({a})", "&RecvWrW::views(&{a})", None),
    "&[WrEx<'_, SimVerbs>]": ("Vec<WrExW>", "WrExW::list({a})", "&WrExW::views(&{a})", None),
    "&[Sge]": ("Vec<Sge>", "{a}.to_vec()", "&{a}", None),
}
HANDLES = {"ContextHandle", "PdHandle", "CqHandle", "CompChannelHandle", "MrHandle", "SrqHandle",
           "QpHandle", "AhHandle", "XrcdHandle", "MwHandle", "DmHandle", "CmChannelHandle", "CmIdHandle"}
# Objects a session owns, freed when its process leaves: creator -> kind.
OWNED = {"ContextHandle": "Context", "PdHandle": "Pd", "CqHandle": "Cq",
         "CompChannelHandle": "Channel", "SrqHandle": "Srq", "QpHandle": "Qp",
         "AhHandle": "Ah", "XrcdHandle": "Xrcd", "MwHandle": "Mw", "DmHandle": "Dm",
         "CmChannelHandle": "CmChannel", "CmIdHandle": "CmId"}
DESTROY = {"close_device": "Context", "dealloc_pd": "Pd", "destroy_comp_channel": "Channel",
           "destroy_cq": "Cq", "dereg_mr": "Mr", "dealloc_mw": "Mw", "free_dm": "Dm", "destroy_srq": "Srq",
           "destroy_qp": "Qp", "destroy_ah": "Ah", "close_xrcd": "Xrcd",
           "rdma_destroy_event_channel": "CmChannel", "rdma_destroy_id": "CmId"}

# Verbs whose result a session owns although their return type is made by
# other verbs too (MRs: the fabric's reg_mr_external is in serve_extra.rs).
OWNED_BY_VERB = {"reg_dm_mr": "Mr"}


def parse(text):
    out = []
    for line in text.strip().splitlines():
        m = re.match(r"(unsafe )?(\w+)\((.*)\) -> (.*)$", line.strip())
        unsafe, name, args, ret = m.groups()
        params = []
        depth, cur = 0, ""
        for ch in args:
            if ch == "<":
                depth += 1
            if ch == ">":
                depth -= 1
            if ch == "," and depth == 0:
                params.append(cur.strip())
                cur = ""
            else:
                cur += ch
        if cur.strip():
            params.append(cur.strip())
        params = [tuple(x.strip() for x in p.split(":", 1)) for p in params]
        out.append((bool(unsafe), name, params, ret))
    return out


def camel(name):
    return "".join(p.capitalize() for p in name.split("_"))


def kind(ty):
    """(wire type, encode, decode-expr, write-back field) of an argument."""
    if ty in WIRE:
        return WIRE[ty]
    if ty == "&[u8]":
        return ("Vec<u8>", "{a}.to_vec()", "&{a}", None)
    if ty.startswith("Option<&") and ty[8:-1] in HANDLES:
        return (f"Option<{ty[8:-1]}>", "{a}.copied()", "{a}.as_ref()", None)
    if ty in ("&mut [Wc]", "&mut [WcEx]"):
        return ("usize", "{a}.len()", None, "out")
    if ty == "&mut [u8]":
        return ("usize", "{a}.len()", None, "bytes")
    if ty.startswith("&mut "):
        return (ty[5:], "{a}.clone()", None, "value")
    if ty.startswith("&") and ty[1:] in HANDLES:
        return (ty[1:], "*{a}", "&{a}", None)
    if ty.startswith("&"):
        return (ty[1:], "{a}.clone()", "&{a}", None)
    return (ty, "{a}", "{a}", None)


KIND = dict(OWNED, MrHandle="Mr")
WIRE_HANDLES = {"CqInitW", "CqInitAttrExW", "ReregMrW", "MwBindW", "SrqInitAttrExW",
                "QpInitAttrExW", "Vec<SendWrW>", "Vec<RecvWrW>", "Vec<WrExW>"}


def handle_checks(a, ty):
    """Statements pushing the handles argument `a` (of trait type `ty`) names."""
    wire = kind(ty)[0]
    if wire in KIND:
        return [f"hs.push(Owned::{KIND[wire]}({a}));"]
    if wire.startswith("Option<") and wire[7:-1] in KIND:
        return [f"hs.extend({a}.map(Owned::{KIND[wire[7:-1]]}));"]
    if wire in WIRE_HANDLES:
        return [f"{a}.handles(&mut hs);"]
    if wire == "CmEvent<SimVerbs>":
        # The id the event is counted on (the listener for a connection
        # request): the request's new id may be destroyed before the
        # listener's event is acknowledged, as librdmacm allows.
        return [f"hs.push(Owned::CmId({a}.listen_id.unwrap_or({a}.id)));"]
    return []


def sig(unsafe, name, params, ret, suffix=""):
    ps = ", ".join(f"{a}: {t}" for a, t in params)
    u = "unsafe " if unsafe else ""
    return f"pub(crate) {u}fn {name}{suffix}(&mut self{', ' if ps else ''}{ps}) -> Result<{ret}>"


# Verbs whose client side is written by hand (src/fabric/fast.rs: the
# queues in shared memory); their call over the socket is generated as
# `NAME_by_call`, which the hand-written side uses when it must.
BY_HAND = {"poll_cq", "poll_cq_ex", "destroy_cq", "resize_cq", "post_send", "post_recv", "dereg_mr",
           "post_srq_recv", "post_wr", "create_ah", "destroy_ah"}


verbs = parse(VERBS)
local_only = parse(LOCAL_ONLY)
files = {}
o = []
w = o.append
w("//! The verbs the drop-in library sends to the shared fabric: the message")
w("//! ([`Call`]) and the [`Transport`] trait every verb of the library goes")
w("//! through. Generated by `shim/gen-rpc.py`; do not edit.")
w("")
w("use std::net::SocketAddr;")
w("")
w("use backend_sim::*;")
w("use serde::{Deserialize, Serialize};")
w("use verbs_api::*;")
w("")
w("use super::extra::{ExtraCall, Extras};")
w("use super::wire::*;")
w("")
w("/// One verb call, with its arguments in their owned wire forms.")
w("#[derive(Debug, Serialize, Deserialize)]")
w("pub(crate) enum Call {")
for unsafe, name, params, ret in verbs:
    tys = [kind(t)[0] for _, t in params]
    w(f"    /// `{name}`.")
    w(f"    {camel(name)}({', '.join(tys)}),")
w("    /// Calls the fabric serves beside the trait's verbs (src/fabric/extra.rs).")
w("    Extra(ExtraCall),")
w("}")
w("")
VERB_OF = {"rdma_id_info": "RdmaCreateId", "cq_info": "CreateCq", "mr_info": "RegMr", "mw_info": "AllocMw", "qp_num": "QueryQp"}
w("impl Call {")
w("    /// The verb this call is, for errors about its transport.")
w("    pub(crate) fn verb(&self) -> Verb {")
w("        match self {")
for unsafe, name, params, ret in verbs:
    w(f"            Self::{camel(name)}(..) => Verb::{VERB_OF.get(name, camel(name))},")
w("            Self::Extra(x) => x.verb(),")
w("        }")
w("    }")
w("}")
w("")
rpc_head = o
o = []
w = o.append
w("impl Remote {")
for unsafe, name, params, ret in verbs:
    by_hand = name in BY_HAND
    doc = f"    /// `{name}` on the shared fabric" + (", as a call over the socket." if by_hand else ".")
    w(doc)
    if unsafe:
        w("    /// # Safety")
        w("    /// None beyond the trait's: the fabric reads the memory the requests name itself.")
    w(f"    {sig(unsafe, name, params, ret, '_by_call' if by_hand else '')} {{")
    enc = ", ".join(kind(t)[1].format(a=a) for a, t in params)
    wbs = [(a, t, kind(t)) for a, t in params if kind(t)[3]]
    if wbs:
        wb_tys = []
        for a, t, k in wbs:
            if k[3] in ("out", "bytes"):
                wb_tys.append(f"Vec<{t[6:-1]}>")
            else:
                wb_tys.append(k[0])
        w(f"        let r: Result<({ret}, {', '.join(wb_tys)})> = self.call(&Call::{camel(name)}({enc}));")
        names = ", ".join(f"wb_{a}" for a, _, _ in wbs)
        w(f"        let (ret, {names}) = r?;")
        for a, t, k in wbs:
            if k[3] == "out":
                w(f"        {a}[..wb_{a}.len()].copy_from_slice(&wb_{a});")
            elif k[3] == "bytes":
                w(f"        let n = wb_{a}.len().min({a}.len());")
                w(f"        {a}[..n].copy_from_slice(&wb_{a}[..n]);")
            elif k[3] == "value":
                w(f"        *{a} = wb_{a};")
            else:
                w(f"        {a}.{k[3]} = wb_{a}.{k[3]};")
        w("        Ok(ret)")
    else:
        w(f"        self.call(&Call::{camel(name)}({enc}))")
    w("    }")
w("}")
w("")
remote_by_call = o
o = []
w = o.append
w("//! The fabric's side of the verbs ([`dispatch`]). Generated by")
w("//! `shim/gen-rpc.py`; do not edit.")
w("#![allow(clippy::too_many_lines, clippy::needless_borrow, clippy::clone_on_copy, clippy::vec_init_then_push)]")
w("")
w("use backend_sim::*;")
w("use verbs_api::*;")
w("")
w("use super::family::{Owned, Session};")
w("use super::rpc::Call;")
w("use super::wire::*;")
w("")
w("/// Runs one call on the fabric's world for `session`; the postcard bytes")
w("/// of its `Result` (with the arguments the verb writes back).")
w("///")
w("/// Every handle the call names must be one of the session's family's")
w("/// objects (as each process has its own uverbs file): any other is")
w("/// refused before the world sees it ([`Session::check`]).")
w("pub(crate) fn dispatch(sim: &mut SimVerbs, session: &mut Session<'_>, call: Call) -> Vec<u8> {")
w("    let verb = call.verb();")
w("    match call {")
for unsafe, name, params, ret in verbs:
    args = [f"a{i}" for i in range(len(params))]
    mut = any(kind(t)[3] for _, t in params)
    w(f"        Call::{camel(name)}({', '.join(('mut ' if kind(t)[3] not in (None, 'out', 'bytes') else '') + a for a, (_, t) in zip(args, params))}) => {{")
    checks = []
    for a, (pn, t) in zip(args, params):
        checks.extend(handle_checks(a, t))
    if checks:
        w("            let mut hs: Vec<Owned> = Vec::new();")
        for c in checks:
            w(f"            {c}")
        w("            if let Err(e) = session.check(verb, &hs) {")
        w("                return super::encode(&Err::<(), Error>(e));")
        w("            }")
    if name == "open_device":
        # The family, not the client, says which process a context is of.
        w("            let _ = a1;")
        w("            let a1 = session.process();")
    pre, callargs, post = [], [], []
    for a, (pn, t) in zip(args, params):
        k = kind(t)
        if k[3] == "out":
            elem = t[6:-1]
            pre.append(f"let mut buf_{a} = vec![{elem}::default(); {a}.min(4096)];")
            callargs.append(f"&mut buf_{a}")
        elif k[3] == "bytes":
            # The verb checks the length against the object before it
            # copies; the bound keeps a garbage length from allocating
            # without limit (a longer copy fails as any past the end).
            pre.append(f"let mut buf_{a} = vec![0u8; {a}.min(1 << 30)];")
            callargs.append(f"&mut buf_{a}")
        elif k[3] == "value":
            callargs.append(f"&mut {a}")
        elif k[3] in ("attr", "cap"):
            pre.append(f"let mut view_{a} = {a}.view();")
            callargs.append(f"&mut view_{a}")
            post.append(f"let wb_{a} = view_{a}.{k[3]};")
            post.append(f"{a}.{k[3]} = wb_{a};")
        else:
            callargs.append(k[2].format(a=a))
    for p in pre:
        w(f"            {p}")
    call = f"Verbs::{name}(sim, {', '.join(callargs)})"
    if name == "rdma_create_event_channel":
        # The family's process owns the channel, its ids, and the CM's
        # device contexts and default PDs made for them (each process's
        # librdmacm opens its own): never shared with another process.
        call = "Ok::<_, Error>(sim.world_mut().rdma_create_event_channel_of(session.process()))"
    if unsafe:
        w("            // SAFETY: the simulator owns or copies every byte a request names")
        w("            // (a client's memory is reached through process_vm_readv/writev).")
        w(f"            let r = unsafe {{ {call} }};")
    else:
        w(f"            let r = {call};")
    for p in post:
        w(f"            {p}")
    if ret in OWNED or name in OWNED_BY_VERB:
        w(f"            if let Ok(h) = &r {{")
        w(f"                session.own(Owned::{OWNED_BY_VERB.get(name) or OWNED[ret]}(*h));")
        w(f"            }}")
    if name == "rdma_get_cm_event":
        # A connection request's new id is the listener's process's.
        w("            if let Ok(Some(ev)) = &r {")
        w("                session.own(Owned::CmId(ev.id));")
        w("            }")
    if name == "rdma_id_info":
        # What the CM made for an id of ours (its device context, default
        # PD, automatic CQs and channels) is reached through it.
        w("            if let Ok(i) = &r {")
        w("                let made = [")
        w("                    i.verbs.map(Owned::Context),")
        w("                    i.pd.map(Owned::Pd),")
        w("                    i.qp.map(Owned::Qp),")
        w("                    i.send_cq.map(Owned::Cq),")
        w("                    i.recv_cq.map(Owned::Cq),")
        w("                    i.send_cq_channel.map(Owned::Channel),")
        w("                    i.recv_cq_channel.map(Owned::Channel),")
        w("                ];")
        w("                for o in made.into_iter().flatten() {")
        w("                    session.adopt(o);")
        w("                }")
        w("            }")
    if name in DESTROY:
        w(f"            if r.is_ok() {{")
        w(f"                session.disown(Owned::{DESTROY[name]}(a0));")
        w(f"            }}")
    wbs = [(a, t, kind(t)) for a, (_, t) in zip(args, params) if kind(t)[3]]
    if wbs:
        parts = []
        for a, t, k in wbs:
            if k[3] in ("out", "bytes"):
                parts.append(f"buf_{a}")
            else:
                parts.append(a)
        outs = [a for a, t, k in wbs if k[3] == "out"]
        if outs:
            o_ = outs[0]
            w(f"            super::encode(&r.map(|n| {{ buf_{o_}.truncate(n); (n, {', '.join(parts)}) }}))")
        else:
            w(f"            super::encode(&r.map(|x| (x, {', '.join(parts)})))")
    else:
        w("            super::encode(&r)")
    w("        }")
w("        Call::Extra(x) => super::serve_extra::dispatch(sim, session, x),")
w("    }")
w("}")
files["dispatch.rs"] = o
o = rpc_head
w = o.append
def tsig(unsafe, name, params, ret):
    ps = ", ".join(f"{a}: {t}" for a, t in params)
    u = "unsafe " if unsafe else ""
    return f"{u}fn {name}(&mut self{', ' if ps else ''}{ps}) -> Result<{ret}>"


w("/// Where the library's verbs go: the bottom layer of the drop-in library.")
w("/// Two implementations (transport.rs): the world in this process")
w("/// (`SimVerbs`) and the shared fabric (`Remote`: calls over its socket,")
w("/// the data path through queues in shared memory). Everything above")
w("/// reaches them through `Engine::transport`, so one code path serves")
w("/// both. What the library asks beyond the `Verbs` trait's verbs is the")
w("/// hand-written [`Extras`].")
w("pub(crate) trait Transport: Extras {")
for unsafe, name, params, ret in verbs + local_only:
    w(f"    /// `{name}`.")
    if unsafe:
        w("    /// # Safety")
        w("    /// As `Verbs`' method of the same name.")
    w(f"    {tsig(unsafe, name, params, ret)};")
w("}")
files["rpc.rs"] = o
o = []
w = o.append
w("//! The [`Transport`] trait's two implementations, the world in this")
w("//! process ([`SimVerbs`]) and the shared fabric ([`Remote`]: a call over")
w("//! its socket per verb, beside the hand-written data path of fast.rs),")
w("//! and the [`Engine`]'s method per verb. Generated by `shim/gen-rpc.py`;")
w("//! do not edit.")
w("#![allow(clippy::too_many_lines, clippy::needless_borrow, clippy::clone_on_copy)]")
w("")
w("use std::net::SocketAddr;")
w("")
w("use backend_sim::*;")
w("use verbs_api::*;")
w("")
w("use super::client::Remote;")
w("use super::engine::Engine;")
w("use super::rpc::{Call, Transport};")
w("use super::wire::*;")
w("")
o.extend(remote_by_call)
w("impl Transport for SimVerbs {")
for unsafe, name, params, ret in verbs + local_only:
    an = ", ".join(a for a, _ in params)
    w(f"    {tsig(unsafe, name, params, ret)} {{")
    if unsafe:
        w("        // SAFETY: the caller's contract, forwarded.")
        w(f"        unsafe {{ Verbs::{name}(self{', ' if an else ''}{an}) }}")
    else:
        w(f"        Verbs::{name}(self{', ' if an else ''}{an})")
    w("    }")
w("}")
w("")
w("impl Transport for Remote {")
for unsafe, name, params, ret in verbs:
    an = ", ".join(a for a, _ in params)
    w(f"    {tsig(unsafe, name, params, ret)} {{")
    if unsafe:
        w("        // SAFETY: the caller's contract, forwarded.")
        w(f"        unsafe {{ Self::{name}(self{', ' if an else ''}{an}) }}")
    else:
        w(f"        Self::{name}(self{', ' if an else ''}{an})")
    w("    }")
for unsafe, name, params, ret in local_only:
    ps = ", ".join(f"_{a}: {t}" for a, t in params)
    w(f"    fn {name}(&mut self{', ' if ps else ''}{ps}) -> Result<{ret}> {{")
    w(f"        Err(super::not_served(Verb::{VERB_OF.get(name, camel(name))}))")
    w("    }")
w("}")
w("")
w("impl Engine {")
for unsafe, name, params, ret in verbs + local_only:
    w(f"    /// `{name}`, on the engine's transport.")
    if unsafe:
        w("    /// # Safety")
        w("    /// As the trait's method.")
    w(f"    {sig(unsafe, name, params, ret)} {{")
    an = ", ".join(a for a, _ in params)
    if unsafe:
        w("        // SAFETY: the caller's contract, forwarded.")
        w(f"        unsafe {{ self.transport().{name}({an}) }}")
    else:
        w(f"        self.transport().{name}({an})")
    w("    }")
w("}")
files["transport.rs"] = o
for name, lines in files.items():
    (root / "src" / "fabric" / name).write_text("\n".join(lines) + "\n")
print(f"{len(verbs)} verbs served, {len(local_only)} in-process only")
