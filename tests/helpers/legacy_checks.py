"""Helpers of the legacy defect tests (``tests/legacy/test_legacy_defects_*.py``): random never-zero
inputs, poisoned outputs, the template's variables with its naga or bridge error, the parsed render
run on the interpreter, and comparisons.

Each defect test shows the difference: the template's render fails under naga (the message names
the problem), or its output (GPU, or the interpreter on the render parsed by ``kvdsl.frontend``)
differs from ``kvdsl.reference`` while kvdsl's kernel equals it, or the legacy bridge refuses the
variables with a ConfigError naming the variable. Inputs are random and never zero; outputs are
poisoned before every run."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp
from kvdsl import reference as ref
from kvdsl.frontend import parse
from kvdsl.ir import Binding
from kvdsl.ir.types import SCALARS
from kvdsl.kernels.config import ConfigError
from kvdsl.legacy import config_from_vars
from kvdsl.runtime import CompileError, compile_wgsl
from tests.helpers.legacy import (
    legacy_bindings,
    legacy_params_struct,
    legacy_vars,
    legacy_workgroups,
    render,
)

B, H, D = 2, 2, 8
F32 = np.float32
NAN = np.nan
BAD_INT = np.int32(-559038737)  # 0xDEADBEEF


def rnd(rng: np.random.Generator, *shape: int, dtype=F32) -> np.ndarray:
    """Random values in ±[0.5, 2): never zero, exact in f16."""
    return (rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)).astype(dtype)


def poison(shape: tuple, dtype=F32) -> np.ndarray:
    """NaN (floats) or 0xDEADBEEF (integers): an element left unwritten shows."""
    return np.full(shape, BAD_INT if np.dtype(dtype).kind == "i" else NAN, dtype)


def rotary(rng: np.random.Generator, positions: int, half: int = D // 2) -> ref.Rotary:
    """Random cos/sin tables of ``positions`` positions, ``half`` entries each."""
    ang = rng.uniform(0.1, 3.0, positions * half)
    return ref.Rotary(np.cos(ang).astype(F32), np.sin(ang).astype(F32))


def variables(mode: str, **kw) -> tuple:
    """Template variables with their bindings and params struct (H kv heads, head dim D)."""
    kw.setdefault("kv_heads", H)
    kw.setdefault("head_dim", D)
    v = legacy_vars(mode, **kw)
    return v, legacy_bindings(v), legacy_params_struct(v)


def naga_error(v: dict, bindings: tuple, struct) -> str:
    """naga's message for the template's render (the test fails if it compiles)."""
    with pytest.raises(CompileError) as err:
        compile_wgsl(render(v, bindings, struct))
    return str(err.value)


def bridge_error(v: dict) -> ConfigError:
    """The legacy bridge's refusal of ``v`` (the test fails if it accepts them)."""
    with pytest.raises(ConfigError) as err:
        config_from_vars(v)
    return err.value


def run_parsed(v: dict, bindings: tuple, struct, buffers: dict, params: dict) -> dict:
    """The template's render parsed into IR and run on the interpreter (no storage limit)."""
    kernel = parse(render(v, bindings, struct))
    return interp.run(kernel, buffers, params, legacy_workgroups(v, params))


def close(got: np.ndarray, want: np.ndarray) -> bool:
    """Same NaNs, equal elsewhere within a few f32 ulps of values around 1."""
    got, want = np.asarray(got, F32).ravel(), np.asarray(want, F32).ravel()
    same_nan = np.array_equal(np.isnan(got), np.isnan(want))
    return same_nan and bool(np.nanmax(np.abs(got - want), initial=0.0) <= 1e-5)


def with_buffers(kernel, data: dict) -> dict:
    """The arrays ``kernel`` binds, by name."""
    return {b.name: data[b.name] for b in kernel.bindings}


def with_buffers_legacy(bindings: tuple, data: dict) -> dict:
    """The arrays the template's ``bindings`` name."""
    return {b.name: data[b.name] for b in bindings}


def share_data(rng, cap, s, seqlens, positions=None) -> dict:
    """merge_share buffers: past and new K/V, ``seqlens``, poisoned present K/V (and cos/sin of
    ``positions`` positions)."""
    data = {
        "past_k": rnd(rng, B, H, cap, D),
        "past_v": rnd(rng, B, H, cap, D),
        "new_k": rnd(rng, B, s, H * D),
        "new_v": rnd(rng, B, s, H * D),
        "seqlens_k": np.array(seqlens, np.int32),
        "present_key": poison((B, H, cap, D)),
        "present_value": poison((B, H, cap, D)),
    }
    if positions:
        rot = rotary(rng, positions)
        data |= {"cos_cache": rot.cos, "sin_cache": rot.sin}
    return data


def retype(bindings: tuple, **types: str) -> tuple:
    """``bindings`` with the element types ``types`` gives by binding name."""
    return tuple(
        Binding(b.name, SCALARS[types[b.name]], b.access) if b.name in types else b
        for b in bindings
    )
