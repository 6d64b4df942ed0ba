//! The connection handshake every RC, UC and UD program writes: RESET →
//! INIT → RTR → RTS with exactly the attribute masks the transition table
//! requires (the twin of the script statement `connect`; issue #20 item 8).
//!
//! The two sides exchange an [`Endpoint`] each (QP number, LID, GID, PSN;
//! over TCP, a file, or in one process by hand) and call [`connect_qp`]:
//!
//! ```
//! # use verbs_api::*;
//! # fn demo<V: Verbs>(v: &mut V, ctx_a: &V::Context, a: &V::Qp, ctx_b: &V::Context, b: &V::Qp) -> Result<()> {
//! let ea = Endpoint::query(v, ctx_a, a, 1)?;
//! let eb = Endpoint::query(v, ctx_b, b, 1)?;
//! connect_qp(v, a, &ea, &eb, &ConnectOptions::default())?;
//! connect_qp(v, b, &eb, &ea, &ConnectOptions::default())?;
//! # Ok(()) }
//! ```

use crate::{
    transition_masks, AccessFlags, Error, ErrorKind, Gid, LinkLayer, Mtu, QpAttr, QpAttrMask,
    QpClass, QpState, QpType, Result, TableFlavor, Verb, Verbs,
};

/// What one side tells the other to connect: the fields `ibv_rc_pingpong`
/// exchanges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Endpoint {
    /// The QP's number.
    pub qp_num: u32,
    /// The QP's type (both sides must agree).
    pub qp_type: QpType,
    /// The port's LID (0 on RoCE).
    pub lid: u16,
    /// The port's GID 0 on RoCE (a GRH is then required); `None` on
    /// InfiniBand, where the LID routes.
    pub gid: Option<Gid>,
    /// The port the QP uses.
    pub port_num: u8,
    /// The first PSN this side sends (the peer's `rq_psn`).
    pub psn: u32,
    /// The port's active MTU (the connection uses the smaller of the two).
    pub mtu: Mtu,
}

impl Endpoint {
    /// This side's endpoint: the QP's number and type (`ibv_query_qp`),
    /// the port's LID, MTU and, on RoCE, GID 0 (`ibv_query_port`,
    /// `ibv_query_gid`); PSN 0.
    ///
    /// # Errors
    /// Whatever those verbs return.
    pub fn query<V: Verbs + ?Sized>(
        v: &mut V,
        ctx: &V::Context,
        qp: &V::Qp,
        port_num: u8,
    ) -> Result<Self> {
        let qp_num = v.qp_num(qp)?;
        let (_, init) = v.query_qp(qp, QpAttrMask::STATE)?;
        let port = v.query_port(ctx, port_num)?;
        let gid = if port.link_layer == LinkLayer::Ethernet {
            Some(v.query_gid(ctx, port_num, 0)?)
        } else {
            None
        };
        Ok(Self {
            qp_num,
            qp_type: init.qp_type,
            lid: port.lid,
            gid,
            port_num,
            psn: 0,
            mtu: port.active_mtu,
        })
    }
}

/// The attributes [`connect_qp`] sets, with the defaults of the script's
/// `connect` (docs/script-format.md) except `rnr_retry`, which is finite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ConnectOptions {
    /// `qp_access_flags` at INIT (RC: WRITE, READ and atomics; UC is cut
    /// to WRITE).
    pub access: AccessFlags,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `path_mtu`: `None` takes the smaller active MTU of the two ports.
    pub path_mtu: Option<Mtu>,
    /// `min_rnr_timer` (RC): 12 is 0.64 ms.
    pub min_rnr_timer: u8,
    /// `timeout` (RC): 4.096 µs × 2^timeout before a retransmission; 14 is
    /// about 67 ms.
    pub timeout: u8,
    /// `retry_cnt` (RC).
    pub retry_cnt: u8,
    /// `rnr_retry` (RC): 6, finite, so a missing receive ends in
    /// `RNR_RETRY_EXC_ERR` instead of retrying for ever (7).
    pub rnr_retry: u8,
    /// `max_rd_atomic` (RC): READs/atomics this side has in flight.
    pub max_rd_atomic: u8,
    /// `max_dest_rd_atomic` (RC): READs/atomics it answers at once.
    pub max_dest_rd_atomic: u8,
    /// `qkey` (UD).
    pub qkey: u32,
    /// GRH hop limit on RoCE.
    pub hop_limit: u8,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            access: AccessFlags::REMOTE_WRITE
                | AccessFlags::REMOTE_READ
                | AccessFlags::REMOTE_ATOMIC,
            pkey_index: 0,
            path_mtu: None,
            min_rnr_timer: 12,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 6,
            max_rd_atomic: 1,
            max_dest_rd_atomic: 1,
            qkey: 0x1111_1111,
            hop_limit: 64,
        }
    }
}

