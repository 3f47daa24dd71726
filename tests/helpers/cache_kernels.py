"""Backends, inputs and comparisons of the KV-cache kernel tests (``tests/kernels/test_merge.py``,
``tests/kernels/test_window_shift.py``) and the fused QKV kernels' bit views: outputs are poisoned with NaN before each run; copies
and conversions of equal types are compared bit for bit, rotated K within a few ulps."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import reference as ref

DT = {"f32": np.float32, "f16": np.float16}
#: The merge and window_shift tests' (kv_heads, head_dim): HALF 4, odd HALF 3, a real head.
SHAPES = [(1, 8), (3, 6), (2, 64)]
#: Their (present_type, input_type).
TYPES = [("f32", "f32"), ("f16", "f16"), ("f16", "f32")]


def bits(a: np.ndarray) -> np.ndarray:
    """``a``'s elements as unsigned integers of their own width (bit-for-bit comparisons)."""
    return a.view(f"u{a.itemsize}")


def fused_and_chained(cfg, kernel, chain, run, seed: int = 5):
    """For each of 3 harness cases of ``cfg``: the case, the fused ``kernel``'s outputs and the
    unfused ``chain``'s (``chain(cfg, buffers, params, run)``), both run by ``run``, having
    asserted they write the same bindings."""
    from kvdsl.harness import cases_for

    for case in cases_for(cfg, 3, seed=seed):
        fused = run(kernel, dict(case.buffers), case.params)
        chained = chain(cfg, case.buffers, case.params, run)
        assert set(fused) == set(chained)
        yield case, fused, chained


def assert_same_bits(case, out: str, got: np.ndarray, want: np.ndarray) -> None:
    """``got`` equals ``want`` bit for bit; else the case, the binding and how many differ."""
    same = bits(got) == bits(want)
    assert same.all(), f"{case.label()} {out}: {int((~same).sum())} elements differ"


def _backends() -> list:
    """The GPU and the interpreter: both always run (an interpreter that fails to import is an
    error, not a reason to drop its cases)."""
    from kvdsl.interp import run as interp_run
    from kvdsl.runtime import run as gpu_run

    return [pytest.param(gpu_run, id="gpu"), pytest.param(interp_run, id="interp")]


BACKENDS = _backends()


def nonzero(rng: np.random.Generator, shape: tuple, dtype) -> np.ndarray:
    """Random values in ±[0.5, 2): never zero, exact in f16."""
    x = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    return x.astype(dtype)


def poison(shape: tuple, dtype) -> np.ndarray:
    return np.full(shape, np.nan, dtype)


def rotary_tables(rng: np.random.Generator, positions: int, half: int) -> ref.Rotary:
    """cos/sin of random non-zero angles, ``positions * half`` f32 each."""
    ang = rng.uniform(0.1, 3.0, positions * half).astype(np.float32)
    return ref.Rotary(np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32))


def past_and_new(rng, heads, head_dim, cap, key, seqlens, cache: str, inp: str) -> dict:
    """The buffers of a kernel that writes a batch's new K and V rows into a cache of its past
    (``merge_share``, ``window_shift``), one sequence for each of ``seqlens``: ``past_k`` and
    ``past_v`` [batch, heads, cap, head_dim] of the type ``cache`` names, ``new_k`` and ``new_v``
    [batch, key, heads * head_dim] of the type ``inp`` names, random and non-zero; and
    ``seqlens_k``."""
    b = len(seqlens)
    return {
        "past_k": nonzero(rng, (b, heads, cap, head_dim), DT[cache]),
        "past_v": nonzero(rng, (b, heads, cap, head_dim), DT[cache]),
        "new_k": nonzero(rng, (b, key, heads * head_dim), DT[inp]),
        "new_v": nonzero(rng, (b, key, heads * head_dim), DT[inp]),
        "seqlens_k": np.array(seqlens, np.int32),
    }


def run_into_present(run, kernel, region: str, data: dict, rot, present_k, present_v) -> tuple:
    """``present_key`` and ``present_value`` after ``run`` runs ``kernel`` (of the region
    ``region``: "append" writes a row for each new token, any other each cached position) over
    the buffers of ``data`` (:func:`past_and_new`) it binds, the rotary tables ``rot`` where it
    binds them, and ``present_k`` and ``present_v``."""
    b, heads, cap, _ = data["past_k"].shape
    key = data["new_k"].shape[1]
    names = {bd.name for bd in kernel.bindings}
    bufs = {n: a.ravel() for n, a in data.items() if n in names}
    if "cos_cache" in names:
        bufs |= {"cos_cache": rot.cos, "sin_cache": rot.sin}
    bufs |= {"present_key": present_k.ravel(), "present_value": present_v.ravel()}
    rows = b * heads * (key if region == "append" else cap)
    out = run(kernel, bufs, {"count": rows, "seq": cap, "keySeq": key})
    return out["present_key"], out["present_value"]


def assert_bits(got: np.ndarray, want: np.ndarray) -> None:
    """Bit-exact equality (NaN poison included)."""
    want = np.asarray(want, got.dtype).reshape(got.shape)
    ints = {2: np.uint16, 4: np.uint32}[got.dtype.itemsize]
    bad = got.view(ints) != want.view(ints)
    assert not bad.any(), f"{bad.sum()} of {bad.size} differ, first at {np.argwhere(bad)[0]}"


def assert_close(got: np.ndarray, want: np.ndarray, ulps: int = 4) -> None:
    """Same NaN (poison) positions; elsewhere within ``ulps`` of the values' scale (about 4)."""
    want = np.asarray(want, got.dtype).reshape(got.shape)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    tol = ulps * np.finfo(got.dtype).eps * 4.0
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert np.nanmax(diff, initial=0.0) <= tol, f"max diff {np.nanmax(diff)} > {tol}"
