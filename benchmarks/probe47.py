"""Probe 47 (H200): a bool select over short-circuit operators under Dawn.

Run 75's generated integer kernels met, under Dawn on an H200, a kernel the fuzz shrank to
``vb = select((-1i < m && vb), m >= 0i || vb, vb);``: for ``vb`` true and ``m`` i32's least
value WGSL gives ``m >= 0i || vb``, true, and the GPU stored false. This probe runs that
statement and variations (the operators without short-circuit, the arms in lets, the select
written as an if, other comparisons) on every invocation of inputs with ``m`` negative, zero
and positive and ``vb`` both ways, each against the interpreter, and prints which forms differ.
Run it under both implementations (``KVDSL_WEBGPU=dawn``).

    python benchmarks/probe47.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvdsl.frontend import parse  # noqa: E402
from kvdsl.interp import run as interp_run  # noqa: E402
from kvdsl.runtime import adapter_info, run  # noqa: E402

FORMS = {
    "shrunk": "vb = select((-1i < m && vb), m >= 0i || vb, vb);",
    "no short-circuit": "vb = select((-1i < m) & vb, (m >= 0i) | vb, vb);",
    "arms in lets": "let f = -1i < m && vb;\n  let t = m >= 0i || vb;\n  vb = select(f, t, vb);",
    "if": "if (vb) { vb = m >= 0i || vb; } else { vb = -1i < m && vb; }",
    "t arm only": "vb = select(false, m >= 0i || vb, vb);",
    "f arm only": "vb = select(-1i < m && vb, true, vb);",
    "let result": "let r = select((-1i < m && vb), m >= 0i || vb, vb);\n  vb = r;",
    "u32 select": "vb = select(0u, 1u, select((-1i < m && vb), m >= 0i || vb, vb)) == 1u;",
    "m > -1": "vb = select((m > -1i && vb), m >= 0i || vb, vb);",
    "y, not m": "vb = select((-1i < y && vb), y >= 0i || vb, vb);",
    # Second call: which parts matter.
    "let c, not var": "let c = vb;\n  vb = select((-1i < m && c), m >= 0i || c, c);",
    "t independent": "vb = select((-1i < m && vb), m >= 0i, vb);",
    "f independent": "vb = select(-1i < m, m >= 0i || vb, vb);",
    "both independent": "vb = select(-1i < m, m >= 0i, vb);",
    "other bool in arms": "let d = z == 1u;\n  vb = select((-1i < m && d), m >= 0i || d, vb);",
    "c first": "vb = select((vb && -1i < m), vb || m >= 0i, vb);",
    "and/and": "vb = select((-1i < m && vb), m >= 0i && vb, vb);",
    "or/or": "vb = select((-1i < m || vb), m >= 0i || vb, vb);",
    "not c": "vb = select((-1i < m && !vb), m >= 0i || !vb, !vb);",
    "u32 arms": "vb = select(u32(-1i < m) & u32(vb), u32(m >= 0i) | u32(vb), vb) == 1u;",
    "i32 arms": "vb = select(i32(vb) * 3i, i32(vb) + 5i, vb) == 6i;",
}


def source(stmt: str) -> str:
    return f"""@group(0) @binding(0) var<storage, read> inp: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {{
  let x = inp[gid.x];
  let y = i32(inp[gid.x + 128u]);
  let z = (x >> 3u) & 1u;
  let m = select(y, i32(2147483648u), z == 0u);
  var vb: bool = (x & 1u) == 0u;
  {stmt}
  out[gid.x] = select(7u, 9u, vb);
}}
"""


def main() -> None:
    info = adapter_info()
    print(f"{info['implementation']}: {info['device']}", flush=True)
    rng = np.random.default_rng(75)
    inp = rng.integers(0, 2**32, 256, dtype=np.uint64).astype(np.uint32)
    inp[128:160] = np.array([0, 1, 2**31, 2**32 - 1] * 8, np.uint32)  # y: 0, 1, MIN, -1
    for name, stmt in FORMS.items():
        k = parse(source(stmt))
        bufs = {"inp": inp, "out": np.full(128, 0xDEADBEEF, np.uint32)}
        want = interp_run(k, dict(bufs), None, (2, 1, 1))["out"]
        got = run(k, dict(bufs), None, (2, 1, 1))["out"]
        bad = np.flatnonzero(got != want)
        print(f"{name:<18} {len(bad):3d} of 128 differ" + (f"; first {bad[0]}" if len(bad) else ""))


if __name__ == "__main__":
    main()
