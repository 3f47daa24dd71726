"""The verifier's rules for constant operands against Tint's, on generated kernels.

WGSL refuses, when it compiles, an integer division or remainder by a constant 0 (a vector's
component too), i32's least value over the constant -1, a shift by a constant 32 or more and a
constant left shift that overflows; the verifier refuses the same (``kvdsl/ir/verify.py``,
``docs/errors.md``), a compound assignment's vector divisor too (``w2 /= vec2<i32>(0i, -1i)``, which
naga takes and Tint refuses). Here each generated kernel holds one division, remainder or shift, as
an operator or a compound assignment, of a run-time or constant left operand by a constant right
one, or a ``clamp`` with constant bounds, or a constant index into a vector, its constants built of
edge literals, module consts, arithmetic, conversions, negations, splats, swizzles, ``select`` on a
literal and the integer builtins the verifier folds; the verifier takes or refuses it, and Tint
(Dawn's compiler, through wgpudawn's Null backend) must say the same.
A constant ``+``, ``-``, ``*`` or negation past its type's range wraps, as WGSL says and
Tint and wgpu-native 0.32's naga do (``CM * 2i`` is 0i, so ``x / (CM * 2i)`` is refused).
The float half does the same for float constants (f32, f16, vectors of them, integers of
them) through arithmetic, builtins, ``fma``, ``clamp``, conversions and selects: Tint refuses a
step past the type's largest value even where it would round down to it, and computes ``%``
in f32; WGSL lets an implementation round an f16 value either way (Tint rounds toward zero),
so the f16 values drawn keep away from f16's largest, and no f16 ``clamp`` is drawn (its
bounds may compare either way after an inexact step). ``KVDSL_CONSTANT_KERNELS`` sets how many
of each (400; random seeds when set).
"""

from __future__ import annotations

import os
import random
import re

import pytest

from kvdsl.frontend import parse
from kvdsl.frontend.errors import WgslTypeError
from kvdsl.runtime import tint_check

HEAD = """const CZ: u32 = 0u;
const CB: u32 = 33u;
const CN: i32 = -1i;
const CM: i32 = i32(-2147483648);

@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let ru = out[gid.x];
  let ri = i32(ru);
"""

EDGES = {
    "u32": ["0u", "1u", "2u", "31u", "32u", "33u", "4294967295u", "2147483648u", "CZ", "CB"],
    "i32": ["0i", "1i", "-1i", "2i", "31i", "32i", "2147483647i", "i32(-2147483648)", "CN", "CM"],
}
VALUE = {"0u": 0, "1u": 1, "2u": 2, "31u": 31, "32u": 32, "33u": 33, "4294967295u": 2**32 - 1}
VALUE |= {"2147483648u": 2**31, "CZ": 0, "CB": 33, "0i": 0, "1i": 1, "-1i": -1, "2i": 2}
VALUE |= {"31i": 31, "32i": 32, "2147483647i": 2**31 - 1, "i32(-2147483648)": -(2**31)}
VALUE |= {"CN": -1, "CM": -(2**31)}
OTHER = {"u32": "i32", "i32": "u32"}
LOW, HIGH = {"u32": 0, "i32": -(2**31)}, {"u32": 2**32, "i32": 2**31}
BINARY = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "&": lambda a, b: a & b,
    "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b,
}

#: A constant: its WGSL text and its components' values, as WGSL evaluates them.
Const = tuple[str, "tuple[int, ...]"]
#: The verifier's refusals this test draws.
REFUSALS = re.compile(
    r"by the constant 0|a shift by \d+: integers have 32 bits|least value over -1 does not fit|"
    r"does not fit (u32|i32) \(WGSL refuses a constant shift|is above the high bound|"
    r"the constant index -?\d+ is out of range"
)


def _bits(ty: str, v: int) -> int:
    """``v``'s 32 bits read as ``ty``: WGSL's conversion between u32 and i32, and its
    ``+``, ``-``, ``*`` and negation, which wrap."""
    v %= 2**32
    return v - 2**32 if ty == "i32" and v >= 2**31 else v


