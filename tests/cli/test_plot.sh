#!/usr/bin/env bash
# `hiernet plot` and `hiernet report` on fixture results directories that
# plot_fixture.lua writes (run.json from a real run, synthetic steps/eval/
# summary/links files): the images of one run (valid PNG, SVG whose legend
# holds the expected series), two runs overlaid, paths with spaces and
# quotes, --format, --x (epochs, samples, time; a steps.csv without
# samples), the marks of where each training starts on the link figure,
# empty and column-less CSVs, the errors (not a results
# directory, several directories without --out, gnuplot missing), an
# interrupt that leaves nothing behind, and the report page's content and
# escaping (the browser test checks its rendering).
# Usage: test_plot.sh HIERNET_BINARY
set -u
HN=$(readlink -f "$1")
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
if ! command -v gnuplot >/dev/null; then
  echo "SKIP: gnuplot is not installed (tools/setup installs gnuplot-nox)"
  exit 77
fi
work=$(mktemp -d)
bg=
cleanup() {
  [[ -n $bg ]] && kill -9 "$bg" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
source "$here/lib.sh"
images() { python3 "$here/check_images.py" "$@"; }
one_line_err() { [[ $(wc -l <err.txt) -eq 1 ]] && ok || bad "$1: stderr is not one line: $(cat err.txt)"; }
fixture() { # fixture DIR [--set ...]
  local dir=$1; shift
  "$HN" run "$here/plot_fixture.lua" --quiet --out "$dir" "$@" "$dir" >/dev/null || bad "fixture $dir"
}
# expect_keys SVG N [KEY...]: the legend has N entries, among them each KEY.
expect_keys() {
  local svg=$1 n=$2; shift 2
  images keys "$svg" >keys.txt || { bad "$svg: $(cat keys.txt)"; return; }
  [[ $(wc -l <keys.txt) -eq $n ]] && ok || bad "$svg: $(wc -l <keys.txt) legend entries, want $n: $(tr '\n' '|' <keys.txt)"
  for k in "$@"; do grep -qxF -- "$k" keys.txt && ok || bad "$svg: no legend entry '$k': $(tr '\n' '|' <keys.txt)"; done
}
no_scratch() { [[ -z $(find . -name '.hiernet-tmp-*') ]] && ok || bad "$1: scratch left: $(find . -name '.hiernet-tmp-*')"; }

one="run one 'q' \"dq\" \$x;"      # a path gnuplot and a shell would both trip over
fixture "$one"
fixture multi --set prefixes=bsp_,asp_,ada_ --set lr=0.1

# --- one run: DIR/plots, both formats, valid images, legends ---
expect_exit 0 "plot one run" -- "$HN" plot "$one"
single=(accuracy_time accuracy_steps loss_steps time_per_worker links link_rate)
for f in "${single[@]}"; do
  for ext in png svg; do expect_out "$one/plots/$f.$ext" "plot lists $f.$ext"; done
done
[[ $(wc -l <out.txt) -eq 12 ]] && ok || bad "plot one run: $(wc -l <out.txt) files, want 12: $(cat out.txt)"
images png "$one"/plots/*.png && ok || bad "PNG check"
[[ ! -e "$one/plots/staleness.png" && ! -e "$one/plots/k_time.png" ]] && ok || bad "figures without data were drawn"
expect_keys "$one/plots/accuracy_time.svg" 1 psgd
expect_keys "$one/plots/loss_steps.svg" 1 psgd
expect_keys "$one/plots/time_per_worker.svg" 3 compute comm wait
expect_keys "$one/plots/links.svg" 8 "w4-sw ab (20Mbit)" "w1-sw ba (20Mbit)"
expect_keys "$one/plots/link_rate.svg" 1 "w1-sw ba"
no_scratch "plot one run"

# --- two runs overlaid (1 + 3 algorithms) into --out ---
expect_exit 2 "several dirs need --out" -- "$HN" plot "$one" multi
expect_err "give --out OUTDIR" "several dirs without --out"
one_line_err "several dirs without --out"
expect_exit 0 "plot overlay" -- "$HN" plot "$one" multi --out "cmp 'x'"
[[ $(wc -l <out.txt) -eq 16 ]] && ok || bad "overlay: $(wc -l <out.txt) files, want 16"
asp="plot_fixture lr=0.1 prefixes=bsp_,asp_,ada_ asp"
expect_keys "cmp 'x'/accuracy_steps.svg" 4 "plot_fixture psgd" "$asp"
expect_keys "cmp 'x'/loss_steps.svg" 4 "plot_fixture psgd" "$asp"
expect_keys "cmp 'x'/time_per_worker.svg" 7 compute wait "plot_fixture psgd" "$asp"
expect_keys "cmp 'x'/staleness.svg" 1 "$asp"
expect_keys "cmp 'x'/k_time.svg" 1 "plot_fixture lr=0.1 prefixes=bsp_,asp_,ada_ ada"
expect_keys "cmp 'x'/links.svg" 8
images png "cmp 'x'"/*.png && ok || bad "overlay PNG check"

# --- runs that differ in no --set parameter are told apart by directory ---
fixture twin
expect_exit 0 "plot twins" -- "$HN" plot "$one" twin --out twins --format svg
expect_keys twins/accuracy_time.svg 2 "plot_fixture (run one 'q' \"dq\" \$x;) psgd" "plot_fixture (twin) psgd"

# --- --x: the axis of the accuracy and loss figures ---
expect_exit 0 "plot --x epochs" -- "$HN" plot multi --x epochs --out x-epochs --format svg
[[ $(ls x-epochs | tr '\n' ' ') == "accuracy_epochs.svg accuracy_time.svg k_time.svg link_rate.svg links.svg loss_epochs.svg staleness.svg time_per_worker.svg " ]] &&
  ok || bad "--x epochs: $(ls x-epochs)"
expect_keys x-epochs/loss_epochs.svg 3 bsp asp ada
grep -qF '>epoch<' x-epochs/accuracy_epochs.svg && ok || bad "--x epochs: no x label 'epoch'"
expect_exit 0 "plot --x=samples" -- "$HN" plot multi --x=samples --out x-samples --format svg
[[ -s x-samples/accuracy_samples.svg && -s x-samples/loss_samples.svg && ! -e x-samples/loss_steps.svg ]] &&
  ok || bad "--x samples: $(ls x-samples)"
expect_exit 0 "plot --x time" -- "$HN" plot multi --x time --out x-time --format svg
[[ -s x-time/loss_time.svg && -s x-time/accuracy_time.svg && $(ls x-time | wc -l) -eq 7 ]] && ok || bad "--x time: $(ls x-time)"
# steps.csv without a samples column: no epochs to plot, said as skipped figures
mkdir -p nosamples && cp multi/run.json nosamples/
cut -d, -f1-11 multi/bsp_steps.csv >nosamples/steps.csv
expect_exit 0 "plot --x epochs without samples" -- "$HN" plot nosamples --x epochs --format svg
[[ $(ls nosamples/plots) == time_per_worker.svg ]] && ok || bad "no samples column: $(ls nosamples/plots)"
expect_exit 2 "bad --x" -- "$HN" plot multi --x weeks
expect_err "x must be steps, time, epochs or samples, got 'weeks'" "bad --x names the value"
one_line_err "bad --x"

# --- where each training of a run with several starts (links figure) ---
for name in bsp asp ada; do
  grep -qF ">$name starts<" x-epochs/links.svg && ok || bad "links: no start marker of $name"
done
! grep -qF ' starts<' "$one/plots/links.svg" && ok || bad "links of one training: a start marker"

# --- --format ---
expect_exit 0 "--format png" -- "$HN" plot multi --format png --out fmt-png
[[ -z $(ls fmt-png | grep -v '\.png$') && $(ls fmt-png | wc -l) -eq 8 ]] && ok || bad "--format png: $(ls fmt-png)"
expect_exit 0 "--format=svg" -- "$HN" plot multi --format=svg --out fmt-svg
[[ -z $(ls fmt-svg | grep -v '\.svg$') && $(ls fmt-svg | wc -l) -eq 8 ]] && ok || bad "--format svg: $(ls fmt-svg)"
expect_exit 2 "bad --format" -- "$HN" plot multi --format gif
expect_err "format must be png, svg or both, got 'gif'" "bad --format names the value"
expect_exit 2 "unknown option" -- "$HN" plot multi --frob
expect_err "unknown option '--frob'" "unknown option named"
expect_exit 0 "plot --help" -- "$HN" plot --help
expect_out "usage: hiernet plot" "plot --help"

# --- not a results directory ---
mkdir -p notres
expect_exit 2 "not a results dir" -- "$HN" plot notres
[[ $(cat err.txt) == "hiernet plot: 'notres' is not a results directory (no run.json)" ]] && ok ||
  bad "not-a-results-dir message: $(cat err.txt)"
expect_exit 2 "missing dir" -- "$HN" plot "$one" nosuchdir --out x
expect_err "'nosuchdir' is not a results directory (no run.json)" "missing dir named"
one_line_err "missing dir"
mkdir -p bad-json
echo '{"scenario": ' >bad-json/run.json
expect_exit 2 "unparsable run.json" -- "$HN" plot bad-json
expect_err "bad-json/run.json: line 2, column 1" "unparsable run.json: file and position"

# --- empty and column-less CSVs: fewer series, never a crash ---
mkdir -p empty nocols
cp multi/run.json empty/ && cp multi/run.json nocols/
head -1 multi/bsp_steps.csv >empty/steps.csv
: >empty/eval.csv
head -1 multi/links.csv >empty/links.csv
echo '{"algorithm": ' >empty/summary.json
expect_exit 0 "plot empty CSVs" -- "$HN" plot empty
expect_err "nothing to plot" "empty CSVs: says there is nothing"
[[ ! -s out.txt ]] && ok || bad "empty CSVs wrote: $(cat out.txt)"
printf 'time,worker,step,loss\n0.1,w1,1,2.0\n0.2,w2,1,2.2\n0.3,w1,2,1.5\n0.4,w2,2,"1.7"\n0.5,w1,3,\n0.6,w1,3,1e999\n0.7,w1,4,nan\n' >nocols/steps.csv
expect_exit 0 "plot without most columns" -- "$HN" plot nocols
[[ $(ls nocols/plots) == $'loss_steps.png\nloss_steps.svg' ]] && ok || bad "column-less: $(ls nocols/plots)"
expect_keys nocols/plots/loss_steps.svg 1 "plot_fixture lr=0.1 prefixes=bsp_,asp_,ada_"
cp "cmp 'x'/links.png" "cmp 'x'/staleness.png" nocols/plots/ # as if from an older run
expect_exit 0 "plot again" -- "$HN" plot nocols
[[ ! -e nocols/plots/links.png && ! -e nocols/plots/staleness.png ]] && ok ||
  bad "images of figures without data survived: $(ls nocols/plots)"
expect_exit 0 "plot an empty run next to a full one" -- "$HN" plot empty "$one" --out mixed --format svg
[[ $(wc -l <out.txt) -eq 6 ]] && ok || bad "empty + full: $(cat out.txt)"

# --- gnuplot missing: one line naming the package, exit 3 ---
mkdir -p emptybin
expect_exit 3 "gnuplot missing" -- env PATH="$work/emptybin" "$HN" plot "$one"
[[ $(cat err.txt) == *"gnuplot-nox"* ]] && ok || bad "gnuplot missing: $(cat err.txt)"
one_line_err "gnuplot missing"

# --- interrupted while gnuplot runs: gnuplot ends, no scratch left ---
mkdir -p slowbin
printf '#!/bin/sh\necho $$ >"%s/slow.pid"\nexec sleep 60\n' "$work" >slowbin/gnuplot
chmod +x slowbin/gnuplot
PATH="$work/slowbin:$PATH" "$HN" plot multi --out slow >/dev/null 2>&1 &
bg=$!
for _ in $(seq 100); do [[ -s slow.pid ]] && break; sleep 0.05; done
kill -INT "$bg"
wait "$bg"; code=$?
bg=
[[ $code -eq 130 ]] && ok || bad "interrupted plot: exit $code, want 130"
pid=$(cat slow.pid 2>/dev/null)
# Killed as the run ended, it is gone within moments (its zombie reaped by
# init): up to 2 s.
gnuplot_gone() { [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; }
wait_until 100 0.02 gnuplot_gone && ok || bad "the fake gnuplot ($pid) survived the interrupt"
no_scratch "interrupted plot"
[[ -z $(ls slow 2>/dev/null) ]] && ok || bad "interrupted plot left images: $(ls slow)"

# --- report: page, plots, escaping ---
fixture esc --set 'note=<b>"x"&amp;</b>' --set "tier=a'b"
expect_exit 0 "report one run" -- "$HN" report esc
expect_out "esc/index.html" "report prints the page"
[[ -s esc/index.html && -s esc/plots/accuracy_time.png ]] && ok || bad "report wrote no page or plots"
grep -qF '&lt;b&gt;&quot;x&quot;&amp;amp;&lt;/b&gt;' esc/index.html && ok || bad "report: param not escaped"
! grep -qF '<b>"x"' esc/index.html && ok || bad "report: raw HTML from run.json in the page"
! grep -qi '<script' esc/index.html && ok || bad "report: a script in the page"
[[ $(grep -o 'src="data:image/png;base64,' esc/index.html | wc -l) -eq 6 ]] && ok || bad "report: want 6 embedded PNG plots"
grep -qF 'src="data:image/svg+xml;base64,' esc/index.html && ok || bad "report: no topology drawing (is graphviz installed?)"
! grep -qE '(src|href)="(https?:|//)' esc/index.html && ok || bad "report: external reference"
expect_exit 0 "report two runs" -- "$HN" report "$one" multi --out "rep cmp"
[[ -s "rep cmp/index.html" && -s "rep cmp/plots/staleness.svg" ]] && ok || bad "comparison report"
[[ $(grep -c '<td>plot_fixture' "rep cmp/index.html") -ge 4 ]] && ok || bad "comparison: want 4 summary rows"
# A scenario's own summary.json: its figures in a table of their own, and no
# row of the per-algorithm table made from it (there was one, empty, "not
# reached"). summary_rows prints the algorithm cell of each of those rows.
fixture scen --set prefixes=bsp_,asp_ --set scenario=true
expect_exit 0 "report of a scenario run" -- "$HN" report scen
summary_rows() {
  python3 -c 'import re, sys
page = open(sys.argv[1]).read()
section = re.search(r"<section id=\"summary\">(.*?)</section>", page, re.S).group(1)
for row in re.findall(r"<tr>(.*?)</tr>", section, re.S)[1:]:
    print(re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)[0])' "$1"
}
summary_rows scen/index.html >rows.txt
[[ $(wc -l <rows.txt) -eq 2 ]] && ! grep -qx '' rows.txt && ok || bad "scenario run: algorithm rows: $(tr '\n' '|' <rows.txt)"
grep -qF '<section id="scenario"><h2>Scenario results</h2>' scen/index.html && ok || bad "scenario run: no section of its figures"
for text in '>speedup_vs_bsp</th>' '>comm_compute_ratio</th>' '{10Gbit=0.03551, 3Mbit=21.8}' \
            '>bsp @ 10Gbit</td>' '>0.03551</td>' '>281.0 MB</td>' '>1596</td>' '{cut=6.02, heal=15}'; do
  grep -qF -- "$text" scen/index.html && ok || bad "scenario run: the page lacks $text"
done
grep -qE '<th>label</th><th>ratio</th><th>time_to_target_s</th><th>speedup_vs_bsp</th><th>bytes</th><th>' \
  scen/index.html && ok || bad "scenario run: results columns not in the scenario's order"
# speedup_vs_bsp null is a dash; time_to_target_s null, with the scenario's
# target_accuracy, is "not reached".
scenario_section() { python3 -c 'import re, sys
print(re.search(r"<section id=\"scenario\">(.*?)</section>", open(sys.argv[1]).read(), re.S).group(1))' "$1"; }
scenario_section scen/index.html >scen.txt
[[ $(grep -o '>—</td>' scen.txt | wc -l) -eq 1 ]] && ok || bad "scenario run: want 1 null shown as a dash"
[[ $(grep -o '>not reached</td>' scen.txt | wc -l) -eq 1 ]] && ok || bad "scenario run: want 1 time to target not reached"
mkdir -p weird && cp "$one"/steps.csv weird/ # valid JSON of the wrong shapes everywhere
echo '{"scenario": 5, "topology": [1, {"name": 3, "nodes": "x"}, {"name": "n", "nodes": [{"name": "a b"}]}],
       "params": "x", "set": [1], "versions": {"a": [1, {"b": null}]}}' >weird/run.json
echo '{"algorithm": ["x"], "steps": "many", "updates_applied": 1e300, "bytes": 1.5, "parameters": 7}' >weird/summary.json
expect_exit 0 "report of a run.json of odd shapes" -- "$HN" report weird
grep -qF "not drawn" weird/index.html && ok || bad "odd topology: no note"
expect_exit 2 "report of a non-results dir" -- "$HN" report notres
expect_err "is not a results directory" "report: not a results dir"
no_scratch "reports"
report
