#!/usr/bin/env python3
"""check_summary.py RUN_DIR SCENARIO KEY... — the scenario's summary.json has
a non-empty `results` list whose every entry holds each KEY, `top:KEY`
fields of its own, and the scenario's name; the run has a report page with
images that shows those figures and no bogus algorithm row.

A KEY must be present in every entry: absent is a failure, never read as
null. Its value is a number, a string or a table; null only where the
scenario's header says the figure may not exist, marked by a trailing `?`
(`time_to_target_s?`: null when the target was not reached).

A value of a known key must be of its kind and range (RULES: an accuracy a
share in [0, 1], steps a whole count >= 1, bytes positive, a label a
non-empty string, ...); labels are distinct; figures a row derives from
others agree with them (bytes_per_step = bytes / steps, s_per_step =
wall_s / steps, the time to the target within the run); and the scenario
header's "Expected:" claims that do not depend on the machine's speed hold
(CLAIMS)."""
import html
import json
import os
import re
import sys

# How far above N a measured speed-up may be before it counts as superlinear.
SUPERLINEAR = 1.2


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def is_count(v):
    return is_num(v) and v >= 0 and float(v).is_integer()


# What a value of a known key must be (one line saying what it is not, or
# None): a figure of the wrong kind, out of its range or in the wrong unit
# fails here, not only a missing one.
def share(v):
    return None if is_num(v) and 0 <= v <= 1 else "is not a share in [0, 1]"


def positive(v):
    return None if is_num(v) and v > 0 else "is not a positive number"


def non_negative(v):
    return None if is_num(v) and v >= 0 else "is not a number >= 0"


def count(v):
    return None if is_count(v) else "is not a whole count >= 0"


def some_steps(v):
    return None if is_count(v) and v >= 1 else "is not a whole count >= 1"


def text(v):
    return None if isinstance(v, str) and v.strip() else "is not a non-empty string"


def table(v):
    return None if isinstance(v, (dict, list)) else "is not a table"


def positive_by_name(v):
    ok = isinstance(v, dict) and v and all(is_num(x) and x > 0 for x in v.values())
    return None if ok else "is not a non-empty table of positive numbers"


RULES = {
    "final_accuracy": share, "best_accuracy": share, "compute_share": share,
    "steps": some_steps, "updates_applied": count, "workers": some_steps,
    "bytes": positive, "bytes_per_step": positive, "s_per_step": positive,
    "time_s": positive, "model_time_s": positive, "t_comm_s": non_negative,
    "wall_s": positive, "time_to_target_s": positive, "speedup": positive,
    "model_speedup": positive, "speedup_vs_bsp": positive, "server_lr": positive,
    "swing": non_negative, "local_steps_per_worker": some_steps,
    "cut_steps_away": count, "cut_steps_after": count, "dead_steps_away": count,
    "dead_steps_after": count, "others_steps_away": count, "fault_times": table,
    "label": text, "mode": text, "method": text, "topology": text, "algorithm": text,
    "network": text, "comm_compute_ratio": positive_by_name, "backend": text, "bsp_fail_error": text,
    "cp_s": positive, "cp_paper_s": positive, "cu_s": positive, "cu_paper_s": positive, "bound_s": positive,
    "cu_vs_paper": positive, "cu_vs_bound": positive, "speedup_bars": table, "bound_bars": table,
    "step_s": positive, "compute_s": positive, "comm_s": positive, "last_bucket_s": positive,
    "buckets": some_steps, "vs_plain": positive,
    "updates_lost": count, "availability": share, "schedule_availability": share, "downs": count,
    "moves": count, "links": text, "figures": table,
}


def check_value(where, key, v):
    rule = RULES.get(key)
    why = rule(v) if rule else None
    if why:
        fail(f"{where}: {key} = {v!r} {why}")


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
            if v is not None:
                check_value(where, key, v)
    labels = [r.get("label") for r in results]
    if len(set(map(str, labels))) != len(labels):
        fail(f"{name}: two results share a label: {labels}")
    for i, r in enumerate(results):
        check_row_sums(f"{name}: results[{i}] ({r.get('label')})", r)


