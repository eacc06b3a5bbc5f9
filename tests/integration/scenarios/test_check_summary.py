#!/usr/bin/env python3
"""test_check_summary.py — check_summary.py refuses what it is there to
refuse: each case is a summary.json that breaks one rule (a value out of its
range, a derived figure that disagrees, a header claim that does not hold,
a null the header does not allow), run through check_summary.py, which must
exit 1 naming the fault; the same summary unbroken must get past those
checks (it then stops at the missing report page). No scenario runs.
Usage: test_check_summary.py"""
import copy
import json
import os
import subprocess
import sys
import tempfile

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_summary.py")
failed = ran = 0


def run(summary, name, keys):
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "summary.json"), "w") as f:
            json.dump(summary, f)
        p = subprocess.run([sys.executable, CHECK, d, name] + keys, capture_output=True, text=True)
        return p.returncode, (p.stdout + p.stderr).strip()


def expect(what, summary, name, keys, rc, text):
    global failed, ran
    ran += 1
    got, out = run(summary, name, keys)
    if got != rc or text not in out:
        failed += 1
        print(f"FAIL: {what}: exit {got} (want {rc}), output lacks {text!r}: {out}")


def row(**kw):
    r = {"label": "a", "steps": 10, "bytes": 4000, "bytes_per_step": 400.0, "wall_s": 2.0,
         "s_per_step": 0.2, "final_accuracy": 0.8, "time_to_target_s": None}
    r.update(kw)
    return r


KEYS = ["label", "steps", "bytes", "bytes_per_step", "s_per_step", "final_accuracy", "time_to_target_s?"]
good = {"scenario": "plain", "results": [row(), row(label="b")]}
# The unbroken summary passes every summary check: what stops it is the page.
expect("a good summary", good, "plain", KEYS, 1, "report")


def broken(change, name="plain", base=good):
    s = copy.deepcopy(base)
    change(s)
    return s


cases = [
    ("an accuracy above 1", lambda s: s["results"][0].update(final_accuracy=1.5), "final_accuracy = 1.5"),
    ("steps 0", lambda s: s["results"][0].update(steps=0, bytes_per_step=1), "steps = 0"),
    ("an empty label", lambda s: s["results"][0].update(label=""), "label = ''"),
    ("two rows of one label", lambda s: s["results"][1].update(label="a"), "share a label"),
    ("bytes_per_step not bytes / steps", lambda s: s["results"][0].update(bytes_per_step=401),
     "bytes_per_step 401 is not bytes / steps"),
    ("s_per_step not wall_s / steps", lambda s: s["results"][0].update(s_per_step=0.3),
     "s_per_step 0.3 is not wall_s / steps"),
    ("a time to target after the end", lambda s: s["results"][0].update(time_to_target_s=10),
     "is after the run's end"),
    ("a promised value null", lambda s: s["results"][0].update(bytes=None), "is null"),
    ("a key absent", lambda s: s["results"][0].pop("steps"), "steps"),
    ("nothing learned", lambda s: [r.update(final_accuracy=0.1) for r in s["results"]], "no run learned anything"),
]
for what, change, text in cases:
    expect(what, broken(change), "plain", KEYS, 1, text)

# compression: a compressed step moves less than a dense one, and at least 0.4 of it.
comp = {"scenario": "compression", "results": [
    {"label": "dense", "method": "none", "bytes_per_step": 1000.0, "steps": 5, "final_accuracy": 0.8},
    {"label": "int8", "method": "int8", "bytes_per_step": 600.0, "steps": 5, "final_accuracy": 0.8}]}
CK = ["method", "bytes_per_step", "steps", "final_accuracy"]
expect("compression as claimed", comp, "compression", CK, 1, "report")
expect("compression that moves more", broken(lambda s: s["results"][1].update(bytes_per_step=1100), base=comp),
       "compression", CK, 1, "want less than the dense")
expect("compression below 0.4 of dense", broken(lambda s: s["results"][1].update(bytes_per_step=300), base=comp),
       "compression", CK, 1, "at least 0.4")

