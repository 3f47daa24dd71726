"""WGSL's uniformity analysis (``kvdsl/ir/uniformity.py``) against Tint and the interpreter.

Generated kernels put ``workgroupBarrier()``\\ s and ``subgroupShuffleXor()``\\ s under ifs, in
``for``, ``while`` and ``loop`` statements with breaks, continues and returns, after vars assigned from
uniform and non-uniform values, under helper calls (one returns a load, one calls a shuffle,
one takes a shuffle's mask, one holds a barrier, one a barrier under its argument). Every kernel's verdict, taken or refused by kvdsl's verifier,
must be Tint's (Dawn's compiler, the spec's reference implementation of the analysis; naga as
wgpu 0.32 ships it does not check uniformity), and every kernel kvdsl takes must run in the
interpreter, whose barriers and shuffles check at run time that every invocation of the
workgroup (subgroup) is there: a kernel the analysis took wrongly would stop there.
``KVDSL_UNIFORMITY_KERNELS`` sets how many (1,000; random seeds, not derandomized, when set), and
``KVDSL_UNIFORMITY_GPU_KERNELS`` how many generated kernels the analysis takes also run on the
GPU against the interpreter, at the adapter's subgroup size (30).
"""

from __future__ import annotations

import functools
import os
import random

import numpy as np
import pytest

from kvdsl.frontend import parse
from kvdsl.frontend.errors import WgslTypeError
from kvdsl.interp import run as interp
from kvdsl.runtime import tint_check

WG = 64
ANALYSIS = "WGSL's uniformity analysis"

HEAD = """enable subgroups;

struct Params {
  n: u32,
  m: u32,
}

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> flags: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;
@group(0) @binding(3) var<uniform> params: Params;

var<workgroup> tile: array<u32, 64>;

fn twice(a: u32) -> u32 {
  return a * 2u + 1u;
}

fn flag(a: u32) -> u32 {
  return flags[a & 3u];
}

fn capped(a: u32) -> u32 {
  var r = a;
  if (a > 5u) {
    r = 7u;
  }
  return r;
}

fn synced(a: u32) -> u32 {
  workgroupBarrier();
  return a + tile[a & 63u];
}

fn synced_if(a: u32) -> u32 {
  if (a > 3u) {
    workgroupBarrier();
  }
  return a;
}

fn swapped(a: u32) -> u32 {
  return subgroupShuffleXor(a, 1u);
}

fn swapped_by(a: u32, m: u32) -> u32 {
  return subgroupShuffleXor(a, m & 1u);
}

@compute @workgroup_size(64)
fn main(
  @builtin(local_invocation_id) lid: vec3<u32>,
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(subgroup_size) sg: u32,
) {
  tile[lid.x] = src[lid.x + wid.x * 64u];
  workgroupBarrier();
  var v0 = params.n;
  var v1 = lid.x;
  var v2 = 1u;
"""

TAIL = """  if (params.n == 4000000000u) {
    flags[0u] = v1;
  }
  dst[lid.x + wid.x * 64u] = v0 + v1 * 3u + v2 * 5u + tile[(lid.x + 1u) & 63u] * 7u;
}
"""

UNIFORM_ATOMS = ["3u", "params.n", "params.m", "wid.x", "sg", "src[params.n & 63u]"]
NON_UNIFORM_ATOMS = ["lid.x", "src[lid.x & 63u]", "flags[1u]", "tile[params.m & 63u]"]
MASKS = ["1u", "2u", "(params.n & 1u)", "(wid.x & 3u)", "(lid.x & 1u)", "(v0 & 1u)"]