def near(a, b, rel=1e-6):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


def check_row_sums(where, r):
    """Figures a row derives from others must agree with them."""
    steps, wall = r.get("steps"), r.get("wall_s")
    if is_num(r.get("bytes_per_step")) and is_num(r.get("bytes")) and is_num(steps) and steps > 0:
        if not near(r["bytes_per_step"], r["bytes"] / steps):
            fail(f"{where}: bytes_per_step {r['bytes_per_step']} is not bytes / steps = {r['bytes'] / steps}")
    if is_num(r.get("s_per_step")) and is_num(wall) and is_num(steps) and steps > 0:
        if not near(r["s_per_step"], wall / steps):
            fail(f"{where}: s_per_step {r['s_per_step']} is not wall_s / steps = {wall / steps}")
    ttt = r.get("time_to_target_s")
    if is_num(ttt) and is_num(wall) and ttt > wall * 1.1 + 1:
        fail(f"{where}: time_to_target_s {ttt} is after the run's end (wall_s {wall})")


# The scenario headers' "Expected:" claims that do not depend on the
# machine's speed: counted bytes, steps and what a formula gives.
def row_of(name, results, key, value):
    for r in results:
        if r.get(key) == value:
            return r
    fail(f"{name}: no result with {key} = {value!r}")


def claim_compression(name, s, results):
    """Compression shrinks the pushes, but the model pulled stays dense: a
    compressed step moves fewer bytes than a dense one, and nearly half of
    it at least: the pulls are half of a dense step's bytes, less the last
    round's model, which goes to no worker (in a quick run of a few rounds
    that is most of the gap: 0.49 of dense measured for int8)."""
    dense = row_of(name, results, "method", "none")["bytes_per_step"]
    for r in results:
        if r["method"] != "none" and not 0.4 * dense <= r["bytes_per_step"] < dense:
            fail(f"{name}: {r['method']} moves {r['bytes_per_step']:.0f} bytes a step, "
                 f"want less than the dense {dense:.0f} and at least 0.4 of it")


def claim_speedup_model(name, s, results):
    """T_N = T_1 / N + T_comm; the speed-up T_1 / T_N stays below N."""
    one = row_of(name, results, "workers", 1)
    if one["speedup"] != 1 or one["t_comm_s"] != 0 or not near(one["model_time_s"], one["time_s"]):
        fail(f"{name}: N=1 must have speedup 1, t_comm_s 0 and the model time its own: {one}")
    t1, steps1 = one["time_s"], one["steps"]
    for r in results:
        n = r["workers"]
        if not near(r["model_time_s"], t1 / n + r["t_comm_s"]):
            fail(f"{name}: N={n}: model_time_s {r['model_time_s']} is not T_1/N + T_comm")
        if not near(r["speedup"], t1 / r["time_s"]):
            fail(f"{name}: N={n}: speedup {r['speedup']} is not T_1 / T_N")
        if abs(r["steps"] * n - steps1) > n:
            fail(f"{name}: N={n}: {r['steps']} steps do not cover the epochs of N=1's {steps1}")
        # T_1 and T_N are separate runs' wall times on a shared host: one
        # stretch of noise in N=1's run (seen: 2.32 at N=2 in a quiet
        # suite, below 2 on the reruns) must not pass for a superlinear
        # algorithm; 20% above N is beyond that noise.
        if n > 1 and r["speedup"] >= SUPERLINEAR * n:
            fail(f"{name}: N={n}: speed-up {r['speedup']:.2f} is not below {SUPERLINEAR} x N")