def scalar(r: random.Random, ty: str, depth: int) -> Const:
    """A constant scalar expression of ``ty`` (u32 or i32)."""
    if depth == 0 or r.random() < 0.35:
        lit = r.choice(EDGES[ty])
        return lit, (VALUE[lit],)
    d = depth - 1
    kind = r.choice(["bin", "bin", "neg", "conv", "select", "member", "call"])
    if kind == "bin":
        op = r.choice(list(BINARY))
        (a, x), (b, y) = scalar(r, ty, d), scalar(r, ty, d)
        return f"({a} {op} {b})", (
            None if x is None or y is None else (_bits(ty, BINARY[op](*x, *y)),)
        )
    if kind == "neg":
        a, x = scalar(r, ty, d)
        if ty == "i32" and r.random() < 0.5:
            return f"-({a})", None if x is None else (_bits(ty, -x[0]),)
        return f"~({a})", None if x is None else (_bits(ty, ~x[0]),)
    if kind == "conv":
        a, x = scalar(r, OTHER[ty], d)
        return f"{ty}({a})", None if x is None else (_bits(ty, x[0]),)
    if kind == "select":
        (a, x), (b, y), c = scalar(r, ty, d), scalar(r, ty, d), r.random() < 0.5
        return f"select({a}, {b}, {str(c).lower()})", y if c else x
    if kind == "member":
        (a, x), c = vector(r, ty, d), r.choice("xy")
        return f"{a}.{c}", None if x is None else (x["xy".index(c)],)
    fn = r.choice(["min", "max"] + (["abs"] if ty == "i32" else []))
    if fn == "abs":  # WGSL: i32's least value is its own abs
        a, x = scalar(r, ty, d)
        return f"abs({a})", None if x is None else (x[0] if x[0] == LOW[ty] else abs(x[0]),)
    (a, x), (b, y) = scalar(r, ty, d), scalar(r, ty, d)
    got = None if x is None or y is None else ((min if fn == "min" else max)(x[0], y[0]),)
    return f"{fn}({a}, {b})", got


def vector(r: random.Random, ty: str, depth: int) -> Const:
    """A constant ``vec2`` of ``ty``."""
    d = max(depth - 1, 0)
    kinds = ["ctor", "ctor", "splat", "unary", "bin", "select", "call", "conv"]
    kind = r.choice(kinds if depth else ["ctor"])
    if kind == "ctor":
        (a, x), (b, y) = scalar(r, ty, d), scalar(r, ty, d)
        return f"vec2<{ty}>({a}, {b})", None if x is None or y is None else x + y
    if kind == "splat":
        a, x = scalar(r, ty, d)
        return f"vec2<{ty}>({a})", None if x is None else x * 2
    if kind == "unary":
        a, x = vector(r, ty, d)
        if ty == "i32" and r.random() < 0.5:
            return f"-({a})", None if x is None else tuple(_bits(ty, -v) for v in x)
        return f"~({a})", None if x is None else tuple(_bits(ty, ~v) for v in x)
    if kind == "bin":
        op = r.choice(list(BINARY))
        (a, x), (b, y) = vector(r, ty, d), vector(r, ty, d)
        got = None if x is None or y is None else tuple(_bits(ty, v) for v in map(BINARY[op], x, y))
        return f"({a} {op} {b})", got
    if kind == "call":
        fn = r.choice(["min", "max"] + (["abs"] if ty == "i32" else []))
        if fn == "abs":
            a, x = vector(r, ty, d)
            return f"abs({a})", (
                None if x is None else tuple(v if v == LOW[ty] else abs(v) for v in x)
            )
        (a, x), (b, y) = vector(r, ty, d), vector(r, ty, d)
        got = None if x is None or y is None else tuple(map(min if fn == "min" else max, x, y))
        return f"{fn}({a}, {b})", got
    if kind == "conv":
        a, x = vector(r, OTHER[ty], d)
        return f"vec2<{ty}>({a})", None if x is None else tuple(_bits(ty, v) for v in x)
    (a, x), (b, y), c = vector(r, ty, d), vector(r, ty, d), r.random() < 0.5
    return f"select({a}, {b}, {str(c).lower()})", y if c else x


def source(body: str, word: str) -> str:
    """A kernel of ``body`` (statements over ``ru`` and ``ri``), then ``word`` stored."""
    return HEAD + f"{body}  out[gid.x] = {word};\n}}\n"


