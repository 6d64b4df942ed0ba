//! Tests of the parser: the grammar, every error path with its message, and
//! the `to_text` round trip.

use super::*;

/// The error of parsing `text`, as `(line, message)`.
fn err(text: &str) -> (usize, String) {
    let e = parse("t.verbs", text).expect_err("the script should not parse");
    assert_eq!(e.path, "t.verbs");
    (e.line, e.message)
}

const SETUP: &str = "let d0 = open_device\nlet pd = alloc_pd d0\nlet cq = create_cq d0 cqe=8\nlet a = create_qp pd send_cq=cq recv_cq=cq\nlet m = reg_mr pd\n";

/// The error message for one statement appended to [`SETUP`] (on line 6).
fn stmt_err(line: &str) -> String {
    let (n, msg) = err(&format!("{SETUP}{line}\n"));
    assert_eq!(n, 6, "{msg}");
    msg
}

// Goal: the format's own example parses into the expected tree.
// Method: parse it and inspect headers, bindings, arguments and expectations.
#[test]
fn example_parses() {
    let text = "\
# comment
#! requires: xrc dc
#! backends: sim
#! seed: 42
#! devices: cx6 cx7
#! description: an example

let d0 = open_device index=0
let pd = alloc_pd d0   # a trailing comment
let cq = create_cq d0 cqe=64
let m0 = reg_mr pd length=4096 access=LOCAL_WRITE|REMOTE_WRITE
let a = create_qp pd qp_type=RC send_cq=cq recv_cq=cq max_send_wr=16
assert a.cap.max_send_wr >= 16
modify_qp a qp_state=RTS -> EINVAL
post_send a wr_id=1 sge=m0:0:8; wr_id=2 sge=m0:8:8 -> ENOMEM bad_wr=1
poll_cq cq -> wr_id=1 status=SUCCESS
poll cq -> empty
sim drop next=1 from=a
";
    let s = parse("ex.verbs", text).unwrap();
    assert_eq!(s.headers.requires, Capabilities::XRC | Capabilities::DC);
    assert_eq!(s.headers.backends, vec![BackendKind::Sim]);
    assert_eq!(s.headers.seed, Some(42));
    assert_eq!(s.headers.devices, vec!["cx6", "cx7"]);
    assert_eq!(s.headers.description.as_deref(), Some("an example"));
    assert_eq!(s.statements.len(), 11);
    let pd = &s.statements[1];
    assert_eq!(
        (pd.line, pd.binding.as_deref(), pd.verb.as_str()),
        (9, Some("pd"), "alloc_pd")
    );
    assert_eq!(pd.args, vec![Arg::Positional("d0".into())]);
    assert_eq!(s.statements[5].args.len(), 3);
    assert_eq!(
        s.statements[6].expect,
        Expectation::Error {
            errno: "EINVAL".into(),
            bad_wr: None
        }
    );
    let post = &s.statements[7];
    assert_eq!(
        post.args.iter().filter(|a| **a == Arg::Separator).count(),
        1
    );
    assert_eq!(
        post.expect,
        Expectation::Error {
            errno: "ENOMEM".into(),
            bad_wr: Some(1)
        }
    );
    assert_eq!(
        s.statements[8].expect,
        Expectation::Fields(vec![
            ("wr_id".into(), "1".into()),
            ("status".into(), "SUCCESS".into())
        ])
    );
    assert_eq!(s.statements[9].expect, Expectation::Empty);
    assert_eq!(s.statements[10].verb, "sim");
    assert_eq!(s.statements[10].args[0], Arg::Positional("drop".into()));
}

