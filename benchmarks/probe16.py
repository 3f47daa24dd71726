"""Walk design probe 16 (H200): what else holds the flat f16 rotary appends at 84-89%?

Probes 11-15 ruled out the load order, the cos/sin tables, eight halves per invocation and words
on the pair walk. The f16 *build* on the pair walk reaches 94-96% of the copy (run 11) where
the append on the same walk reaches 89%: same bytes, same rotation; the append adds the
``seqlens_k`` load and its window arithmetic, on which the destination row and the cos/sin row
depend. Ceilings, not kernels (outputs unchecked) of ``merge_share_append_rotary_flat_f16`` and
its pair form, at 2,048 tokens: *no window* (``t = j``: no ``seqlens_k`` load, no skip test);
*f16 math* (the rotation in f16 lanes, no conversions); *no select* (vector form: only the
first half's product stored); and the emitted kernels at workgroups of 128 and 64. Five rounds
alternately with the copy, best kept, after 30 s of copies.
"""

from __future__ import annotations

import dataclasses
import re
import sys

import probes
from kvdsl import catalog
from kvdsl.emit import emit
from kvdsl.ir import workgroups

VARIANTS = [
    "merge_share_append_rotary_flat_f16_llama31_8b",
    "merge_share_append_rotary_flat_pairs_f16_llama31_8b",
]
WINDOW = re.compile(r"  let total = .*?  let t = appendStart \+ \(j - skip\);\n", re.DOTALL)


def no_window(text: str) -> str:
    out, n = WINDOW.subn("  let t = j;\n", text)
    assert n == 1
    return out


def f16_math(text: str) -> str:
    out = re.sub(r"let (cs|sn) = ((cos|sin)_cache\[.*\]);", r"let \1 = vec4<f16>(\2);", text)
    out, n = re.subn(r"let (x[01]) = vec4<f32>\((new_k\[.*\])\);", r"let \1 = \2;", out)
    assert n == 2
    return out


def no_select(text: str) -> str:
    out, n = re.subn(r"select\((.*), (x0 \* cs - x1 \* sn), d4 < HALF_V4\)", r"\2", text)
    assert n == 1
    return out


def main() -> None:
    size, pool, race = probes.start(sys.argv)
    for m in probes.measurements(VARIANTS, size, pool, decode=False):
        forms = {
            "emitted": (m.text, m.wg),
            "no window": (no_window(m.text), m.wg),
            "f16 math": (f16_math(m.text), m.wg),
        }
        if "select(" in m.text:
            forms["no select"] = (no_select(m.text), m.wg)
        for n in (128, 64):
            k = catalog.build_config(dataclasses.replace(m.cfg, workgroup_size=n), m.variant)
            forms[f"wg{n}"] = (emit(k), workgroups(k, m.params))
        race.run(m.label, m.kernel, forms, m.bufs, m.params, m.nbytes, 5)


if __name__ == "__main__":
    main()
