#!/bin/bash
# The RDMA ecosystem's unmodified programs on the drop-in libraries, server
# and client as two processes on one simulated fabric (`verbsim exec
# --fabric NAME`): librdmacm's example programs (rdmacm-utils), qperf's RC,
# UC and UD tests (and -cm1), UCX's ucx_info and ucx_perftest (UCP and UCT
# over rc_verbs and ud_verbs), libfabric's verbs provider (fi_info,
# fi_pingpong). Prints a verdict per program and, where one fails, why;
# writes the table as markdown (docs/drop-in.md carries it); fails when a
# program named in shim/ci/ecosystem-pass stops passing.
#   usage: shim/ci/ecosystem.sh TARGET_DIR [REPORT.md]
# Every program runs under `timeout`: nothing hangs CI.
set -u
bin="$(cd "$1" && pwd)/verbsim"
report="${2:-/dev/null}"
passlist="$(dirname "$0")/ecosystem-pass"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export VERBSIM_FABRIC_LOG="$tmp/fabric.log"
declare -A verdict why
order=()
n=0

# record NAME OK REASON
record() {
    order+=("$1")
    if [ "$2" = 1 ]; then verdict[$1]=pass; why[$1]="$3"; echo "PASS $1: $3"
    else verdict[$1]=FAIL; why[$1]="$3"; echo "FAIL $1: $3"; fi
}

# The last informative line of a log, for a failure's reason.
reason() {
    grep -v '^ *$' "$1" | grep -vi 'verbsim shim: .* has waited' | tail -n 1 | tr -s ' \t|' ' ' | cut -c1-160
}