// Goal: printing a script and parsing it back gives the same script.
// Method: parse → to_text → parse, compare everything but line numbers; and
// to_text is a fixed point.
#[test]
fn to_text_round_trips() {
    let text = "\
#! description: round trip
#! requires: rc ud
#! backends: sim hw
#! seed: 9
#! devices: rxe
# a comment that is not kept
let d0 = open_device index=0 process=1
let pd = alloc_pd d0
let cq = create_cq d0 cqe=16
let m = reg_mr pd length=64 access=LOCAL_WRITE|REMOTE_READ
let a = create_qp pd qp_type=UD send_cq=cq recv_cq=cq
modify_qp a qp_state=INIT pkey_index=0 port_num=1 qkey=0x11 -> ok
modify_qp a qp_state=RTS attr_mask=STATE -> EINVAL
post_recv a wr_id=1 sge=m:0:8 ; wr_id=2 sge_raw=m.addr:8:m.lkey -> EINVAL bad_wr=1
poll_cq cq -> wr_id=1 status=SUCCESS opcode=RECV
poll_cq cq -> empty
assert m.length == 64
sim advance ns=1000
";
    let first = parse("a.verbs", text).unwrap();
    let printed = first.to_text();
    let second = parse("a.verbs", &printed).unwrap();
    assert_eq!(first.headers, second.headers);
    assert_eq!(first.statements.len(), second.statements.len());
    for (x, y) in first.statements.iter().zip(&second.statements) {
        assert_eq!(
            (&x.binding, &x.verb, &x.args, &x.expect),
            (&y.binding, &y.verb, &y.args, &y.expect)
        );
    }
    assert_eq!(second.to_text(), printed);
    assert!(printed
        .starts_with("#! description: round trip\n#! requires: rc ud\n#! backends: sim hw\n"));
}

// Goal: every header error names the line and what was wrong.
// Method: one bad header per case.
#[test]
fn header_errors() {
    assert_eq!(
        err("#! requrie: xrc\n"),
        (
            1,
            "unknown header `#! requrie` (did you mean `#! requires:`?)".into()
        )
    );
    assert_eq!(
        err("#! frobs: 1\n"),
        (1, "unknown header `#! frobs`".into())
    );
    assert_eq!(
        err("#! requires xrc\n"),
        (
            1,
            "expected `:` after the header name in `#! requires xrc`".into()
        )
    );
    assert!(err("#! requires: xrcc\n")
        .1
        .starts_with("unknown capability `xrcc` (known: rc uc ud"));
    assert_eq!(
        err("#! backends: gpu\n"),
        (1, "unknown backend `gpu` (known: sim hw)".into())
    );
    assert_eq!(
        err("#! seed: x\n"),
        (
            1,
            "expected a seed (a number) after `#! seed:`, got `x`".into()
        )
    );
    assert_eq!(
        err("#! seed: 1\n#! seed: 2\n"),
        (2, "`#! seed:` given twice".into())
    );
    assert_eq!(
        err("let d0 = open_device\n#! seed: 1\n"),
        (
            2,
            "header `#! seed` after the first statement (headers come first)".into()
        )
    );
}

// Goal: every `let` error says what was expected.
// Method: one malformed `let` per case.
#[test]
fn let_errors() {
    assert_eq!(err("let\n"), (1, "expected a name after `let`".into()));
    assert_eq!(
        err("let a open_device\n"),
        (1, "expected `=` after `let a`".into())
    );
    assert_eq!(
        err("let a= open_device\n"),
        (
            1,
            "expected `=` after `let a` (separate it by spaces)".into()
        )
    );
    assert_eq!(
        err("let 1a = open_device\n"),
        (
            1,
            "`1a` is not a valid name (letters, digits and `_`, not starting with a digit)".into()
        )
    );
    assert_eq!(
        err("let a =\n"),
        (1, "expected a statement after `let a =`".into())
    );
}

// Goal: unknown statements and sim directives are parse errors with hints.
// Method: typos of real names and made-up names.
#[test]
fn unknown_statement_errors() {
    assert_eq!(
        err("modfy_qp a\n"),
        (
            1,
            "unknown statement `modfy_qp` (did you mean `modify_qp`?)".into()
        )
    );
    assert_eq!(
        err("frobnicate\n"),
        (1, "unknown statement `frobnicate`".into())
    );
    assert!(err("sim\n")
        .1
        .starts_with("expected a directive after `sim` (advance run_until_idle"));
    assert_eq!(
        err("sim dorp next=1\n"),
        (
            1,
            "unknown sim directive `dorp` (did you mean `sim drop`?)".into()
        )
    );
    assert_eq!(
        stmt_err("sim drop a"),
        "unexpected `a`: `sim drop` takes only key=value arguments"
    );
}

