//! How a statement's keys become the masks the C API takes.
//!
//! The format's rule: a mask is **the set of fields given**, unless an
//! explicit mask argument (`attr_mask=`, `comp_mask=`, `srq_attr_mask=`,
//! `dv.comp_mask=`) replaces it. Each function here takes the keys of a
//! statement and returns the derived mask; they are pure so they can be
//! tested without a backend.

use verbs_api::{Mlx5QpInitAttrMask, QpAttrMask, QpInitAttrMask, SrqAttrMask, SrqInitAttrMask};

/// The `ibv_qp_attr_mask` bit a `modify_qp` key selects (`None` for keys
/// that are not attributes, such as `attr_mask` or `qp_num`).
pub fn qp_attr_bit(key: &str) -> Option<QpAttrMask> {
    let bit = match key {
        "qp_state" => QpAttrMask::STATE,
        "cur_qp_state" => QpAttrMask::CUR_STATE,
        "en_sqd_async_notify" => QpAttrMask::EN_SQD_ASYNC_NOTIFY,
        "qp_access_flags" => QpAttrMask::ACCESS_FLAGS,
        "pkey_index" => QpAttrMask::PKEY_INDEX,
        "port_num" => QpAttrMask::PORT,
        "qkey" => QpAttrMask::QKEY,
        "path_mtu" => QpAttrMask::PATH_MTU,
        "timeout" => QpAttrMask::TIMEOUT,
        "retry_cnt" => QpAttrMask::RETRY_CNT,
        "rnr_retry" => QpAttrMask::RNR_RETRY,
        "rq_psn" => QpAttrMask::RQ_PSN,
        "max_rd_atomic" => QpAttrMask::MAX_QP_RD_ATOMIC,
        "min_rnr_timer" => QpAttrMask::MIN_RNR_TIMER,
        "sq_psn" => QpAttrMask::SQ_PSN,
        "max_dest_rd_atomic" => QpAttrMask::MAX_DEST_RD_ATOMIC,
        "path_mig_state" => QpAttrMask::PATH_MIG_STATE,
        "dest_qp_num" => QpAttrMask::DEST_QPN,
        "rate_limit" => QpAttrMask::RATE_LIMIT,
        "alt_pkey_index" | "alt_port_num" | "alt_timeout" => QpAttrMask::ALT_PATH,
        k if k.starts_with("alt_ah_attr.") => QpAttrMask::ALT_PATH,
        k if k.starts_with("ah_attr.") => QpAttrMask::AV,
        k if k.starts_with("cap.") => QpAttrMask::CAP,
        _ => return None,
    };
    Some(bit)
}

/// The `modify_qp` mask: the bits of the fields given (see [`qp_attr_bit`]).
pub fn qp_attr_mask<'a>(keys: impl IntoIterator<Item = &'a str>) -> QpAttrMask {
    keys.into_iter()
        .filter_map(qp_attr_bit)
        .fold(QpAttrMask::empty(), |m, b| m | b)
}

/// The `create_qp_ex` / `mlx5dv_create_qp` default `comp_mask`: `PD` for
/// `pd=`, `XRCD` for `xrcd=`, `CREATE_FLAGS` for `create_flags=` or
/// `source_qpn=`, `SEND_OPS_FLAGS`, `MAX_TSO_HEADER` for their fields.
pub fn qp_init_comp_mask<'a>(keys: impl IntoIterator<Item = &'a str>) -> QpInitAttrMask {
    let mut m = QpInitAttrMask::empty();
    for k in keys {
        m |= match k {
            "pd" => QpInitAttrMask::PD,
            "xrcd" => QpInitAttrMask::XRCD,
            "create_flags" | "source_qpn" => QpInitAttrMask::CREATE_FLAGS,
            "send_ops_flags" => QpInitAttrMask::SEND_OPS_FLAGS,
            "max_tso_header" => QpInitAttrMask::MAX_TSO_HEADER,
            _ => QpInitAttrMask::empty(),
        };
    }
    m
}

/// The default `dv.comp_mask` of `mlx5dv_create_qp`: `QP_CREATE_FLAGS` for
/// `dv.create_flags=`, `DC` for `dv.dc_type=`/`dv.dct_access_key=`,
/// `DCI_STREAMS` for `dv.log_num_concurent=`/`dv.log_num_errored=`,
/// `SEND_OPS_FLAGS` for `dv.send_ops_flags=`.
pub fn dv_comp_mask<'a>(keys: impl IntoIterator<Item = &'a str>) -> Mlx5QpInitAttrMask {
    let mut m = Mlx5QpInitAttrMask::empty();
    for k in keys {
        m |= match k {
            "dv.create_flags" => Mlx5QpInitAttrMask::QP_CREATE_FLAGS,
            "dv.dc_type" | "dv.dct_access_key" => Mlx5QpInitAttrMask::DC,
            "dv.log_num_concurent" | "dv.log_num_errored" => Mlx5QpInitAttrMask::DCI_STREAMS,
            "dv.send_ops_flags" => Mlx5QpInitAttrMask::SEND_OPS_FLAGS,
            _ => Mlx5QpInitAttrMask::empty(),
        };
    }
    m
}

