//! The shim's C layouts (`shim/src/sys.rs`, bindgen output committed) against
//! the installed rdma-core headers: a generated C program prints `sizeof` and
//! `offsetof` of every struct and member the shim hands out or reads, and
//! each number must equal Rust's. Skips (says so) where the headers are not
//! installed; CI installs them.

use core::mem::{offset_of, size_of};
use std::fmt::Write as _;
use std::process::Command;

use verbsim_shim::sys::*;

struct Probe {
    c_type: &'static str,
    size: usize,
    fields: Vec<(&'static str, usize)>,
}

macro_rules! probe {
    ($t:ident { $($f:ident),* $(,)? }) => {
        Probe {
            c_type: concat!("struct ", stringify!($t)),
            size: size_of::<$t>(),
            fields: vec![$((stringify!($f), offset_of!($t, $f))),*],
        }
    };
}

fn probes() -> Vec<Probe> {
    vec![
        probe!(ibv_device {
            node_type,
            transport_type,
            name,
            dev_name,
            dev_path,
            ibdev_path
        }),
        probe!(ibv_context {
            device,
            ops,
            cmd_fd,
            async_fd,
            num_comp_vectors,
            mutex,
            abi_compat
        }),
        probe!(ibv_context_ops {
            alloc_mw,
            bind_mw,
            dealloc_mw,
            poll_cq,
            req_notify_cq,
            post_srq_recv,
            post_send,
            post_recv
        }),
        probe!(verbs_context {
            query_port,
            create_cq_ex,
            query_device_ex,
            open_qp,
            create_qp_ex,
            get_srq_num,
            create_srq_ex,
            open_xrcd,
            close_xrcd,
            sz,
            context
        }),
        probe!(ibv_pd { context, handle }),
        probe!(ibv_mr {
            context,
            pd,
            addr,
            length,
            handle,
            lkey,
            rkey
        }),
        probe!(ibv_comp_channel {
            context,
            fd,
            refcnt
        }),
        probe!(ibv_cq {
            context,
            channel,
            cq_context,
            handle,
            cqe,
            mutex,
            cond,
            comp_events_completed,
            async_events_completed
        }),
        probe!(ibv_cq_ex {
            context,
            channel,
            cq_context,
            handle,
            cqe,
            comp_mask,
            status,
            wr_id,
            start_poll,
            next_poll,
            end_poll,
            read_opcode,
            read_vendor_err,
            read_byte_len,
            read_imm_data,
            read_qp_num,
            read_src_qp,
            read_wc_flags,
            read_slid,
            read_sl,
            read_dlid_path_bits
        }),
        probe!(ibv_srq {
            context,
            srq_context,
            pd,
            handle,
            mutex,
            cond,
            events_completed
        }),
        probe!(ibv_qp {
            context,
            qp_context,
            pd,
            send_cq,
            recv_cq,
            srq,
            handle,
            qp_num,
            state,
            qp_type,
            mutex,
            cond,
            events_completed
        }),
        probe!(ibv_qp_ex {
            qp_base,
            comp_mask,
            wr_id,
            wr_flags,
            wr_atomic_cmp_swp,
            wr_atomic_fetch_add,
            wr_bind_mw,
            wr_local_inv,
            wr_rdma_read,
            wr_rdma_write,
            wr_rdma_write_imm,
            wr_send,
            wr_send_imm,
            wr_send_inv,
            wr_send_tso,
            wr_set_ud_addr,
            wr_set_xrc_srqn,
            wr_set_inline_data,
            wr_set_inline_data_list,
            wr_set_sge,
            wr_set_sge_list,
            wr_start,
            wr_complete,
            wr_abort
        }),
        probe!(ibv_ah {
            context,
            pd,
            handle
        }),
        probe!(ibv_xrcd { context }),
        probe!(ibv_wc {
            wr_id,
            status,
            opcode,
            vendor_err,
            byte_len,
            qp_num,
            src_qp,
            wc_flags,
            pkey_index,
            slid,
            sl,
            dlid_path_bits
        }),
        probe!(ibv_sge { addr, length, lkey }),
        probe!(ibv_send_wr {
            wr_id,
            next,
            sg_list,
            num_sge,
            opcode,
            send_flags,
            wr,
            qp_type
        }),
        probe!(ibv_recv_wr {
            wr_id,
            next,
            sg_list,
            num_sge
        }),
        probe!(ibv_qp_init_attr {
            qp_context,
            send_cq,
            recv_cq,
            srq,
            cap,
            qp_type,
            sq_sig_all
        }),
        probe!(ibv_qp_init_attr_ex {
            qp_context,
            send_cq,
            recv_cq,
            srq,
            cap,
            qp_type,
            sq_sig_all,
            comp_mask,
            pd,
            xrcd,
            create_flags,
            max_tso_header,
            rwq_ind_tbl,
            rx_hash_conf,
            source_qpn,
            send_ops_flags
        }),
        probe!(ibv_qp_attr {
            qp_state,
            cur_qp_state,
            path_mtu,
            path_mig_state,
            qkey,
            rq_psn,
            sq_psn,
            dest_qp_num,
            qp_access_flags,
            cap,
            ah_attr,
            alt_ah_attr,
            pkey_index,
            alt_pkey_index,
            en_sqd_async_notify,
            sq_draining,
            max_rd_atomic,
            max_dest_rd_atomic,
            min_rnr_timer,
            port_num,
            timeout,
            retry_cnt,
            rnr_retry,
            alt_port_num,
            alt_timeout,
            rate_limit
        }),
        probe!(ibv_ah_attr {
            grh,
            dlid,
            sl,
            src_path_bits,
            static_rate,
            is_global,
            port_num
        }),
        probe!(ibv_port_attr {
            state,
            max_mtu,
            active_mtu,
            gid_tbl_len,
            port_cap_flags,
            max_msg_sz,
            pkey_tbl_len,
            lid,
            sm_lid,
            lmc,
            active_width,
            active_speed,
            phys_state,
            link_layer,
            flags,
            port_cap_flags2
        }),
        probe!(ibv_device_attr {
            fw_ver,
            node_guid,
            sys_image_guid,
            max_mr_size,
            vendor_id,
            vendor_part_id,
            max_qp,
            max_qp_wr,
            device_cap_flags,
            max_cqe,
            atomic_cap,
            max_srq_sge,
            max_pkeys,
            local_ca_ack_delay,
            phys_port_cnt
        }),
        probe!(ibv_device_attr_ex {
            orig_attr,
            comp_mask,
            odp_caps,
            completion_timestamp_mask,
            hca_core_clock,
            device_cap_flags_ex,
            max_dm_size,
            phys_port_cnt_ex
        }),
        probe!(ibv_cq_init_attr_ex {
            cqe,
            cq_context,
            channel,
            comp_vector,
            wc_flags,
            comp_mask,
            flags,
            parent_domain
        }),
        probe!(ibv_srq_init_attr_ex {
            srq_context,
            attr,
            comp_mask,
            srq_type,
            pd,
            xrcd,
            cq,
            tm_cap
        }),
        probe!(ibv_gid_entry {
            gid,
            gid_index,
            port_num,
            gid_type,
            ndev_ifindex
        }),
        probe!(ibv_async_event {
            element,
            event_type
        }),
        probe!(ibv_qp_open_attr {
            comp_mask,
            qp_num,
            xrcd,
            qp_context,
            qp_type
        }),
        probe!(ibv_xrcd_init_attr {
            comp_mask,
            fd,
            oflags
        }),
        probe!(mlx5dv_qp_ex {
            comp_mask,
            wr_set_dc_addr
        }),
        // The WQE segments `mlx5dv_wr_raw_wqe` decodes (src/provider/mlx5.rs); the
        // control segment is sys.rs's hand-declared one (bindgen made it
        // 20 bytes).
        probe!(mlx5_wqe_ctrl_seg {
            opmod_idx_opcode,
            qpn_ds,
            signature,
            dci_stream_channel_id,
            fm_ce_se,
            imm
        }),
        probe!(mlx5_wqe_raddr_seg { raddr, rkey }),
        probe!(mlx5_wqe_atomic_seg { swap_add, compare }),
        probe!(mlx5_wqe_data_seg {
            byte_count,
            lkey,
            addr
        }),
        // librdmacm: the event and the two members of its `param` union
        // (`param.ud` carries MULTICAST_JOIN), and the join attributes.
        probe!(rdma_cm_event {
            id,
            listen_id,
            event,
            status,
            param
        }),
        probe!(rdma_conn_param {
            private_data,
            private_data_len,
            responder_resources,
            initiator_depth,
            flow_control,
            retry_count,
            rnr_retry_count,
            srq,
            qp_num
        }),
        probe!(rdma_ud_param {
            private_data,
            private_data_len,
            ah_attr,
            qp_num,
            qkey
        }),
        probe!(rdma_cm_join_mc_attr_ex {
            comp_mask,
            join_flags,
            addr
        }),
    ]
}

fn c_program(probes: &[Probe]) -> String {
    let mut s = String::from("#include <stdio.h>\n#include <stddef.h>\n#include <infiniband/verbs.h>\n#include <infiniband/mlx5dv.h>\n#include <rdma/rdma_cma.h>\nint main(void) {\n");
    for p in probes {
        let _ = writeln!(s, "  printf(\"%zu\\n\", sizeof({}));", p.c_type);
        for (f, _) in &p.fields {
            let _ = writeln!(s, "  printf(\"%zu\\n\", offsetof({}, {f}));", p.c_type);
        }
    }
    s.push_str("  return 0;\n}\n");
    s
}

#[test]
fn layouts_match_the_installed_headers() {
    if !std::path::Path::new("/usr/include/infiniband/verbs.h").exists() {
        eprintln!(
            "SKIPPED: rdma-core headers are not installed (libibverbs-dev); CI installs them"
        );
        return;
    }
    let probes = probes();
    let dir = std::env::temp_dir().join(format!("verbsim-shim-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("probe.c");
    let exe = dir.join("probe");
    std::fs::write(&src, c_program(&probes)).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(&cc)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .expect("run the C compiler");
    assert!(st.success(), "compiling the layout probe failed");
    let out = Command::new(&exe).output().expect("run the probe");
    let nums: Vec<usize> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let mut it = nums.into_iter();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for p in &probes {
        let c = it.next().unwrap();
        checked += 1;
        if c != p.size {
            wrong.push(format!("sizeof({}): C {c}, Rust {}", p.c_type, p.size));
        }
        for (f, off) in &p.fields {
            let c = it.next().unwrap();
            checked += 1;
            if c != *off {
                wrong.push(format!("offsetof({}, {f}): C {c}, Rust {off}", p.c_type));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        wrong.is_empty(),
        "layouts differ from the headers:\n{}",
        wrong.join("\n")
    );
    assert!(checked > 300, "only {checked} numbers checked");
}

#[test]
fn checker_catches_a_wrong_offset() {
    // The comparison is not vacuous: a probe with a shifted offset differs.
    let mut p = probe!(ibv_qp { qp_num });
    p.fields[0].1 += 4;
    assert_ne!(p.fields[0].1, offset_of!(ibv_qp, qp_num));
    assert_eq!(
        offset_of!(ibv_qp, qp_num),
        52,
        "the research note's measured offset"
    );
}

#[test]
fn wqe_control_segment_is_mlx5dv_h_s_16_bytes() {
    // Goal: `sys::mlx5_wqe_ctrl_seg` has mlx5dv.h's layout (packed, 16
    // bytes) on every machine, headers installed or not: bindgen's
    // rendering of `packed, aligned(4)` put `dci_stream_channel_id` at 10,
    // `fm_ce_se` at 12 and `imm` at 16, in 20 bytes.
    // Method: the numbers of the header's declaration, field by field.
    assert_eq!(size_of::<mlx5_wqe_ctrl_seg>(), 16);
    assert_eq!(
        [
            offset_of!(mlx5_wqe_ctrl_seg, opmod_idx_opcode),
            offset_of!(mlx5_wqe_ctrl_seg, qpn_ds),
            offset_of!(mlx5_wqe_ctrl_seg, signature),
            offset_of!(mlx5_wqe_ctrl_seg, dci_stream_channel_id),
            offset_of!(mlx5_wqe_ctrl_seg, fm_ce_se),
            offset_of!(mlx5_wqe_ctrl_seg, imm),
        ],
        [0, 4, 8, 9, 11, 12]
    );
    // A control segment written through the struct lies where a C
    // program's does.
    let seg = mlx5_wqe_ctrl_seg {
        opmod_idx_opcode: 0x0a_u32.to_be(),
        qpn_ds: 0x0012_3403_u32.to_be(),
        signature: 0,
        dci_stream_channel_id: 0,
        fm_ce_se: 0x08,
        imm: 0x1122_3344_u32.to_be(),
    };
    // SAFETY: a packed plain-data struct of 16 bytes, no padding.
    let bytes: [u8; 16] = unsafe { core::mem::transmute(seg) };
    assert_eq!(
        bytes,
        [0, 0, 0, 0x0a, 0, 0x12, 0x34, 0x03, 0, 0, 0, 0x08, 0x11, 0x22, 0x33, 0x44]
    );
}
