#!/usr/bin/env bash
# `hiernet models`: --help, the zoo and profile tables, one model (its step
# time measured or from FLOPs), one profile (built-in or a file), and bad
# input (unknown name, bad profile file, bad --batch): one line, exit 2.
# Usage: test_models.sh HIERNET_BINARY
set -u
HN=$(readlink -f "$1")
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib.sh"
in_scratch_dir
one_line_err() { [[ $(wc -l <err.txt) -eq 1 ]] && ok || bad "$1: stderr is not one line: $(cat err.txt)"; }

expect_exit 0 "models --help" -- "$HN" models --help
expect_out "usage: hiernet models" "models --help prints its usage"
"$HN" --help >out.txt
expect_out "  models" "hiernet --help lists models"

expect_exit 0 "models" -- "$HN" models
for m in resnet18 resnet34 resnet50 resnet101 vgg16 mobilenet_v1 mobilenet_v2 gpt2-small; do
  grep -qE "^$m +[0-9]+ " out.txt && ok || bad "models lists $m"
done
for p in i5-7500 rtx2080ti v100 a100 h100 rpi4 jetson-nano; do
  grep -qE "^$p +[0-9.e-]+ " out.txt && ok || bad "models lists profile $p"
done
grep -qE "^resnet50 +25557032 +97\.49 " out.txt && ok || bad "resnet50 row: params and grad MiB"
expect_out "measured: resnet50 batch 32 0.86 s" "rtx2080ti's measured steps listed"

expect_exit 0 "models resnet50" -- "$HN" models resnet50
expect_out "parameters 25557032" "resnet50 details"
grep -qE "^  rtx2080ti +0\.86 s +\(measured\)" out.txt && ok || bad "resnet50 on rtx2080ti at 32 is measured"
grep -qE "^  h100 +[0-9.e-]+ s +\(flops\)" out.txt && ok || bad "resnet50 on h100 from flops"
grep -qE "^  h200 +0\.0379 s +\(measured\)" out.txt && ok || bad "resnet50 on h200 at 32 is measured"
expect_exit 0 "models resnet50 --batch 16" -- "$HN" models resnet50 --batch 16
grep -qE "^  rtx2080ti +[0-9.e-]+ s +\(flops\)" out.txt && ok || bad "batch 16: flops"
expect_exit 0 "models mlp spec" -- "$HN" models mlp:784-128-10
expect_out "(real: hiernet computes it)" "a spec is real"
expect_out "parameters 101770" "mlp parameters"

expect_exit 0 "models rtx2080ti" -- "$HN" models rtx2080ti
expect_out "NVIDIA GeForce RTX 2080 Ti" "profile details"
printf 'about Mine\nrate conv 1e12\nrate depthwise 1e11\nrate dense 1e12\nrate attention 1e12\n'\
'rate norm 1e10\nrate elementwise 5e9\nrate embedding 5e9\nbandwidth 4e10\n' >mine.profile
expect_exit 0 "models FILE.profile" -- "$HN" models ./mine.profile
grep -qE "^mine +1 " out.txt && ok || bad "a profile file, named after the file"

expect_exit 2 "unknown model" -- "$HN" models resnet51
expect_err '"resnet51"' "names the model"
expect_err "resnet50" "lists the zoo"
one_line_err "unknown model"
sed -i 's/^rate dense.*/rate dense fast/' mine.profile
expect_exit 2 "bad profile file" -- "$HN" models ./mine.profile
expect_err "./mine.profile:4: rate dense" "names the file and line"
one_line_err "bad profile file"
expect_exit 2 "missing profile file" -- "$HN" models ./absent.profile
expect_err "./absent.profile" "names the missing file"
expect_exit 2 "bad batch" -- "$HN" models resnet50 --batch 0
expect_err "--batch '0'" "names the batch"
expect_exit 2 "batch without a name" -- "$HN" models --batch 16
expect_err "--batch needs a NAME" "says the listing takes no batch"
expect_exit 2 "two names" -- "$HN" models resnet50 vgg16
expect_err "'vgg16'" "names the extra argument"
report
