"""Every mode on a cache larger than one storage binding, under WebGPU's default limits.

    python benchmarks/big_cache.py [--batch 3] [--tokens 32768] [--modes MODE ...]
                                   [--binding BYTES] [--buffer BYTES] [--seed S]

Run from the repository root. Each mode runs its windowed catalog variant over Llama-3.1-8B's
cache shape (8 KV heads × head dim 128, f32) through :func:`kvdsl.runtime.windows.run_windows`
on a device created with no limits requested (WebGPU's defaults: 128 MiB per storage binding,
256 MiB per buffer, offsets multiples of 256 bytes). At the default ``--batch 3 --tokens 32768``
each K or V cache is 384 MiB: three windows of one batch (128 MiB, one binding) held in two
buffers; ``build``'s and ``transpose``'s sources (a 32K-token prompt per batch, 128 MiB) are
bound one batch per window. ``copy`` runs its flat variant (position-independent) with the
cache's rows as slices.

Inputs are random and non-zero, outputs poisoned; every output element is compared with the
numpy reference of the whole cache (no sampling: the reference of a mode over 384 MiB takes
seconds). One line per mode: the variant, MiB per K/V, windows, buffers, seconds of the
windowed run (upload, dispatches and read back), the largest error and ``ok`` or the problems.
Exit code 1 when any mode fails. ``--binding`` / ``--buffer`` plan the windows at lower limits
(the device keeps WebGPU's defaults), so a small run exercises the same path on a software
adapter.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from kvdsl import catalog, reference  # noqa: E402
from kvdsl.harness.cases import Case  # noqa: E402
from kvdsl.kernels.config import window_bindings  # noqa: E402
from kvdsl.reference.judge import poison, values  # noqa: E402
from kvdsl.runtime.layout import to_storage  # noqa: E402
from kvdsl.runtime.windows import Limits, plan_windows, run_windows  # noqa: E402

#: mode → the variant each runs.
VARIANTS = {
    "transpose": "transpose_windowed_llama31_8b",
    "copy": "copy_flat_llama31_8b",
    "merge": "merge_windowed_llama31_8b",
    "merge_share": "merge_share_append_rotary_windowed_llama31_8b",
    "merge_share_retain": "merge_share_retain_windowed_llama31_8b",
    "window_shift": "window_shift_windowed_llama31_8b",
    "window_shift_append": "window_shift_append_rotary_windowed_llama31_8b",
    "build": "build_rotary_windowed_llama31_8b",
    "build_quant": "build_quant_int8_windowed_llama31_8b",
    "append_quant": "append_quant_int4_windowed_llama31_8b",
}
#: New tokens of the appending modes.
NEW_TOKENS = 16


def _rotary(rng: np.random.Generator, positions: int, half: int) -> reference.Rotary:
    theta = rng.uniform(0, 2 * np.pi, (positions, half))
    return reference.Rotary(np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32))


def _seqlens(rng: np.random.Generator, batch: int, cap: int) -> np.ndarray:
    """Per batch: an append in the middle, a cache filled exactly, more tokens than it holds."""
    kinds = [int(rng.integers(NEW_TOKENS, cap)), cap, cap + NEW_TOKENS // 2]
    return np.array([kinds[b % 3] - 1 for b in range(batch)], np.int32)


def _flat(d: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: np.ascontiguousarray(v).reshape(-1) for k, v in d.items()}


def _windowed(
    bufs: dict, shape: tuple, dt, params: dict, want, mask=None, tol: float = 0.0
) -> Case:
    size = int(np.prod(shape))
    out = {"present_key": poison(size, dt), "present_value": poison(size, dt)}
    written = {} if mask is None else _flat({"present_key": mask, "present_value": mask})
    return Case(
        {"batch": shape[0]},
        _flat(bufs) | out,
        params,
        _flat({"present_key": want[0], "present_value": want[1]}),
        written,
        {"present_key": tol},
    )


def make_case(mode: str, cfg, rng: np.random.Generator, batch: int, tokens: int) -> Case:
    """Random inputs of ``mode`` over a ``batch × kvHeads × tokens`` cache, and the reference."""
    model = catalog.MODELS["llama31_8b"]  # copy's config has no heads: its rows are whole
    h, d, f32 = model.kv_heads, model.head_dim, np.float32
    cache = (batch, h, tokens, d)

    def new(seq: int) -> np.ndarray:
        return values(rng, (batch, seq, h * d), f32)

    if mode == "transpose":
        key, value = new(tokens), new(tokens)
        want = reference.transpose(key, value, h, f32)
        params = {"batchSize": batch, "kvSeq": tokens, "count": batch * h * tokens}
        return _windowed({"key": key, "value": value}, cache, f32, params, want)
    if mode == "copy":
        src_k, src_v = values(rng, cache, f32), values(rng, cache, f32)
        params = {"count": batch * h * tokens}
        return _windowed({"src_k": src_k, "src_v": src_v}, cache, f32, params, (src_k, src_v))
    if mode == "merge":
        past = tokens - NEW_TOKENS
        past_k, past_v = (values(rng, (batch, h, past, d), f32) for _ in range(2))
        new_k, new_v = new(NEW_TOKENS), new(NEW_TOKENS)
        want = reference.merge(past_k, past_v, new_k, new_v)
        bufs = {"past_k": past_k, "past_v": past_v, "new_k": new_k, "new_v": new_v}
        params = {"count": batch * h * tokens, "seq": tokens, "pastSeq": past}
        return _windowed(bufs, cache, f32, params | {"keySeq": NEW_TOKENS}, want)
    seqlens = _seqlens(rng, batch, tokens)
    if mode in ("merge_share", "append_quant", "window_shift_append"):
        rows = NEW_TOKENS
    else:
        rows = tokens
    params = {"count": batch * h * rows, "seq": tokens, "keySeq": NEW_TOKENS}
    if mode == "merge_share_retain":
        past_k, past_v = values(rng, cache, f32), values(rng, cache, f32)
        w = reference.merge_share_retain(past_k, past_v, seqlens, NEW_TOKENS)
        bufs = {"past_k": past_k, "past_v": past_v, "seqlens_k": seqlens}
        return _windowed(bufs, cache, f32, params, (w.key, w.value), w.mask)
    if mode == "merge_share":
        k, v = new(NEW_TOKENS), new(NEW_TOKENS)
        rot = _rotary(rng, tokens, d // 2)
        w = reference.merge_share_append(k, v, seqlens, tokens, h, rot, f32)
        bufs = {"new_k": k, "new_v": v, "seqlens_k": seqlens}
        bufs |= {"cos_cache": rot.cos, "sin_cache": rot.sin}
        return _windowed(bufs, cache, f32, params, (w.key, w.value), w.mask, 2e-5)
    if mode in ("window_shift", "window_shift_append"):
        append = mode == "window_shift_append"
        past_k, past_v = values(rng, cache, f32), values(rng, cache, f32)
        k, v = new(NEW_TOKENS), new(NEW_TOKENS)
        rot = _rotary(rng, int(seqlens.max()) + NEW_TOKENS + 1, d // 2) if append else None
        region = "append" if append else "all"
        w = reference.window_shift(past_k, past_v, k, v, seqlens, region, rot)
        bufs = {"new_k": k, "new_v": v, "seqlens_k": seqlens}
        if append:
            bufs |= {"cos_cache": rot.cos, "sin_cache": rot.sin}
        else:
            bufs |= {"past_k": past_k, "past_v": past_v}
        return _windowed(bufs, cache, f32, params, (w.key, w.value), w.mask, 2e-5 if append else 0)
    # build, build_quant: a prompt of `tokens` tokens; append_quant: NEW_TOKENS new ones.
    seq = NEW_TOKENS if mode == "append_quant" else tokens
    src_k, src_v = new(seq), new(seq)
    bufs = {"src_k": src_k, "src_v": src_v}
    rot = None
    if cfg.rotary:
        rot = _rotary(rng, tokens, d // 2)
        bufs |= {"cos_cache": rot.cos, "sin_cache": rot.sin}
    params = {"count": batch * h * seq, "seq": seq, "pastSeq": 0}
    if mode == "build":
        want = reference.build(src_k, src_v, h, 0, None, rot)
        return _windowed(bufs, cache, f32, params, want, None, 2e-5)
    scale = (rng.uniform(1.2, 2.5, h * d).astype(f32) / cfg.qmax for _ in range(2))
    q = reference.Quant(cfg.bits, *scale, True, cfg.qmin, cfg.qmax)
    bufs |= {"k_scale": q.k_scale, "v_scale": q.v_scale}
    params["perChannel"] = 1
    if mode == "build_quant":
        pk, pv = reference.build_quant(src_k, src_v, h, q, 0, None, rot)
        case = _windowed(bufs, pk.shape, pk.dtype, params, (pk, pv))
    else:
        w = reference.append_quant(src_k, src_v, seqlens, tokens, h, q, None, rot)
        bufs["seqlens_k"] = seqlens
        params |= {"totalSeq": tokens}
        case = _windowed(bufs, w.key.shape, w.key.dtype, params, (w.key, w.value), w.mask)
    case.codes = {"present_key": cfg.bits, "present_value": cfg.bits}
    return case


def run_mode(mode: str, batch: int, tokens: int, limits: Limits, seed: int) -> tuple[bool, str]:
    """One mode's windowed run against its reference: (ok, the line to print)."""
    name = VARIANTS[mode]
    cfg, kernel = catalog.config(name), catalog.build(name)
    case = make_case(mode, cfg, np.random.default_rng(seed), batch, tokens)
    cache, sources = window_bindings(cfg.mode)
    heads = 1 if cfg.mode == "copy" else cfg.kv_heads
    slices = case.params["count"] if cfg.mode == "copy" else batch * heads
    nbytes = {b.name: len(to_storage(b.elem, case.buffers[b.name])) for b in kernel.bindings}
    plan = plan_windows(
        slices,
        heads,
        {n: v // slices for n, v in nbytes.items() if n in cache},
        {n: v // (slices // heads) for n, v in nbytes.items() if n in sources},
        {n: v for n, v in nbytes.items() if n not in cache and n not in sources},
        limits,
    )
    start = time.perf_counter()
    got = run_windows(
        kernel,
        case.buffers,
        case.params,
        heads=heads,
        slices=slices,
        cache=cache,
        sources=sources,
        limits=limits,
    )
    seconds = time.perf_counter() - start
    verdict = list(case.judge(got, codes=case.codes))
    err = max(e for _, e, _ in verdict)
    problems = [f"{n}: {p}" for n, _, p in verdict if p]
    mib = nbytes["present_key"] / 2**20
    line = (
        f"{mode:20s} {name:48s} {mib:8.1f} MiB/K,V  {len(plan.windows):3d} windows "
        f"{len(plan.buffers):2d} buffers  {seconds:7.2f} s  max err {err:.3g}  "
        + ("ok" if not problems else "FAIL " + "; ".join(problems))
    )
    return not problems, line


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=3, help="batches (default 3)")
    p.add_argument("--tokens", type=int, default=32768, help="cache rows per head (32768)")
    p.add_argument("--modes", nargs="*", choices=sorted(VARIANTS), default=list(VARIANTS))
    p.add_argument("--binding", type=int, default=Limits().binding, help="bytes per binding")
    p.add_argument("--buffer", type=int, default=Limits().buffer, help="bytes per buffer")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.tokens <= NEW_TOKENS or args.batch < 1:
        p.error(f"--tokens must be more than {NEW_TOKENS} and --batch at least 1")
    limits = Limits(args.binding, args.buffer)
    from kvdsl.runtime import device

    dev = device.device()
    names = ("max-storage-buffer-binding-size", "max-buffer-size")
    names += ("min-storage-buffer-offset-alignment",)
    print(
        f"device {device.adapter_info()['device']}: "
        + ", ".join(f"{n} {dev.limits[n]}" for n in names)
        + f"; windows planned at binding {limits.binding}, buffer {limits.buffer}",
        flush=True,
    )
    ok = True
    for mode in args.modes:
        passed, line = run_mode(mode, args.batch, args.tokens, limits, args.seed)
        print(line, flush=True)
        ok = ok and passed
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
