//! Layout tests: every hand-declared struct (and the hand-written types of
//! rdma-sys that we pass to C) is compared with the installed C headers.
//!
//! The test generates a small C program that prints `sizeof`, `_Alignof`
//! and `offsetof` for each struct and member named in [`probes`], compiles it
//! with `$CC` (default `cc`) against `/usr/include`, runs it, and compares
//! each number with the Rust `size_of`/`align_of`/`offset_of!` of the same
//! item. A wrong, missing or reordered field changes an offset or the size
//! and fails the test; `checker_catches_a_wrong_field` proves the checker is
//! not vacuous.
//!
//! `struct mlx5dv_context` is checked twice (see `ffi::mlx5dv`'s docs):
//! against the installed rdma-core 44 header for every field that header has
//! (with "ours is at least as large" for the size, and "the upstream-only
//! tail starts at or after the end of the installed struct"), and against a
//! C restatement of the upstream layout built from the installed member
//! types, for every field.

use core::mem::{align_of, offset_of, size_of};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

use rdma_sys::*;

use super::mlx5dv::*;
use super::posix::{sockaddr_in, sockaddr_in6};
use super::verbs::ibv_async_event_raw;

/// How the Rust size must relate to the C size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SizeRule {
    Exact,
    /// Rust may be larger (a newer layout that extends the installed one).
    AtLeast,
}