// Goal: argument errors (keys, values, names, positionals) are caught at parse time.
// Method: one bad argument per case, after a setup that binds d0 pd cq a m.
#[test]
fn argument_errors() {
    assert_eq!(
        stmt_err("create_cq d0 cqe2=4"),
        "unknown argument `cqe2` for create_cq (did you mean `cqe`?)"
    );
    assert_eq!(
        stmt_err("alloc_pd d0 x=1"),
        "unknown argument `x` for alloc_pd (it takes no key=value arguments)"
    );
    assert_eq!(
        stmt_err("query_gid d0 zzzzzz=1"),
        "unknown argument `zzzzzz` for query_gid (expected one of: port_num, index)"
    );
    assert_eq!(
        stmt_err("create_cq d0 cqe="),
        "expected a value after `cqe=`"
    );
    assert_eq!(
        stmt_err("create_cq d0 cqe=1 cqe=2"),
        "argument `cqe` given twice"
    );
    assert_eq!(
        stmt_err("create_cq d0 cqe=abc"),
        "expected a number for `cqe`, got `abc`"
    );
    assert_eq!(
        stmt_err("create_cq d0 cqe=x.y"),
        "unknown name `x` in `cqe=x.y` (no earlier `let x = …`)"
    );
    assert_eq!(
        stmt_err("modify_qp a qp_state=RTX"),
        "`RTX` is not a QP state (RESET INIT RTR RTS SQD SQE ERR) (in `qp_state=RTX`)"
    );
    assert!(stmt_err("reg_mr pd access=LOCAL_WRTE").starts_with("`LOCAL_WRTE` is not access flags"));
    assert_eq!(
        stmt_err("attach_mcast a gid=zz"),
        "expected a GID (fe80::1 or 32 hex digits) for `gid`, got `zz`"
    );
    assert_eq!(
        stmt_err("post_send a sge=m:0"),
        "expected `sge=MR:OFFSET:LENGTH`, got `sge=m:0`"
    );
    assert_eq!(
        stmt_err("post_send a sge=q:0:8"),
        "unknown name `q` in `sge=q:0:8` (no earlier `let q = …`)"
    );
    assert_eq!(
        stmt_err("post_send a sge_raw=1:2"),
        "expected `sge_raw=ADDR:LENGTH:LKEY`, got `sge_raw=1:2`"
    );
    assert_eq!(
        stmt_err("post_send a remote=m"),
        "expected `remote=MR:OFFSET`, got `remote=m`"
    );
    assert_eq!(
        stmt_err("write m hex=abc"),
        "expected hex bytes (an even number of hex digits) for `hex`, got `abc`"
    );
    assert_eq!(
        stmt_err("open_xrcd d0 fd=-x"),
        "expected a name in `fd=-x` (fd is none, bad or a number), got `-x`"
    );
    assert_eq!(
        stmt_err("create_cq d0 cqe=8; cqe=9"),
        "`;` separates work requests and is only allowed in post_send, post_recv and post_srq_recv, not in create_cq"
    );
    let (_, msg) = err("let ch = rdma_create_event_channel\nlet id = rdma_create_id ch\nrdma_bind_addr id addr=10.0.0.1\n");
    assert_eq!(
        msg,
        "expected an address IP:PORT for `addr`, got `10.0.0.1`"
    );
    assert_eq!(
        stmt_err("create_qp pd send_cq=cqq"),
        "unknown name `cqq` in `send_cq=cqq` (no earlier `let cqq = …`)"
    );
}

// Goal: positional argument counts and names are checked.
// Method: missing, extra and unbound positionals, and malformed asserts.
#[test]
fn positional_errors() {
    assert_eq!(
        stmt_err("modify_qp qp_state=RTS"),
        "expected QP after modify_qp"
    );
    assert_eq!(
        stmt_err("modify_qp a a"),
        "modify_qp takes 1 positional argument (QP), got `a` as well"
    );
    assert_eq!(
        stmt_err("open_device d0"),
        "open_device takes no positional argument, got `d0` (arguments are key=value)"
    );
    assert_eq!(
        stmt_err("alloc_pd d9"),
        "unknown name `d9` in alloc_pd (CTX) (no earlier `let d9 = …`)"
    );
    assert_eq!(stmt_err("connect"), "expected QP after connect");
    assert_eq!(
        stmt_err("assert a.qp_num"),
        "expected `assert LEFT OP RIGHT` with OP one of == != < <= > >="
    );
    assert_eq!(
        stmt_err("assert 1 =< 2"),
        "expected `assert LEFT OP RIGHT` with OP one of == != < <= > >="
    );
    assert_eq!(
        stmt_err("assert z.x == 1"),
        "unknown name `z` in `z.x` (no earlier `let z = …`)"
    );
}