def kernel(r: random.Random) -> tuple[str, bool]:
    """One kernel: a division, remainder or shift of a run-time or constant left operand by a
    constant right one, as an operator or a compound assignment, its result stored; and whether
    WGSL refuses it, by the operands' values."""
    ty = r.choice(["u32", "i32"])
    vec = r.random() < 0.5
    op = r.choice(["/", "%", "<<", ">>", "clamp", "index"])
    run = {"u32": "ru", "i32": "ri"}[ty]
    if op == "clamp":  # constant bounds: WGSL refuses low above high, in any component
        make = vector if vec else scalar
        (lo, lv), (hi, hv) = make(r, ty, 2), make(r, ty, 2)
        left = f"vec2<{ty}>({run})" if vec else run
        text = source(f"  let w = clamp({left}, {lo}, {hi});\n", f"u32(w{'.x' * vec})")
        return text, any(a > b for a, b in zip(lv, hv))
    if op == "index":  # a constant index into a vector: 0 or 1
        k, kv = scalar(r, ty, 2)
        text = source(f"  let v = vec2<u32>(ru, 7u);\n  let w = v[{k}];\n", "w")
        return text, not 0 <= kv[0] < 2
    shift = op in ("<<", ">>")
    rty = "u32" if shift else ty
    # The right operand: the left's shape for shifts; for / and % either shape.
    rvec = vec if shift else r.random() < 0.5
    right, rv = vector(r, rty, 2) if rvec else scalar(r, rty, 2)
    compound = r.random() < 0.5 and (rvec == vec or (vec and not rvec))
    lv: tuple[int, ...] = ()  # () for a run-time left operand
    if vec:
        if compound or r.random() < 0.5:
            left = f"vec2<{ty}>({run}, {run})"
        else:
            left, lv = vector(r, ty, 1)
    elif compound or r.random() < 0.5:
        left = run
    else:
        left, lv = scalar(r, ty, 1)
    if compound:
        body = f"  var w = {left};\n  w {op}= {right};\n"
    else:
        body = f"  let w = {left} {op} {right};\n"
    word = "w.x" if vec or rvec else "w"
    text = source(body, f"u32({word})")
    if shift and any(v >= 32 for v in rv):
        return text, True
    if op == "<<" and lv:  # WGSL: no bit shifted out may differ from the result's sign bit
        n = max(len(lv), len(rv))
        return text, any(not LOW[ty] <= a << b < HIGH[ty] for a, b in zip(lv * n, rv * n))
    if shift:
        return text, False
    if any(v == 0 for v in rv):
        return text, True
    if ty == "i32" and lv:  # i32's least value over -1, component by component
        n = max(len(lv), len(rv))
        return text, any(a == LOW["i32"] and b == -1 for a, b in zip(lv * n, rv * n))
    return text, False


def verdict(text: str) -> str | None:
    """The verifier's refusal, or None where it takes the kernel."""
    try:
        parse(text)
    except WgslTypeError as err:
        return str(err)
    return None


def test_the_verifier_refuses_the_constant_operands_tint_refuses():
    count = int(os.environ.get("KVDSL_CONSTANT_KERNELS", "400"))
    seed = random.randrange(2**32) if "KVDSL_CONSTANT_KERNELS" in os.environ else 14
    r = random.Random(seed)
    drawn = [kernel(r) for _ in range(count)]
    texts = {f"k{i}": text for i, (text, _) in enumerate(drawn)}
    tint = tint_check(texts)
    tally = {True: 0, False: 0}
    for i, (text, refused) in enumerate(drawn):
        ours, theirs = verdict(text), tint[f"k{i}"]
        where = f"seed {seed}, kernel {i}:\n{text}"
        tally[refused] += 1
        if ours is not None:
            assert REFUSALS.search(ours), f"{ours}\n{where}"
            assert theirs is not None, f"the verifier refuses what Tint takes: {ours}\n{where}"
        assert (ours is not None) == refused, f"the verifier says {ours!r}\n{where}"
        assert (theirs is not None) == refused, f"Tint says {theirs!r}\n{where}"
    # Each verdict is drawn often: a test of one verdict only would hold vacuously.
    assert tally[True] > count // 10 and tally[False] > count // 4, (seed, tally)


