#!/usr/bin/env bash
# qs_rounds (tests/lib/quickstart_paths.sh) on a results folder written
# here: the lower quartile of the rounds, the RTOs, the drops by cause and
# those on cut links, which it finds by links.csv's names. Two parallel
# links between e1 and cloud, only the second cut: its drops are the cut
# ones ("e1-cloud#2", run.json's parallel 1), the first's are not.
# Usage: test_quickstart_rounds.sh
set -u
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
source "$here/lib.sh"
source "$here/../lib/quickstart_paths.sh"
in_scratch_dir
mkdir -p q
printf 'step,time,k\n0,1.0,2\n1,2.0,2\n2,3.0,2\n3,4.5,2\n4,9.0,\n' >q/bsp_steps.csv
cat >q/run.json <<'JSON'
{"placement": [{"cut_links": [{"a": "e1", "b": "cloud", "parallel": 1},
                              {"a": "e2", "b": "cloud", "parallel": 0}]}],
 "overload": {"starved_share": 0.25}}
JSON
printf '{"tcp": {"rtos": 3}}\n' >q/bsp_summary.json
cat >q/links.csv <<'CSV'
time_s,link,dir,drops_loss,drops_queue,drops_down
1,e1-cloud,ab,9,9,9
2,e1-cloud,ab,2,0,0
2,e1-cloud,ba,1,0,0
2,e1-cloud#2,ab,5,1,0
2,e1-cloud#2,ba,0,0,4
2,e2-cloud,ab,1,0,0
2,t1-e1,ab,0,3,0
CSV
# rounds end at 2, 3, 4.5 after the first: gaps 1 and 1.5, quartile 1.125;
# drops: loss 2+1+5+1, queue 1+3, cut (e1-cloud#2 and e2-cloud) 5+1+4+1.
got=$(qs_rounds q 2>err.txt)
want="1.1250 2 3 9 4 11 0.250"
[[ $got == "$want" ]] && ok || bad "qs_rounds: '$got', want '$want' ($(cat err.txt))"
report
