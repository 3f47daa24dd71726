"""Walk design probe 5 (H200): why kvdsl's drop-in per-row and cooperative 1-token appends of
``merge_share`` trailed the template's (run 2 and 3: per-row 0.44-0.65x, cooperative 0.93-0.95x).

The per-row gap was the benchmark's (the template has no per-row append); the cooperative one is
the ``j >= skip`` test. The *uniform skip* form (not yet measured) runs each cooperative loop
without that test under a uniform ``keySeq <= seq`` branch.

kvdsl's window arithmetic differs from the template's in two ways (docs/legacy.md): a negative
``seqlens_k`` is clamped (``max(seqlens_k[b], -1)``) and new tokens that do not fit a cache
shorter than ``keySeq`` are skipped (``if (j < skip)``). Each catalog kernel is timed as emitted and
text-edited to isolate each difference, at 1 and 2,048 new tokens, in one run.
"""

from __future__ import annotations

import os
import sys
import tempfile

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())

from kvdsl import catalog  # noqa: E402
from kvdsl.emit import emit  # noqa: E402
from kvdsl.ir import workgroups  # noqa: E402
from kvdsl.runtime import run_source, time_kernel  # noqa: E402

B, H, D = 4, 8, 128

CLAMP = "u32(max(seqlens_k[b], -1i)) + 1u"
WINDOW = (
    "  let fresh = min(params.keySeq, activeEnd);\n"
    "  let appendStart = activeEnd - fresh;\n"
    "  let skip = params.keySeq - fresh;\n"
)


def timed(kernel, wgsl, bufs, params, warmup, reps=100):
    wg = workgroups(kernel, params)
    ts = time_kernel(
        wgsl, bufs, params, wg, bindings=kernel.bindings, params_struct=kernel.params,
        repeats=reps, warmup=warmup, label=kernel.name, reuse=REUSE,
    )  # fmt: skip
    return float(np.median(ts)) * 1e6


REUSE: dict = {}


def forms(text: str, indent: str) -> dict[str, str]:
    """The emitted kernel and its edits: without the clamp, without the skip, the template's."""
    window = "".join(indent + line.lstrip() + "\n" for line in WINDOW.splitlines())
    no_clamp = text.replace(CLAMP, "u32(seqlens_k[b]) + 1u")
    per_row_skip = f"{indent}if (j < skip) {{\n{indent}  return;\n{indent}}}\n"
    no_skip = text.replace(per_row_skip, "")
    if no_skip == text:  # the cooperative walk wraps the stores in `if (j >= skip) { ... }`
        no_skip = text.replace("if (j >= skip) {", "if (true) {")
    template = no_skip.replace(CLAMP, "u32(seqlens_k[b]) + 1u").replace(window, "")
    template = template.replace(
        "let t = appendStart + (j - skip);", "let t = activeEnd - params.keySeq + j;"
    )
    out = {"as emitted": text, "no clamp": no_clamp, "no skip": no_skip, "template's": template}
    if "if (j >= skip) {" in text:
        out["uniform skip"] = uniform_skip(text)
    for name, form in out.items():
        assert name == "as emitted" or form != text, name
    return out


def uniform_skip(text: str) -> str:
    """Each cooperative loop twice, under ``if (params.keySeq <= params.seq)``: without the
    ``j >= skip`` test (``skip`` is 0 whenever the new tokens fit, and the condition is uniform),
    and as emitted otherwise, so the common case's loads are not inside a condition."""
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        if not line.lstrip().startswith("for ("):
            out.append(line)
            i += 1
            continue
        depth, j = 0, i
        while True:
            depth += lines[j].count("{") - lines[j].count("}")
            if depth == 0:
                break
            j += 1
        loop = lines[i : j + 1]
        if not any("if (j >= skip) {" in x for x in loop):
            out += loop
        else:
            pad = line[: len(line) - len(line.lstrip())]
            fast = [x.replace("if (j >= skip) {", "{") for x in loop]
            out += [pad + "if (params.keySeq <= params.seq) {"] + ["  " + x for x in fast]
            out += [pad + "} else {"] + ["  " + x for x in loop] + [pad + "}"]
        i = j + 1
    return "\n".join(out)


def same_outputs(kernel, texts: dict[str, str], bufs: dict, params: dict) -> None:
    """Every form writes what the emitted kernel writes on these (well-formed) inputs."""
    wg = workgroups(kernel, params)
    outs = {
        name: run_source(text, kernel.bindings, kernel.params, dict(bufs), params, wg)
        for name, text in texts.items()
    }
    want = outs["as emitted"]
    for name, got in outs.items():
        for b in ("present_key", "present_value"):
            assert np.array_equal(got[b], want[b]), f"{kernel.name} {name}: {b} differs"


def main() -> None:
    small = "--small" in sys.argv
    cap = 256 if small else 8192
    rng = np.random.default_rng(0)
    for variant, indent in (
        ("merge_share_append_per_row_llama31_8b", "  "),
        ("merge_share_append_rotary_per_row_llama31_8b", "  "),
        ("merge_share_append_llama31_8b", "      "),
        ("merge_share_append_rotary_llama31_8b", "      "),
    ):
        k = catalog.build(variant)
        text = emit(k)
        for tokens in (1, 64 if small else 2048):
            new = rng.random(B * H * D * tokens, np.float32) + 0.5
            bufs = {
                "new_k": new,
                "new_v": new.copy(),
                "seqlens_k": np.full(B, cap // 2 + tokens - 1, np.int32),
                "present_key": np.zeros(B * H * cap * D, np.float32),
                "present_value": np.zeros(B * H * cap * D, np.float32),
            }
            if "rotary" in variant:
                cs = rng.random(cap * D // 2, np.float32)
                bufs |= {"cos_cache": cs, "sin_cache": cs.copy()}
            params = {"count": B * H * tokens, "seq": cap, "keySeq": tokens}
            # The GPU lowers its clocks when idle: ~100 ms of back-to-back dispatches before each
            # timing, and the forms alternate over three rounds, the best of each kept.
            warmup = 2000 if tokens == 1 else 300
            same_outputs(k, forms(text, indent), bufs, params)
            best: dict[str, float] = {}
            for _ in range(3):
                for name, form in forms(text, indent).items():
                    us = timed(k, form, bufs, params, warmup)
                    best[name] = min(best.get(name, us), us)
            for name, us in best.items():
                print(f"{variant:<46} tok={tokens:<5} {name:<12} {us:9.2f} us", flush=True)


if __name__ == "__main__":
    main()