# paper_table4: Cp the paper's, the ratios derived, BSP not below the bound.
t4 = {"scenario": "paper_table4", "results": [
    {"label": "2 bsp", "mode": "bsp", "cp_s": 4.36, "cp_paper_s": 4.36, "cu_s": 2.2, "cu_paper_s": 8.8,
     "bound_s": 2.0, "cu_vs_paper": 0.25, "cu_vs_bound": 1.1}]}
T4K = ["mode", "cp_s", "cu_s", "bound_s"]
expect("paper_table4 as claimed", t4, "paper_table4", T4K, 1, "report")
expect("paper_table4 BSP below its bound", broken(lambda s: s["results"][0].update(
    cu_s=1.8, cu_vs_paper=1.8 / 8.8, cu_vs_bound=0.9), base=t4), "paper_table4", T4K, 1, "below the link's bound")
expect("paper_table4 Cp not the paper's", broken(lambda s: s["results"][0].update(cp_s=5), base=t4),
       "paper_table4", T4K, 1, "is not the paper's")
# paper_speedup: a speed-up that is not BSP's time over the mode's.
sp = {"scenario": "paper_speedup", "speedup_bars": [{"label": "bsp", "points": [[2, 1.0]]},
                                                   {"label": "asp", "points": [[2, 2.0]]}], "results": [
    {"label": "2 bsp", "mode": "bsp", "row": 2, "time_to_target_s": 10.0, "speedup_vs_bsp": 1.0},
    {"label": "2 asp", "mode": "asp", "row": 2, "time_to_target_s": 5.0, "speedup_vs_bsp": 2.0}]}
SPK = ["mode", "time_to_target_s?", "speedup_vs_bsp?"]
expect("paper_speedup as claimed", sp, "paper_speedup", SPK, 1, "report")
expect("paper_speedup wrong speed-up", broken(lambda s: s["results"][1].update(speedup_vs_bsp=3.0), base=sp),
       "paper_speedup", SPK, 1, "is not BSP's time")
# incast: the step_vs_bound figure's bars must be the rows' ratios.
ic = {"scenario": "incast", "bound_bars": [{"label": "default", "points": [[8, 3.0]]}], "results": [
    {"label": "8 workers, default", "workers": 8, "variant": "default", "ratio": 3.0}]}
ICK = ["workers", "variant", "ratio"]
expect("incast as claimed", ic, "incast", ICK, 1, "report")
expect("incast bars not the ratios", broken(lambda s: s["bound_bars"][0].update(points=[[8, 2.0]]), base=ic),
       "incast", ICK, 1, "bound_bars lack its ratio")

# mobile_edge: nothing lost on fixed links; churn, moves and updates_lost <= downs on mobile ones.
def mrow(label, links, **kw):
    r = {"label": label, "links": links, "algorithm": "asp", "steps": 10, "final_accuracy": 0.7,
         "updates_lost": 0, "availability": 1, "schedule_availability": 1, "downs": 0, "moves": 0}
    r.update(kw)
    return r


me = {"scenario": "mobile_edge", "figures": ["link_rate"], "results": [
    mrow("asp fixed", "fixed"),
    mrow("asp mobile", "mobile", updates_lost=3, availability=0.8, schedule_availability=0.82, downs=4, moves=2)]}
MEK = ["links", "algorithm", "updates_lost", "availability", "schedule_availability", "downs", "moves"]
expect("mobile_edge as claimed", me, "mobile_edge", MEK, 1, "report")
for what, change, text in [
        ("an update lost on fixed links", lambda s: s["results"][0].update(updates_lost=1), "fixed links lost"),
        ("no move on mobile links", lambda s: s["results"][1].update(moves=0), "no move"),
        ("more updates lost than kills", lambda s: s["results"][1].update(updates_lost=5), "updates lost from 4"),
        ("churn without downtime", lambda s: s["results"][1].update(schedule_availability=1), "not 20% churn"),
        ("no fixed run", lambda s: s["results"].pop(0), "lacks its run")]:
    expect(f"mobile_edge: {what}", broken(change, base=me), "mobile_edge", MEK, 1, text)

print(f"check_summary.py: {ran} cases, {failed} failed")
sys.exit(1 if failed else 0)
