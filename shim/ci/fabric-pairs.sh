#!/bin/bash
# Server and client as two processes on one simulated fabric (issue #15):
# Debian's ibverbs-utils pingpongs and perftest, unmodified, through the
# drop-in libraries with `verbsim exec --fabric NAME`; a run with 1 % of
# packets dropped; a peer killed mid-run; garbage on the fabric's socket.
#   usage: shim/ci/fabric-pairs.sh TARGET_DIR [REPORT.md]
set -u
bin="$(cd "$1" && pwd)/verbsim"
report="${2:-/dev/null}"
tmp=$(mktemp -d)
trap 'pkill -f -- "--socket [^ ]*verbsim-fabric-ci-" 2>/dev/null; rm -rf "$tmp"' EXIT
export VERBSIM_FABRIC_LOG="$tmp/fabric.log"
failed=0
n=0
printf '| pair | server | client | client says |\n|---|---|---|---|\n' > "$report"

# Waits until something listens on TCP port $1 (perftest and the
# pingpongs use 18515), without connecting to it: the servers accept once.
wait_listen() {
    local hex
    hex=$(printf '%04X' "$1")
    for _ in $(seq 1 400); do
        if grep -q ":$hex 00000000:0000 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null; then
            return 0
        fi
        sleep 0.05
    done
    return 1
}

# pair NAME 'SERVER ARGS' 'CLIENT ARGS' PATTERN [EXEC OPTIONS...]
pair() {
    local name=$1 srv=$2 cli=$3 want=$4
    shift 4
    n=$((n + 1))
    local fab="${FAB:-ci-$n}"
    timeout 120 "$bin" exec "$@" --fabric "$fab" -- $srv > "$tmp/$n.srv" 2>&1 &
    local spid=$!
    local to=127.0.0.1
    if [ -n "${RDMACM:-}" ]; then
        # perftest -R meets over rdma_cm (no TCP port to watch): give the
        # server time to listen, and connect to device 0's address.
        sleep 2
        to=10.0.0.1
    elif ! wait_listen 18515; then
        echo "FAIL $name: the server never listened"; cat "$tmp/$n.srv"
        failed=$((failed + 1)); kill "$spid" 2>/dev/null; wait "$spid"; return
    fi
    local c try
    for try in 1 2 3 4 5; do
        timeout 120 "$bin" exec "$@" --fabric "$fab" -- $cli "$to" > "$tmp/$n.cli" 2>&1
        c=$?
        # Over rdma_cm a client that came before the server listened is
        # rejected at once (as on hardware): try again.
        if [ "$c" -ne 0 ] && [ -n "${RDMACM:-}" ] && grep -q "Failed to create RDMA CM connection" "$tmp/$n.cli"; then
            sleep 1
            continue
        fi
        break
    done
    wait "$spid"
    local s=$?
    local says
    says=$(grep -E "$want" "$tmp/$n.cli" | tail -n 1 | tr -s ' \t' ' ')
    printf '| `%s` | %s | %s | %s |\n' "$name" "$s" "$c" "$says" >> "$report"
    if [ "$s" -eq 0 ] && [ "$c" -eq 0 ] && [ -n "$says" ]; then
        echo "PASS $name: $says"
    else
        echo "FAIL $name: server exit $s, client exit $c"
        tail -n 5 "$tmp/$n.srv" "$tmp/$n.cli"
        failed=$((failed + 1))
    fi
}

bytes='bytes in [0-9.]+ seconds'
pair ibv_rc_pingpong "ibv_rc_pingpong -g 0" "ibv_rc_pingpong -g 0" "$bytes"
pair ibv_uc_pingpong "ibv_uc_pingpong -g 0" "ibv_uc_pingpong -g 0" "$bytes"
pair ibv_ud_pingpong "ibv_ud_pingpong -g 0" "ibv_ud_pingpong -g 0" "$bytes"
pair ibv_srq_pingpong "ibv_srq_pingpong -g 0" "ibv_srq_pingpong -g 0" "$bytes"
pair ibv_xsrq_pingpong "ibv_xsrq_pingpong -g 0" "ibv_xsrq_pingpong -g 0" "success"
pair "ibv_rc_pingpong, 1 % of packets dropped" "ibv_rc_pingpong -g 0 -n 200" "ibv_rc_pingpong -g 0 -n 200" "$bytes" --faults drop=10000
# ibv_rc_pingpong's feature switches: on-demand paging (-o), implicit ODP
# (-O), ODP with ibv_advise_mr prefetch (-o -P), completion timestamps and
# the core clock (-t), device memory (-j), the received buffer checked (-c),
# the ibv_wr_* API (-N).
for o in "-o" "-O" "-o -P" "-t" "-j" "-c" "-N"; do
    pair "ibv_rc_pingpong $o" "ibv_rc_pingpong -g 0 -n 100 $o" "ibv_rc_pingpong -g 0 -n 100 $o" "$bytes"