class Gen:
    """One kernel's statements, drawn from ``rng``; names are fresh, statements after a break,
    continue or return never drawn (a branch ends with one)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lets: list[list[str]] = [[]]
        self.frozen: list[str] = []  # v0..v2 shadowed by a let here: not to be assigned
        self.fresh = 0

    def name(self, stem: str) -> str:
        self.fresh += 1
        return f"{stem}{self.fresh}"

    def atom(self) -> str:
        """Mostly uniform atoms: a kernel is then refused, if at all, for one non-uniform
        value's path through the statements, which is what tells the rules apart."""
        r = self.rng.random()
        if r < 0.1:
            return self.rng.choice(NON_UNIFORM_ATOMS)
        if r < 0.35:
            lets = [n for scope in self.lets for n in scope]
            return self.rng.choice(["v0", "v1", "v2"] + lets)
        return self.rng.choice(UNIFORM_ATOMS)

    def expr(self, depth: int = 0) -> str:
        r = self.rng
        if depth >= 2 or r.random() < 0.45:
            return self.atom()
        a, b = self.expr(depth + 1), self.expr(depth + 1)
        return r.choice(
            [
                f"({a} + {b})",
                f"min({a}, {b})",
                f"({a} & 7u)",
                f"select({a}, {b}, {self.cond(depth + 1)})",
                f"twice({a})",
                f"flag({a})",
                f"capped({a})",
                f"synced({a})",
                f"synced_if({a})",
            ]
        )

    def cond(self, depth: int = 0) -> str:
        r = self.rng
        if depth < 2 and r.random() < 0.25:
            op = r.choice(["&&", "||"])
            return f"({self.cond(depth + 1)} {op} {self.cond(depth + 1)})"
        op = r.choice(["<", "==", ">", "!="])
        return f"({self.expr(depth + 1)} {op} {self.expr(depth + 1)})"

    def block(self, pad: str, n: int, loop: bool, depth: int) -> list[str]:
        self.lets.append([])
        out: list[str] = []
        if depth and self.rng.random() < 0.2:
            # A var or let of the outer vars' names, visible to the end of this block only:
            # what the block does to it must not reach the outer one.
            kind = self.rng.choice(["var", "let"])
            name = self.rng.choice(["v0", "v1", "v2"])
            out.append(f"{pad}{kind} {name} = {self.expr()};")
            if kind == "let":  # not assignable: the block's assignments go to the others
                self.frozen.append(name)
        frozen = len(self.frozen)
        for _ in range(n):
            out += self.stmt(pad, loop, depth)
        self.lets.pop()
        del self.frozen[frozen:]
        return out

    def ending(self, pad: str, loop: bool) -> list[str]:
        """A branch's last statement, sometimes one that leaves it."""
        r = self.rng.random()
        if r < 0.15:
            return [f"{pad}return;"]
        if loop and r < 0.35:
            return [f"{pad}break;"]
        if loop and r < 0.5:
            return [f"{pad}continue;"]
        return []

    def loop_body(self, pad: str, depth: int) -> list[str]:
        """A loop's statements, often a barrier first: the next trip reaches it after
        whatever the last one did (the loop's back edge)."""
        first = [f"{pad}workgroupBarrier();"] if self.rng.random() < 0.4 else []
        return first + self.block(pad, self.rng.randint(1, 3), True, depth + 1)

    def after(self, pad: str) -> list[str]:
        """Sometimes a barrier right after a loop: uniform unless some invocation returned."""
        return [f"{pad}workgroupBarrier();"] if self.rng.random() < 0.3 else []

    def stmt(self, pad: str, loop: bool, depth: int) -> list[str]:
        r = self.rng
        kinds = ["assign", "assign", "compound", "let", "barrier", "guarded", "shuffle"]
        if depth < 3:
            kinds += ["if", "if", "for", "loop", "while", "block"]
        free = [v for v in ("v0", "v1", "v2") if v not in self.frozen]
        if not free:
            kinds = ["let", "barrier", "guarded"]
        v = r.choice(free or ["v0"])
        match r.choice(kinds):
            case "assign":
                return [f"{pad}{v} = {self.expr()};"]
            case "compound":
                return [f"{pad}{v} {r.choice(['+=', '^=', '|='])} {self.expr()};"]
            case "let":
                name = self.name("l")
                line = f"{pad}let {name} = {self.expr()};"
                self.lets[-1].append(name)
                return [line]
            case "barrier":
                return [f"{pad}workgroupBarrier();"]
            case "guarded":  # a barrier under a var's or let's value
                return [
                    f"{pad}if ({self.atom()} > 2u) {{",
                    f"{pad}  workgroupBarrier();",
                    f"{pad}}}",
                ]
            case "shuffle":
                call = r.choice(
                    [
                        f"subgroupShuffleXor({self.expr()}, {r.choice(MASKS)})",
                        f"swapped({self.expr()})",
                        f"swapped_by({self.expr()}, {r.choice(['params.m', 'v0', 'lid.x'])})",
                    ]
                )
                return [f"{pad}{v} = {call};"]
            case "if":
                inner = pad + "  "
                out = [f"{pad}if {self.cond()} {{"]
                out += self.block(inner, r.randint(0, 2), loop, depth + 1) + self.ending(
                    inner, loop
                )
                if r.random() < 0.5:
                    out.append(f"{pad}}} else {{")
                    out += self.block(inner, r.randint(0, 2), loop, depth + 1)
                    out += self.ending(inner, loop)
                return out + [f"{pad}}}"]
            case "for":
                i, inner = self.name("i"), pad + "  "
                bound = r.choice(["3u", "params.m", "wid.x", "lid.x", "v2", "flag(2u)"])
                out = [f"{pad}for (var {i} = 0u; {i} < min({bound}, 4u); {i}++) {{"]
                return out + self.loop_body(inner, depth) + [f"{pad}}}"] + self.after(pad)
            case "while":  # WGSL's `for (; cond; )`: the count goes up first, past a continue
                c, inner = self.name("w"), pad + "  "
                bound = r.choice(["3u", "params.m", "lid.x", "v0"])
                out = [f"{pad}var {c} = 0u;", f"{pad}while {c} < min({bound}, 4u) {{"]
                out += [f"{inner}{c} += 1u;"]
                return out + self.loop_body(inner, depth) + [f"{pad}}}"] + self.after(pad)
            case "loop":
                c, inner = self.name("c"), pad + "  "
                out = [f"{pad}var {c} = 0u;", f"{pad}loop {{", f"{inner}{c} += 1u;"]
                out += [f"{inner}if ({c} > 3u) {{", f"{inner}  break;", f"{inner}}}"]
                return out + self.loop_body(inner, depth) + [f"{pad}}}"] + self.after(pad)
            case "block":
                return (
                    [f"{pad}{{"]
                    + self.block(pad + "  ", r.randint(1, 2), loop, depth + 1)
                    + [f"{pad}}}"]
                )
        raise AssertionError("unreachable")