/// The `create_srq_ex` default `comp_mask`: `TYPE`, plus `PD`, `XRCD`, `CQ`
/// for the objects given.
pub fn srq_init_comp_mask<'a>(keys: impl IntoIterator<Item = &'a str>) -> SrqInitAttrMask {
    let mut m = SrqInitAttrMask::TYPE;
    for k in keys {
        m |= match k {
            "pd" => SrqInitAttrMask::PD,
            "xrcd" => SrqInitAttrMask::XRCD,
            "cq" => SrqInitAttrMask::CQ,
            _ => SrqInitAttrMask::empty(),
        };
    }
    m
}

/// The `modify_srq` mask: `MAX_WR` for `max_wr=`, `LIMIT` for `srq_limit=`.
pub fn srq_attr_mask<'a>(keys: impl IntoIterator<Item = &'a str>) -> SrqAttrMask {
    let mut m = SrqAttrMask::empty();
    for k in keys {
        m |= match k {
            "max_wr" => SrqAttrMask::MAX_WR,
            "srq_limit" => SrqAttrMask::LIMIT,
            _ => SrqAttrMask::empty(),
        };
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::QP_ATTR_KEYS;

    // Goal: the modify_qp mask is exactly the set of fields given.
    // Method: the RC RESET→INIT and INIT→RTR field sets of the format's
    // example, and the AV/ALT_PATH/CAP groups, compared with the C bits.
    #[test]
    fn qp_attr_mask_is_the_fields_given() {
        let init = qp_attr_mask(["qp_state", "pkey_index", "port_num", "qp_access_flags"]);
        assert_eq!(
            init,
            QpAttrMask::STATE
                | QpAttrMask::PKEY_INDEX
                | QpAttrMask::PORT
                | QpAttrMask::ACCESS_FLAGS
        );
        let rtr = qp_attr_mask([
            "qp_state",
            "path_mtu",
            "dest_qp_num",
            "rq_psn",
            "max_dest_rd_atomic",
            "min_rnr_timer",
            "ah_attr.dlid",
            "ah_attr.grh.dgid",
        ]);
        assert_eq!(
            rtr,
            QpAttrMask::STATE
                | QpAttrMask::PATH_MTU
                | QpAttrMask::DEST_QPN
                | QpAttrMask::RQ_PSN
                | QpAttrMask::MAX_DEST_RD_ATOMIC
                | QpAttrMask::MIN_RNR_TIMER
                | QpAttrMask::AV
        );
        assert_eq!(
            qp_attr_mask(["alt_ah_attr.dlid", "alt_timeout"]),
            QpAttrMask::ALT_PATH
        );
        assert_eq!(
            qp_attr_mask(["cap.max_send_wr", "rate_limit"]),
            QpAttrMask::CAP | QpAttrMask::RATE_LIMIT
        );
        assert_eq!(
            qp_attr_mask(["attr_mask", "max_rd_atomic"]),
            QpAttrMask::MAX_QP_RD_ATOMIC
        );
        assert_eq!(qp_attr_mask([]), QpAttrMask::empty());
    }

    // Goal: every modify_qp key the parser accepts selects a mask bit.
    // Method: walk the catalogue.
    #[test]
    fn every_qp_attr_key_has_a_bit() {
        for (key, _) in QP_ATTR_KEYS {
            assert!(qp_attr_bit(key).is_some(), "{key} has no mask bit");
        }
    }

    // Goal: the other derived masks follow the objects/fields given.
    // Method: one table row per rule.
    #[test]
    fn other_masks_follow_the_fields_given() {
        assert_eq!(qp_init_comp_mask(["pd", "qp_type"]), QpInitAttrMask::PD);
        assert_eq!(
            qp_init_comp_mask(["xrcd", "source_qpn"]),
            QpInitAttrMask::XRCD | QpInitAttrMask::CREATE_FLAGS
        );
        assert_eq!(
            qp_init_comp_mask(["send_ops_flags", "max_tso_header"]),
            QpInitAttrMask::SEND_OPS_FLAGS | QpInitAttrMask::MAX_TSO_HEADER
        );
        assert_eq!(
            dv_comp_mask(["dv.dc_type", "dv.log_num_errored"]),
            Mlx5QpInitAttrMask::DC | Mlx5QpInitAttrMask::DCI_STREAMS
        );
        assert_eq!(
            dv_comp_mask(["dv.create_flags"]),
            Mlx5QpInitAttrMask::QP_CREATE_FLAGS
        );
        assert_eq!(
            srq_init_comp_mask(["xrcd", "cq", "pd"]),
            SrqInitAttrMask::all_named() - SrqInitAttrMask::TM
        );
        assert_eq!(srq_init_comp_mask([]), SrqInitAttrMask::TYPE);
        assert_eq!(srq_attr_mask(["max_wr"]), SrqAttrMask::MAX_WR);
        assert_eq!(srq_attr_mask(["srq_limit", "max_sge"]), SrqAttrMask::LIMIT);
    }
}