/// Brings `qp` (described by `local`) from RESET to RTS towards `remote`
/// with exactly the masks the transition table requires for its type
/// (`ibv_modify_qp` three times). RC, UC and UD QPs; for UD `remote` is
/// not read (a UD QP addresses each send).
///
/// # Errors
/// `EINVAL` for another QP type or when the two sides' types differ; the
/// first `ibv_modify_qp` that fails otherwise (the QP stays where that
/// call left it, as with the C handshake).
pub fn connect_qp<V: Verbs + ?Sized>(
    v: &mut V,
    qp: &V::Qp,
    local: &Endpoint,
    remote: &Endpoint,
    opts: &ConnectOptions,
) -> Result<()> {
    let class = match local.qp_type {
        QpType::Rc | QpType::Uc | QpType::Ud => {
            QpClass::from_qp_type(local.qp_type, None).expect("RC, UC and UD have a class")
        }
        t => {
            return Err(Error::new(
                Verb::ModifyQp,
                ErrorKind::InvalidArgument,
                format!("connect_qp: RC, UC and UD QPs, not {t}"),
            ))
        }
    };
    if local.qp_type != QpType::Ud && remote.qp_type != local.qp_type {
        return Err(Error::new(
            Verb::ModifyQp,
            ErrorKind::InvalidArgument,
            format!(
                "connect_qp: a {} QP cannot connect to a {} QP",
                local.qp_type, remote.qp_type
            ),
        ));
    }
    let mut a = QpAttr {
        pkey_index: opts.pkey_index,
        port_num: local.port_num,
        qp_access_flags: if local.qp_type == QpType::Uc {
            opts.access.intersection(AccessFlags::REMOTE_WRITE)
        } else {
            opts.access
        },
        qkey: opts.qkey,
        path_mtu: opts.path_mtu.unwrap_or(local.mtu.min(remote.mtu)),
        dest_qp_num: remote.qp_num,
        rq_psn: remote.psn,
        sq_psn: local.psn,
        min_rnr_timer: opts.min_rnr_timer,
        timeout: opts.timeout,
        retry_cnt: opts.retry_cnt,
        rnr_retry: opts.rnr_retry,
        max_rd_atomic: opts.max_rd_atomic,
        max_dest_rd_atomic: opts.max_dest_rd_atomic,
        ..QpAttr::default()
    };
    a.ah_attr.dlid = remote.lid;
    a.ah_attr.port_num = local.port_num;
    if let Some(gid) = remote.gid {
        a.ah_attr.is_global = true;
        a.ah_attr.grh.dgid = gid;
        a.ah_attr.grh.hop_limit = opts.hop_limit;
    }
    for (from, to) in [
        (QpState::Reset, QpState::Init),
        (QpState::Init, QpState::ReadyToReceive),
        (QpState::ReadyToReceive, QpState::ReadyToSend),
    ] {
        let masks = transition_masks(class, from, to, TableFlavor::Kernel)
            .expect("RESET->INIT->RTR->RTS is legal for RC, UC and UD");
        a.qp_state = to;
        v.modify_qp(qp, &a, masks.required | QpAttrMask::STATE)?;
    }
    Ok(())
}
