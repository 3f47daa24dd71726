"""Semantics conformance: operators, builtins and conversions at their edges, interpreter vs GPU.

Each group of cases is one tiny kernel ``out[i] = f(a0[i], a1[i], ...)`` built with the
KernelBuilder; inputs come from storage buffers so nothing is constant-folded. A group runs once
on the interpreter and once on the GPU (naga → SPIR-V → llvmpipe); every case is then its own
test comparing the two bit for bit (any NaN equals any NaN: WGSL fixes no NaN payload), and,
where the case pins a value, both against it. Ops the op table marks ``approximate`` compare
within WGSL's accuracy instead.

Where WGSL leaves a result open (``indeterminate``) the case names that and checks only the
interpreter's documented choice; the GPU's value is printed in the reason.

The cases live by operator family in ``conformance_int.py`` (integer operators),
``conformance_float.py`` (float operators and builtins) and ``conformance_convert.py``
(conversions); ``conformance_cases.py`` says what a case is.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from kvdsl import interp
from kvdsl import runtime
from kvdsl.ir import Dispatch, KernelBuilder, bool_, lit, select, u32
from tests.helpers import conformance_convert, conformance_float, conformance_int
from tests.helpers import conformance_library
from tests.helpers.conformance_cases import Group
from tests.helpers.features import allow_refusal

GROUPS = (
    conformance_int.GROUPS
    + conformance_float.GROUPS
    + conformance_convert.GROUPS
    + conformance_library.GROUPS
)

# WGSL leaves these results open; the interpreter's choice is pinned, the GPU's only reported.
OPEN = {
    ("f32_to_i32", 10): "NaN -> i32 is indeterminate in WGSL",
    ("f32_to_u32", 4): "NaN -> u32 is indeterminate in WGSL",
    ("f16_to_i32", 4): "NaN -> i32 is indeterminate in WGSL",
    ("pack2x16float", 7): "a lane past f16's finite range packs to an indeterminate u32",
    # WGSL lets an implementation assume no NaN at runtime; naga/llvmpipe then answer
    # NaN != x as false, where IEEE (and the interpreter) say true.
    ("f32_ne", 0): "NaN may be assumed absent at runtime",
    ("f32_ne", 1): "NaN may be assumed absent at runtime",
    # The same latitude, and WGSL's leave to ignore a zero's sign: on an H200 (naga and Tint
    # alike) select(a, b, a < b) runs as max(a, b), which gives 1.0 for (NaN, 1.0) and 0.0 for
    # (-0.0, 0.0) where IEEE comparisons (and the interpreter) give NaN and -0.0.
    ("f32_select", 2): "NaN may be assumed absent at runtime",
    ("f32_select", 3): "an implementation may ignore the sign of a zero",
    # WGSL lets an implementation flush a subnormal to zero: on an H100 (wgpu-native) sign of
    # 1e-40 gives 0.0; llvmpipe and the interpreter keep it (1.0).
    ("sign_f32", 4): "a subnormal may be flushed to zero",
}
#: Groups a known deviation of an implementation (tests/conftest.py) touches, by deviation.
DEVIATING = {
    "i32 %": {"i32_mod"},
    "pack norm ties": {"pack4x8unorm", "pack4x8snorm", "pack2x16unorm", "pack2x16snorm"},
}

CASES = [(g, k) for g in GROUPS for k in range(len(g.rows))]
GROUPS_BY_NAME = {g.name: g for g in GROUPS}


def _np(value, ty) -> np.ndarray:
    if ty.is_int:
        return np.array([value & 0xFFFFFFFF], np.uint32).view(ty.dtype)
    return np.array([value], ty.dtype)


@functools.cache
def _results(name: str) -> tuple[np.ndarray, np.ndarray, object]:
    g = GROUPS_BY_NAME[name]
    kb = KernelBuilder(f"conf_{name}", 64)
    ins = [kb.binding(f"a{k}", t, "read") for k, t in enumerate(g.types)]
    n = kb.param("n")
    i = kb.let("i", kb.gid.x)
    with kb.if_(i >= n):
        kb.ret()
    r = g.fn(*(buf[i] for buf in ins))
    if r.ty == bool_:
        r = select(lit(0, u32), lit(1, u32), r)
    out = kb.binding("out", r.ty, "read_write")
    out[i] = r
    kernel = kb.build(Dispatch(n.node, 64, 65535))
    buffers = {
        f"a{k}": np.concatenate([_np(inputs[k], t) for inputs, _ in g.rows])
        for k, t in enumerate(g.types)
    }
    poison = np.full(len(g.rows), 0xDEADBEEF if r.ty.is_int else np.nan, np.float64)
    buffers["out"] = (
        poison.astype(np.uint32).view(r.ty.dtype) if r.ty.is_int else poison.astype(r.ty.dtype)
    )
    params = {"n": len(g.rows)}
    got_i = interp.run(kernel, buffers, params)["out"]
    try:
        got_g = runtime.run(kernel, buffers, params)["out"]
    except runtime.FeatureError as err:  # f16 on an adapter without shader-f16: refused
        got_g = err
    return got_i, got_g, r.ty


def _same(x: np.ndarray, y: np.ndarray) -> bool:
    if x.dtype.kind == "f" and np.isnan(x) and np.isnan(y):
        return True
    bits = np.uint16 if x.dtype.itemsize == 2 else np.uint32
    return x.view(bits)[0] == y.view(bits)[0]


def _close(x: float, y: float, name: str) -> bool:
    if math.isinf(x) or math.isinf(y):
        return x == y
    # WGSL's accuracy for these builtins is a few ULP (cos/sin: absolute 2^-11 on [-pi, pi]);
    # the inverse trigonometric and hyperbolic ones 4096 ULP, or inherited from formulas of
    # those (asin from atan2, tanh from exp).
    atol = 2.0**-11 * 4 if "cos" in name else 0.0
    rel = 4096 * 2.0**-23 if name.split("_")[0] in WIDE else 4e-6
    return abs(x - y) <= atol + rel * max(abs(x), abs(y))


WIDE = {"asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "tan"}


@pytest.mark.parametrize("group,k", CASES, ids=[f"{g.name}-{k}-{g.rows[k][0]}" for g, k in CASES])
def test_case(gpu, deviations, group: Group, k: int) -> None:
    """One case: interpreter == GPU, both == the pinned value when the case has one."""
    inputs, want = group.rows[k]
    got_i, got_g, ty = _results(group.name)
    a = got_i[k : k + 1]
    what = f"{group.name}{inputs}"
    if want is not None:
        w = _np(want, ty) if ty.is_int else np.array([want], ty.dtype)
        ok = _close(float(a[0]), float(w[0]), group.name) if group.approx else _same(a, w)
        assert ok, f"{what}: interpreter gives {a[0]!r}, WGSL says {w[0]!r}"
    if isinstance(got_g, runtime.FeatureError):  # the adapter lacks the feature, and says so
        assert "shader-f16" in str(got_g) and not gpu["shader_f16"], got_g
        allow_refusal(got_g)  # only where KVDSL_EXCUSE_FEATURES excuses it
        return
    b = got_g[k : k + 1]
    if (group.name, k) in OPEN:
        return
    for deviation, why in deviations.items():
        if group.name in DEVIATING.get(deviation, ()) and not _same(a, b):
            pytest.xfail(f"{what}: GPU {b[0]!r}, interpreter {a[0]!r}: {why}")
    if group.approx:
        assert _close(
            float(a[0]), float(b[0]), group.name
        ), f"{what}: interp {a[0]!r}, GPU {b[0]!r}"
    else:
        assert _same(a, b), f"{what}: interpreter gives {a[0]!r}, GPU gives {b[0]!r}"


def test_enough_cases() -> None:
    assert len(CASES) >= 150


def test_open_cases_report_gpu(gpu) -> None:
    """The cases WGSL leaves open still run on the GPU; their values are recorded here."""
    seen = {}
    for (name, k), why in OPEN.items():
        got_i, got_g, ty = _results(name)
        seen[(name, k)] = (got_i[k], got_g if isinstance(got_g, Exception) else got_g[k])
        pinned = GROUPS_BY_NAME[name].rows[k][1]
        want = _np(pinned, ty) if ty.is_int else np.array([pinned], ty.dtype)
        assert _same(got_i[k : k + 1], want), f"{name}[{k}]: {why}; the interpreter pins {want}"
    print(seen)
