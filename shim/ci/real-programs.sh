#!/bin/sh
# Real programs nobody here wrote, on the simulator through the drop-in
# libibverbs.so.1 (issue #13 item 5): ibv_devices and ibv_devinfo -v
# (Debian's ibverbs-utils), checked against what the simulated devices
# report, and rdma-core's own pyverbs test suite (Debian's python3-pyverbs)
# with a pass-count floor that only rises (shim/ci/pyverbs-floor).
#   usage: shim/ci/real-programs.sh TARGET_DIR [REPORT.md]
set -eu
bin="$(cd "$1" && pwd)/verbsim"
report="${2:-/dev/null}"
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "real-programs: $*" >&2; exit 1; }

out=$("$bin" exec -- ibv_devices)
echo "$out"
echo "$out" | grep -Eq '^[[:space:]]+sim_cx6_0[[:space:]]+0002c90300011a2b$' || fail "ibv_devices does not list sim_cx6_0 with its GUID"
echo "$out" | grep -Eq '^[[:space:]]+sim_cx6_1[[:space:]]+0002c90300021a2b$' || fail "ibv_devices does not list sim_cx6_1 with its GUID"

out=$("$bin" exec --devices cx6 -- ibv_devinfo -v)
for want in 'hca_id:	sim_cx6_0' 'vendor_id:			0x02c9' 'vendor_part_id:			4123' 'fw_ver:				20.37.1700' \
            'phys_port_cnt:			1' 'state:			PORT_ACTIVE (4)' 'link_layer:		InfiniBand' 'max_qp_wr:			32768'; do
  printf '%s\n' "$out" | grep -qF "$want" || fail "ibv_devinfo -v lacks '$want'"
done
echo "ibv_devinfo -v: device, port and limits as the cx6 profile reports them"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r /usr/share/doc/rdma-core/tests "$tmp/tests"
gunzip -f "$tmp"/tests/*.gz 2>/dev/null || true
set +e
(cd "$tmp/tests" && timeout 1500 "$bin" exec -- /usr/bin/python3 run_tests.py -v) > "$tmp/log" 2>&1
rc=$?
set -e
[ "$rc" -ne 124 ] || fail "the pyverbs suite hung (timeout)"
tail -n 4 "$tmp/log"
python3 "$here/pyverbs_table.py" "$tmp/log" "$(cat "$here/pyverbs-floor")" | tee "$report"
