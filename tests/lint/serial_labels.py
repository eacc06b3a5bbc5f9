#!/usr/bin/env python3
"""serial_labels.py BUILD_DIR: the split of tools/test holds together. A test
with the label "serial" (run alone, after the rest) also has RUN_SERIAL (so
a plain `ctest -j` runs it alone too), and a RUN_SERIAL test has the label
(else tools/test would run it in the parallel pass, stopping that pass while
it runs). Reads `ctest --show-only=json-v1`; names each test at fault."""
import json
import subprocess
import sys


def main():
    if len(sys.argv) != 2:
        print("usage: serial_labels.py BUILD_DIR", file=sys.stderr)
        return 2
    shown = subprocess.run(["ctest", "--show-only=json-v1"], cwd=sys.argv[1],
                           capture_output=True, text=True, check=False)
    if shown.returncode != 0:
        print(f"ctest --show-only failed: {shown.stderr.strip()}", file=sys.stderr)
        return 1
    bad = 0
    tests = json.loads(shown.stdout)["tests"]
    for test in tests:
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        labelled = "serial" in props.get("LABELS", [])
        alone = bool(props.get("RUN_SERIAL", False))
        if labelled != alone:
            bad += 1
            print(f"{test['name']}: " + ("label serial without RUN_SERIAL" if labelled
                                         else "RUN_SERIAL without the label serial"))
    print(f"{len(tests)} tests, {bad} with the label serial and RUN_SERIAL at odds")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