// Goal: expectation errors say what may follow `->`.
// Method: one malformed expectation per case.
#[test]
fn expectation_errors() {
    assert_eq!(
        stmt_err("dealloc_pd pd ->"),
        "expected an expectation after `->` (ok, an errno name, error, empty, or key=value fields)"
    );
    assert_eq!(
        stmt_err("dealloc_pd pd -> ok EINVAL"),
        "unexpected `EINVAL` after `-> ok`"
    );
    assert_eq!(
        stmt_err("dealloc_pd pd -> empty"),
        "`-> empty` is not an expectation for dealloc_pd"
    );
    assert_eq!(
        stmt_err("dealloc_pd pd -> EFOO"),
        "unknown errno `EFOO` (expected ok, an errno name such as EINVAL, error, empty, or key=value fields)"
    );
    assert_eq!(
        stmt_err("dealloc_pd pd -> EBUSY bad_wr=1"),
        "unexpected `bad_wr=1` after `-> EBUSY`"
    );
    assert_eq!(
        stmt_err("post_send a wr_id=1 -> ENOMEM x=1"),
        "unexpected `x=1` after `-> ENOMEM` (only bad_wr=N may follow)"
    );
    assert_eq!(
        stmt_err("post_send a wr_id=1 -> ENOMEM bad_wr=x"),
        "expected a number after `bad_wr=`, got `x`"
    );
    assert_eq!(
        stmt_err("dealloc_pd pd -> wr_id=1"),
        "dealloc_pd takes no field expectations (expected ok or an errno name after `->`, got `wr_id=1`)"
    );
    assert_eq!(
        stmt_err("poll_cq cq -> wr_id=1 SUCCESS"),
        "expected key=value after `->`, got `SUCCESS`"
    );
    assert!(stmt_err("poll_cq cq -> stat=SUCCESS").starts_with(
        "unknown field `stat` in the expectation of poll_cq (expected one of: wr_id, status"
    ));
    assert_eq!(
        stmt_err("poll_cq cq -> wr_id=1 wr_id=2"),
        "field `wr_id` given twice after `->`"
    );
    assert_eq!(
        stmt_err("poll_cq cq -> status=GOOD"),
        "`GOOD` is not a completion status (SUCCESS LOC_PROT_ERR …) (in `status=GOOD`)"
    );
}

// Goal: tokens split the way the format says: `;` and `->` need no spaces,
// `#` starts a comment only at a token start.
// Method: parse compact forms.
#[test]
fn tokenizing() {
    let s = parse(
        "t.verbs",
        &format!("{SETUP}post_recv a wr_id=1 sge=m:0:8;wr_id=2 ->EINVAL # c\n"),
    )
    .unwrap();
    let post = &s.statements[5];
    assert_eq!(post.args.len(), 5);
    assert_eq!(
        post.expect,
        Expectation::Error {
            errno: "EINVAL".into(),
            bad_wr: None
        }
    );
    assert_eq!(strip_comment("a b#c # d"), "a b#c");
}

// Goal: `-> error` parses (with bad_wr on post_*, without elsewhere), is
// rejected with anything else after it, and prints back as written.
// Method: parse each form, check the tree and the error messages, and
// round-trip through to_text.
#[test]
fn any_error_expectation() {
    let s = parse(
        "t.verbs",
        &format!("{SETUP}poll_cq cq -> error\npost_send a wr_id=1 -> error bad_wr=0\n"),
    )
    .unwrap();
    assert_eq!(
        s.statements[5].expect,
        Expectation::AnyError { bad_wr: None }
    );
    assert_eq!(
        s.statements[6].expect,
        Expectation::AnyError { bad_wr: Some(0) }
    );
    assert_eq!(s.statements[5].to_text(), "poll_cq cq -> error");
    assert_eq!(
        s.statements[6].to_text(),
        "post_send a wr_id=1 -> error bad_wr=0"
    );
    assert_eq!(
        stmt_err("dealloc_pd pd -> error bad_wr=1"),
        "unexpected `bad_wr=1` after `-> error`"
    );
    assert_eq!(
        stmt_err("poll_cq cq -> error status=SUCCESS"),
        "unexpected `status=SUCCESS` after `-> error`"
    );
}

