#!/usr/bin/env python3
"""bench_json_last.py — every benchmark in tools/bench/ prints its JSON
object as its last line of output (README.md), checked statically: no
benchmark is run.

For each executable script in tools/bench/ (not guard.sh, which is sourced):
  - its last statement that writes to stdout (echo, printf, a Python print,
    or the exec of a bench_* program, whose C source is read in turn) must
    write the JSON line: an echo of $json..., a printf whose format ends the
    object ('}\\n'), json.dumps, or {"bench": ...};
  - what runs at exit (its EXIT trap: the quoted command, or the function it
    names) writes nothing to stdout;
and tools/bench/leftovers.c, the guard every benchmark runs under, writes
nothing to stdout (its findings go to stderr).

Usage: bench_json_last.py [BENCH_DIR]   (default: tools/bench next to tests/)
Exits 1 naming file:line of each benchmark at fault."""
import os
import re
import sys

# A statement that writes to stdout: echo / printf not redirected away.
SHELL_OUT = re.compile(r"^\s*(?:if\s+.*;\s*then\s+)?(echo|printf)\b")
STDOUT_REDIRECT = re.compile(r"(?:^|\s)(?:1?>>?|&>)\s*(?!&1)\S|>&2")
PY_OUT = re.compile(r"^\s*print\((?!.*file\s*=)")
EXEC_BENCH = re.compile(r"^\s*exec\s+.*/bench_(\w+)\"?")
# The JSON line: a variable holding the object, json.dumps, a printf format
# that closes the object, or a literal {"bench": ...}.
JSON_LINE = re.compile(r"\$\{?json\b|json\.dumps|\}\\n['\"]|\{\\?\"bench\\?\"")
C_STDOUT = re.compile(r"(?<![\w])(printf|puts|putchar)\s*\(|fprintf\s*\(\s*stdout|fputs\s*\([^;]*stdout")


def statements(lines):
    """(line number, text) of each logical line: continuation lines joined."""
    out, start, buf = [], None, ""
    for i, line in enumerate(lines, 1):
        if start is None:
            start = i
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        out.append((start, buf + line))
        start, buf = None, ""
    return out


def writes_stdout(text):
    if PY_OUT.match(text) or EXEC_BENCH.match(text):
        return True
    return bool(SHELL_OUT.match(text)) and not STDOUT_REDIRECT.search(text.split("#")[0].split("|")[0])


def function_body(lines, name):
    """The lines of shell function `name() {` ... `}` (at column 0), or []."""
    head = re.compile(r"^\s*(?:function\s+)?" + re.escape(name) + r"\s*\(\)\s*\{")
    for i, line in enumerate(lines):
        if head.match(line):
            body = []
            for j in range(i + 1, len(lines)):
                if lines[j].startswith("}"):
                    return [(j0 + 1, lines[j0]) for j0 in range(i + 1, j)]
                body.append(lines[j])
    return []


def check_exit_trap(path, lines, errors):
    for n, line in enumerate(lines, 1):
        m = re.match(r"^\s*trap\s+(?:'([^']*)'|\"([^\"]*)\"|(\w+))\s+.*\bEXIT\b", line)
        if not m:
            continue
        if m.group(3):
            body = function_body(lines, m.group(3))
        else:
            body = [(n, part) for part in re.split(r";|&&|\|\|", m.group(1) or m.group(2))]
        for k, text in body:
            if writes_stdout(text):
                errors.append(f"{path}:{k}: the EXIT trap writes to stdout after the JSON line: {text.strip()}")


def check_c_json_last(path, errors):
    """The last write to stdout of a bench's C source prints the object."""
    with open(path) as f:
        lines = f.read().split("\n")
    last = None
    for n, line in enumerate(lines, 1):
        if C_STDOUT.search(line):
            last = n
    if last is None:
        errors.append(f"{path}: writes nothing to stdout (no JSON line)")
        return
    text = " ".join(lines[last - 1:last + 3])
    if '{\\"bench\\"' not in text:
        errors.append(f"{path}:{last}: the last write to stdout is not the JSON line: {lines[last - 1].strip()}")


def check_script(path, bench_dir, errors):
    with open(path) as f:
        lines = f.read().split("\n")
    last = None
    for n, text in statements(lines):
        if not text.lstrip().startswith("#") and writes_stdout(text):
            last = (n, text)
    if last is None:
        errors.append(f"{path}: no statement writes to stdout (no JSON line)")
        return
    n, text = last
    m = EXEC_BENCH.match(text)
    if m:
        check_c_json_last(os.path.join(bench_dir, m.group(1) + ".c"), errors)
    elif not JSON_LINE.search(text):
        errors.append(f"{path}:{n}: the last statement that writes to stdout is not the JSON line: {text.strip()}")
    check_exit_trap(path, lines, errors)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    bench_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "tools", "bench")
    errors, scripts = [], 0
    for name in sorted(os.listdir(bench_dir)):
        path = os.path.join(bench_dir, name)
        if "." in name or not os.path.isfile(path) or not os.access(path, os.X_OK):
            continue
        scripts += 1
        check_script(path, bench_dir, errors)
    if scripts == 0:
        errors.append(f"{bench_dir}: no benchmark scripts")
    leftovers = os.path.join(bench_dir, "leftovers.c")
    if os.path.exists(leftovers):
        with open(leftovers) as f:
            for n, line in enumerate(f, 1):
                if C_STDOUT.search(line):
                    errors.append(f"{leftovers}:{n}: the guard writes to stdout: {line.strip()}")
    for e in errors:
        print(e, file=sys.stderr)
    print(f"{scripts} benchmarks checked, {len(errors)} problems")
    sys.exit(1 if errors else 0)


main()
