"""The signed Walsh-Hadamard rotation of rows in a kernel: ``R = H diag(s)`` over blocks of
``block`` dimensions, as :mod:`kvdsl.reference.rotation` states it.

A row of ``D`` values held as ``D / 4`` ``vec4<f32>`` is rotated in two steps: as each
``vec4`` is loaded, its signs, the ``1 / sqrt(block)`` and the butterflies at distances 1 and 2
(:func:`load4`); then, over the rows in workgroup memory, one stage per distance 4, 8, ...
``block / 2`` (:func:`stages`: ``vec4`` pairs ``(a, b)`` become ``(a + b, a - b)``), a barrier
after each. The signs are a hash of the dimension's index (:func:`sign`), no table.
"""

from __future__ import annotations

import math

from kvdsl.ir import KernelBuilder, Val, construct, f32, select, u32, vec
from kvdsl.ir.builder import Shared

V4 = vec(4, f32)


SIGN_FN = "hadamardSign"


def sign(kb: KernelBuilder, i: Val) -> Val:
    """Dimension ``i``'s sign (``u32`` in, ``f32`` +1 or -1 out), by the helper ``fn
    hadamardSign`` (declared once): -1 where bit 31 of the hash ``x = (i + 1) * 0x9E3779B1;
    x ^= x >> 15; x *= 0x2C1B3C6D; x ^= x >> 12`` is set."""
    if not any(f.name == SIGN_FN for f in kb.functions):
        with kb.function(SIGN_FN, [("i", u32)], f32) as (n,):
            x = kb.var("x", u32, (n + 1) * 0x9E3779B1)
            x.set(x ^ (x >> 15))
            x.set(x * 0x2C1B3C6D)
            x.set(x ^ (x >> 12))
            kb.return_(select(1.0, -1.0, (x >> 31).eq(1)))
    return kb.fn_call(SIGN_FN, i)


def load4(kb: KernelBuilder, x: Val, e: Val, block: int) -> Val:
    """Elements ``4 e .. 4 e + 3`` of a row, ``x``, with their signs and ``1 / sqrt(block)``
    applied and the butterflies at distances 1 and 2 done: the first two stages of the
    rotation, inside one ``vec4``."""
    d = e * 4
    s = kb.let("signs", construct(V4, *(sign(kb, d + c) for c in range(4))))
    y = kb.let("signed", x * s * (1.0 / math.sqrt(block)))
    return butterflies4(kb, y, "half")


def butterflies4(kb: KernelBuilder, y: Val, name: str) -> Val:
    """The butterflies at distances 1 and 2 inside one ``vec4`` ``y`` (the first stage's
    result named ``name``)."""
    a = kb.let(
        name,
        construct(
            V4,
            y.member("x") + y.member("y"),
            y.member("x") - y.member("y"),
            y.member("z") + y.member("w"),
            y.member("z") - y.member("w"),
        ),
    )
    return construct(
        V4,
        a.member("x") + a.member("z"),
        a.member("y") + a.member("w"),
        a.member("x") - a.member("z"),
        a.member("y") - a.member("w"),
    )


def stages(kb: KernelBuilder, rows: Shared, count: int, d4: int, block: int, t: Val, wg: Val):
    """The rotation's stages at distances 4 .. ``block / 2`` over ``count`` rows of ``d4``
    ``vec4``s in workgroup memory ``rows`` (each loaded through :func:`load4` and a barrier
    passed), by invocations ``t`` of ``wg``; a barrier after each stage."""
    half = d4 // 2
    h = 1
    while 4 * h < block:
        kb.comment(f"Rotation stage: pairs {4 * h} values apart.")
        with kb.for_range("p", t, count * half, wg) as p:
            k = kb.let("k", p % half)
            lo = kb.let("lo", (p / half) * d4 + (k / h) * (2 * h) + k % h)
            a = kb.let("a", rows[lo])
            b = kb.let("b", rows[lo + h])
            rows[lo] = a + b
            rows[lo + h] = a - b
        kb.barrier()
        h *= 2


def registers(kb: KernelBuilder, row: list[Val], block: int, name: str) -> list[Val]:
    """The rotation of a whole row held as ``vec4``s (``row[i]`` its elements ``4 i .. 4 i +
    3``), in registers: signs and ``1 / sqrt(block)`` (known when the kernel is built), the
    butterflies at distances 1 and 2 in each ``vec4``, then between ``vec4``s at distances 4 ..
    ``block / 2``; the results named ``{name}{i}``."""
    scale = 1.0 / math.sqrt(block)
    out = []
    for i, x in enumerate(row):
        s = [scale * _sign(4 * i + c) for c in range(4)]
        y = kb.let(f"{name}S{i}", x * construct(V4, *s))
        out.append(kb.let(f"{name}B{i}", butterflies4(kb, y, f"{name}H{i}")))
    h, stage = 1, 0
    while 4 * h < block:
        nxt = list(out)
        for i in range(len(out)):
            if i & h == 0:
                a, b = out[i], out[i + h]
                nxt[i] = kb.let(f"{name}{stage}_{i}", a + b)
                nxt[i + h] = kb.let(f"{name}{stage}_{i + h}", a - b)
        out, h, stage = nxt, 2 * h, stage + 1
    return out


def _sign(i: int) -> float:
    """:func:`sign` of a dimension known when the kernel is built."""
    x = (i + 1) * 0x9E3779B1 % 2**32
    x ^= x >> 15
    x = x * 0x2C1B3C6D % 2**32
    x ^= x >> 12
    return -1.0 if x >> 31 else 1.0


def check_block(block: int, head_dim: int) -> str | None:
    """What is wrong with rotating ``head_dim``-value rows over blocks of ``block`` (None:
    nothing; 0 is no rotation)."""
    if block == 0:
        return None
    if not isinstance(block, int) or block < 4 or block & (block - 1):
        return "0 (none) or a power of two, at least 4"
    if head_dim % block:
        return f"0 (none) or a power of two dividing head_dim ({head_dim})"
    return None


__all__ = ["check_block", "load4", "registers", "sign", "stages"]
