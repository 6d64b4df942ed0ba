#!/bin/bash
# perftest over the shared fabric beside `verbsim perf`, for
# docs/fabric-perf.md: ib_write_bw / ib_send_bw / ib_read_bw at 64 KiB and
# ib_write_lat / ib_send_lat at 2 B, each as server and client processes
# through `verbsim exec --fabric`, then the same workload with
# `verbsim perf` in one process. Prints one markdown row per workload.
#   usage: benches/fabric-perftest.sh [TARGET_DIR]   (default target/release;
#          build it: cargo build --release -p verbsim-cli -p verbsim-shim)
set -u
dir="$(cd "${1:-target/release}" && pwd)"
bin="$dir/verbsim"
[ -x "$bin" ] && [ -f "$dir/libverbsim_shim.so" ] || {
    echo "no $bin or $dir/libverbsim_shim.so: cargo build --release -p verbsim-cli -p verbsim-shim" >&2
    exit 2
}
for t in ib_write_bw ib_send_bw ib_read_bw ib_write_lat ib_send_lat; do
    command -v "$t" >/dev/null || { echo "SKIP: $t is not installed (Debian's perftest)" >&2; exit 0; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fabric="fabric-perftest-$$"

# Waits until something listens on TCP port $1 (the servers accept once).
wait_listen() {
    local hex
    hex=$(printf '%04X' "$1")
    for _ in $(seq 1 400); do
        grep -q ":$hex 00000000:0000 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

# pair PROGRAM ARGS...: server and client on the fabric; the client's output.
pair() {
    local port=$((20000 + RANDOM % 20000))
    timeout 300 "$bin" exec --fabric "$fabric" -- "$@" -p "$port" > "$tmp/srv" 2>&1 &
    local spid=$!
    wait_listen "$port" || { echo "the server of $* never listened" >&2; kill "$spid"; return 1; }
    timeout 300 "$bin" exec --fabric "$fabric" -- "$@" -p "$port" 127.0.0.1 > "$tmp/cli" 2>&1
    wait "$spid"
    cat "$tmp/cli"
}

# The row of numbers under perftest's header (bytes first).
numbers() { grep -E '^ *[0-9]+ +[0-9]+ +[0-9.]+' | head -n 1 | tr -s ' \t' ' ' | sed 's/^ //'; }

printf '| workload | perftest over the fabric (wall clock) | `verbsim perf` simulated | `verbsim perf` wall | perftest row (virtual time) |\n|---|---|---|---|---|\n'
for t in write_bw send_bw read_bw; do
    # perftest: bytes iters BW-peak BW-average MsgRate (Gb/s with --report_gbits)
    p=$(pair "ib_$t" -s 65536 -n 5000 --report_gbits | numbers)
    pbw=$(echo "$p" | cut -d' ' -f4)
    prate=$(echo "$p" | cut -d' ' -f5)
    # verbsim perf, perftest's post list of 1: bytes iters BW MsgRate clock
    v=$("$bin" perf "$t" -s 65536 -n 5000 --post-list 1)
    vsim=$(echo "$v" | grep 'simulated$' | tr -s ' ' | sed 's/^ //')
    vwall=$(echo "$v" | grep 'wall$' | tr -s ' ' | sed 's/^ //')
    printf '| `ib_%s -s 65536` | %s Gb/s (%s Mpps) | %s Gb/s (%s Mpps) | %s Gb/s (%s Mpps) | - |\n' "$t" \
        "$pbw" "$prate" "$(echo "$vsim" | cut -d' ' -f3)" "$(echo "$vsim" | cut -d' ' -f4)" \
        "$(echo "$vwall" | cut -d' ' -f3)" "$(echo "$vwall" | cut -d' ' -f4)"
done
for t in write_lat send_lat; do
    # perftest: bytes iters t_min t_max t_typical t_avg t_stdev 99% 99.9%
    p=$(pair "ib_$t" -s 2 -n 1000 | numbers)
    ptyp=$(echo "$p" | cut -d' ' -f5)
    pavg=$(echo "$p" | cut -d' ' -f6)
    # verbsim perf: bytes iters t_min t_typical t_avg t_99% clock
    v=$("$bin" perf "$t" -s 2 -n 1000)
    row() { echo "$v" | grep "$1\$" | tr -s ' ' | sed 's/^ //'; }
    printf '| `ib_%s -s 2` | t_typical %s µs, t_avg %s µs | t_typical %s µs | t_typical %s µs | t_typical %s µs |\n' "$t" \
        "$ptyp" "$pavg" "$(row simulated | cut -d' ' -f4)" "$(row wall | cut -d' ' -f4)" \
        "$(row perftest | cut -d' ' -f4)"
done