// Goal: arithmetic values are accepted where numbers, enums and flags are,
// and their references must be bound.
// Method: parse valid uses; check the errors for an unbound reference.
#[test]
fn arithmetic_values() {
    let s = parse(
        "t.verbs",
        &format!("{SETUP}post_send a wr_id=1+1 sge_raw=m.addr+8:8:m.lkey remote_addr=m.addr+4*2 rkey=m.rkey\nassert a.cap.max_send_wr+1 > 16-1\nmodify_qp a qp_state=RTR path_mtu=a.path_mtu+10\ncreate_cq d0 cqe=-1 comp_vector=-1\n"),
    )
    .unwrap();
    assert_eq!(s.statements[5].named("remote_addr"), Some("m.addr+4*2"));
    assert_eq!(s.statements[8].named("cqe"), Some("-1"));
    assert_eq!(
        stmt_err("post_send a wr_id=x+1"),
        "unknown name `x` in `wr_id=x+1` (no earlier `let x = …`) (arithmetic takes numbers, `name.field` references and repeat variables)"
    );
    assert_eq!(
        stmt_err("assert q.qp_num+1 == 2"),
        "unknown name `q` in `q.qp_num+1` (no earlier `let q = …`) (arithmetic takes numbers, `name.field` references and repeat variables)"
    );
}

// Goal: repeat blocks expand with their variable substituted, keep the real
// line numbers, nest, and refuse malformed forms with a hint.
// Method: parse blocks and inspect the statements; table of error cases.
#[test]
fn repeat_blocks() {
    let text = format!(
        "{SETUP}repeat i in 1..3 {{\n  post_send a wr_id=i sge=m:i*8:8\n  repeat j in 0..i {{\n    poll_cq cq -> wr_id=10*i+j\n  }}\n}}\nrepeat 2 {{\n  poll_cq cq\n}}\n"
    );
    let s = parse("t.verbs", &text).unwrap();
    let got: Vec<(usize, String)> = s.statements[5..]
        .iter()
        .map(|st| (st.line, st.to_text()))
        .collect();
    let want = [
        (7, "post_send a wr_id=1 sge=m:1*8:8"),
        (9, "poll_cq cq -> wr_id=10*1+0"),
        (7, "post_send a wr_id=2 sge=m:2*8:8"),
        (9, "poll_cq cq -> wr_id=10*2+0"),
        (9, "poll_cq cq -> wr_id=10*2+1"),
        (13, "poll_cq cq"),
        (13, "poll_cq cq"),
    ];
    let want: Vec<(usize, String)> = want.iter().map(|(n, t)| (*n, (*t).to_owned())).collect();
    assert_eq!(got, want);
    // The iteration is named when a body line fails to parse.
    assert_eq!(
        err(&format!("{SETUP}repeat i in 0..2 {{\n  poll_cq cq -> wr_id=i\n  poll_cq cq -> stauts=SUCCESS\n}}\n")),
        (8, "unknown field `stauts` in the expectation of poll_cq (expected one of: wr_id, status, opcode, byte_len, imm_data, invalidated_rkey, qp_num, src_qp, wc_flags, vendor_err, pkey_index, slid, sl, dlid_path_bits) (in `repeat` iteration i=0)".to_owned())
    );
    for (body, line, msg) in [
        ("repeat 3\n", 6, "expected `{` at the end of the `repeat` line"),
        ("repeat i 0..3 {\n}\n", 6, "expected `repeat N {` or `repeat i in A..B {`, got `repeat i 0..3 {`"),
        ("repeat i in 3 {\n}\n", 6, "expected a range A..B after `repeat i in`, got `3`"),
        ("repeat i in 3..1 {\n}\n", 6, "the repeat range 3..1 runs backwards"),
        ("repeat 1x {\n}\n", 6, "expected a number, or arithmetic on numbers and enclosing repeat variables as a repeat bound, got `1x`"),
        ("repeat 0..n {\n}\n", 6, "expected `repeat N {` or `repeat i in A..B {`"),
        ("repeat pd in 0..3 {\n}\n", 6, "the repeat variable `pd` is already bound by a `let`"),
        ("repeat i in 0..3 {\nrepeat i in 0..3 {\n}\n}\n", 7, "the repeat variable `i` is already the variable of an enclosing `repeat`"),
        ("repeat i in 0..2 {\nlet i = alloc_pd d0\n}\n", 7, "`let i` inside `repeat i …`"),
        ("repeat 2 {\npoll_cq cq\n", 6, "`repeat` block not closed"),
        ("}\n", 6, "`}` without an open `repeat` block"),
        ("repeat 2 {\n#! seed: 1\n}\n", 7, "header `#! seed` inside a `repeat` block"),
        ("repeat 1000001 {\npoll_cq cq\n}\n", 6, "more than 1000000"),
    ] {
        let (n, m) = err(&format!("{SETUP}{body}"));
        assert_eq!(n, line, "{body}: {m}");
        assert!(m.starts_with(msg) || m.contains(msg), "{body}: {m}");
    }
}

