"""Probe 44 (H200): the workgroup K RMSNorm drop-ins in two passes, one barrier a block.

The block walk runs the K RMSNorm program one step at a time: each step loads its items,
stores each item's partial sum of squares in workgroup memory, waits at a barrier, reads its
row's partials, stores its outputs, and waits at a second barrier before the next step may
reuse the memory: eight barriers a block of four steps, every value loaded before the first
kept live across it (naga's int8 module: 35 registers, one more workgroup than a wave holds
at 2,048 tokens; probes 41-43). This probe splits the loop in two:

- pass 1: each step loads only K and stores its items' partials, each item its own slot of a
  workgroup array of the whole block (``WG * per_row`` partials: 4 KB for 64 rows of 16 pair
  items);
- one barrier;
- pass 2: each step loads everything again (K from the cache the first pass filled), reads
  its row's partials and stores; no barrier, no workgroup memory reused.

K is read twice (the second time from L2), no load waits on a barrier, and nothing is live
across one. The form is written from the emitted WGSL (:func:`two_pass`), parsed back into the
IR (which verifies it), checked on the device to write the same bytes as the emitted one, and
timed alternately with the copy (three rounds) at batch 4, 2,048 / 8,192 tokens and one token,
with each form's registers read through the Vulkan layer (:func:`probes.race_with_registers`).
Run it under both implementations (``KVDSL_WEBGPU=dawn``).

    python benchmarks/probe44.py [--small] [VARIANT ...]
"""

from __future__ import annotations

import re
import sys
from importlib.util import find_spec

import probes
from kvdsl.frontend import parse

VARIANTS = probes.KNORM_DROPINS
STORE = "wsum[lid.x / 4u][lid.x % 4u] = "
SLOT = "(lid.x + s * LANES)"


def two_pass(text: str) -> str:
    """The emitted block-walk K RMSNorm kernel ``text`` in two passes (see the module)."""
    lines = text.splitlines()
    head = next(i for i, l in enumerate(lines) if l.lstrip().startswith("for (var s: u32"))
    store = next(i for i, l in enumerate(lines) if l.lstrip().startswith(STORE))
    barrier = store + 1
    assert lines[barrier].strip() == "workgroupBarrier();", lines[barrier]
    close = max(i for i, l in enumerate(lines) if l == "  }")  # the step loop's end
    assert lines[close - 1].strip() == "workgroupBarrier();" and "next step" in lines[close - 2]
    k_last = max(i for i in range(head, store) if "Raw = src_k[" in lines[i])
    slot_store = lines[store].replace("wsum[lid.x / 4u]", f"wsum[{SLOT} / 4u]")
    after = [
        l.replace("let rowQuad = (lid.x - dr) / 4u;", f"let rowQuad = ({SLOT} - dr) / 4u;")
        for l in lines[barrier + 1 : close - 2]
    ]
    assert any(f"{SLOT} - dr" in l for l in after), "no rowQuad line"
    body = (
        lines[:head]
        + ["  // Pass 1: every item's partial sum of squares in its own slot of the block."]
        + lines[head : k_last + 1]
        + [slot_store, "  }", "  workgroupBarrier();"]
        + ["  // Pass 2: each item's row partials read back; nothing waits at a barrier."]
        + lines[head:store]
        + after
        + lines[close:]
    )
    out = "\n".join(body) + "\n"
    wg = int(re.search(r"const WG: u32 = (\d+)u;", out)[1])
    per_row_name = re.search(r"let itemBase = wgFlat \* \(WG \* (\w+)\);", out)[1]
    per_row = int(re.search(rf"const {per_row_name}: u32 = (\d+)u;", out)[1])
    old = re.search(r"var<workgroup> wsum: array<vec4<f32>, \d+>;", out)[0]
    return out.replace(old, f"var<workgroup> wsum: array<vec4<f32>, {wg * per_row // 4}>;")


def forms(m: probes.Measurement) -> dict[str, str]:
    text = two_pass(m.text)
    if find_spec("interegular"):  # lark's strict mode needs it; a bare GPU host may lack it
        parse(text)  # the IR's verifier takes it
    return {"emitted": m.text, "two-pass": text}


def main(argv: list[str]) -> None:
    names = [a for a in argv if not a.startswith("--")] or VARIANTS
    probes.race_with_registers(__file__, argv, names, forms)


if __name__ == "__main__":
    main(sys.argv[1:])
