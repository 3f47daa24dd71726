"""Probe 46 (H200): the drop-in appends' row split without a division at one token.

A drop-in append's block walk splits each item's row into its token and the rest with a
division and a remainder by a params field the compiler cannot know (``row % params.seq``,
``row / params.seq``; ``keySeq`` in the buffer-sharing modes), at every step of every lane. At
one token the whole dispatch is one workgroup, whose lanes walk 4 steps each on one
multiprocessor; if its time there is instructions rather than memory, those two divisions by a
run-time value (each tens of instructions, and naga guards a division against a zero divisor
too) are a large share of a step. The form here takes them only where the field is not 1 (a
uniform branch): at one token ``t = 0`` and ``tmp = row``. Both forms are checked to write the
same bytes and timed alternately with the copy at batch 4, one and 2,048 tokens, with each
form's registers (:func:`probes.race_with_registers`).

    python benchmarks/probe46.py [--small] [VARIANT ...]
"""

from __future__ import annotations

import re
import sys
from importlib.util import find_spec

import probes
from kvdsl.frontend import parse

VARIANTS = [
    "merge_share_append_llama31_8b",
    "merge_share_append_rotary_llama31_8b",
    "window_shift_append_gemma2_2b",
    "append_quant_int8_llama31_8b",
    "append_quant_int4_llama31_8b",
    "append_quant_int8_knorm_qwen3_06b",
]
SPLIT = re.compile(
    r"^( *)let (\w+) = row % params\.(\w+);\n\1let tmp = row / params\.\3;\n", re.MULTILINE
)


def one_token(text: str) -> str:
    """``text`` with the row split by a params field skipped where that field is 1."""

    def split(m: re.Match) -> str:
        pad, t, field = m[1], m[2], m[3]
        return (
            f"{pad}var {t} = 0u;\n{pad}var tmp = row;\n"
            f"{pad}if (params.{field} != 1u) {{\n"
            f"{pad}  {t} = row % params.{field};\n{pad}  tmp = row / params.{field};\n"
            f"{pad}}}\n"
        )

    out, n = SPLIT.subn(split, text)
    assert n == 1, f"{n} row splits"
    return out


def forms(m: probes.Measurement) -> dict[str, str]:
    text = one_token(m.text)
    if find_spec("interegular"):  # lark's strict mode needs it; a bare GPU host may lack it
        parse(text)  # the IR's verifier takes it
    return {"emitted": m.text, "one-token": text}


def main(argv: list[str]) -> None:
    names = [a for a in argv if not a.startswith("--")] or VARIANTS
    probes.race_with_registers(__file__, argv, names, forms)


if __name__ == "__main__":
    main(sys.argv[1:])
