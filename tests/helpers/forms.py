"""The frame of the runtime-form tests (``tests/frontend/test_runtime_forms.py``,
``test_tint_takes.py``, ``test_tint_takes_interface.py``, ``test_tint_verdicts.py``,
``test_feature_formats_and_extensions.py``): modules that read ``a``, random non-zero u32s, and
write ``out``, poisoned before each run, one word (or ``lanes``) per invocation."""

from __future__ import annotations

import numpy as np

N = 128
POISON = 0xDEADBEEF
GROUPS = (N // 64, 1, 1)
ENTRY = "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"


def head(out: str = "u32") -> str:
    """The bindings: ``a`` (read) and ``out`` of element type ``out``."""
    return (
        "@group(0) @binding(0) var<storage, read> a: array<u32>;\n"
        f"@group(0) @binding(1) var<storage, read_write> out: array<{out}>;\n"
    )


HEAD = head()


def kernel(body: str, helpers: str = "", out: str = "u32") -> str:
    """The module of ``body`` in the entry point (after ``let i = gid.x;``), ``helpers`` between
    the bindings and it."""
    return head(out) + helpers + ENTRY + "  let i = gid.x;\n" + body + "\n}\n"


def inputs(seed: int) -> np.ndarray:
    """``a``: N random u32s from 1 to 2**20 - 1."""
    return np.random.default_rng(seed).integers(1, 1 << 20, N, dtype=np.uint32)


def run_form(text: str, name: str, run, a: np.ndarray, groups=GROUPS, lanes: int = 1) -> np.ndarray:
    """``out`` after ``run`` (a backend's) runs ``text`` (read as ``name``.wgsl) over ``a``."""
    from kvdsl.frontend import parse

    k = parse(text, f"{name}.wgsl")
    out = np.full(N if lanes == 1 else (N, lanes), POISON, np.uint32)
    return run(k, {"a": a, "out": out}, {}, groups)["out"]


def assert_form_runs_as_numpy_says(
    text: str, name: str, want, backend: str, request, seed: int, groups=GROUPS, **how
) -> None:
    """``text`` prints back to the same IR, and ``out`` after ``backend`` ("interp" or "gpu")
    runs it over ``inputs(seed)`` is ``want(a)``. ``how`` may give ``lanes`` (as
    :func:`run_form` takes it) and ``wide``: a numpy type ``want`` is given ``a`` as, its values
    then taken modulo 2**32 (none: ``want`` is given the u32s and its values compared as they
    are)."""
    from tests.helpers.backends import backend_run
    from tests.helpers.wgsl import printed_back

    wide, lanes = how.get("wide"), how.get("lanes", 1)
    printed_back(text)
    a = inputs(seed)
    got = run_form(text, name, backend_run(backend, request), a, groups, lanes)
    if wide is not None:
        want_a = (want(a.astype(wide)) & 0xFFFFFFFF).astype(np.uint32)
    else:
        want_a = want(a)
    np.testing.assert_array_equal(got, want_a)
