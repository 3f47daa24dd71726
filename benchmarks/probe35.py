"""Probe 35 (H200): the K RMSNorm drop-ins with their step loop written out.

The driver compiles naga's SPIR-V of the int8 K RMSNorm drop-in to 35 registers and Tint's to 64
(``shaderstats.py``, run 46), and naga's runs at 73-77% of the copy where Tint's runs at 88%.
Neither the barriers' memory ordering, the memory model nor maximal reconvergence is the
difference (runs 47-49); what is left is the code's own shape, the step loop first: naga bounds
it with a counter it steps at the loop's top. This writes the loop out: the block walk's at
most ``WG * per_row / LANES`` steps (4 on pairs, 8 on vectors) each become ``if (k < steps) {
let s = k; ... }`` (a uniform condition, so the barriers inside stay uniform), a text rewrite
of the emitted WGSL and nothing else. It checks on the device that both forms write the same
bytes, and times them alternately with the copy, three rounds, best kept, after 20 s of copies,
at batch 4.

Result (run 50, ``results/h200/probe35.txt``, ``probe35-dawn.txt``): the same bytes, and no form
wins on every row. Under wgpu-native at 2,048 tokens the written-out loop gains 2-7 points on
the int8, plain and rotary drop-ins (int8 build 77% → 81%, rotary 79% → 86%) and loses 12-14 on
the int4 ones (89% → 75%, 87% → 75%); under Dawn it loses 6 points on the int8 build and 13-16
on the int4 ones and matches the rest; at 8,192 tokens it is within 3 points but int4 (-5).
On llvmpipe it is faster everywhere. The loop stays.

    python benchmarks/probe35.py [--small]
"""

from __future__ import annotations

import re
import sys

import probes
from kvdsl.runtime import adapter_info

VARIANTS = [
    "build_quant_int8_knorm_qwen3_06b",
    "append_quant_int8_knorm_qwen3_06b",
    "build_knorm_qwen3_06b",
    "build_knorm_rotary_qwen3_06b",
    "build_quant_int4_knorm_qwen3_06b",
    "append_quant_int4_knorm_qwen3_06b",
    "build_quant_int8_knorm_sg_qwen3_06b",
]
HEAD = re.compile(r"^  for \(var s: u32 = 0u; s < (.+); s = s \+ 1u\) \{$")


def consts(text: str) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r"const (\w+): u32 = (\d+)u;", text)}


def written_out(text: str) -> str:
    """``text`` with its step loop (the entry point's last statement) written out."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if HEAD.match(line))
    end = max(i for i, line in enumerate(lines) if line == "  }")
    bound = HEAD.match(lines[at])[1]
    c = consts(text)
    per_row = re.search(r"let itemBase = wgFlat \* \(WG \* (\w+)\);", text)[1]
    steps = c["WG"] * c[per_row] // c["LANES"]
    body = ["  " + line if line else line for line in lines[at + 1 : end]]
    out = lines[:at] + [f"  let steps = {bound};"]
    for k in range(steps):
        out += [f"  if ({k}u < steps) {{", f"    let s = {k}u;"] + body + ["  }"]
    return "\n".join(out + lines[end + 1 :]) + "\n"


def main(argv: list[str]) -> None:
    size, pool, race = probes.start(argv, 0 if "--small" in argv else 20)
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}")
    for m in probes.measurements(VARIANTS, size, pool):
        flat = written_out(m.text)
        assert "for (var s" not in flat and flat.count("let s = ") >= 4
        probes.same_bytes(m, m.text, flat)
        forms = {"loop": (m.text, m.wg), "written": (flat, m.wg)}
        race.run(m.label, m.kernel, forms, m.bufs, m.params, m.nbytes, 3)


if __name__ == "__main__":
    main(sys.argv[1:])
