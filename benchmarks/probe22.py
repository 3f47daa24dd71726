"""Probe 22 (H200): the flat f16 kernels that compute, with halves carried in u32 words.

Run 14 found no ``shader-f16`` on the H200 under Dawn (Chrome's WebGPU): the seven flat kernels
that compute on f16 (rotary appends and builds, f16 inputs) cannot run there, nor on any device
without the feature. WGSL's ``unpack2x16float`` / ``pack2x16float`` need no extension: this
rewrites each emitted kernel with its ``array<vec4<f16>>`` bindings as ``array<vec2<u32>>`` (the
same 8 bytes per element, four halves), loads converted by ``h4`` (two ``unpack2x16float``) and
stores by ``p4`` (two ``pack2x16float``); everything else, the walk and the f32 arithmetic
included, stays as emitted. Under wgpu-native the form is first checked to write the halves the
emitted kernel writes, then both are timed alternately with the copy at batch 4; under Dawn
(``KVDSL_WEBGPU=dawn``) only the words form can run, and is timed beside the copy.

    [KVDSL_WEBGPU=dawn] python benchmarks/probe22.py [--small]

The compiler emits this form since (``flat.HALVES``), so the rewrite no longer applies to the
emitted text: ``probe22.txt`` is this probe's record, and ``probe23.py`` rebuilds the
``vec4<f16>`` form from the emitted one to compare them again.
"""

from __future__ import annotations

import re
import sys

import probes
from kvdsl.runtime import adapter_info, device

VARIANTS = [
    "merge_share_append_rotary_flat_f16_llama31_8b",
    "merge_share_append_rotary_flat_pairs_f16_llama31_8b",
    "window_shift_append_rotary_flat_f16_gemma2_2b",
    "window_shift_append_rotary_flat_pairs_f16_gemma2_2b",
    "build_rotary_flat_f16_llama31_8b",
    "build_rotary_flat_f16_in_llama31_8b",
    "build_quant_int8_flat_f16_in_llama31_8b",
]
HELPERS = """fn h4(w: vec2<u32>) -> vec4<f32> {
  return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}

fn p4(x: vec4<f32>) -> vec2<u32> {
  return vec2<u32>(pack2x16float(x.xy), pack2x16float(x.zw));
}

"""


def words(text: str) -> str:
    """The emitted kernel with its f16 vectors carried as ``vec2<u32>`` words."""
    names = re.findall(r"var<storage, \w+> (\w+): array<vec4<f16>>;", text)
    out = text.replace("enable f16;\n", "").replace("array<vec4<f16>>", "array<vec2<u32>>")
    for name in names:
        out = out.replace(f"vec4<f32>({name}[", f"h4({name}[")
    out = out.replace("vec4<f16>(", "p4(")
    out = out.replace("@compute", HELPERS + "@compute", 1)
    body = out[out.index("struct Params") :]
    assert "f16" not in body and names, body
    return out


def main(argv: list[str]) -> None:
    size, pool, race = probes.start(argv, 0 if "--small" in argv else 15)
    dawn = device.IMPLEMENTATION == "dawn"
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}")
    for m in probes.measurements(VARIANTS, size, pool):
        form = words(m.text)
        if dawn:
            race.run(m.label, m.kernel, {"words": (form, m.wg)}, m.bufs, m.params, m.nbytes)
            continue
        probes.same_bytes(m, m.text, form)
        forms = {"vec4<f16>": (m.text, m.wg), "words": (form, m.wg)}
        race.run(m.label, m.kernel, forms, m.bufs, m.params, m.nbytes)


if __name__ == "__main__":
    main(sys.argv[1:])
