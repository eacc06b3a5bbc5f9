#!/usr/bin/env bash
# The report page in a real browser: `hiernet report` of one run and of two
# runs compared, each page loaded by headless Chromium (browser_check.py,
# DevTools protocol over a pipe): every image decodes, every inline SVG has
# a size, no console error, no request leaves the page, and strings from
# run.json (HTML in a --set value) show as text. Installs Chromium through
# tools/setup (group browser); skips when it cannot. Chromium gets a fresh
# profile and TMPDIR in the test's directory, removed at the end.
# Usage: test_report_browser.sh HIERNET_BINARY SOURCE_DIR
set -u
HN=$(readlink -f "$1")
root=$(readlink -f "$2")
here=$root/tests/cli
if ! setup_log=$("$root/tools/setup" browser 2>&1) || ! command -v chromium >/dev/null; then
  echo "SKIP: chromium cannot be installed here: $(tail -n 1 <<<"$setup_log")"
  exit 77
fi
command -v gnuplot >/dev/null || { echo "SKIP: gnuplot is not installed (tools/setup)"; exit 77; }
source "$here/lib.sh"
in_scratch_dir
mkdir tmp
export TMPDIR=$work/tmp
fixture() {
  local dir=$1; shift
  "$HN" run "$here/plot_fixture.lua" --quiet --out "$dir" "$@" "$dir" >/dev/null || bad "fixture $dir"
}
# browse PAGE TEXT...: the page passes browser_check.py with those texts shown.
browse() {
  local page=$1; shift
  rm -rf profile && mkdir profile
  if timeout 50 python3 "$here/browser_check.py" chromium "$page" "$work/profile" "$@" >check.txt 2>&1; then
    ok
  else
    local code=$?
    [[ $code -eq 77 ]] && { cat check.txt; exit 77; }
    bad "$page in the browser (exit $code): $(cat check.txt)"
  fi
  rm -rf profile
}

fixture "run one" --set 'note=<b>"x"&amp;</b>'
fixture multi --set prefixes=bsp_,asp_,ada_ --set lr=0.1 --set scenario=true
expect_exit 0 "report one run" -- "$HN" report "run one"
browse "run one/index.html" 'note=<b>"x"&amp;</b>' "psgd" "Summary" "Topology"
expect_exit 0 "report two runs" -- "$HN" report "run one" multi --out cmp
browse cmp/index.html "plot_fixture lr=0.1 prefixes=bsp_,asp_,ada_ scenario=true" "asp (asp_)" "not reached" \
  "Scenario results" "speedup_vs_bsp" "bsp @ 10Gbit"
[[ -z $(ls tmp) ]] && ok || bad "Chromium left files in TMPDIR: $(ls tmp)"
report