def claim_faults(name, s, results):
    """Every model but strict BSP goes on through both faults and takes both
    terminals back; BSP with "fail" names the cut-off node (t2)."""
    err = s["bsp_fail_error"]
    if err == "no error" or "t2" not in err:
        fail(f"{name}: strict BSP's error does not name the cut-off t2: {err!r}")
    for r in results:
        where = f"{name}: {r['label']}"
        if r["dead_steps_away"] != 0:
            fail(f"{where}: the killed t5 made {r['dead_steps_away']} steps while dead")
        if r["others_steps_away"] < 1:
            fail(f"{where}: the other terminals did not step through the faults")
        if r["cut_steps_after"] < 1 or r["dead_steps_after"] < 1:
            fail(f"{where}: t2 or t5 made no step after its return")


def bits_per_s(rate):
    m = re.fullmatch(r"([0-9.]+)([kMG]?)bit", rate)
    if not m:
        fail(f"sync_models: link rate {rate!r} is not NUMBER[k|M|G]bit")
    return float(m.group(1)) * {"": 1, "k": 1e3, "M": 1e6, "G": 1e9}[m.group(2)]


def claim_sync_models(name, s, results):
    """Communication grows from a sliver of a step to many times the compute
    as the links slow down (rates thousands of times apart)."""
    ratios = sorted(s["comm_compute_ratio"].items(), key=lambda kv: -bits_per_s(kv[0]))
    for (fast, a), (slow, b) in zip(ratios, ratios[1:]):
        if not b > a:
            fail(f"{name}: comm/compute at {slow} ({b:.3g}) is not above that at {fast} ({a:.3g})")


def claim_paper_table4(name, s, results):
    """Cp is the profile's, the paper's own Cp for every measured row (1%);
    the ratios are the row's Cu over the paper's and over the bound; a BSP
    step moves every worker's gradient in and the model out through the
    server's link, so its Cu is not below the α-β bound (5% for timer
    precision)."""
    for r in results:
        if not near(r["cp_s"], r["cp_paper_s"], 0.01):
            fail(f"{name}: {r['label']}: Cp {r['cp_s']} is not the paper's {r['cp_paper_s']}")
        if not near(r["cu_vs_paper"], r["cu_s"] / r["cu_paper_s"]):
            fail(f"{name}: {r['label']}: cu_vs_paper {r['cu_vs_paper']} is not cu_s / cu_paper_s")
        if not near(r["cu_vs_bound"], r["cu_s"] / r["bound_s"]):
            fail(f"{name}: {r['label']}: cu_vs_bound {r['cu_vs_bound']} is not cu_s / bound_s")
        if r["mode"] == "bsp" and r["cu_s"] < 0.95 * r["bound_s"]:
            fail(f"{name}: {r['label']}: Cu {r['cu_s']:.3g} s is below the link's bound {r['bound_s']:.3g} s")


def claim_paper_speedup(name, s, results):
    """Each row's speed-up is BSP's time to the target over the mode's (BSP's
    own 1), null where either did not reach it; the figure's bars are the
    rows' speed-ups."""
    bsp = {r["row"]: r.get("time_to_target_s") for r in results if r["mode"] == "bsp"}
    bars = {(b["label"], p[0]): p[1] for b in s.get("speedup_bars") or [] for p in b["points"]}
    for r in results:
        t, base, got = r.get("time_to_target_s"), bsp.get(r["row"]), r.get("speedup_vs_bsp")
        want = base / t if (t and base) else None
        if (got is None) != (want is None) or (want is not None and not near(got, want)):
            fail(f"{name}: {r['label']}: speedup_vs_bsp {got} is not BSP's time to the target / its own ({want})")
        if want is not None and not near(bars.get((r["mode"], r["row"]), -1), want):
            fail(f"{name}: {r['label']}: speedup_bars lack its speed-up {want}")


