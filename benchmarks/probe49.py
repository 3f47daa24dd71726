"""Probe 49 (H200): an i32 abs taken as never negative, and an i32 loop sum that overflows.

The integer fuzz at length (``tests/test_exec_fuzz.py``, fourteenth stop, run 85) met two
kernels whose words the H200 computed other than WGSL says:

- under wgpu-native, ``let l4 = abs(-1i << r); if (0i < l4) { return 0i; } return l4;`` in a
  helper, with ``r`` 63: ``-1i << 63u`` is i32's least value (WGSL shifts by ``r % 32``),
  whose ``abs`` is itself (WGSL), so ``0i < l4`` is false; the GPU returned 0i, as if ``abs``
  could not be negative;
- under Dawn, ``var acc3: i32 = 2147483647i; for (k4 < 2u) { acc3 += i32(-2147483648); }``
  in a helper: the sum wraps to 2147483647 (WGSL's i32 arithmetic wraps at run time); the GPU
  left i32's least value there.

This runs each shape and its neighbours (in ``main`` or a helper, constants or values read at
run time, other comparisons, trip counts and types), each in a module of its own, on inputs
holding i32's least value, -1, 0, 1 and shift amounts past 31, against the interpreter, and
prints which forms differ. Run it under both implementations (``KVDSL_WEBGPU=dawn``)::

    python benchmarks/probe49.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvdsl.frontend import parse  # noqa: E402
from kvdsl.interp import run as interp_run  # noqa: E402
from kvdsl.runtime import adapter_info, run  # noqa: E402

MIN = "i32(-2147483648)"

# name -> (helpers, statements in main). main has x (u32), y (i32), m (y or i32's least value),
# vi, vb, vu vars; it stores vi, vb and vu.
ABS = {
    "fuzz shape (helper)": (
        "fn h(r: u32) -> i32 {\n  let l = abs(-1i << r);\n"
        "  if (0i < l) {\n    return 0i;\n  }\n  return l;\n}\n",
        "vi ^= h(vu);",
    ),
    "fuzz shape in main": (
        "",
        "let l = abs(-1i << vu);\n  if (0i < l) { vi = 0i; } else { vi ^= l; }",
    ),
    "0 < abs(m)": ("", "vb = 0i < abs(m);"),
    "abs(m) > 0": ("", "vb = abs(m) > 0i;"),
    "abs(m) >= 0": ("", "vb = abs(m) >= 0i;"),
    "abs(m) < 0": ("", "vb = abs(m) < 0i;"),
    "abs(m) != 0 (control)": ("", "vb = abs(m) != 0i;"),
    "select(1, 2, abs(m) < 0)": ("", "vi = select(1i, 2i, abs(m) < 0i);"),
    "abs(m) >> 31": ("", "vi = abs(m) >> 31u;"),
    "abs(m) / 2": ("", "vi = abs(m) / 2i;"),
    "min(abs(m), 0)": ("", "vi = min(abs(m), 0i);"),
    "u32(abs(m)) > 0x7fffffff (control)": ("", "vb = u32(abs(m)) > 2147483647u;"),
    "abs(vec2(m)).x < 0": ("", "vb = abs(vec2<i32>(m, y)).x < 0i;"),
    "hand abs: select(-m, m, m >= 0) < 0": ("", "vb = select(-m, m, m >= 0i) < 0i;"),
    "-1 << vu, no abs, 0 < it (control)": ("", "vb = 0i < (-1i << vu);"),
    "abs(m) in a var, then < 0": ("", "var a = abs(m);\n  vb = a < 0i;"),
    "abs(m) < 0 in a helper": ("fn h(v: i32) -> bool {\n  return abs(v) < 0i;\n}\n", "vb = h(m);"),
}

LOOP = {
    "fuzz shape (helper)": (
        "fn h(q: bool) -> i32 {\n  var acc: i32 = 2147483647i;\n"
        f"  for (var k: u32 = 0u; k < 2u; k += 1u) {{\n    acc += {MIN};\n  }}\n"
        "  if (q) {\n    return 0i;\n  }\n  return ~acc + 0i;\n}\n",
        "vi ^= h(vb);",
    ),
    "in main": (
        "",
        "var acc: i32 = 2147483647i;\n"
        f"  for (var k: u32 = 0u; k < 2u; k += 1u) {{ acc += {MIN}; }}\n  vi ^= ~acc;",
    ),
    "1 trip": (
        "",
        f"var acc: i32 = 2147483647i;\n  for (var k: u32 = 0u; k < 1u; k += 1u) {{ acc += {MIN}; }}\n"
        "  vi ^= acc;",
    ),
    "3 trips": (
        "",
        f"var acc: i32 = 2147483647i;\n  for (var k: u32 = 0u; k < 3u; k += 1u) {{ acc += {MIN}; }}\n"
        "  vi ^= acc;",
    ),
    "+1, 3 trips from MAX - 1": (
        "",
        "var acc: i32 = 2147483646i;\n  for (var k: u32 = 0u; k < 3u; k += 1u) { acc += 1i; }\n"
        "  vi ^= acc;",
    ),
    "-1, 2 trips from MIN": (
        "",
        f"var acc: i32 = {MIN};\n  for (var k: u32 = 0u; k < 2u; k += 1u) {{ acc -= 1i; }}\n"
        "  vi ^= acc;",
    ),
    "*65536, 2 trips from 3": (
        "",
        "var acc: i32 = 3i;\n  for (var k: u32 = 0u; k < 2u; k += 1u) { acc *= 65536i; }\n"
        "  vi ^= acc;",
    ),
    "step read at run time (m)": (
        "",
        "var acc: i32 = 2147483647i;\n  for (var k: u32 = 0u; k < 2u; k += 1u) { acc += m; }\n"
        "  vi ^= acc;",
    ),
    "start read at run time (y)": (
        "",
        f"var acc: i32 = y;\n  for (var k: u32 = 0u; k < 2u; k += 1u) {{ acc += {MIN}; }}\n"
        "  vi ^= acc;",
    ),
    "trips read at run time (x & 3)": (
        "",
        "var acc: i32 = 2147483647i;\n"
        f"  for (var k: u32 = 0u; k < (x & 3u); k += 1u) {{ acc += {MIN}; }}\n  vi ^= acc;",
    ),
    "u32 (control)": (
        "",
        "var acc: u32 = 2147483647u;\n"
        "  for (var k: u32 = 0u; k < 2u; k += 1u) { acc += 2147483648u; }\n  vu ^= acc;",
    ),
    "unrolled (control)": (
        "",
        f"var acc: i32 = 2147483647i;\n  acc += {MIN};\n  acc += {MIN};\n  vi ^= acc;",
    ),
    "no overflow (control)": (
        "",
        "var acc: i32 = 5i;\n  for (var k: u32 = 0u; k < 2u; k += 1u) { acc += 7i; }\n  vi ^= acc;",
    ),
    "loop + break": (
        "",
        "var acc: i32 = 2147483647i;\n  var k: u32 = 0u;\n"
        f"  loop {{\n    if (k >= 2u) {{ break; }}\n    acc += {MIN};\n    k += 1u;\n  }}\n  vi ^= acc;",
    ),
    "i32 counter": (
        "",
        "var acc: i32 = 2147483647i;\n"
        f"  for (var k: i32 = 0i; k < 2i; k += 1i) {{ acc += {MIN}; }}\n  vi ^= acc;",
    ),
    "step 0x40000000, 4 trips from 1": (
        "",
        "var acc: i32 = 1i;\n"
        "  for (var k: u32 = 0u; k < 4u; k += 1u) { acc += 1073741824i; }\n  vi ^= acc;",
    ),
    "step 0x40000000, 2 trips from MAX": (
        "",
        "var acc: i32 = 2147483647i;\n"
        "  for (var k: u32 = 0u; k < 2u; k += 1u) { acc += 1073741824i; }\n  vi ^= acc;",
    ),
}

# Second call: run 86's wgpu-native fuzz met ``w2 /= vec2<i32>(0i, -1i);``, which naga takes and
# Tint refuses (a division by a constant 0: not WGSL; the verifier now refuses it too), and the
# GPU ran it otherwise than the interpreter. The same divisions by values known only at run
# time are WGSL (a division by 0, or of the least value by -1, gives the left operand):
#: (0, -1), which the driver can fold and WGSL does not call constant.
FOLDED_D = "let d = vec2<i32>(i32(x >> 31u) * 0i, i32(x >> 31u) * 0i - 1i);\n  "
DIV = {
    "w2 /= d, d = (0, -1) at run time": (
        "",
        FOLDED_D + "var w2 = vec2<i32>(y, m);\n  w2 /= d;\n  vi = w2.x ^ w2.y;",
    ),
    "w2 / d, .y": (
        "",
        FOLDED_D + "vi = (vec2<i32>(y, m) / d).y;",
    ),
    "w2 % d": (
        "",
        FOLDED_D + "vi = (vec2<i32>(y, m) % d).x;",
    ),
    "w2 / vec2(1, -1)": ("", "vi = (vec2<i32>(y, m) / vec2<i32>(1i, -1i)).y;"),
    "w2 / vec2(-1, -1)": ("", "vi = (vec2<i32>(y, m) / vec2<i32>(-1i, -1i)).y;"),
    "m / -1 (scalar)": ("", "vi = m / -1i;"),
    "m / 0 at run time (scalar)": ("", "vi = m / (0i * y);"),
    "vec2<u32> / (0, 1) at run time": (
        "",
        "vu = (vec2<u32>(x, vu) / vec2<u32>((x >> 31u) >> 1u, 1u)).x;",
    ),
}

# Third call: run 87's wgpu-native fuzz met ``v2 += v2 / vec2<u32>(select(vec2<i32>(0i, 0i),
# vec2<i32>(0i, -1i), vb));`` (fuzz87-native.wgsl): for vb true 31u / 4294967295u is 0u, and
# the GPU gave 1u, as if the divisor were 1u. Divisions by a select of constants:
SEL = {
    "fuzz shape": (
        "",
        "var v2 = vec2<u32>(x, 31u);\n"
        "  v2 += v2 / vec2<u32>(select(vec2<i32>(0i, 0i), vec2<i32>(0i, -1i), vb));\n"
        "  vu = v2.y;",
    ),
    "u32 arms": (
        "",
        "let v2 = vec2<u32>(x, 31u) / select(vec2<u32>(0u), vec2<u32>(0u, 4294967295u), vb);\n"
        "  vu = v2.y;",
    ),
    "scalar, 0 or MAX": ("", "vu = vu / select(0u, 4294967295u, vb);"),
    "scalar, 0 or 3": ("", "vu = vu / select(0u, 3u, vb);"),
    "scalar, 1 or MAX (no 0)": ("", "vu = vu / select(1u, 4294967295u, vb);"),
    "i32, 0 or -1": ("", "vi = m / select(0i, -1i, vb);"),
    "if instead of select": ("", "var d = 0u;\n  if (vb) { d = 4294967295u; }\n  vu = vu / d;"),
    "divisor loaded (control)": ("", "vu = vu / (inp[gid.x + 128u] | 1u);"),
}

# The run-85 Dawn kernel (fuzz85-dawn.wgsl), each edit applied to its text on its own.
DAWN_EDITS = {
    "as drawn": [],
    "no h0 call": [("  vu ^= h0(x, y);\n", "")],
    "no if (q)": [("  if (q) {\n    return 0i;\n  }\n", "")],
    "return ~acc3": [("return ~acc3 + 0i;", "return ~acc3;")],
    "unrolled": [
        (
            "  for (var k4: u32 = 0u; k4 < 2u; k4 += 1u) {\n    acc3 += i32(-2147483648);\n  }",
            "  acc3 += i32(-2147483648);\n  acc3 += i32(-2147483648);",
        )
    ],
    "only slot 1 stored": [
        ("  out[gid.x * 8u + 0u] = vu;\n", ""),
        ("  out[gid.x * 8u + 2u] = select(7u, 9u, vb);\n", ""),
    ],
    "h0 returns 0u at once": [
        (
            "  var acc1: u32 = 0u;\n  for (var k2: u32 = 0u; k2 < 0u; k2 += 1u) {\n"
            "    acc1 = 0u;\n  }\n  if (false) {\n    return 0u;\n  }\n",
            "",
        )
    ],
}


def source(helpers: str, stmts: str) -> str:
    return f"""@group(0) @binding(0) var<storage, read> inp: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

