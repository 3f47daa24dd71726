#!/usr/bin/env bash
# Everything issue 7 measures, in one call on the GPU host: check every catalog variant on the
# GPU against the interpreter (under wgpu-native, and under Dawn where wgpudawn is installed),
# time the compiler, then run the GPU benchmark. Each step's log
# lands under OUT; a failing step is reported and the next still runs, and the script then exits
# with 1.
#
#   . scripts/on-gpu.sh && bash benchmarks/all.sh "$OUT/run5" --batches 4 --trials 3 --repeats 30 --budget 480
#
# (--budget: the benchmark starts no config after that many seconds, so a time-limited device
# call still ends with its CSV and device.json written. On the H200 verify and the compiler
# take ~30 s, and batch 4 with its retries ~470-500 s (runs 52, 57), batch 1 ~525 s (run 59):
# in a 600 s call, the configs past the budget are named in the log, for a second call with
# --variants. The late retries of rows whose copy stayed slow come after every config and also
# stop at the budget: leave ~4 s a row for them, as run 59 did not.)
#
# The legacy template is found beside the repo or in .seed/ (copy it there on the GPU host).
#
# Then, here: python benchmarks/report.py --csv <OUT>/run5/gpu.csv --note benchmarks/results/h200/NOTE.md
set -u
out=${1:?usage: all.sh OUT [gpu.py options]}
shift
mkdir -p "$out"
py=${PYTHON:-python3}
step() {
  local name=$1
  shift
  local t0=$SECONDS
  "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "$name: rc=$rc in $((SECONDS - t0)) s; $(tail -n 1 "$out/$name.log")"
  [ "$rc" -eq 0 ] || failed=1
}
failed=0
step verify "$py" -m kvdsl verify
# Where wgpudawn is installed (its wheel in .whl on the GPU host) and finds a GPU, the catalog
# is also checked as Chrome compiles it: Dawn, Tint, robustness on (f16 drop-ins are not run
# without shader-f16).
if "$py" -c "import wgpudawn; wgpudawn.gpu.request_adapter_sync()" >/dev/null 2>&1; then
  step verify-dawn env KVDSL_WEBGPU=dawn "$py" -m kvdsl verify
fi
step compile "$py" benchmarks/compile.py --out "$out"
step gpu "$py" benchmarks/gpu.py --out "$out" "$@"
exit $failed
