#!/usr/bin/env python3
"""check_summary.py RUN_DIR SCENARIO KEY... — the scenario's summary.json has
a non-empty `results` list whose every entry holds each KEY, `top:KEY`
fields of its own, and the scenario's name; the run has a report page with
images that shows those figures and no bogus algorithm row.

A KEY must be present in every entry: absent is a failure, never read as
null. Its value is a number, a string or a table; null only where the
scenario's header says the figure may not exist, marked by a trailing `?`
(`time_to_target_s?`: null when the target was not reached)."""
import html
import json
import os
import re
import sys


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def check_results(name, results, keys):
    for key in keys:
        if key.startswith("top:"):
            continue
        nullable = key.endswith("?")
        key = key.rstrip("?")
        for i, r in enumerate(results):
            where = f"{name}: results[{i}] ({r.get('label')})"
            if key not in r:
                fail(f"{where} lacks {key!r}")
            v = r[key]
            if v is None and not nullable:
                fail(f"{where}: {key!r} is null, and the header promises a value")
            if isinstance(v, float) and v != v:
                fail(f"{where}.{key} is NaN")


def check_page(run, name, summary):
    """The report page: plots, the scenario's figures in a table of their
    own, and no row of the per-algorithm table made from summary.json."""
    page = os.path.join(run, "index.html")
    if not os.path.exists(page):
        fail(f"{name}: no report page index.html")
    with open(page) as f:
        text = f.read()
    if text.count("<img") < 1:
        fail(f"{name}: the report page has no plots")
    if 'id="scenario"' not in text:
        fail(f"{name}: the report page has no section of the scenario's figures")
    first = summary["results"][0]
    label = first.get("label")
    if isinstance(label, str) and html.escape(label, quote=True) not in text:
        fail(f"{name}: the report page does not show the result {label!r}")
    # Each per-algorithm row names its algorithm; the scenario's own
    # summary.json (prefix "") read as an algorithm's gave a row with an
    # empty algorithm cell, dashes and "not reached".
    section = re.search(r'<section id="summary">(.*?)</section>', text, re.S)
    if not section:
        fail(f"{name}: the report page has no table of the trainings")
    rows = re.findall(r"<tr>(.*?)</tr>", section.group(1), re.S)
    if len(rows) < 2:
        fail(f"{name}: the trainings' table has no row")
    for row in rows[1:]:
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        if not cells or not cells[0].strip():
            fail(f"{name}: the summary table has a row of no algorithm: {row[:200]}")
    return text.count("<img")


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
        if key.startswith("top:") and key[4:] not in s:
            fail(f"{name}: summary.json lacks {key[4:]!r}")
    check_results(name, results, keys)
    accs = [r["final_accuracy"] for r in results if isinstance(r.get("final_accuracy"), (int, float))]
    if accs and max(accs) <= 0.15:
        fail(f"{name}: no run learned anything (best final accuracy {max(accs)})")
    images = check_page(run, name, s)
    print(f"{name}: summary.json with {len(results)} results; report page with {images} images")


if __name__ == "__main__":
    main()