/// One struct to check: the Rust numbers and the C expressions to compare.
struct Probe {
    c_type: &'static str,
    size: usize,
    align: usize,
    rule: SizeRule,
    /// (C member designator, Rust offset)
    fields: Vec<(&'static str, usize)>,
}

macro_rules! probe {
    ($rust:ty => $c:literal, $rule:ident { $($($f:ident).+ => $cf:literal),* $(,)? }) => {
        Probe {
            c_type: $c,
            size: size_of::<$rust>(),
            align: align_of::<$rust>(),
            rule: SizeRule::$rule,
            fields: vec![$(($cf, offset_of!($rust, $($f).+))),*],
        }
    };
}

/// C restatement of the upstream `struct mlx5dv_context` (rdma-core ≥ 55),
/// built from the member types the installed header already has.
const UPSTREAM_CONTEXT_C: &str = r#"
struct verbsim_mlx5dv_context_upstream {
    uint8_t version;
    uint64_t flags;
    uint64_t comp_mask;
    struct mlx5dv_cqe_comp_caps cqe_comp_caps;
    struct mlx5dv_sw_parsing_caps sw_parsing_caps;
    struct mlx5dv_striding_rq_caps striding_rq_caps;
    uint32_t tunnel_offloads_caps;
    uint32_t max_dynamic_bfregs;
    uint64_t max_clock_info_update_nsec;
    uint32_t flow_action_flags;
    uint32_t dc_odp_caps;
    void *hca_core_clock;
    uint8_t num_lag_ports;
    struct mlx5dv_sig_caps sig_caps;
    struct mlx5dv_dci_streams_caps dci_streams_caps;
    size_t max_wr_memcpy_length;
    struct mlx5dv_crypto_caps crypto_caps;
    uint64_t max_dc_rd_atom;
    uint64_t max_dc_init_rd_atom;
    struct mlx5dv_reg reg_c0;
    struct { uint32_t max_rc, max_xrc, max_dct, max_ud, max_uc; } ooo_recv_wrs_caps;
};
"#;

fn probes() -> Vec<Probe> {
    vec![
        // ---------------- hand-declared mlx5dv ----------------
        probe!(mlx5dv_dci_streams => "struct mlx5dv_dci_streams", Exact {
            log_num_concurent => "log_num_concurent",
            log_num_errored => "log_num_errored",
        }),
        probe!(mlx5dv_dc_init_attr => "struct mlx5dv_dc_init_attr", Exact {
            dc_type => "dc_type",
            u.dct_access_key => "dct_access_key",
            u.dci_streams => "dci_streams",
            u.dci_streams.log_num_errored => "dci_streams.log_num_errored",
        }),
        probe!(mlx5dv_qp_init_attr => "struct mlx5dv_qp_init_attr", Exact {
            comp_mask => "comp_mask",
            create_flags => "create_flags",
            dc_init_attr => "dc_init_attr",
            dc_init_attr.u.dct_access_key => "dc_init_attr.dct_access_key",
            send_ops_flags => "send_ops_flags",
        }),
        probe!(mlx5dv_cqe_comp_caps => "struct mlx5dv_cqe_comp_caps", Exact {
            max_num => "max_num", supported_format => "supported_format",
        }),
        probe!(mlx5dv_sw_parsing_caps => "struct mlx5dv_sw_parsing_caps", Exact {
            sw_parsing_offloads => "sw_parsing_offloads", supported_qpts => "supported_qpts",
        }),
        probe!(mlx5dv_striding_rq_caps => "struct mlx5dv_striding_rq_caps", Exact {
            min_single_stride_log_num_of_bytes => "min_single_stride_log_num_of_bytes",
            max_single_stride_log_num_of_bytes => "max_single_stride_log_num_of_bytes",
            min_single_wqe_log_num_of_strides => "min_single_wqe_log_num_of_strides",
            max_single_wqe_log_num_of_strides => "max_single_wqe_log_num_of_strides",
            supported_qpts => "supported_qpts",
        }),
        probe!(mlx5dv_sig_caps => "struct mlx5dv_sig_caps", Exact {
            block_size => "block_size", block_prot => "block_prot",
            t10dif_bg => "t10dif_bg", crc_type => "crc_type",
        }),
        probe!(mlx5dv_dci_streams_caps => "struct mlx5dv_dci_streams_caps", Exact {
            max_log_num_concurent => "max_log_num_concurent",
            max_log_num_errored => "max_log_num_errored",
        }),
        probe!(mlx5dv_crypto_caps => "struct mlx5dv_crypto_caps", Exact {
            failed_selftests => "failed_selftests", crypto_engines => "crypto_engines",
            wrapped_import_method => "wrapped_import_method",
            log_max_num_deks => "log_max_num_deks", flags => "flags",
        }),
        probe!(mlx5dv_reg => "struct mlx5dv_reg", Exact { value => "value", mask => "mask" }),
        probe!(mlx5dv_clock_info => "struct mlx5dv_clock_info", Exact {
            nsec => "nsec", last_cycles => "last_cycles", frac => "frac",
            mult => "mult", shift => "shift", mask => "mask",
        }),
        // The installed (rdma-core 44) context: every field it has, ours may be larger.
        probe!(mlx5dv_context => "struct mlx5dv_context", AtLeast {
            version => "version", flags => "flags", comp_mask => "comp_mask",
            cqe_comp_caps => "cqe_comp_caps", sw_parsing_caps => "sw_parsing_caps",
            striding_rq_caps => "striding_rq_caps", tunnel_offloads_caps => "tunnel_offloads_caps",
            max_dynamic_bfregs => "max_dynamic_bfregs",
            max_clock_info_update_nsec => "max_clock_info_update_nsec",
            flow_action_flags => "flow_action_flags", dc_odp_caps => "dc_odp_caps",
            hca_core_clock => "hca_core_clock", num_lag_ports => "num_lag_ports",
            sig_caps => "sig_caps", dci_streams_caps => "dci_streams_caps",
            max_wr_memcpy_length => "max_wr_memcpy_length", crypto_caps => "crypto_caps",
        }),
        // The upstream layout, every field.
        probe!(mlx5dv_context => "struct verbsim_mlx5dv_context_upstream", Exact {
            version => "version", flags => "flags", comp_mask => "comp_mask",
            cqe_comp_caps => "cqe_comp_caps", sw_parsing_caps => "sw_parsing_caps",
            striding_rq_caps => "striding_rq_caps", tunnel_offloads_caps => "tunnel_offloads_caps",
            max_dynamic_bfregs => "max_dynamic_bfregs",
            max_clock_info_update_nsec => "max_clock_info_update_nsec",
            flow_action_flags => "flow_action_flags", dc_odp_caps => "dc_odp_caps",
            hca_core_clock => "hca_core_clock", num_lag_ports => "num_lag_ports",
            sig_caps => "sig_caps", dci_streams_caps => "dci_streams_caps",
            max_wr_memcpy_length => "max_wr_memcpy_length", crypto_caps => "crypto_caps",
            max_dc_rd_atom => "max_dc_rd_atom", max_dc_init_rd_atom => "max_dc_init_rd_atom",
            reg_c0 => "reg_c0", ooo_recv_wrs_caps => "ooo_recv_wrs_caps",
            ooo_recv_wrs_caps.max_uc => "ooo_recv_wrs_caps.max_uc",
        }),
        probe!(mlx5dv_qp_ex => "struct mlx5dv_qp_ex", Exact {
            comp_mask => "comp_mask", wr_set_dc_addr => "wr_set_dc_addr",
            wr_mr_interleaved => "wr_mr_interleaved", wr_mr_list => "wr_mr_list",
            wr_mkey_configure => "wr_mkey_configure",
            wr_set_mkey_access_flags => "wr_set_mkey_access_flags",
            wr_set_mkey_layout_list => "wr_set_mkey_layout_list",
            wr_set_mkey_layout_interleaved => "wr_set_mkey_layout_interleaved",
            wr_set_mkey_sig_block => "wr_set_mkey_sig_block", wr_raw_wqe => "wr_raw_wqe",
            wr_set_dc_addr_stream => "wr_set_dc_addr_stream", wr_memcpy => "wr_memcpy",
            wr_set_mkey_crypto => "wr_set_mkey_crypto",
        }),
        // ---------------- rdma-sys's hand-written types ----------------
        probe!(ibv_send_wr => "struct ibv_send_wr", Exact {
            wr_id => "wr_id", next => "next", sg_list => "sg_list", num_sge => "num_sge",
            opcode => "opcode", send_flags => "send_flags",
            imm_data_invalidated_rkey_union => "imm_data",
            wr.rdma.remote_addr => "wr.rdma.remote_addr", wr.rdma.rkey => "wr.rdma.rkey",
            wr.atomic.remote_addr => "wr.atomic.remote_addr",
            wr.atomic.compare_add => "wr.atomic.compare_add", wr.atomic.swap => "wr.atomic.swap",
            wr.atomic.rkey => "wr.atomic.rkey",
            wr.ud.ah => "wr.ud.ah", wr.ud.remote_qpn => "wr.ud.remote_qpn",
            wr.ud.remote_qkey => "wr.ud.remote_qkey",
            qp_type.xrc.remote_srqn => "qp_type.xrc.remote_srqn",
            bind_mw_tso_union.bind_mw.mw => "bind_mw.mw",
            bind_mw_tso_union.bind_mw.bind_info => "bind_mw.bind_info",
            bind_mw_tso_union.tso.mss => "tso.mss",
        }),
        probe!(ibv_recv_wr => "struct ibv_recv_wr", Exact {
            wr_id => "wr_id", next => "next", sg_list => "sg_list", num_sge => "num_sge",
        }),
        probe!(ibv_sge => "struct ibv_sge", Exact { addr => "addr", length => "length", lkey => "lkey" }),
        probe!(ibv_wc => "struct ibv_wc", Exact {
            wr_id => "wr_id", status => "status", opcode => "opcode", vendor_err => "vendor_err",
            byte_len => "byte_len", imm_data_invalidated_rkey_union => "imm_data",
            qp_num => "qp_num", src_qp => "src_qp", wc_flags => "wc_flags",
            pkey_index => "pkey_index", slid => "slid", sl => "sl",
            dlid_path_bits => "dlid_path_bits",
        }),
        probe!(ibv_gid => "union ibv_gid", Exact { raw => "raw", global.interface_id => "global.interface_id" }),
        probe!(ibv_global_route => "struct ibv_global_route", Exact {
            dgid => "dgid", flow_label => "flow_label", sgid_index => "sgid_index",
            hop_limit => "hop_limit", traffic_class => "traffic_class",
        }),
        probe!(ibv_ah_attr => "struct ibv_ah_attr", Exact {
            grh => "grh", dlid => "dlid", sl => "sl", src_path_bits => "src_path_bits",
            static_rate => "static_rate", is_global => "is_global", port_num => "port_num",
        }),
        probe!(ibv_async_event => "struct ibv_async_event", Exact {
            element => "element", event_type => "event_type",
        }),
        // Our integer-typed restatement (rdma-sys's has a Rust enum field).
        probe!(ibv_async_event_raw => "struct ibv_async_event", Exact {
            element => "element", event_type => "event_type",
        }),
        // ---------------- hand-declared POSIX (ffi::posix) ----------------
        probe!(sockaddr_in => "struct sockaddr_in", Exact {
            sin_family => "sin_family", sin_port => "sin_port", sin_addr => "sin_addr",
            sin_zero => "sin_zero",
        }),
        probe!(sockaddr_in6 => "struct sockaddr_in6", Exact {
            sin6_family => "sin6_family", sin6_port => "sin6_port",
            sin6_flowinfo => "sin6_flowinfo", sin6_addr => "sin6_addr",
            sin6_scope_id => "sin6_scope_id",
        }),
        // ---------------- rdma_cm and ibv_qp_ex shapes the backend reads ----------------
        probe!(rdma_cm_id => "struct rdma_cm_id", Exact {
            verbs => "verbs", channel => "channel", context => "context", qp => "qp",
            route => "route", route.addr.src_addr_union => "route.addr.src_addr",
            route.addr.dst_addr_union => "route.addr.dst_addr", ps => "ps",
            port_num => "port_num", event => "event", send_cq_channel => "send_cq_channel",
            send_cq => "send_cq", recv_cq_channel => "recv_cq_channel", recv_cq => "recv_cq",
            srq => "srq", pd => "pd", qp_type => "qp_type",
        }),
        probe!(src_addr_union_t => "struct sockaddr_storage", Exact {}),
        probe!(rdma_conn_param => "struct rdma_conn_param", Exact {
            private_data => "private_data", private_data_len => "private_data_len",
            responder_resources => "responder_resources", initiator_depth => "initiator_depth",
            flow_control => "flow_control", retry_count => "retry_count",
            rnr_retry_count => "rnr_retry_count", srq => "srq", qp_num => "qp_num",
        }),
        probe!(rdma_ud_param => "struct rdma_ud_param", Exact {
            private_data => "private_data", private_data_len => "private_data_len",
            ah_attr => "ah_attr", qp_num => "qp_num", qkey => "qkey",
        }),
        probe!(rdma_event_channel => "struct rdma_event_channel", Exact { fd => "fd" }),
        probe!(ibv_comp_channel => "struct ibv_comp_channel", Exact {
            context => "context", fd => "fd", refcnt => "refcnt",
        }),
        probe!(ibv_data_buf => "struct ibv_data_buf", Exact { addr => "addr", length => "length" }),
        probe!(ibv_qp_ex => "struct ibv_qp_ex", Exact {
            qp_base => "qp_base", comp_mask => "comp_mask", wr_id => "wr_id",
            wr_flags => "wr_flags", wr_atomic_cmp_swp => "wr_atomic_cmp_swp",
            wr_atomic_fetch_add => "wr_atomic_fetch_add", wr_rdma_read => "wr_rdma_read",
            wr_rdma_write => "wr_rdma_write", wr_rdma_write_imm => "wr_rdma_write_imm",
            wr_send => "wr_send", wr_send_imm => "wr_send_imm",
            wr_set_inline_data_list => "wr_set_inline_data_list",
            wr_set_sge_list => "wr_set_sge_list", wr_start => "wr_start",
            wr_complete => "wr_complete", wr_abort => "wr_abort",
        }),
        probe!(rdma_cm_event => "struct rdma_cm_event", Exact {
            id => "id", listen_id => "listen_id", event => "event", status => "status",
            param.conn => "param.conn", param.ud.qp_num => "param.ud.qp_num",
        }),
        // ---------------- bindgen types whose shape our code relies on ----------------
        probe!(ibv_qp_attr => "struct ibv_qp_attr", Exact {
            qp_state => "qp_state", cur_qp_state => "cur_qp_state", path_mtu => "path_mtu",
            path_mig_state => "path_mig_state", qkey => "qkey", rq_psn => "rq_psn",
            sq_psn => "sq_psn", dest_qp_num => "dest_qp_num", qp_access_flags => "qp_access_flags",
            cap => "cap", ah_attr => "ah_attr", alt_ah_attr => "alt_ah_attr",
            pkey_index => "pkey_index", alt_pkey_index => "alt_pkey_index",
            en_sqd_async_notify => "en_sqd_async_notify", sq_draining => "sq_draining",
            max_rd_atomic => "max_rd_atomic", max_dest_rd_atomic => "max_dest_rd_atomic",
            min_rnr_timer => "min_rnr_timer", port_num => "port_num", timeout => "timeout",
            retry_cnt => "retry_cnt", rnr_retry => "rnr_retry", alt_port_num => "alt_port_num",
            alt_timeout => "alt_timeout", rate_limit => "rate_limit",
        }),
        // `ibv_qp_init_attr` must be the leading part of `ibv_qp_init_attr_ex`
        // (ffi::verbs::ibv_create_qp_ex casts one to the other).
        probe!(ibv_qp_init_attr => "struct ibv_qp_init_attr", Exact {
            qp_context => "qp_context", send_cq => "send_cq", recv_cq => "recv_cq", srq => "srq",
            cap => "cap", qp_type => "qp_type", sq_sig_all => "sq_sig_all",
        }),
        probe!(ibv_qp_init_attr_ex => "struct ibv_qp_init_attr_ex", Exact {
            qp_context => "qp_context", send_cq => "send_cq", recv_cq => "recv_cq", srq => "srq",
            cap => "cap", qp_type => "qp_type", sq_sig_all => "sq_sig_all", comp_mask => "comp_mask",
            pd => "pd", xrcd => "xrcd", create_flags => "create_flags",
            max_tso_header => "max_tso_header", rwq_ind_tbl => "rwq_ind_tbl",
            rx_hash_conf => "rx_hash_conf", source_qpn => "source_qpn",
            send_ops_flags => "send_ops_flags",
        }),
        probe!(ibv_srq_init_attr => "struct ibv_srq_init_attr", Exact {
            srq_context => "srq_context", attr => "attr",
        }),
        probe!(ibv_srq_init_attr_ex => "struct ibv_srq_init_attr_ex", Exact {
            srq_context => "srq_context", attr => "attr", comp_mask => "comp_mask",
            srq_type => "srq_type", pd => "pd", xrcd => "xrcd", cq => "cq", tm_cap => "tm_cap",
        }),
        probe!(ibv_context => "struct ibv_context", Exact {
            device => "device", ops => "ops", ops.poll_cq => "ops.poll_cq",
            ops.req_notify_cq => "ops.req_notify_cq", ops.post_srq_recv => "ops.post_srq_recv",
            ops.post_send => "ops.post_send", ops.post_recv => "ops.post_recv",
            cmd_fd => "cmd_fd", async_fd => "async_fd", num_comp_vectors => "num_comp_vectors",
            abi_compat => "abi_compat",
        }),
        probe!(verbs_context => "struct verbs_context", Exact {
            query_port => "query_port", query_device_ex => "query_device_ex",
            open_qp => "open_qp", create_qp_ex => "create_qp_ex", get_srq_num => "get_srq_num",
            create_srq_ex => "create_srq_ex", open_xrcd => "open_xrcd",
            close_xrcd => "close_xrcd", sz => "sz", context => "context",
        }),
        probe!(ibv_port_attr => "struct ibv_port_attr", Exact {
            state => "state", max_mtu => "max_mtu", active_mtu => "active_mtu",
            gid_tbl_len => "gid_tbl_len", port_cap_flags => "port_cap_flags",
            lid => "lid", link_layer => "link_layer", port_cap_flags2 => "port_cap_flags2",
        }),
        probe!(ibv_device_attr_ex => "struct ibv_device_attr_ex", Exact {
            orig_attr => "orig_attr", comp_mask => "comp_mask", odp_caps => "odp_caps",
        }),
        probe!(ibv_qp_open_attr => "struct ibv_qp_open_attr", Exact {
            comp_mask => "comp_mask", qp_num => "qp_num", xrcd => "xrcd",
            qp_context => "qp_context", qp_type => "qp_type",
        }),
        probe!(ibv_xrcd_init_attr => "struct ibv_xrcd_init_attr", Exact {
            comp_mask => "comp_mask", fd => "fd", oflags => "oflags",
        }),
    ]
}

/// Constants declared by hand that the installed header also has:
/// (C name, Rust value).
fn constants() -> Vec<(&'static str, u64)> {
    vec![
        (
            "MLX5DV_CONTEXT_MASK_DCI_STREAMS",
            MLX5DV_CONTEXT_MASK_DCI_STREAMS,
        ),
        (
            "MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS",
            MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS,
        ),
        ("MLX5DV_QP_INIT_ATTR_MASK_DC", MLX5DV_QP_INIT_ATTR_MASK_DC),
        (
            "MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS",
            MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS,
        ),
        ("MLX5DV_DCTYPE_DCT", u64::from(MLX5DV_DCTYPE_DCT)),
        ("MLX5DV_DCTYPE_DCI", u64::from(MLX5DV_DCTYPE_DCI)),
        ("AF_INET", u64::from(super::posix::AF_INET)),
        ("AF_INET6", u64::from(super::posix::AF_INET6)),
        ("O_NONBLOCK", super::posix::O_NONBLOCK as u64),
        ("F_GETFL", super::posix::F_GETFL as u64),
        ("F_SETFL", super::posix::F_SETFL as u64),
        ("EAGAIN", super::posix::EAGAIN as u64),
        (
            "sizeof(struct sockaddr_storage)",
            super::posix::SOCKADDR_STORAGE_LEN as u64,
        ),
        // The highest create flag rdma-core 44 knows; OOO_DP must be above it.
        (
            "MLX5DV_QP_CREATE_SIG_PIPELINING",
            u64::from(MLX5DV_QP_CREATE_OOO_DP >> 1),
        ),
    ]
}

/// Generates the C probe program for `probes`.
fn c_source(probes: &[Probe]) -> String {
    let mut s = String::from(
        "#include <stddef.h>\n#include <stdint.h>\n#include <stdio.h>\n\
         #include <errno.h>\n#include <fcntl.h>\n#include <netinet/in.h>\n#include <sys/socket.h>\n\
         #include <infiniband/verbs.h>\n#include <infiniband/mlx5dv.h>\n#include <rdma/rdma_cma.h>\n",
    );
    s.push_str(UPSTREAM_CONTEXT_C);
    s.push_str("int main(void) {\n");
    for p in probes {
        let t = p.c_type;
        writeln!(
            s,
            "  printf(\"S|{t}|%zu|%zu\\n\", sizeof({t}), _Alignof({t}));"
        )
        .unwrap();
        for (f, _) in &p.fields {
            writeln!(s, "  printf(\"O|{t}|{f}|%zu\\n\", offsetof({t}, {f}));").unwrap();
        }
    }
    for (name, _) in constants() {
        writeln!(
            s,
            "  printf(\"K|{name}|%llu\\n\", (unsigned long long)({name}));"
        )
        .unwrap();
    }
    s.push_str("  return 0;\n}\n");
    s
}

/// Compiles and runs the probe; returns `key -> value` where keys are
/// `"S|type"` (value `(size, align)`) and `"O|type|field"` (value `(offset, 0)`).
fn run_c_probe(probes: &[Probe]) -> BTreeMap<String, (usize, usize)> {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir: PathBuf = std::env::temp_dir().join(format!(
        "verbsim-layout-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("probe.c");
    let exe = dir.join("probe");
    std::fs::write(&src, c_source(probes)).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-std=gnu11", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}`: {e}"));
    assert!(
        out.status.success(),
        "compiling the layout probe failed:\n{}\n(source kept in {})",
        String::from_utf8_lossy(&out.stderr),
        src.display()
    );
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success());
    let mut map = BTreeMap::new();
    for line in String::from_utf8(run.stdout).unwrap().lines() {
        let parts: Vec<&str> = line.split('|').collect();
        match parts.as_slice() {
            ["S", t, size, align] => {
                map.insert(
                    format!("S|{t}"),
                    (size.parse().unwrap(), align.parse().unwrap()),
                );
            }
            ["O", t, f, off] => {
                map.insert(format!("O|{t}|{f}"), (off.parse().unwrap(), 0));
            }
            ["K", name, v] => {
                map.insert(format!("K|{name}"), (v.parse().unwrap(), 0));
            }
            _ => panic!("unexpected probe output line {line:?}"),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    map
}

/// Every difference between the Rust numbers and the C ones.
fn mismatches(probes: &[Probe]) -> Vec<String> {
    let c = run_c_probe(probes);
    let mut bad = Vec::new();
    for p in probes {
        let (size, align) = c[&format!("S|{}", p.c_type)];
        let size_ok = match p.rule {
            SizeRule::Exact => p.size == size,
            SizeRule::AtLeast => p.size >= size,
        };
        if !size_ok {
            bad.push(format!(
                "{}: Rust size {} vs C {} ({:?})",
                p.c_type, p.size, size, p.rule
            ));
        }
        if p.align != align {
            bad.push(format!(
                "{}: Rust align {} vs C {}",
                p.c_type, p.align, align
            ));
        }
        for (f, off) in &p.fields {
            let (c_off, _) = c[&format!("O|{}|{f}", p.c_type)];
            if *off != c_off {
                bad.push(format!("{}.{f}: Rust offset {off} vs C {c_off}", p.c_type));
            }
        }
    }
    bad
}

#[test]
fn hand_declared_layouts_match_the_c_headers() {
    let probes = probes();
    let bad = mismatches(&probes);
    assert!(bad.is_empty(), "layout mismatches:\n  {}", bad.join("\n  "));
}

#[test]
fn upstream_context_tail_starts_after_the_installed_struct() {
    // The rdma-core 44 library writes at most `sizeof(struct mlx5dv_context)`
    // bytes; the fields it does not know must lie entirely past them.
    let c = run_c_probe(&[probe!(mlx5dv_context => "struct mlx5dv_context", AtLeast {})]);
    let (installed, _) = c["S|struct mlx5dv_context"];
    assert!(offset_of!(mlx5dv_context, max_dc_rd_atom) >= installed);
    assert!(
        size_of::<mlx5dv_context>() > installed,
        "rdma-core 44 has no ooo_recv_wrs_caps"
    );
}

/// A deliberately wrong declaration of `struct mlx5dv_dci_streams`
/// (fields swapped in width) to prove the checker reports it.
#[repr(C)]
#[allow(dead_code)] // only its layout is used
struct WrongDciStreams {
    log_num_concurent: u16,
    log_num_errored: u8,
}

#[test]
fn checker_catches_a_wrong_field() {
    let bad = mismatches(&[
        probe!(WrongDciStreams => "struct mlx5dv_dci_streams", Exact {
            log_num_concurent => "log_num_concurent",
            log_num_errored => "log_num_errored",
        }),
    ]);
    assert!(
        bad.iter()
            .any(|m| m.contains("log_num_errored: Rust offset 2 vs C 1")),
        "{bad:?}"
    );
    assert!(bad.iter().any(|m| m.contains("size")), "{bad:?}");
}

#[test]
fn constants_match_the_headers() {
    let c = run_c_probe(&[]);
    for (name, value) in constants() {
        let (c_value, _) = c[&format!("K|{name}")];
        assert_eq!(value as usize, c_value, "{name}");
    }
    // Absent from rdma-core 44; upstream values.
    assert_eq!(MLX5DV_QP_CREATE_OOO_DP, 1 << 7);
    assert_eq!(MLX5DV_CONTEXT_MASK_REG_C0, 1 << 15);
}
