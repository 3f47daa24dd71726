"""Probe 45: an i32 max beside abs that the H200 under Dawn ran other than WGSL says.

``tests/test_exec_fuzz.py`` under Dawn on the H200 (eleventh stop) shrank a disagreement to
``vi = ~max(select(y, y, false), abs(y));`` with ``y`` negative: the GPU gave ``~y``, as if
``max(y, abs(y))`` were ``y``. This runs that expression and its neighbours, each into its own
word, over negative, zero and positive ``y``, under the implementation ``KVDSL_WEBGPU`` names,
and prints each form's words beside WGSL's (numpy: ``max`` and ``abs`` of i32, ``abs`` of the
least value wrapping to itself)::

    python benchmarks/probe45.py          # wgpu-native (naga)
    KVDSL_WEBGPU=dawn python benchmarks/probe45.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kvdsl.ir import Binding, i32  # noqa: E402
from kvdsl.runtime import adapter_info, run_source  # noqa: E402
from kvdsl.runtime.device import IMPLEMENTATION  # noqa: E402

# (name, WGSL expression of y, what WGSL says for the numpy array y)
FORMS = [
    ("abs(y)", "abs(y)", lambda y: np.abs(y)),
    ("max(y, abs(y))", "max(y, abs(y))", lambda y: np.maximum(y, np.abs(y))),
    ("max(abs(y), y)", "max(abs(y), y)", lambda y: np.maximum(np.abs(y), y)),
    (
        "max(select(y, y, false), abs(y))",
        "max(select(y, y, false), abs(y))",
        lambda y: np.maximum(y, np.abs(y)),
    ),
    ("~max(y, abs(y))", "~max(y, abs(y))", lambda y: ~np.maximum(y, np.abs(y))),
    ("max(y, -y)", "max(y, -y)", lambda y: np.maximum(y, -y)),
    ("max(y, a) (a = abs(y) loaded)", "max(y, a[i])", lambda y: np.maximum(y, np.abs(y))),
    ("min(y, abs(y))", "min(y, abs(y))", lambda y: np.minimum(y, np.abs(y))),
    ("max(y, abs(z))", "max(y, abs(z))", lambda y: np.maximum(y, np.abs(np.roll(y, 1)))),
    ("select(y, abs(y), abs(y) > y)", "select(y, abs(y), abs(y) > y)", None),
    ("abs(z)", "abs(z)", lambda y: np.abs(_z(y))),
    ("max(abs(z), y)", "max(abs(z), y)", lambda y: np.maximum(np.abs(_z(y)), y)),
    ("min(y, abs(z))", "min(y, abs(z))", lambda y: np.minimum(y, np.abs(_z(y)))),
    ("max(y, -z)", "max(y, -z)", lambda y: np.maximum(y, -_z(y))),
    ("max(y, abs(z) + 0)", "max(y, abs(z) + zero)", lambda y: np.maximum(y, np.abs(_z(y)))),
    ("max(y, abs(w)) (w = ys[i] again)", "max(y, abs(w))", lambda y: np.maximum(y, np.abs(y))),
    ("max(y, abs(z)) as u32", "i32(max(u32(y), u32(abs(z))))", None),
    ("max(y, abs(y - 1))", "max(y, abs(y - 1i))", lambda y: np.maximum(y, np.abs(y - 1))),
    ("max(z, abs(y))", "max(z, abs(y))", lambda y: np.maximum(_z(y), np.abs(y))),
    ("max(vec2(y), abs(vec2(z))).x", "max(vec2(y), abs(vec2(z))).x", None),
]


def _z(y: np.ndarray) -> np.ndarray:
    """The kernel's z: the element before y's, cyclically."""
    return np.roll(y, 1)


UNSIGNED = {"max(y, abs(z)) as u32"}
VECTOR = {"max(vec2(y), abs(vec2(z))).x"}


def main() -> int:
    info = adapter_info()
    print(f"{IMPLEMENTATION}: {info['device']} ({info['backend']}, {info['description']})")
    with np.errstate(over="ignore"):
        y = np.array([-434093534, -1, -7, 0, 5, -(2**31), 2**31 - 1, -123456789], np.int32)
        n = len(y)
        a = np.abs(y)
        body = "\n".join(
            f"  out[i * {len(FORMS)}u + {j}u] = {e};" for j, (_, e, _) in enumerate(FORMS)
        )
        wgsl = (
            "@group(0) @binding(0) var<storage, read> ys: array<i32>;\n"
            "@group(0) @binding(1) var<storage, read> a: array<i32>;\n"
            "@group(0) @binding(2) var<storage, read_write> out: array<i32>;\n"
            "@compute @workgroup_size(64)\n"
            "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
            f"  let i = gid.x;\n  if (i >= {n}u) {{ return; }}\n"
            f"  let y = ys[i];\n  let z = ys[(i + {n - 1}u) % {n}u];\n  let w = ys[i];\n"
            f"  let zero = i32(i / 1000u);\n{body}\n}}\n"
        )
        bindings = (
            Binding("ys", i32, "read"),
            Binding("a", i32, "read"),
            Binding("out", i32, "read_write"),
        )
        buffers = {"ys": y, "a": a, "out": np.full(n * len(FORMS), 0x5EED, np.int32)}
        got = run_source(wgsl, bindings, None, buffers, None, (1, 1, 1))["out"]
        got = got.reshape(n, len(FORMS))
        bad = 0
        for j, (name, _, want_of) in enumerate(FORMS):
            if name in UNSIGNED:
                want = np.maximum(y.view(np.uint32), np.abs(_z(y)).view(np.uint32)).view(np.int32)
            elif name in VECTOR:
                want = np.maximum(y, np.abs(_z(y)))
            else:
                want = want_of(y) if want_of else np.where(np.abs(y) > y, np.abs(y), y)
            ok = np.array_equal(got[:, j], want.astype(np.int32))
            bad += not ok
            print(f"  {'ok ' if ok else 'BAD'} {name:36s} GPU {got[:, j].tolist()}")
            if not ok:
                print(f"      {'':36s} WGSL {want.astype(np.int32).tolist()}")
    print(f"y = {y.tolist()}; {bad} of {len(FORMS)} forms differ from WGSL")
    return 0


if __name__ == "__main__":
    sys.exit(main())