@pytest.mark.parametrize(
    "stmt, refused",
    [
        ("var w = vec2<i32>(ri, ri);\n  w /= vec2<i32>(0i, -1i);", True),  # a fuzz kernel's
        ("var w = vec2<u32>(ru, ru);\n  w %= vec2<u32>(3u, CZ);", True),
        ("var w = ri;\n  w /= (CN + 1i);", True),
        ("var w = vec2<u32>(ru, ru);\n  w <<= vec2<u32>(1u, CB);", True),
        ("let w = CM / CN;", True),
        # Shapes generated draws met: a constant vector over a
        # scalar -1 went unchecked; a select of vectors and vector builtins were not folded;
        # a vector's negation past i32's range was folded as a value WGSL does not have; a
        # shift's left constant was read as u32.
        ("let w = vec2<i32>(CM, 1i) / -1i;", True),
        ("let w = vec2<u32>(ru) >> select(vec2<u32>(1u), vec2<u32>(2u, CB), true);", True),
        ("let w = vec2<u32>(ru) << max(vec2<u32>(1u), vec2<u32>(0u, 32u));", True),
        ("let w = vec2<i32>(ri) % vec2<i32>(vec2<u32>(1u, 0u));", True),
        (
            "var w = vec2<i32>(ri, ri);\n  w /= min(-(vec2<i32>(1i, CM)), ~(vec2<i32>(-1i, -1i)));",
            False,
        ),
        ("let w = ~(vec2<i32>(0i, 0i)) << vec2<u32>(~(4294967295u));", False),
        ("let w = -(vec2<i32>(32i, CM)) << vec2<u32>(0u);", False),
        # + - * and negation wrap, as WGSL says (Tint and wgpu-native 0.32's naga wrap too).
        ("let w = vec2<i32>(ri) / (CM * 2i);", True),
        ("let w = ru / (4294967295u + 2u);", False),
    ],
)
def test_pinned_constant_operands_get_tints_verdict(stmt: str, refused: bool):
    text = source(f"  {stmt}\n", f"u32(w{'.x' if 'vec2' in stmt else ''})")
    ours, theirs = verdict(text), tint_check({"k": text})["k"]
    if refused:
        assert REFUSALS.search(ours or ""), text
        assert theirs is not None, text
    else:
        assert ours is None and theirs is None, (ours, theirs)


# ---- float constants ------------------------------------------------------------------------

FHEAD = """enable f16;

const CF: f32 = 2.0f;
const CE: f32 = 0.0f;
const CI: i32 = -7i;

@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let rf = f32(out[gid.x]);
"""
FEDGES = {
    # Not f32's largest value: Tint refuses a division by it (1.0f / 3.4028235e38f, while
    # 1.0f / 3.3e38f and 1.0e-30f / 1.0e10f, as small, are taken), which WGSL does not ask.
    "f32": ["0.0f", "1.0f", "0.5f", "-2.0f", "3.0e38f", "1.0e-30f", "65504.0f", "70000.0f"]
    + ["1.0e10f", "CF", "CE"],
    # Values f16 holds exactly, none within a step of its largest: WGSL lets an implementation
    # round an f16 value either way, and Tint rounds toward zero (65502.0h is 65472.0h, and
    # -2.0h + 65504.0h is too), where the verifier (numpy) rounds to the nearest (65504.0h):
    # a verdict one step from the largest value is the implementation's.
    "f16": ["0.0h", "1.0h", "0.5h", "-2.0h", "0.25h", "255.0h", "1000.0h", "2048.0h"],
}
UNARY_F = ["sqrt", "inverseSqrt", "exp", "log", "abs", "floor", "ceil", "round", "trunc", "sin"]


def floats(r: random.Random, ty: str, depth: int) -> str:
    """A constant float expression of ``ty`` (f32 or f16)."""
    if depth == 0 or r.random() < 0.3:
        return r.choice(FEDGES[ty])
    d = depth - 1
    # No f16 clamp: its bounds, a step apart after an inexact f16 result, compare as the
    # implementation rounds (Tint: (-2.0h / 2048.0h) + 255.0h is 254.875h, here 255.0h).
    kinds = ["bin", "bin", "neg", "call", "call2", "conv", "select", "fma"]
    kind = r.choice(kinds + (["clamp"] if ty == "f32" else []))
    if kind == "bin":  # no f16 %: its steps, rounded as Tint rounds f16 (above), differ
        op = r.choice("+-*/%" if ty == "f32" else "+-*/")
        return f"({floats(r, ty, d)} {op} {floats(r, ty, d)})"
    if kind == "neg":
        return f"-({floats(r, ty, d)})"
    if kind == "call":
        return f"{r.choice(UNARY_F)}({floats(r, ty, d)})"
    if kind == "call2":
        return f"{r.choice(['min', 'max'])}({floats(r, ty, d)}, {floats(r, ty, d)})"
    if kind == "conv":
        source = r.choice(["f32", "f16", "i32", "u32"])
        if source in ("i32", "u32"):
            return f"{ty}({scalar(r, source, d)[0]})"
        return f"{ty}({floats(r, source, d)})"
    if kind == "select":
        return f"select({floats(r, ty, d)}, {floats(r, ty, d)}, {r.choice(['true', 'false'])})"
    if kind == "clamp":
        return f"clamp({floats(r, ty, d)}, {floats(r, ty, d)}, {floats(r, ty, d)})"
    return f"fma({floats(r, ty, d)}, {floats(r, ty, d)}, {floats(r, ty, d)})"