done

row='^ *[0-9]+ +[0-9]+ +[0-9.]+'
for t in ib_write_bw ib_read_bw ib_send_bw ib_atomic_bw; do
    pair "$t" "$t -n 200" "$t -n 200" "$row"
done
pair "ib_send_bw -c UD" "ib_send_bw -c UD -n 200" "ib_send_bw -c UD -n 200" "$row"
pair "ib_write_bw -c UC" "ib_write_bw -c UC -n 200" "ib_write_bw -c UC -n 200" "$row"
pair "ib_write_bw -c DC" "ib_write_bw -c DC -n 200" "ib_write_bw -c DC -n 200" "$row"
pair "ib_read_bw -c DC" "ib_read_bw -c DC -n 200" "ib_read_bw -c DC -n 200" "$row"
for t in ib_write_lat ib_send_lat; do
    pair "$t" "$t -n 200" "$t -n 200" "$row"
done
pair "ib_send_lat -c UD" "ib_send_lat -c UD -n 200" "ib_send_lat -c UD -n 200" "$row"

# The same over rdma_cm (perftest -R): rdma_resolve_addr/route, connect,
# accept, rdma_create_qp_ex, SIDR for UD, across the two processes.
for t in "ib_write_bw -R" "ib_send_bw -R" "ib_read_lat -R" "ib_send_bw -R -c UD"; do
    RDMACM=1 pair "$t" "$t -n 200" "$t -n 200" "$row"
done

# A peer killed mid-run: the other side's WRITEs go unanswered and fail
# with IBV_WC_RETRY_EXC_ERR (status 12) after the transport's retries, as
# on hardware; nothing hangs.
n=$((n + 1))
timeout 60 "$bin" exec --fabric "ci-$n" -- ib_write_bw -D 30 > "$tmp/kill.srv" 2>&1 &
spid=$!
wait_listen 18515
timeout 60 "$bin" exec --fabric "ci-$n" -- ib_write_bw -D 30 127.0.0.1 > "$tmp/kill.cli" 2>&1 &
cpid=$!
sleep 3
pkill -9 -f '^ib_write_bw -D 30$' 2>/dev/null
start=$(date +%s)
wait "$cpid"
c=$?
took=$(( $(date +%s) - start ))
wait "$spid" 2>/dev/null
if [ "$c" -ne 0 ] && [ "$c" -ne 124 ] && grep -q 'Failed status 12' "$tmp/kill.cli" && [ "$took" -le 10 ]; then
    echo "PASS peer killed: the client failed with status 12 (RETRY_EXC_ERR) after ${took}s"
    printf '| peer killed mid-run | killed | %s | %s |\n' "$c" "Failed status 12 after ${took}s" >> "$report"
else
    echo "FAIL peer killed: client exit $c after ${took}s"; tail -n 5 "$tmp/kill.cli"
    failed=$((failed + 1))
fi

# Garbage on the fabric's socket: refused, logged, and the fabric serves on.
n=$((n + 1))
sock="/tmp/verbsim-fabric-ci-$n.sock"
VERBSIM_FABRIC_LOG= "$bin" fabric --socket "$sock" --exit-when-idle --linger 3 2> "$tmp/garbage.log" &
fpid=$!
for _ in $(seq 1 100); do [ -S "$sock" ] && break; sleep 0.05; done
python3 - "$sock" <<'EOF'
import socket, sys
for junk in (b"\xff\xff\xff\x7f" + b"x" * 64, b"\x08\x00\x00\x00" + b"\xee" * 8, b"\x01"):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    s.sendall(junk)
    s.close()
EOF
FAB="$sock" pair "ibv_rc_pingpong after garbage" "ibv_rc_pingpong -g 0 -n 100" "ibv_rc_pingpong -g 0 -n 100" "$bytes"
wait "$fpid"
if kill -0 "$fpid" 2>/dev/null || ! grep -q "refused" "$tmp/garbage.log"; then
    echo "FAIL garbage: the fabric did not log a refusal"; cat "$tmp/garbage.log"
    failed=$((failed + 1))
else
    echo "PASS garbage: $(grep -c refused "$tmp/garbage.log") refused and logged; the fabric served on and exited when idle"
fi