# Waits until something listens on TCP port $1 (without connecting: some
# servers accept once).
wait_listen() {
    local hex
    hex=$(printf '%04X' "$1")
    for _ in $(seq 1 200); do
        grep -q ":$hex 00000000:0000 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

# pair NAME 'SERVER' 'CLIENT' CHECK [WAIT]: the server in the background,
# the client after WAIT seconds; CHECK is a shell test run with $s and $c
# (exit codes) and the logs $tmp/$n.srv, $tmp/$n.cli. A server still
# running after its client is ended (daemons such as qperf's).
pair() {
    local name=$1 srv=$2 cli=$3 check=$4 wait=${5:-2}
    n=$((n + 1))
    local fab="eco-$$-$n"
    timeout 60 "$bin" exec --fabric "$fab" -- $srv > "$tmp/$n.srv" 2>&1 &
    local spid=$!
    if [ -n "${PORT:-}" ]; then wait_listen "$PORT"; else sleep "$wait"; fi
    local try t0
    for try in 1 2 3; do
        t0=$SECONDS
        timeout 60 "$bin" exec --fabric "$fab" -- $cli > "$tmp/$n.cli" 2>&1
        c=$?
        # A client that came before a loaded machine let the server
        # listen fails at once (rejected, refused): it tries again.
        if [ "$c" -eq 0 ] || [ $((SECONDS - t0)) -gt 3 ] || ! kill -0 "$spid" 2>/dev/null; then
            break
        fi
        sleep 2
    done
    # Give the server a moment to finish on its own, then end it.
    for _ in $(seq 1 50); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
    kill "$spid" 2>/dev/null
    wait "$spid"
    s=$?
    srvlog="$tmp/$n.srv"; clilog="$tmp/$n.cli"
    if eval "$check"; then
        record "$name" 1 "$(eval "${SAYS:-reason \$clilog}")"
    else
        record "$name" 0 "server exit $s: $(reason "$srvlog"); client exit $c: $(reason "$clilog")"
    fi
}

# ------------------------------------------------------------ rdmacm-utils
# Addresses follow the simulator's plan (docs/rdma-cm.md): device 0 is 10.0.0.1.
both0='[ "$s" -eq 0 ] && [ "$c" -eq 0 ]'
SAYS='echo "$(grep -c "^ping data" $clilog) pings echoed, READ and WRITE each way"' \
pair rping "rping -s -v -C 5" "rping -c -a 10.0.0.1 -v -C 5" \
    "$both0 && [ \$(grep -c '^ping data' \$clilog) -eq 5 ]"
SAYS='echo "connected, SENDs each way, disconnected"' \
pair ucmatose "ucmatose" "ucmatose -s 10.0.0.1" \
    "$both0 && grep -q 'return status 0' \$srvlog && grep -q 'return status 0' \$clilog"
SAYS='echo "SIDR, datagrams each way"' \
pair udaddy "udaddy" "udaddy -s 10.0.0.1" \
    "$both0 && grep -q 'return status 0' \$srvlog && grep -q 'return status 0' \$clilog"
SAYS='echo "synchronous endpoints, inline SEND each way"' \
pair rdma_server/rdma_client "rdma_server" "rdma_client -s 10.0.0.1" \
    "$both0 && grep -q 'end 0' \$srvlog && grep -q 'end 0' \$clilog"
SAYS='echo "synchronous endpoints, RC"' \
pair rdma_xserver/rdma_xclient "rdma_xserver" "rdma_xclient -s 10.0.0.1" \
    "$both0 && grep -q 'end 0' \$srvlog && grep -q 'end 0' \$clilog"
SAYS='echo "10 connections; connect step: $(grep -E "^connect +:" $clilog | tr -s " " | cut -d" " -f3-6) (total ms, max ms, min us, us per connection)"' \
pair cmtime "cmtime -b 10.0.0.1 -c 10" "cmtime -s 10.0.0.1 -c 10" \
    "[ \"\$c\" -eq 0 ] && grep -q '^connect' \$clilog"
SAYS='echo "joined, 10 datagrams to the group received"' \
pair mckey "mckey -m 224.0.0.5 -b 10.0.0.1 -C 10" "mckey -m 224.0.0.5 -b 10.0.1.1 -s -C 10" \
    "$both0 && grep -q 'return status 0' \$srvlog && grep -q 'return status 0' \$clilog"
unset SAYS

# ------------------------------------------------------------------ qperf
# One qperf server for every test (it serves clients one after the other).
n=$((n + 1))
fab="eco-$$-qperf"
timeout 600 "$bin" exec --fabric "$fab" -- qperf > "$tmp/qperf.srv" 2>&1 &
qpid=$!
wait_listen 19765
# qtest NAME ARGS: a positive bandwidth, latency or message rate, and no
# zero among them (a bandwidth of 0 is a wrong result).
qtest() {
    local name=$1
    shift
    timeout 60 "$bin" exec --fabric "$fab" -- qperf 127.0.0.1 "$@" > "$tmp/q.out" 2>&1
    local c=$?
    local vals
    vals=$(grep -E '^ +[a-z_]+ += ' "$tmp/q.out" | tr -s ' ' | sed 's/^ //')
    if [ "$c" -eq 0 ] && [ -n "$vals" ] && ! echo "$vals" | grep -qE '= 0 '; then
        record "qperf $name" 1 "$(echo "$vals" | tr '\n' ';' | sed 's/;$//; s/;/, /g')"
    else
        record "qperf $name" 0 "exit $c: $(tr -s ' \n' ' ' < "$tmp/q.out" | cut -c1-160)"
    fi
}
for t in rc_bw rc_lat uc_bw uc_lat ud_bw ud_lat rc_rdma_read_bw rc_rdma_read_lat \
    rc_rdma_write_bw rc_rdma_write_lat rc_rdma_write_poll_lat uc_rdma_write_bw \
    uc_rdma_write_lat uc_rdma_write_poll_lat rc_compare_swap_mr rc_fetch_add_mr \
    ver_rc_compare_swap ver_rc_fetch_add; do
    qtest "$t" -t 2 "$t"
done
# The bi-directional tests post 1024 messages before they first poll; with
# a call per verb that alone outlasted a short test, so they ran for 5 s.
# Posts and polls now go through shared memory: 2 s, as the others.
for t in rc_bi_bw uc_bi_bw ud_bi_bw; do
    qtest "$t" -t 2 "$t"
done
qtest "-cm1 rc_lat" -t 2 -cm1 rc_lat
qtest "-cm1 rc_bw" -t 2 -cm1 rc_bw
qtest "-cm1 rc_rdma_read_bw" -t 2 -cm1 rc_rdma_read_bw
kill "$qpid" 2>/dev/null
wait "$qpid" 2>/dev/null

# -------------------------------------------------------------------- UCX
if timeout 60 "$bin" exec -- ucx_info -d > "$tmp/ucx_info" 2>&1 \
    && grep -q 'Transport: rc_verbs' "$tmp/ucx_info" && grep -q 'Device: sim_cx6_0:1' "$tmp/ucx_info"; then
    record "ucx_info -d" 1 "$(grep -c 'Transport: .*_verbs' "$tmp/ucx_info") verbs transports on $(grep -c '^# Memory domain: sim_' "$tmp/ucx_info") simulated devices"
else
    record "ucx_info -d" 0 "no rc_verbs transport on sim_cx6_0: $(reason "$tmp/ucx_info")"
fi
export UCX_NET_DEVICES=sim_cx6_0:1
# ucx NAME TLS 'ARGS': a Final line with a positive message rate.
ucx() {
    local name=$1
    port=$((20000 + n))
    SAYS='echo "$(grep Final $clilog | tr -s " " | cut -d" " -f2-4,9) (iterations, 50%ile and average usec, msg/s)"' \
    PORT=$port UCX_TLS=$2 pair "ucx_perftest $name" "ucx_perftest -p $port" "ucx_perftest 127.0.0.1 -p $port $3" \
        "$both0 && awk '/^Final:/ { exit !(\$NF > 0) }' \$clilog && grep -q '^Final:' \$clilog"
}
ucp='rc_verbs,ud_verbs,self'
ucx "tag_lat (UCP, rc_verbs)" "$ucp" "-t tag_lat -n 200"
ucx "tag_bw (UCP, rc_verbs)" "$ucp" "-t tag_bw -n 200 -s 4096"
ucx "stream_lat (UCP, rc_verbs)" "$ucp" "-t stream_lat -n 200"
ucx "stream_bw (UCP, rc_verbs)" "$ucp" "-t stream_bw -n 200 -s 4096"
ucx "ucp_put_lat (UCP, rc_verbs)" "$ucp" "-t ucp_put_lat -n 200"
ucx "ucp_put_bw (UCP, rc_verbs)" "$ucp" "-t ucp_put_bw -n 200 -s 4096"
ucx "ucp_get (UCP, rc_verbs)" "$ucp" "-t ucp_get -n 200 -s 4096"
ucx "tag_lat (UCP, ud_verbs)" "ud_verbs,self" "-t tag_lat -n 200"
ucx "put_lat (UCT rc_verbs)" "$ucp" "-t put_lat -x rc_verbs -d sim_cx6_0:1 -n 200"
ucx "put_bw zcopy (UCT rc_verbs)" "$ucp" "-t put_bw -x rc_verbs -d sim_cx6_0:1 -n 200 -s 4096 -D zcopy"
ucx "am_lat (UCT rc_verbs)" "$ucp" "-t am_lat -x rc_verbs -d sim_cx6_0:1 -n 200"
ucx "am_lat (UCT ud_verbs)" "$ucp" "-t am_lat -x ud_verbs -d sim_cx6_0:1 -n 200"
ucx "am_bw (UCT ud_verbs)" "$ucp" "-t am_bw -x ud_verbs -d sim_cx6_0:1 -n 200"
unset UCX_NET_DEVICES SAYS

# -------------------------------------------------------------- libfabric
if timeout 60 "$bin" exec -- fi_info -p verbs > "$tmp/fi_info" 2>&1 \
    && grep -q 'type: FI_EP_MSG' "$tmp/fi_info" && grep -q 'type: FI_EP_RDM' "$tmp/fi_info"; then
    record "fi_info -p verbs" 1 "$(grep -c '^provider: verbs' "$tmp/fi_info") endpoints (MSG, RDM through ofi_rxm, DGRAM) on $(grep 'domain:' "$tmp/fi_info" | sort -u | wc -l) domains"
else
    record "fi_info -p verbs" 0 "$(reason "$tmp/fi_info")"
fi
# FI_EP_MSG finds the devices by GID (AF_IB): no interface address of
# the host binds to a simulated device. FI_EP_RDM (ofi_rxm over verbs MSG) cannot: with
# AF_IB addresses libfabric 1.17 resolves its passive side with no
# destination, which librdmacm refuses (EINVAL) on hardware too; so its
# run names the interface that holds device 0's address as a user names
# their IPoIB one (FI_VERBS_IFACE): loopback, which the simulated CM
# places on device 0 (docs/rdma-cm.md).
for ep in msg rdm; do
    iface=""
    [ "$ep" = rdm ] && iface="env FI_VERBS_IFACE=lo"
    SAYS='echo "$(grep -E "^ *64 " $clilog | tr -s " " | head -n 1)"' PORT=47592 \
    pair "fi_pingpong -p verbs -e $ep" "$iface fi_pingpong -p verbs -e $ep -I 100 -S 64" \
        "$iface fi_pingpong -p verbs -e $ep -I 100 -S 64 127.0.0.1" \
        "$both0 && grep -qE '^ *64 ' \$clilog"
done
unset SAYS

# ---------------------------------------------------------------- verdicts
passed=0
failed_floor=0
{
    echo '| program | verdict | what it showed, or why it fails |'
    echo '|---|---|---|'
} > "$report"
echo
printf '%-45s %s\n' program verdict
for p in "${order[@]}"; do
    printf '%-45s %s\n' "$p" "${verdict[$p]}"
    printf '| `%s` | %s | %s |\n' "$p" "${verdict[$p]}" "$(echo "${why[$p]}" | sed 's/|/\\|/g')" >> "$report"
    [ "${verdict[$p]}" = pass ] && passed=$((passed + 1))
done
while IFS= read -r p; do
    case "$p" in ''|'#'*) continue ;; esac
    if [ "${verdict[$p]:-missing}" != pass ]; then
        echo "REGRESSION: $p is on $passlist and did not pass (${why[$p]:-not run})"
        failed_floor=$((failed_floor + 1))
    fi
done < "$passlist"
echo "ecosystem: $passed of ${#order[@]} programs pass; $failed_floor on the pass list failed"
[ "$failed_floor" -eq 0 ]
