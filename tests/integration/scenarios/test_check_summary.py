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
failed = 0


def run(summary, name, keys):
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "summary.json"), "w") as f:
            json.dump(summary, f)
        p = subprocess.run([sys.executable, CHECK, d, name] + keys, capture_output=True, text=True)
        return p.returncode, (p.stdout + p.stderr).strip()


def expect(what, summary, name, keys, rc, text):
    global failed
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

print(f"check_summary.py: {len(cases) + 5} cases, {failed} failed")
sys.exit(1 if failed else 0)
