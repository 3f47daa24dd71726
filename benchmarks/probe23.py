"""Probe 23 (H200): the f16 rotary appends in u32 words against their ``vec4<f16>`` form, again.

Run 19 timed the four flat f16 rotary appends after they took ``vec2<u32>`` words (probe 22),
partly in a slow state of the GPU; the pair form of the ``merge_share`` append measured 26.98 µs
at 2,048 tokens where run 15 measured the ``vec4<f16>`` form at 24.99 µs. This rebuilds the
``vec4<f16>`` form from the emitted kernel (the inverse of probe 22's rewrite: ``enable f16;``,
``array<vec4<f16>>`` bindings, ``vec4<f32>(...)`` loads and ``vec4<f16>(...)`` stores), checks on
the device that both write the same halves, and times them alternately with the copy, five
rounds, best kept, after 20 s of copies.

    python benchmarks/probe23.py [--small]
"""

from __future__ import annotations

import re
import sys

import probes
from kvdsl.runtime import adapter_info

VARIANTS = [
    "merge_share_append_rotary_flat_f16_llama31_8b",
    "merge_share_append_rotary_flat_pairs_f16_llama31_8b",
    "window_shift_append_rotary_flat_f16_gemma2_2b",
    "window_shift_append_rotary_flat_pairs_f16_gemma2_2b",
]


def halves(text: str) -> str:
    """The emitted words kernel as it was before: ``vec4<f16>`` bindings and conversions."""
    out = re.sub(r"array<vec2<u32>>; // host: f16", "array<vec4<f16>>;", text)
    out = re.sub(r"fn unpackHalves.*?\n}\n\n", "", out, flags=re.S)
    out = re.sub(r"fn packHalves.*?\n}\n\n", "", out, flags=re.S)
    out = out.replace("unpackHalves(", "vec4<f32>(").replace("packHalves(", "vec4<f16>(")
    out = out.replace("struct Params", "enable f16;\n\nstruct Params", 1)
    assert "Halves" not in out and "vec2<u32>" not in out, out
    return out


def main(argv: list[str]) -> None:
    size, pool, race = probes.start(argv, 0 if "--small" in argv else 20)
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}")
    for m in probes.measurements(VARIANTS, size, pool):
        old = halves(m.text)
        probes.same_bytes(m, m.text, old)
        forms = {"words": (m.text, m.wg), "vec4<f16>": (old, m.wg)}
        race.run(m.label, m.kernel, forms, m.bufs, m.params, m.nbytes, 5)


if __name__ == "__main__":
    main(sys.argv[1:])