{helpers}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {{
  let x = inp[gid.x];
  let y = i32(inp[gid.x + 128u]);
  let z = (x >> 3u) & 1u;
  let m = select(y, i32(2147483648u), z == 0u);
  var vi: i32 = y;
  var vb: bool = (x & 1u) == 0u;
  var vu: u32 = x ^ 31u;
  {stmts}
  out[gid.x * 3u] = u32(vi);
  out[gid.x * 3u + 1u] = select(7u, 9u, vb);
  out[gid.x * 3u + 2u] = vu;
}}
"""


def differ(text: str, inp: np.ndarray, words: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The words a kernel's GPU run and its interpreter run differ in: (indices, GPU, WGSL)."""
    k = parse(text)
    bufs = {"inp": inp, "out": np.full(128 * words, 0xDEADBEEF, np.uint32)}
    params = {"n": 0x1F} if "params" in text else None
    want = interp_run(k, dict(bufs), params, (2, 1, 1))["out"]
    got = run(k, dict(bufs), params, (2, 1, 1))["out"]
    return np.flatnonzero(got != want), got, want


def main() -> None:
    info = adapter_info()
    print(f"{info['implementation']}: {info['device']} ({info['description']})", flush=True)
    rng = np.random.default_rng(49)
    inp = rng.integers(0, 2**32, 256, dtype=np.uint64).astype(np.uint32)
    inp[:64] = np.arange(64, dtype=np.uint32)  # x ^ 31: every shift amount 0-63, z both ways
    inp[128:160] = np.array([2**31, 2**32 - 1, 0, 1] * 8, np.uint32)  # y: MIN, -1, 0, 1
    total = 0
    for family, forms in (("abs", ABS), ("loop", LOOP), ("div", DIV), ("sel", SEL)):
        for name, (helpers, stmts) in forms.items():
            bad, got, want = differ(source(helpers, stmts), inp, 3)
            total += bool(len(bad))
            line = f"{family:4} {name:<38} {len(bad):3d} of 384 differ"
            if len(bad):
                i = bad[0]
                line += f"; first word {i}: GPU {got[i]:#x}, WGSL {want[i]:#x}"
            print(line, flush=True)
    here = Path(__file__).resolve().parent / "results" / "h200"
    for f in ("fuzz85-native.wgsl", "fuzz85-dawn.wgsl", "fuzz87-native.wgsl"):  # as drawn
        bad = differ((here / f).read_text(), inp, 8)[0]
        total += bool(len(bad))
        print(f"fuzz {f:<38} {len(bad):3d} of 1024 differ", flush=True)
    base = (here / "fuzz85-dawn.wgsl").read_text()
    for name, edits in DAWN_EDITS.items():
        text = base
        for old, new in edits:
            assert old in text, old
            text = text.replace(old, new)
        bad = differ(text, inp, 8)[0]
        total += bool(len(bad))
        print(f"dawn {name:<38} {len(bad):3d} of 1024 differ", flush=True)
    forms = len(ABS) + len(LOOP) + len(DIV) + len(SEL) + 3 + len(DAWN_EDITS)
    print(f"{total} of {forms} forms differ")


if __name__ == "__main__":
    main()