# Determinism: the same pair twice, seed 7, on a fabric with --pace
# virtual, gives the same trace byte for byte once the PSNs are set aside
# (ibv_rc_pingpong draws its PSNs from lrand48 seeded with pid and time:
# the program's own nondeterminism, not the simulator's).
for run in 1 2; do
    sock="/tmp/verbsim-fabric-ci-det-$run.sock"
    "$bin" fabric --socket "$sock" --exit-when-idle --linger 0.5 --pace virtual --trace "$tmp/det-$run.trace" 2>/dev/null &
    fpid=$!
    for _ in $(seq 1 100); do [ -S "$sock" ] && break; sleep 0.05; done
    VERBSIM_SEED=7 "$bin" exec --fabric "$sock" -- ibv_rc_pingpong -g 0 -n 50 > /dev/null 2>&1 &
    spid=$!
    wait_listen 18515
    VERBSIM_SEED=7 "$bin" exec --fabric "$sock" -- ibv_rc_pingpong -g 0 -n 50 127.0.0.1 > /dev/null 2>&1
    wait "$spid"
    wait "$fpid"
    # From the first QP destruction on, the two programs tear down
    # independently: which one the kernel lets exit first is not the
    # simulator's choice, so that tail is compared as a set.
    sed -E 's/psn=[0-9]+/psn=P/g' "$tmp/det-$run.trace" \
        | awk 'BEGIN { t = 0 } / destroyed$/ { t = 1 } { if (t) print > "/dev/stderr"; else print }' \
        > "$tmp/det-$run.norm" 2> "$tmp/det-$run.tail"
    sort "$tmp/det-$run.tail" >> "$tmp/det-$run.norm"
done
if [ -s "$tmp/det-1.norm" ] && cmp -s "$tmp/det-1.norm" "$tmp/det-2.norm"; then
    echo "PASS determinism: two runs, $(wc -l < "$tmp/det-1.norm") trace lines, identical but for the programs' random PSNs (and the order of their teardowns)"
else
    echo "FAIL determinism: the traces of two identical runs differ"
    diff "$tmp/det-1.norm" "$tmp/det-2.norm" | head -n 10
    failed=$((failed + 1))
fi

# rdma-core's own rdma_cm tests (test_rdmacm, and test_mlx5_rdmacm: DC
# QPs as rdma_cm external QPs, a reserved QP number for the second
# connection), whose passive sides are forked children: pyverbs finds a
# device's IP through /sys/class/infiniband/DEV/device/net/ and `ip addr`,
# so they run in a mount and network namespace where a tmpfs gives the
# simulated devices the netdev `lo` and `lo` holds only device 0's address
# (docs/rdma-cm.md's plan: 10.0.0.1; `lo` is brought up first, since
# bringing it up adds 127.0.0.1). Each module's pass count may only rise
# (shim/ci/pyverbs-rdmacm-floor, shim/ci/pyverbs-mlx5-rdmacm-floor).
# Skipped where namespaces cannot be made.
if unshare -mn true 2>/dev/null; then
    tests=$(mktemp -d)
    cp -r /usr/share/doc/rdma-core/tests "$tests/tests"
    gunzip -f "$tests"/tests/*.gz 2>/dev/null || true
    for spec in "test_rdmacm pyverbs-rdmacm-floor 10" "test_mlx5_rdmacm pyverbs-mlx5-rdmacm-floor 2"; do
        read -r module floor_file total <<< "$spec"
        floor=$(cat "$(dirname "$0")/$floor_file")
        {
            echo 'set -e'
            echo 'mount -t tmpfs verbsim-sysfs /sys/class'
            echo 'for d in sim_cx6_0 sim_cx6_1; do mkdir -p /sys/class/infiniband/$d/device/net/lo; done'
            echo 'ip link set lo up'
            echo 'ip addr flush dev lo'
            echo 'ip addr add 10.0.0.1/8 dev lo'
            echo "cd '$tests/tests'"
            echo "exec timeout 600 '$bin' exec --fabric ci-pyverbs -- /usr/bin/python3 run_tests.py -v $module"
        } > "$tests/run.sh"
        unshare -mn sh "$tests/run.sh" > "$tmp/pyverbs-$module.log" 2>&1
        ok=$(grep -c '\.\.\. ok$' "$tmp/pyverbs-$module.log")
        grep -E '\.\.\. |^Ran ' "$tmp/pyverbs-$module.log" | sed 's/ (tests\.[A-Za-z0-9_.]*)//'
        if [ "$ok" -ge "$floor" ]; then
            echo "PASS pyverbs $module: $ok ok (floor $floor), passive sides in forked children, one fabric"
            printf '| pyverbs `%s` (forked children) | | | %s of %s ok |\n' "$module" "$ok" "$total" >> "$report"
        else
            echo "FAIL pyverbs $module: $ok ok, below the floor of $floor"; tail -n 30 "$tmp/pyverbs-$module.log"
            failed=$((failed + 1))
        fi
    done
    rm -rf "$tests"
else
    echo "SKIP pyverbs test_rdmacm, test_mlx5_rdmacm: cannot make mount and network namespaces here"
fi

echo "fabric pairs: $failed failed"
[ "$failed" -eq 0 ]
