"""Names WGSL allows: a declaration may take a builtin function's name, at module, function or
block scope. Within the declaration's scope the name is the declaration's (a module function's in
the whole module); outside it, and in the declaration's own initialiser, the builtin is still
called. Every builtin of the op table is shadowed at each scope; the kernels run on the
interpreter and on the GPU to what numpy says, and naga and Tint take them. Calling a builtin
where a value takes its name is refused, as Tint refuses it: the conformance cases
``tests/frontend/cases/shadowed_builtins/``."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import parse
from kvdsl.ir.scope import BUILTIN_FUNCTIONS
from tests.helpers.wgsl import refused_by_compilers

NAMES = sorted(BUILTIN_FUNCTIONS)
N = 64

HEAD = "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"
ENTRY = "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"

# Each builtin's name as a module-scope const, read in the entry point.
MODULE = (
    HEAD
    + "".join(f"const {n} = {k + 1}u;\n" for k, n in enumerate(NAMES))
    + ENTRY
    + "  var s = gid.x;\n"
    + "".join(f"  s = s * 3u + {n};\n" for n in NAMES)
    + "  out[gid.x] = s;\n}\n"
)

# Each as a helper's parameter or let; a helper named as a builtin (declared after its caller's
# entry point is no matter: module scope) takes the calls of that name in the whole module.
FUNCTION = (
    HEAD
    + ENTRY
    + "  out[gid.x] = lets(gid.x) + min(gid.x, 5u, 9u) + clamp(gid.x, 3u);\n}\n"
    + "fn lets(x: u32) -> u32 {\n  var s = x;\n"
    + "".join(f"  let {n} = x * {k + 2}u;\n  s = s * 5u + {n};\n" for k, n in enumerate(NAMES))
    + "  return s;\n}\n"
    + "fn clamp(select: u32, max: u32) -> u32 {\n  return select * max + 1u;\n}\n"
    + "fn min(a: u32, b: u32, c: u32) -> u32 {\n  return a * b + c;\n}\n"
)

# Each as a block's let, its initialiser calling the builtin it shadows (WGSL's scope of a
# declaration starts after it), and the builtin called again after the block.
BLOCK = (
    HEAD
    + ENTRY
    + "  var s = gid.x;\n"
    + "".join(
        f"  {{\n    let {n} = s + {k + 1}u;\n    s = s * 7u + {n};\n  }}\n"
        for k, n in enumerate(NAMES)
    )
    + "  {\n    let max = max(s, 3u);\n    var min = max ^ 5u;\n    min += 1u;\n    s = min;\n  }\n"
    + "  out[gid.x] = max(s, 1u) - min(s, 0u);\n}\n"
)


def _module_numpy(gid: np.ndarray) -> np.ndarray:
    s = gid.astype(np.uint32)
    for k in range(len(NAMES)):
        s = s * np.uint32(3) + np.uint32(k + 1)
    return s


def _function_numpy(gid: np.ndarray) -> np.ndarray:
    x = gid.astype(np.uint32)
    s = x.copy()
    for k in range(len(NAMES)):
        s = s * np.uint32(5) + x * np.uint32(k + 2)
    return s + (x * np.uint32(5) + np.uint32(9)) + (x * np.uint32(3) + np.uint32(1))


def _block_numpy(gid: np.ndarray) -> np.ndarray:
    s = gid.astype(np.uint32)
    for k in range(len(NAMES)):
        s = s * np.uint32(7) + (s + np.uint32(k + 1))
    s = (np.maximum(s, np.uint32(3)) ^ np.uint32(5)) + np.uint32(1)
    return np.maximum(s, np.uint32(1))


CASES = {"module": (MODULE, _module_numpy), "function": (FUNCTION, _function_numpy)}
CASES["block"] = (BLOCK, _block_numpy)


def test_every_builtin_of_the_op_table_is_shadowed():
    assert len(NAMES) >= 90 and {"min", "max", "select", "step", "clamp"} <= set(NAMES)
    for text, _ in CASES.values():
        assert all(f" {n} " in text for n in NAMES)


@pytest.mark.parametrize("scope", CASES)
def test_shadowing_kernels_print_back_and_run_on_the_interpreter_as_numpy_says(scope):
    text, want = CASES[scope]
    k = parse(text, f"{scope}.wgsl")
    assert parse(emit(k), f"{scope}.wgsl") == k
    got = interp.run(k, {"out": np.full(N, 0xDEADBEEF, np.uint32)}, {}, (1, 1, 1))["out"]
    np.testing.assert_array_equal(got, want(np.arange(N)))


def test_naga_and_tint_take_the_shadowing_kernels():
    assert refused_by_compilers({scope: text for scope, (text, _) in CASES.items()}) == {}


@pytest.mark.parametrize("scope", CASES)
def test_shadowing_kernels_on_the_gpu_are_what_numpy_says(scope, gpu):
    text, want = CASES[scope]
    k = parse(text, f"{scope}.wgsl")
    got = runtime.run(k, {"out": np.full(N, 0xDEADBEEF, np.uint32)}, {}, (1, 1, 1))["out"]
    np.testing.assert_array_equal(got, want(np.arange(N)))
