#!/usr/bin/env python3
"""Reads `run_tests.py -v` output (rdma-core's pyverbs suite) and prints a
per-module ok/skip/fail/error table in Markdown, then every test that did
not pass with its reason. Exit 1 if fewer than FLOOR tests passed or any
test crashed the run (the summary line is missing).
   usage: pyverbs_table.py LOG FLOOR"""
import re, sys, collections

log, floor = sys.argv[1], int(sys.argv[2])
lines = open(log, errors="replace").read().splitlines()
results = []  # (module, test, outcome, reason)
pending = None
for line in lines:
    m = re.match(r"^(\w+) \(tests\.(\w+)\.[\w.]+\)(.*)$", line)
    if m:
        pending = (m.group(2), m.group(1))
        rest = m.group(3)
    elif pending:
        rest = line
    else:
        continue
    r = re.search(r" \.\.\. (ok|skipped|FAIL|ERROR|expected failure)(?: ['\"](.*)['\"])?$", rest)
    if not r and pending and rest.strip() in ("ok", "FAIL", "ERROR"):
        # The test printed something after " ... " and the verdict came alone.
        r = re.match(r"(ok|FAIL|ERROR)()", rest.strip())
    if r and pending:
        outcome = {"ok": "ok", "skipped": "skip", "FAIL": "fail", "ERROR": "error"}.get(r.group(1), "ok")
        results.append((pending[0], pending[1], outcome, r.group(2) or ""))
        pending = None
table = collections.OrderedDict()
for mod, _, out, _ in sorted(results):
    table.setdefault(mod, collections.Counter())[out] += 1
tot = collections.Counter(o for _, _, o, _ in results)
print("| module | ok | skip | fail | error |")
print("|---|---:|---:|---:|---:|")
for mod, c in table.items():
    print(f"| {mod} | {c['ok']} | {c['skip']} | {c['fail']} | {c['error']} |")
print(f"| **total ({len(results)})** | **{tot['ok']}** | **{tot['skip']}** | **{tot['fail']}** | **{tot['error']}** |")
print()
reasons = collections.Counter(r for _, _, o, r in results if o == "skip")
print("Skip reasons:")
for r, n in reasons.most_common():
    print(f"- {n} × {r}")
bad = [(m, t, o) for m, t, o, _ in results if o in ("fail", "error")]
if bad:
    print("\nFailed or errored:")
    for m, t, o in bad:
        print(f"- {m}.{t}: {o}")
summary = any(l.startswith("Ran ") for l in lines)
if not summary:
    print("\nthe suite did not finish (no 'Ran N tests' line): a crash or a hang", file=sys.stderr)
    sys.exit(1)
if tot["ok"] < floor:
    print(f"\n{tot['ok']} tests passed, below the floor of {floor} (shim/ci/pyverbs-floor)", file=sys.stderr)
    sys.exit(1)
