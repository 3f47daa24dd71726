#!/usr/bin/env bash
# Everything the performance page measures, in one call on the GPU host: check every catalog
# variant on the GPU against the interpreter (under wgpu-native, and under Dawn where wgpudawn
# finds a GPU), time the compiler, then run the GPU benchmark; with --dawn, the benchmark under
# Dawn too (into OUT/dawn). Each step's log lands under OUT; a failing step is reported, the next
# still runs, and the script then exits with 1.
#
#   . scripts/on-gpu.sh && bash benchmarks/all.sh OUT [--dawn] [--dawn-f16] [gpu.py options]
#   e.g. bash benchmarks/all.sh out/h200 --dawn --batches 4 --trials 3 --repeats 30 --budget 480
#
# --dawn-f16: Dawn's steps run with its vulkan_enable_f16_on_nvidia toggle on, which Chrome
# leaves off, so the f16 drop-ins get shader-f16 on NVIDIA's Vulkan driver.
# --budget: the benchmark starts no config after that many seconds, so a time-limited device
# call still ends with its CSV and device.json written (batch 4 takes ~500 s on an H200; leave
# ~4 s a row for the late retries).
#
# The legacy template is found beside the repository or in .seed/ (copy it there on the GPU host).
# Then, here: python benchmarks/report.py OUT
set -u
out=${1:?usage: all.sh OUT [--dawn] [--dawn-f16] [gpu.py options]}
shift
dawn=0
toggles=
while [ $# -gt 0 ]; do
  case $1 in
    --dawn) dawn=1 ;;
    --dawn-f16) dawn=1; toggles=vulkan_enable_f16_on_nvidia ;;
    *) break ;;
  esac
  shift
done
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
# Dawn's toggles (KVDSL_DAWN_ENABLE) apply to the Dawn steps only.
under_dawn() { env KVDSL_WEBGPU=dawn KVDSL_DAWN_ENABLE="$toggles" "$@"; }
step verify "$py" -m kvdsl verify
if "$py" -c "import wgpudawn; wgpudawn.gpu.request_adapter_sync()" >/dev/null 2>&1; then
  step verify-dawn env KVDSL_DAWN_ENABLE="$toggles" "$py" -m kvdsl --webgpu dawn verify
fi
step compile "$py" benchmarks/compile.py --out "$out"
step gpu "$py" benchmarks/gpu.py --out "$out" "$@"
if [ "$dawn" -eq 1 ]; then
  step gpu-dawn under_dawn "$py" benchmarks/gpu.py --out "$out/dawn" "$@"
fi
exit $failed
