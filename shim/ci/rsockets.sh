#!/bin/bash
# rsockets across processes on one simulated fabric: Debian's rdmacm-utils
# rstream, riostream, rcopy and udpong, unmodified, as server and client through
# the drop-in librdmacm (`verbsim exec --fabric NAME`), with their option
# sets (blocking, non-blocking, async through rpoll, data verification,
# direct placement with riowrite), datagrams with udpong, a file copied
# with rcopy and compared,
# and a connect with nobody listening (ECONNREFUSED). The server listens on
# device 0's address, 10.0.0.1. Fails on any wrong result.
#   usage: shim/ci/rsockets.sh TARGET_DIR [REPORT.md]
set -u
bin="$(cd "$1" && pwd)/verbsim"
report="${2:-/dev/null}"
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
failed=0
n=0
printf '| pair | server | client | client says |\n|---|---|---|---|\n' > "$report"

# pair NAME 'SERVER ARGS' 'CLIENT ARGS' PATTERN
pair() {
    local name=$1 srv=$2 cli=$3 want=$4
    n=$((n + 1))
    local fab="rs-ci-$$-$n"
    timeout 90 "$bin" exec --fabric "$fab" -- $srv > "$tmp/$n.srv" 2>&1 &
    local spid=$!
    local c try
    for try in 1 2 3 4 5 6 7 8; do
        sleep 1
        timeout 90 "$bin" exec --fabric "$fab" -- $cli > "$tmp/$n.cli" 2>&1
        c=$?
        # A client that came before the server listened is refused at
        # once, as on hardware: try again.
        if [ "$c" -ne 0 ] && grep -q "Connection refused" "$tmp/$n.cli"; then
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

row='^custom +[0-9.]+[kmg]? '
to='-s 10.0.0.1'
pair "rstream -T b -T v (blocking, verified)" "rstream -T b -T v -S 65536 -C 100" "rstream $to -T b -T v -S 65536 -C 100" "$row"
pair "rstream -T n -T v (non-blocking)" "rstream -T n -T v -S 10000 -C 200" "rstream $to -T n -T v -S 10000 -C 200" "$row"
pair "rstream -T a -T v (async, rpoll)" "rstream -T a -T v -S 4096 -C 200" "rstream $to -T a -T v -S 4096 -C 200" "$row"
pair "rstream 1 MB transfers" "rstream -T v -S 1048576 -C 20" "rstream $to -T v -S 1048576 -C 20" "$row"
pair "rstream 64 B ping-pong" "rstream -T b -S 64 -I 200 -C 1" "rstream $to -T b -S 64 -I 200 -C 1" "$row"
pair "rstream -T s (plain sockets)" "rstream -T s -S 65536 -C 50" "rstream -s 127.0.0.1 -T s -S 65536 -C 50" "$row"
pair "riostream -T v (riowrite)" "riostream -T v -S 65536 -C 50" "riostream $to -T v -S 65536 -C 50" "$row"
pair "riostream -T a -T v" "riostream -T a -T v -S 8192 -C 100" "riostream $to -T a -T v -S 8192 -C 100" "$row"
pair "riostream -T n" "riostream -T n -S 100000 -C 20" "riostream $to -T n -S 100000 -C 20" "$row"

# pair_forever NAME 'SERVER ARGS' 'CLIENT ARGS' PATTERN: for servers that
# serve until killed (udpong): the client's verdict; the server is stopped.
pair_forever() {
    local name=$1 srv=$2 cli=$3 want=$4
    n=$((n + 1))
    local fab="rs-ci-$$-$n"
    timeout 90 "$bin" exec --fabric "$fab" -- $srv > "$tmp/$n.srv" 2>&1 &
    local spid=$!
    pids+=("$spid")
    sleep 1
    timeout 60 "$bin" exec --fabric "$fab" -- $cli > "$tmp/$n.cli" 2>&1
    local c=$?
    kill "$spid" 2>/dev/null
    wait "$spid" 2>/dev/null
    local says
    says=$(grep -E "$want" "$tmp/$n.cli" | tail -n 1 | tr -s ' \t' ' ')
    printf '| `%s` | killed after | %s | %s |\n' "$name" "$c" "$says" >> "$report"
    if [ "$c" -eq 0 ] && [ -n "$says" ]; then
        echo "PASS $name: $says"
    else
        echo "FAIL $name: client exit $c"
        tail -n 5 "$tmp/$n.srv" "$tmp/$n.cli"
        failed=$((failed + 1))
    fi
}

# udpong: datagram rsockets (SOCK_DGRAM over UD); the server answers each
# client at the address its datagrams come from.
pair_forever "udpong (SOCK_DGRAM)" "udpong -b 10.0.0.1" "udpong $to -C 200 -S 1000" "$row"
pair_forever "udpong -T e (echo)" "udpong -b 10.0.0.1" "udpong $to -C 20 -S 2000 -T e" "$row"

# rcopy: a file of random bytes copied to the server's side, then compared.
n=$((n + 1))
fab="rs-ci-$$-$n"
head -c 3000000 /dev/urandom > "$tmp/src.bin"
timeout 90 "$bin" exec --fabric "$fab" -- rcopy > "$tmp/rcopy.srv" 2>&1 &
rpid=$!
pids+=("$rpid")
for try in 1 2 3 4 5 6 7 8; do
    sleep 1
    timeout 90 "$bin" exec --fabric "$fab" -- rcopy "$tmp/src.bin" "10.0.0.1:$tmp/dst.bin" > "$tmp/rcopy.cli" 2>&1
    c=$?
    if [ "$c" -ne 0 ] && grep -q "Connection refused\|rconnect failed" "$tmp/rcopy.cli"; then
        continue
    fi
    break
done
# The rcopy server serves forever: stop it once the copy is done.
kill "$rpid" 2>/dev/null
wait "$rpid" 2>/dev/null
says=$(grep -E 'bytes in' "$tmp/rcopy.cli" | tr -s ' \t' ' ')
if [ "$c" -eq 0 ] && cmp -s "$tmp/src.bin" "$tmp/dst.bin"; then
    echo "PASS rcopy: $says; the copy is identical"
    printf '| `rcopy` (3 MB file, compared) | killed after | %s | %s; identical |\n' "$c" "$says" >> "$report"
else
    echo "FAIL rcopy: client exit $c, copy $(cmp "$tmp/src.bin" "$tmp/dst.bin" 2>&1)"
    tail -n 5 "$tmp/rcopy.srv" "$tmp/rcopy.cli"
    printf '| `rcopy` | | %s | wrong copy |\n' "$c" >> "$report"
    failed=$((failed + 1))
fi

# Nobody listens: rconnect fails with ECONNREFUSED, quickly.
timeout 30 "$bin" exec --fabric "rs-ci-$$-refused" -- rstream $to -T b -S 64 -C 1 > "$tmp/refused.cli" 2>&1
c=$?
if [ "$c" -ne 0 ] && grep -q "rconnect: Connection refused" "$tmp/refused.cli"; then
    echo "PASS rstream with no server: rconnect: Connection refused"
    printf '| `rstream` with no server | - | %s | rconnect: Connection refused |\n' "$c" >> "$report"
else
    echo "FAIL rstream with no server: exit $c"
    tail -n 5 "$tmp/refused.cli"
    failed=$((failed + 1))
fi

if [ "$failed" -ne 0 ]; then
    echo "$failed rsockets runs failed"
    exit 1
fi
echo "every rsockets run passed"