def claim_overlap(name, s, results):
    """Each row's ratios are its step over its bound and over the step
    without overlap at its rate; one bucket's bound is compute +
    communication, the step without overlap's."""
    plain = {r["bw"]: r for r in results if r["bucket_mb"] == 0}
    for r in results:
        if not near(r["ratio"], r["step_s"] / r["bound_s"]):
            fail(f"{name}: {r['label']}: ratio {r['ratio']} is not step_s / bound_s")
        p = plain.get(r["bw"])
        if not p:
            fail(f"{name}: {r['label']}: no run without overlap at {r['bw']}")
        if not near(r["vs_plain"], r["step_s"] / p["step_s"]):
            fail(f"{name}: {r['label']}: vs_plain {r['vs_plain']} is not step_s / the plain step")
        if r["buckets"] == 1 and not near(r["bound_s"], r["compute_s"] + r["comm_s"]):
            fail(f"{name}: {r['label']}: one bucket's bound {r['bound_s']} is not compute + communication")


def claim_incast(name, s, results):
    """The step_vs_bound figure's bars are the rows' step / bound ratios."""
    bars = {(b["label"], p[0]): p[1] for b in s.get("bound_bars") or [] for p in b["points"]}
    for r in results:
        if r.get("ratio") is not None and not near(bars.get((r["variant"], r["workers"]), -1), r["ratio"]):
            fail(f"{name}: {r['label']}: bound_bars lack its ratio {r['ratio']}")


def claim_mobile_edge(name, s, results):
    """On fixed links nothing is lost and every terminal stays; on the mobile
    network the churn takes terminals down (its schedule near 80% up), some
    move, a kill loses at most the update being made (updates_lost <=
    downs); every algorithm runs on both."""
    by = {(r["algorithm"], r["links"]): r for r in results}
    for r in results:
        where = f"{name}: {r['label']}"
        if (r["algorithm"], "fixed") not in by or (r["algorithm"], "mobile") not in by:
            fail(f"{where}: {r['algorithm']} lacks its run on fixed or on mobile links")
        if r["links"] == "fixed":
            if r["updates_lost"] != 0 or r["availability"] != 1 or r["downs"] != 0 or r["moves"] != 0:
                fail(f"{where}: fixed links lost updates, availability or nodes, or moved one")
        else:
            if r["downs"] < 1 or r["moves"] < 1:
                fail(f"{where}: no churn down ({r['downs']}) or no move ({r['moves']})")
            if not 0.5 <= r["schedule_availability"] < 1:
                fail(f"{where}: the churn's availability {r['schedule_availability']} is not 20% churn")
            if r["updates_lost"] > r["downs"]:
                fail(f"{where}: {r['updates_lost']} updates lost from {r['downs']} kills")
            if not r["availability"] < 1:
                fail(f"{where}: the training saw every terminal throughout a churn")


CLAIMS = {"compression": claim_compression, "incast": claim_incast, "speedup_model": claim_speedup_model,
          "faults": claim_faults, "sync_models": claim_sync_models, "paper_table4": claim_paper_table4,
          "paper_speedup": claim_paper_speedup, "overlap": claim_overlap, "mobile_edge": claim_mobile_edge}


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
    # figures the scenario's header promises (summary.json `figures`)
    for fig in summary.get("figures") or []:
        if not os.path.exists(os.path.join(run, "plots", f"{fig}.png")):
            fail(f"{name}: no figure {fig!r} (plots/{fig}.png), which the header promises")
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
        if not key.startswith("top:"):
            continue
        nullable, key = key.endswith("?"), key[4:].rstrip("?")
        if key not in s:
            fail(f"{name}: summary.json lacks {key!r}")
        if s[key] is None and not nullable:
            fail(f"{name}: summary.json's {key!r} is null, and the header promises a value")
        if s[key] is not None:
            check_value(f"{name}: summary.json", key, s[key])
    check_results(name, results, keys)
    claim = CLAIMS.get(name)
    if claim:
        claim(name, s, results)
    accs = [r["final_accuracy"] for r in results if isinstance(r.get("final_accuracy"), (int, float))]
    if accs and max(accs) <= 0.15:
        fail(f"{name}: no run learned anything (best final accuracy {max(accs)})")
    images = check_page(run, name, s)
    print(f"{name}: summary.json with {len(results)} results; report page with {images} images")


if __name__ == "__main__":
    main()
