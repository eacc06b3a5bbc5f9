#!/usr/bin/env python3
"""check_summary.py RUN_DIR SCENARIO KEY... — the scenario's summary.json has
a non-empty `results` list whose every entry holds each KEY (a number, a
string, or null where the header allows "not reached"), `top:KEY` fields of
its own, the scenario's name, and the run has a report page with images."""
import json
import os
import sys

NULLABLE = {"time_to_target_s", "speedup_vs_bsp", "swing"}


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def main():
    run, name, keys = sys.argv[1], sys.argv[2], sys.argv[3:]
    path = os.path.join(run, "summary.json")
    if not os.path.exists(path):
        fail(f"{name}: no summary.json")
    with open(path) as f:
        s = json.load(f)
    if s.get("scenario") != name:
        fail(f"{name}: summary.json names scenario {s.get('scenario')!r}")
    results = s.get("results")
    if not isinstance(results, list) or not results:
        fail(f"{name}: summary.json has no results")
    for key in keys:
        if key.startswith("top:"):
            if key[4:] not in s:
                fail(f"{name}: summary.json lacks {key[4:]!r}")
            continue
        for i, r in enumerate(results):
            v = r.get(key)
            if v is None and key not in NULLABLE:
                fail(f"{name}: results[{i}] ({r.get('label')}) lacks {key!r}")
            if isinstance(v, float) and v != v:
                fail(f"{name}: results[{i}].{key} is NaN")
    accs = [r["final_accuracy"] for r in results if isinstance(r.get("final_accuracy"), (int, float))]
    if accs and max(accs) <= 0.15:
        fail(f"{name}: no run learned anything (best final accuracy {max(accs)})")
    page = os.path.join(run, "index.html")
    if not os.path.exists(page):
        fail(f"{name}: no report page index.html")
    with open(page) as f:
        html = f.read()
    if html.count("<img") < 1:
        fail(f"{name}: the report page has no plots")
    print(f"{name}: summary.json with {len(results)} results; report page with {html.count('<img')} images")


if __name__ == "__main__":
    main()
