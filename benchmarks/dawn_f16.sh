#!/usr/bin/env bash
# Dawn with shader-f16 on an NVIDIA GPU (run 94): Dawn, and so Chrome, leaves f16 off under
# NVIDIA's Vulkan driver unless its `vulkan_enable_f16_on_nvidia` toggle is on
# (KVDSL_DAWN_ENABLE). On the GPU host, after scripts/on-gpu.sh and the test wheels:
#
#   bash benchmarks/dawn_f16.sh OUT [BUDGET]
#
# 1. `kvdsl verify` of an f16 drop-in without the toggle (the FeatureError names the toggle);
# 2. the f16-heavy test files under Dawn with the toggle, two processes, while
# 3. `kvdsl verify` of the whole catalog under Dawn with the toggle runs;
# 4. then the batch-4 benchmark of every variant whose row under Dawn lacked the feature
#    (kvdsl's or the template's kernel) in run 60, the run 60 options, BUDGET seconds (280).
set -u
out=${1:?usage: dawn_f16.sh OUT [BUDGET]}
budget=${2:-280}
mkdir -p "$out"
py=${PYTHON:-python3}
export KVDSL_WEBGPU=dawn
KVDSL_DAWN_ENABLE= "$py" -m kvdsl verify transpose_f16_llama31_8b >"$out/verify-notoggle.log" 2>&1
echo "without the toggle: rc=$? $(tail -n 2 "$out/verify-notoggle.log" | head -n 1)"
export KVDSL_DAWN_ENABLE=vulkan_enable_f16_on_nvidia
t() { timeout 300 "$py" -m pytest -q -p no:cacheprovider "$@"; }
t tests/test_catalog.py tests/test_conformance.py >"$out/tests-a.log" 2>&1 &
a=$!
t tests/test_exec_fuzz_float.py tests/test_words.py tests/test_pair.py tests/test_flat.py \
  tests/test_merge.py tests/test_window_shift.py >"$out/tests-b.log" 2>&1 &
b=$!
"$py" -m kvdsl verify >"$out/verify.log" 2>&1
echo "verify: rc=$? $(tail -n 1 "$out/verify.log")"
wait $a; echo "tests a: rc=$? $(tail -n 1 "$out/tests-a.log")"
wait $b; echo "tests b: rc=$? $(tail -n 1 "$out/tests-b.log")"
variants=(
  build_rotary_f16_llama31_8b build_rotary_flat_f16_llama31_8b copy_f16_llama31_8b
  copy_flat_f16_llama31_8b merge_f16_llama31_8b merge_flat_f16_llama31_8b
  merge_per_row_f16_llama31_8b merge_share_append_rotary_f16_llama31_8b
  merge_share_append_rotary_flat_f16_llama31_8b merge_share_retain_f16_llama31_8b
  merge_share_retain_flat_f16_llama31_8b transpose_f16_llama31_8b transpose_flat_f16_llama31_8b
  transpose_vec4_f16_llama31_8b window_shift_append_rotary_f16_gemma2_2b
  window_shift_append_rotary_flat_f16_gemma2_2b window_shift_f16_gemma2_2b
  window_shift_flat_f16_gemma2_2b window_shift_shift_f16_gemma2_2b
)
"$py" benchmarks/gpu.py --out "$out/gpu" --variants "${variants[@]}" --batches 4 --trials 3 \
  --repeats 30 --settle 20 --retry-below 90 --budget "$budget" >"$out/gpu.log" 2>&1
echo "benchmark: rc=$? $(tail -n 1 "$out/gpu.log")"