// Goal: `-> any wr_id=LIST` and either-or field values parse, print back,
// and are refused where they do not apply.
// Method: parse, compare the tree and `to_text`; table of error cases.
#[test]
fn any_order_and_either_or() {
    let s = parse(
        "t.verbs",
        &format!("{SETUP}poll_cq cq -> any wr_id=1,2,5..8 status=REM_ACCESS_ERR|RETRY_EXC_ERR\npoll_cq cq -> status=SUCCESS|WR_FLUSH_ERR wc_flags=GRH|WITH_IMM byte_len=0|8\n"),
    )
    .unwrap();
    assert_eq!(
        s.statements[5].expect,
        Expectation::AnyOrder {
            wr_ids: vec!["1".into(), "2".into(), "5..8".into()],
            fields: vec![("status".into(), "REM_ACCESS_ERR|RETRY_EXC_ERR".into())],
        }
    );
    assert_eq!(
        s.statements[5].to_text(),
        "poll_cq cq -> any wr_id=1,2,5..8 status=REM_ACCESS_ERR|RETRY_EXC_ERR"
    );
    assert_eq!(
        parse("t.verbs", &s.to_text()).unwrap().statements[5].expect,
        s.statements[5].expect
    );
    // Events take alternatives too.
    parse(
        "t.verbs",
        &format!("{SETUP}let ch = rdma_create_event_channel\nrdma_get_cm_event ch -> event=REJECTED|UNREACHABLE status=-110|0\nget_async_event d0 -> event_type=QP_FATAL|QP_REQ_ERR qp=a\n"),
    )
    .unwrap();
    for (line, msg) in [
        (
            "poll_cq cq -> any status=SUCCESS",
            "expected the work requests after `-> any`",
        ),
        ("poll_cq cq -> any wr_id=1,,2", "empty item in `wr_id=1,,2`"),
        (
            "poll_cq cq -> any wr_id=1,x",
            "expected a number for `wr_id`, got `x`",
        ),
        (
            "poll_cq cq -> wr_id=1,2",
            "write `-> any wr_id=1,2` to reap them in any order",
        ),
        (
            "let w = poll_cq cq -> any wr_id=1,2",
            "`let w =` cannot bind `-> any`",
        ),
        (
            "get_cq_event cq -> any wr_id=1",
            "is only for poll_cq, not get_cq_event",
        ),
        (
            "poll_cq cq -> status=SUCCESS|BOGUS",
            "`BOGUS` is not a completion status",
        ),
        (
            "poll_cq cq -> status=SUCCESS|",
            "empty alternative in `status=SUCCESS|`",
        ),
    ] {
        let m = stmt_err(line);
        assert!(m.contains(msg), "{line}: {m}");
    }
}

// Goal: `#! sim:` keeps its `name=value` pairs in order, writes them back,
// and refuses a pair without `=`.
// Method: parse, print with the script writer, parse again; then a bad pair.
#[test]
fn sim_header_pairs() {
    let text = "#! sim: cq_overrun=continue dc_key_violation=nak\n#! sim: errno_flavor=spec\nlet d0 = open_device index=0\n";
    let s = parse("sim.verbs", text).unwrap();
    let want = vec![
        ("cq_overrun".to_owned(), "continue".to_owned()),
        ("dc_key_violation".to_owned(), "nak".to_owned()),
        ("errno_flavor".to_owned(), "spec".to_owned()),
    ];
    assert_eq!(s.headers.sim, want);
    let again = parse("sim.verbs", &s.to_text()).unwrap();
    assert_eq!(again.headers.sim, want);
    let e = parse("bad.verbs", "#! sim: cq_overrun\n").unwrap_err();
    assert!(e.to_string().contains("expected `name=value`"), "{e}");
}
