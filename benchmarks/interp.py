"""Interpreter speed: interpreter vs numpy reference vs the software GPU (llvmpipe), one run.

    python benchmarks/interp.py [--repeat N]

Each kernel is one line of ``CASES``: a name, the kernel, its buffers and params, and the numpy
reference computing the same outputs. Times are the best of ``--repeat`` runs after a warm-up
(the GPU's includes upload, dispatch and read-back, as ``kvdsl.runtime.run`` does them).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Callable

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())

from kvdsl import catalog, interp, runtime  # noqa: E402
from arguments import whole  # noqa: E402
from kvdsl.kernels.transpose import TransposeConfig, transpose  # noqa: E402

B, H, S, D = 1, 8, 4096, 128


def transpose_case(vec4: bool):
    rng = np.random.default_rng(0)
    key = rng.random((B, S, H * D), np.float32) + 0.5
    value = rng.random((B, S, H * D), np.float32) + 0.5
    bufs = {"key": key, "value": value}
    bufs |= {n: np.zeros(B * H * S * D, np.float32) for n in ("present_key", "present_value")}

    def reference():
        return [x.reshape(B, S, H, D).transpose(0, 2, 1, 3).copy() for x in (key, value)]

    return transpose(TransposeConfig(H, D, vec4)), bufs, {"batchSize": B, "kvSeq": S}, reference


def copy_case(name: str):
    rows = B * H * S
    rng = np.random.default_rng(1)
    src = {n: rng.random(rows * D, np.float32) + 0.5 for n in ("src_k", "src_v")}
    bufs = src | {n: np.zeros(rows * D, np.float32) for n in ("present_key", "present_value")}

    def reference():
        return [src["src_k"].copy(), src["src_v"].copy()]

    return catalog.build(name), bufs, {"count": rows}, reference


CASES: list[tuple[str, Callable]] = [
    ("transpose", lambda: transpose_case(False)),
    ("transpose vec4", lambda: transpose_case(True)),
    ("copy", lambda: copy_case("copy_llama31_8b")),
    ("copy per row", lambda: copy_case("copy_per_row_llama31_8b")),
]


def best(fn: Callable, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=whole(1), default=3, help="timed runs, best kept (3)")
    ap.add_argument("--no-gpu", action="store_true", help="skip the software GPU")
    args = ap.parse_args()
    print(f"batch {B}, kv heads {H}, tokens {S}, head dim {D}")
    print(
        f"{'kernel':<16}{'numpy ms':>10}{'interp ms':>11}{'gpu ms':>9}{'interp/np':>11}{'gpu/np':>8}"
    )
    for name, make in CASES:
        kernel, bufs, params, reference = make()
        out = interp.run(kernel, bufs, params)
        for got, want in zip(out.values(), reference()):
            assert np.array_equal(
                got.reshape(-1), want.reshape(-1)
            ), f"{name}: interpreter is wrong"
        t_np = best(reference, args.repeat)
        t_in = best(lambda: interp.run(kernel, bufs, params), args.repeat)
        t_gpu = float("nan") if args.no_gpu else best(lambda: runtime.run(kernel, bufs, params), 2)
        print(
            f"{name:<16}{t_np * 1e3:>10.1f}{t_in * 1e3:>11.1f}{t_gpu * 1e3:>9.1f}"
            f"{t_in / t_np:>10.1f}x{t_gpu / t_np:>7.1f}x"
        )


if __name__ == "__main__":
    main()