def float_source(value: str, store: str) -> str:
    """A kernel of ``let w = value;``, then ``store`` (an expression of ``w`` and ``rf``)."""
    return FHEAD + f"  let w = {value};\n  out[gid.x] = {store};\n}}\n"


def float_kernel(r: random.Random) -> str:
    """One kernel: a let of a float constant (f32, f16, a vec2 of them, or an integer of one;
    vector builtins, ``dot``, conversions, ``pack2x16float``, ``unpack2x16float``), stored
    through a run-time conversion."""
    kinds = ["f32", "f32", "f16", "vec", "int", "vcall", "dot", "pack", "unpack", "vconv", "vsel"]
    kind = r.choice(kinds)
    ty = r.choice(["f32", "f16"])

    def vec(d: int) -> str:
        return f"vec2<{ty}>({floats(r, ty, d)}, {floats(r, ty, d)})"

    store = "u32(f32(w.y) + rf)"  # a vector's
    if kind == "vcall":  # builtins on vectors of constants
        fn = r.choice(UNARY_F + ["min", "max", "fma"] + (["clamp"] if ty == "f32" else []))
        arity = {"min": 2, "max": 2, "fma": 3, "clamp": 3}.get(fn, 1)
        value = f"{fn}({', '.join(vec(1) for _ in range(arity))})"
    elif kind == "vsel":  # a select of float vectors on a literal, then an operator
        pick = f"select({vec(1)}, {vec(1)}, {r.choice(['true', 'false'])})"
        value = f"{vec(1)} {r.choice('+-*/')} {pick}"
    elif kind == "dot":
        value, store = f"dot({vec(1)}, {vec(1)})", "u32(f32(w) + rf)"
    elif kind == "pack":
        value = f"pack2x16float(vec2<f32>({floats(r, 'f32', 2)}, {floats(r, 'f32', 2)}))"
        store = "w"
    elif kind == "unpack":  # words holding f16's infinities and NaNs among others
        word = r.choice(["0x7c00u", "0xfc00u", "0x7e00u", "0x3c00u", "0x7bffu", "0x3c007c00u"])
        word = r.choice([word, scalar(r, "u32", 2)[0]])
        value, store = f"unpack2x16float({word})", "u32(w.y + rf)"
    elif kind == "vconv":
        source = r.choice(["f32", "f16", "i32", "u32"])
        if source in ("i32", "u32"):
            inner = f"vec2<{source}>({scalar(r, source, 2)[0]}, {scalar(r, source, 2)[0]})"
        else:
            inner = f"vec2<{source}>({floats(r, source, 2)}, {floats(r, source, 2)})"
        value, store = f"vec2<{ty}>({inner})", "u32(f32(w.x) + rf)"
    elif kind == "vec":
        a, b = floats(r, ty, 2), floats(r, ty, 2)
        op = r.choice("+-*/%" if ty == "f32" else "+-*/")
        value = f"vec2<{ty}>({a}, {b}) {op} vec2<{ty}>({floats(r, ty, 1)})"
    elif kind == "int":
        value = f"{r.choice(['i32', 'u32'])}({floats(r, r.choice(['f32', 'f16']), 2)})"
        store = "u32(w)"
    else:
        value, store = floats(r, kind, 3), "u32(f32(w) + rf)"
    return float_source(value, store)


def test_the_verifier_refuses_the_float_constants_tint_refuses():
    count = int(os.environ.get("KVDSL_CONSTANT_KERNELS", "400"))
    seed = random.randrange(2**32) if "KVDSL_CONSTANT_KERNELS" in os.environ else 14
    r = random.Random(seed)
    drawn = [float_kernel(r) for _ in range(count)]
    tint = tint_check({f"k{i}": text for i, text in enumerate(drawn)})
    tally = [0, 0]
    for i, text in enumerate(drawn):
        ours, theirs = verdict(text), tint[f"k{i}"]
        where = f"seed {seed}, kernel {i}:\n{text}"
        assert (ours is None) == (theirs is None), f"verifier: {ours!r}\nTint: {theirs!r}\n{where}"
        tally[ours is None] += 1
    assert min(tally) > count // 10, (seed, tally)