def kernel_text(seed: int) -> str:
    rng = random.Random(seed)
    g = Gen(rng)
    body = g.block("  ", rng.randint(2, 6), False, 0)
    return HEAD + "\n".join(body) + "\n" + TAIL


def verdict(text: str) -> str | None:
    """kvdsl's verdict: None (taken) or the uniformity error; any other error fails the test."""
    try:
        parse(text, "u.wgsl")
    except WgslTypeError as err:
        if ANALYSIS not in str(err):
            raise AssertionError(f"not a uniformity error: {err}\n{text}") from None
        return str(err)
    return None


def count() -> tuple[int, int]:
    n = os.environ.get("KVDSL_UNIFORMITY_KERNELS")
    if n is None:
        return 1000, 0
    return int(n), random.randrange(1 << 30)


def inputs(rng: np.random.Generator) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Random non-zero inputs for two workgroups; ``dst`` poisoned."""
    bufs = {
        "src": rng.integers(1, 50, 2 * WG, dtype=np.uint32),
        "flags": rng.integers(1, 50, 4, dtype=np.uint32),
        "dst": np.full(2 * WG, 0xDEADBEEF, np.uint32),
    }
    return bufs, {"n": int(rng.integers(1, 9)), "m": int(rng.integers(1, 9))}


def test_taken_kernels_run_alike_on_the_gpu(gpu) -> None:
    """Generated kernels the analysis takes, and the shapes it takes, on the
    GPU and in the interpreter (at the adapter's subgroup size): the same words."""
    from kvdsl.runtime import run as gpu_run
    from kvdsl.runtime import subgroup_size

    size = subgroup_size()
    texts = [HEAD + b + TAIL for b in TAKEN]
    many = int(os.environ.get("KVDSL_UNIFORMITY_GPU_KERNELS", "30"))
    seed = random.randrange(1 << 30) if "KVDSL_UNIFORMITY_GPU_KERNELS" in os.environ else 0
    while len(texts) < len(TAKEN) + many:
        text = kernel_text(seed)
        seed += 1
        if verdict(text) is None:
            texts.append(text)
    rng = np.random.default_rng(3)
    for text in texts:
        k = parse(text, "u.wgsl")
        bufs, params = inputs(rng)
        want = interp(k, dict(bufs), params, (2, 1, 1), subgroup_size=size)["dst"]
        got = gpu_run(k, dict(bufs), params, (2, 1, 1))["dst"]
        assert np.array_equal(got, want), f"GPU {got[:8]} interpreter {want[:8]}\n{text}"


def test_uniformity_agrees_with_tint_and_the_interpreter() -> None:
    n, base = count()
    texts = {f"k{seed}": kernel_text(seed) for seed in range(base, base + n)}
    ours = {name: verdict(t) for name, t in texts.items()}
    tint = tint_check(texts)
    for name, err in tint.items():
        if err is not None and "uniform" not in err:
            raise AssertionError(f"Tint refuses {name} for another reason: {err}\n{texts[name]}")
    differ = sorted(
        (name for name in texts if (ours[name] is None) != (tint[name] is None)),
        key=lambda name: len(texts[name]),
    )
    if differ:
        name = differ[0]
        raise AssertionError(
            f"{len(differ)} of {n} verdicts differ from Tint's; the shortest, {name}:\n"
            f"kvdsl: {ours[name] or 'taken'}\nTint: {tint[name] or 'taken'}\n{texts[name]}"
        )
    taken = [name for name in texts if ours[name] is None]
    # Both verdicts must be common, or the comparison says little.
    assert 0.2 * n <= len(taken) <= 0.8 * n, f"{len(taken)} of {n} taken"
    rng = np.random.default_rng(base)
    for name in taken:
        k = parse(texts[name], "u.wgsl")
        bufs, params = inputs(rng)
        try:
            out = interp(k, bufs, params, (2, 1, 1), subgroup_size=8)
        except Exception as err:
            raise AssertionError(f"{name}, taken, does not run: {err}\n{texts[name]}") from None
        assert out["dst"].shape == (2 * WG,)


MESSAGES = [
    (
        "  var x = 0u;\n  if (lid.x > 0u) {\n    x = 1u;\n  }\n  if (x > 0u) {\n"
        "    workgroupBarrier();\n  }\n",
        "on the condition of `if (x > 0u)`, which depends on 'x', which depends on the "
        "condition of `if (lid.x > 0u)`, which depends on 'lid'",
    ),
    (
        "  v1 = swapped_by(v1, lid.x);\n",
        "argument 2 of swapped_by() must be uniform (for the mask of subgroupShuffleXor() "
        "in swapped_by), but it depends on 'lid'",
    ),
    (
        "  if (flags[0u] > 2u) {\n    v1 = swapped(v1);\n  }\n",
        "swapped() must be called in uniform control flow (for subgroupShuffleXor() in "
        "swapped), but it depends on the condition of `if (flags[0u] > 2u)`, which depends "
        "on a load of 'flags' (read_write storage)",
    ),
]


@pytest.mark.parametrize("body, message", MESSAGES)
def test_uniformity_messages(body: str, message: str) -> None:
    text = HEAD + body + TAIL
    with pytest.raises(WgslTypeError, match="u.wgsl:") as err:
        parse(text, "u.wgsl")
    assert message in str(err.value)
    assert "uniform" in tint_verdicts()[body]


def test_uniform_kernels_tint_takes() -> None:
    """What a verifier of its own shape rules would refuse, and WGSL takes:
    a barrier in a `loop` with a uniform break, in a `for` that breaks on a uniform
    condition, under a var of uniform values, under a load of a `read` binding, in a nested
    block, under a helper's result of uniform arguments, and before a uniform return."""
    texts = {f"k{i}": HEAD + b + TAIL for i, b in enumerate(TAKEN)}
    assert tint_check(texts) == dict.fromkeys(texts)
    rng = np.random.default_rng(1)
    for text in texts.values():
        k = parse(text, "u.wgsl")
        bufs, _ = inputs(rng)
        for n in (0, 5):
            out = interp(k, dict(bufs), {"n": n, "m": 3}, (2, 1, 1), subgroup_size=8)
            assert not np.any(out["dst"] == 0xDEADBEEF) or n > 3


TAKEN = [
    "  var s = 32u;\n  loop {\n    if (s == 0u) {\n      break;\n    }\n"
    "    if (lid.x < s) {\n      tile[lid.x] = tile[lid.x] + tile[lid.x + s];\n    }\n"
    "    workgroupBarrier();\n    s = s / 2u;\n  }\n",
    "  for (var i = 0u; i < 4u; i++) {\n    if (params.n == i) {\n      break;\n    }\n"
    "    workgroupBarrier();\n  }\n",
    "  var n = params.n;\n  if (n > 2u) {\n    workgroupBarrier();\n  }\n",
    "  if (src[0u] > 0u) {\n    workgroupBarrier();\n  }\n",
    "  {\n    workgroupBarrier();\n  }\n",
    "  if (twice(params.n) > 3u) {\n    workgroupBarrier();\n  }\n",
    "  if (params.n > 3u) {\n    workgroupBarrier();\n    return;\n  }\n",
]


PINNED = {
    "return before": "  if (lid.x > 3u) {\n    return;\n  }\n  workgroupBarrier();\n",
    "uniform return before": "  if (params.n > 3u) {\n    return;\n  }\n  workgroupBarrier();\n",
    "return after, in a loop": "  for (var i = 0u; i < 4u; i++) {\n    workgroupBarrier();\n"
    "    if (lid.x == i) {\n      return;\n    }\n  }\n",
    "after a loop that returns": "  for (var i = 0u; i < 4u; i++) {\n    if (lid.x == i) {\n"
    "      return;\n    }\n  }\n  workgroupBarrier();\n",
    "after a loop that breaks": "  for (var i = 0u; i < 4u; i++) {\n    if (lid.x == i) {\n"
    "      break;\n    }\n  }\n  workgroupBarrier();\n",
    "continue before, next trip": "  for (var i = 0u; i < 4u; i++) {\n    workgroupBarrier();\n"
    "    if (lid.x == i) {\n      continue;\n    }\n    v2 += 1u;\n  }\n",
    "var halved in a loop": "  var s = 32u;\n  loop {\n    if (s == 0u) {\n      break;\n    }\n"
    "    workgroupBarrier();\n    s = s / 2u;\n  }\n",
    "var halved, plus an id": "  var s = 32u;\n  loop {\n    if (s == 0u) {\n      break;\n"
    "    }\n    workgroupBarrier();\n    s = s / 2u + (lid.x & 0u);\n  }\n",
    "var of a loop's id sum": "  var x = 0u;\n  for (var i = 0u; i < 4u; i++) {\n    x = x + lid.x;\n"
    "  }\n  if (x > 0u) {\n    workgroupBarrier();\n  }\n",
    "a let read under an id": "  let q = params.n;\n  if (lid.x > 3u) {\n    v0 = q;\n  }\n"
    "  if (v0 > 2u) {\n    workgroupBarrier();\n  }\n",
    "a lane stored by an id": "  var a = vec2<u32>(1u, 2u);\n  a[lid.x & 1u] = 3u;\n"
    "  if (a.x > 2u) {\n    workgroupBarrier();\n  }\n",
    "a lane stored uniformly": "  var a = vec2<u32>(1u, 2u);\n  a.y = 3u;\n  if (a.x > 2u) {\n"
    "    workgroupBarrier();\n  }\n",
    "a lane of an id": "  var a = vec2<u32>(1u, 2u);\n  a.y = lid.x;\n  if (a.x > 2u) {\n"
    "    workgroupBarrier();\n  }\n",
    "a break on a load after the barrier": "  for (var i = 0u; i < 4u; i++) {\n"
    "    workgroupBarrier();\n    if (flags[0u] > i) {\n      break;\n    }\n  }\n",
    "a var's value at a continue": "  for (var i = 0u; i < 4u; i++) {\n    v0 = lid.x;\n"
    "    if (params.n > 2u) {\n      continue;\n    }\n    v0 = 3u;\n  }\n"
    "  if (v0 > 2u) {\n    workgroupBarrier();\n  }\n",
    "a var's value at a break": "  for (var i = 0u; i < 4u; i++) {\n    v0 = lid.x;\n"
    "    if (params.n > 2u) {\n      break;\n    }\n    v0 = 3u;\n  }\n"
    "  if (v0 > 2u) {\n    workgroupBarrier();\n  }\n",
    "shuffle after an id's return": "  if (lid.x > 40u) {\n    return;\n  }\n"
    "  v1 = subgroupShuffleXor(v1, 1u);\n",
    "shuffle by a workgroup's mask": "  v1 = subgroupShuffleXor(v1, wid.x & 1u);\n",
    "shuffle by a subgroup-size mask": "  v1 = subgroupShuffleXor(v1, (sg - 1u) & 1u);\n",
}


@functools.cache
def tint_verdicts() -> dict[str, str | None]:
    """Tint's verdict on each pinned and message body, by body: one worker for them all (each
    start of Tint's worker process costs a Dawn instance)."""
    bodies = list(PINNED.values()) + [body for body, _ in MESSAGES]
    got = tint_check({f"k{i}": HEAD + b + TAIL for i, b in enumerate(bodies)})
    return {b: got[f"k{i}"] for i, b in enumerate(bodies)}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_pinned_verdicts_are_tints(name: str) -> None:
    """Shapes the random kernels meet only now and then, each with Tint's verdict."""
    text = HEAD + PINNED[name] + TAIL
    tint = tint_verdicts()[PINNED[name]]
    assert tint is None or "uniform" in tint, tint
    assert (verdict(text) is None) == (tint is None), verdict(text) or "taken by kvdsl"