@pytest.mark.parametrize(
    "value, refused",
    [
        # Shapes generated draws met: a float step past the largest value
        # that rounds down to it, a % whose quotient overflows, float vectors of constants
        # and fma's steps.
        ("3.4028235e38f + 1.0e30f", True),
        ("65504.0h + 8.0h", True),
        ("3.0e38f % 0.5f", True),
        ("vec2<f32>(1.0f, 2.0f) / vec2<f32>(0.0f, 1.0f)", True),
        ("vec2<f16>(1000.0h) * vec2<f16>(255.0h, 1.0h)", True),
        ("fma(1.0e30f, 1.0e10f, 0.0f)", True),
        # Then: builtins on float vectors of constants, dot, pack2x16float, unpack2x16float
        # and vector conversions were not folded.
        ("sqrt(vec2<f32>(-1.0f, 1.0f))", True),
        ("exp(vec2<f32>(100.0f))", True),
        ("dot(vec2<f32>(3.0e38f), vec2<f32>(2.0f))", True),
        ("pack2x16float(vec2<f32>(70000.0f, 0.0f))", True),
        ("unpack2x16float(0x7c00u)", True),
        ("vec2<f16>(vec2<f32>(70000.0f))", True),
        ("vec2<f32>(1.0f) / select(vec2<f32>(0.0f), vec2<f32>(1.0f), false)", True),
        ("pack2x16float(vec2<f32>(1.0f, -65504.0f))", False),
        ("unpack2x16float(0x3c007bffu)", False),
        ("1.0e30f % 3.0f", False),
        ("vec2<f32>(1.0f, 2.0f) / vec2<f32>(4.0f)", False),
        ("fma(255.0h, 255.0h, 255.0h)", False),
    ],
)
def test_pinned_float_constants_get_tints_verdict(value: str, refused: bool):
    word = "u32(f32(w) + rf)"
    if value.startswith("pack"):
        word = "w"
    elif "vec2" in value and not value.startswith("dot") or value.startswith("unpack"):
        word = "u32(f32(w.x) + rf)"
    text = float_source(value, word)
    ours, theirs = verdict(text), tint_check({"k": text})["k"]
    assert (ours is not None) == refused and (theirs is not None) == refused, (ours, theirs)


def test_f16_literals_read_back_exactly_under_tint():
    # WGSL lets an implementation round an f16 literal's decimal either way; Tint rounds toward
    # zero (`31.62h`, the shortest digits of 31.625, runs as 31.609375 under Dawn on an
    # H200). The printer spells each f16 by its exact digits, so Tint reads the value itself:
    # each literal's bits are asserted when Tint compiles the module, and its digits are
    # checked exact here and read back as the same IR value by the frontend.
    from decimal import Decimal

    import numpy as np

    from kvdsl.emit.wgsl import format_literal
    from kvdsl.frontend.abstract import canonical
    from kvdsl.ir.types import f16

    rng = np.random.default_rng(95)
    bits = rng.integers(1, 0x7C00, 300).astype(np.uint16)  # finite, positive, nonzero
    edges = np.array([1, 0x3FF, 0x400, 0x7BFF, 0x4FE8, 0x2E66], np.uint16)  # 2^-24 ... 31.625
    bits = np.concatenate([edges, bits, bits[:60] | 0x8000])  # and some negative
    asserts = []
    for b in bits:
        value = float(b.view(np.float16))
        text = format_literal(value, f16)
        assert Decimal(text[:-1]) == Decimal(value), (text, value)  # every digit of the value
        assert canonical(float(text[:-1]), f16) == value
        asserts.append(f"const_assert bitcast<u32>(vec2<f16>({text}, 0.0h)) == {int(b)}u;")
    module = "enable f16;\n" + "\n".join(asserts) + "\n@compute @workgroup_size(1) fn main() {}\n"
    assert tint_check({"k": module})["k"] is None
    # The shortest digits of 31.625 are read as another value: what the test guards against.
    bad = "enable f16;\nconst_assert 31.62h == 31.625h;\n@compute @workgroup_size(1) fn main() {}\n"
    assert "const assertion failed" in tint_check({"k": bad})["k"]
