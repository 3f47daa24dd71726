"""The signed Walsh-Hadamard rotation of rows in a kernel: ``R = H diag(s)`` over blocks of
``block`` dimensions, as :mod:`kvdsl.reference.rotation` states it.

A row of ``D`` values held as ``D / 4`` ``vec4<f32>`` is rotated in two steps: as each
``vec4`` is loaded, its signs, the ``1 / sqrt(block)`` and the butterflies at distances 1 and 2
(:func:`load4`); then, over the rows in workgroup memory, one stage per distance 4, 8, ...
``block / 2`` (:func:`stages`: ``vec4`` pairs ``(a, b)`` become ``(a + b, a - b)``), a barrier
after each. The signs are a hash of the dimension's index (:func:`sign`), no table; a writer's
lanes take theirs as nibbles of a word built with the kernel (:func:`_lane_signs`).

The writers' rows are held by several lanes, each a few ``vec4``s of it (the quantiser's runs
or strided words), and are rotated once, cooperatively (:func:`across_lanes`): each lane signs
and butterflies its own ``vec4``s, does in registers every stage whose pairs it holds both
halves of, and gets the rest from the lanes of its row through workgroup memory, one barrier a
round: each lane stores its ``vec4``s (vector ``j`` of every lane side by side, so adjacent
lanes touch adjacent ``vec4``s and no two of a warp's share a bank), and after the barrier
reads, for each of them, the same ``vec4`` of every lane the round's stages pair it with (the
``2^k`` lanes that ``k`` consecutive lane stages reach) and does those stages itself, in
registers, keeping its own. A round takes at most two stages: one of ``k`` costs each vector
``2^k`` accesses of workgroup memory, which bound these writers' time, so three go as two
rounds (6, not 8).
Every stage adds the same pairs in the same order as the reference, so the rows are its bits.
Workgroup memory rather than ``subgroupShuffleXor``: a shuffle needs WGSL's ``subgroups`` (the
module would enable it, and a device without it could not run the writer, where the unrotated
writers need no feature; kvdsl's subgroup kernels are variants of their own), and a row inside
one subgroup, whose size varies by device (4 .. 128), so it would need this path beside it as
its fallback. A rotation costs its row one barrier a round (one or two at the catalog
writers' layouts) and ``2^k - 1`` workgroup reads a vector a round; the quantiser's own
reduction has a barrier already.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from kvdsl.ir import KernelBuilder, Val, array, construct, f32, lit, select, u32, vec
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


def stages(
    kb: KernelBuilder,
    rows: Shared,
    count: int,
    d4: int,
    block: int,
    t: Val,
    wg: Val,
    label: str = "Rotation stage",
    prefix: str = "",
):
    """The rotation's stages at distances 4 .. ``block / 2`` over ``count`` rows of ``d4``
    ``vec4``s in workgroup memory ``rows`` (each loaded through :func:`load4` and a barrier
    passed), by invocations ``t`` of ``wg``; a barrier after each stage. Each stage's comment
    starts with ``label``; its values are named with ``prefix`` (``ortLo`` for ``lo``)."""

    def named(base: str) -> str:
        return prefix + base.capitalize() if prefix else base

    half = d4 // 2
    h = 1
    while 4 * h < block:
        kb.comment(f"{label}: pairs {4 * h} values apart.")
        with kb.for_range(named("p"), t, count * half, wg) as p:
            k = kb.let(named("k"), p % half)
            lo = kb.let(named("lo"), (p / half) * d4 + (k / h) * (2 * h) + k % h)
            a = kb.let(named("a"), rows[lo])
            b = kb.let(named("b"), rows[lo + h])
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
    return register_stages(kb, out, block, name)


def register_stages(kb: KernelBuilder, row: list[Val], block: int, name: str) -> list[Val]:
    """The stages between ``vec4``s at distances 4 .. ``block / 2`` of a row held as
    ``vec4``s in registers (each already through :func:`butterflies4`), stage ``s``'s
    ``vec4`` ``i`` named ``{name}{s}_{i}``."""
    out, h, stage = list(row), 1, 0
    while 4 * h < block:
        nxt = list(out)
        for i in range(len(out)):
            if i & h == 0:
                a, b = out[i], out[i + h]
                nxt[i] = kb.let(f"{name}{stage}_{i}", a + b)
                nxt[i + h] = kb.let(f"{name}{stage}_{i + h}", a - b)
        out, h, stage = nxt, 2 * h, stage + 1
    return out


@dataclass(frozen=True)
class Stage:
    """A stage between ``vec4``s of :func:`across_lanes`: pairs ``h`` ``vec4``s apart, either
    held by one lane (``pairs``: its ``(lo, hi)`` vectors, the same in every lane) or by lanes
    ``mask`` apart (lane ``l``'s is the high half where ``l & mask``), at the same place in
    each."""

    h: int
    pairs: tuple[tuple[int, int], ...] = ()
    mask: int = 0


def plan(vector_at: Callable[[int, int], int], lanes: int, vectors: int, block: int) -> list[Stage]:
    """The stages between ``vec4``s, distances 1 .. ``block / 8`` ``vec4``s in order, of rows
    whose ``lanes`` lanes hold ``vectors`` ``vec4``s each, lane ``l``'s ``j``-th the row's
    ``vector_at(l, j)`` (integers). Raises ValueError where a stage's pairs are neither inside
    every lane alike nor between lanes a fixed mask apart (no writer lays its rows out so)."""
    table = {(lane, j): vector_at(lane, j) for lane in range(lanes) for j in range(vectors)}
    where = {i: lj for lj, i in table.items()}
    if sorted(where) != list(range(lanes * vectors)):
        raise ValueError(f"rotation: the lanes' vectors {table} are not the row's, once each")
    out = []
    h = 1
    while 4 * h < block:
        partner = {lj: where[i ^ h] for lj, i in table.items()}
        if all(p[0] == lj[0] for lj, p in partner.items()):
            pairs = {(j, partner[(lane, j)][1]) for (lane, j), i in table.items() if not i & h}
            if len(pairs) * 2 == vectors:
                out.append(Stage(h, tuple(sorted(pairs))))
                h *= 2
                continue
        masks = {lj[0] ^ p[0] for lj, p in partner.items() if p[1] == lj[1]}
        mask = masks.pop() if len(masks) == 1 else 0
        same = all(p == (lj[0] ^ mask, lj[1]) for lj, p in partner.items())
        if not (
            mask and same and all(bool(i & h) == bool(lj[0] & mask) for lj, i in table.items())
        ):
            raise ValueError(f"rotation: the pairs {4 * h} values apart are not lane-aligned")
        out.append(Stage(h, mask=mask))
        h *= 2
    return out


def exchange_bytes(
    vector_at: Callable[[int, int], int], lanes: int, vectors: int, block: int, workgroup_size: int
) -> int:
    """Bytes of workgroup memory :func:`across_lanes` declares for these rows: each lane's
    ``vec4``s where a stage pairs lanes, else none."""
    if any(s.mask for s in plan(vector_at, lanes, vectors, block)):
        return 16 * workgroup_size * vectors
    return 0


def across_lanes(
    kb: KernelBuilder,
    row: list[Val],
    vector_at: Callable[..., Val | int],
    lane: Val,
    lanes: int,
    block: int,
    workgroup_size: int,
    name: str = "w",
    swap: Shared | None = None,
) -> list[Val]:
    """The rotation of rows held by ``lanes`` adjacent invocations each (rows whole inside a
    workgroup, lane ``lane`` of its row), this lane's ``vec4``s ``row`` (its ``j``-th the row's
    ``vector_at(lane, j)``; ``vector_at`` takes integers too): signs and ``1 / sqrt(block)``,
    the butterflies inside each ``vec4``, the stages between its own ``vec4``s in registers and
    the rest through workgroup memory (see the module). Every invocation of the workgroup must
    call it (a barrier where lanes pair); the results named ``{name}{j}``. ``swap``: workgroup
    memory of ``workgroup_size * len(row)`` ``vec4<f32>`` to exchange through that the kernel
    has used before (a barrier first), else ``{name}Swap`` is declared."""
    n = len(row)
    stages = plan(vector_at, lanes, n, block)
    scale = 1.0 / math.sqrt(block)
    cur = []
    for j, x in enumerate(row):
        if lanes == 1:
            y = x * construct(V4, *(scale * _sign(4 * vector_at(0, j) + c) for c in range(4)))
        else:
            nib = kb.let(f"{name}Nib{j}", _lane_signs(vector_at, lane, lanes, j))
            s = [select(scale, -scale, (nib & (1 << c)).ne(0)) for c in range(4)]
            # One factor, as the reference has it: with x * s * scale a GPU may fuse the
            # second product into the first butterfly's sum (llvmpipe does), one rounding less.
            y = x * kb.let(f"{name}Signs{j}", construct(V4, *s))
        y = kb.let(f"{name}S{j}", y)
        cur.append(kb.let(f"{name}B{j}", butterflies4(kb, y, f"{name}H{j}")))
    reused = swap is not None
    rounds = 0
    at = 0
    while at < len(stages):
        stage = stages[at]
        if not stage.mask:
            nxt = list(cur)
            for lo, hi in stage.pairs:
                a, b = cur[lo], cur[hi]
                nxt[lo] = kb.let(f"{name}{at}_{lo}", a + b)
                nxt[hi] = kb.let(f"{name}{at}_{hi}", a - b)
            cur, at = nxt, at + 1
            continue
        masks = []
        # At most two stages a round: a round of m costs each vector 2^m accesses (a store and
        # 2^m - 1 reads), so three stages go as two rounds (6, not 8).
        while at < len(stages) and stages[at].mask and len(masks) < 2:
            masks.append(stages[at].mask)
            at += 1
        if swap is None:
            swap = kb.workgroup_var(f"{name}Swap", array(V4, workgroup_size * n))
        elif rounds or reused:
            kb.barrier()  # every lane has read what the memory held
        apart = ", ".join(str(4 * stages[at - len(masks) + t].h) for t in range(len(masks)))
        kb.comment(f"Rotation stages {apart} values apart: between the row's lanes, through")
        kb.comment("workgroup memory; each lane reads its partners' vectors and keeps its own.")
        # Vector j of every lane side by side (j * workgroup_size + lane): adjacent lanes touch
        # adjacent vec4s, where lane-major places a warp's 32 on the same 4 of 32 banks.
        for j in range(n):
            swap[kb.lid.x + j * workgroup_size if j else kb.lid.x] = cur[j]
        kb.barrier()
        # Stage t: where this lane holds the high half it takes partner - own, else own +
        # partner (the same sums as a + b, a - b); own * -1 is exact.
        signs = [
            kb.let(f"{name}Hi{rounds}_{t}", select(1.0, -1.0, (lane & m).ne(0)))
            for t, m in enumerate(masks)
        ]
        group = 1 << len(masks)
        for j in range(n):
            vals = [cur[j]]
            for c in range(1, group):
                m = 0
                for t, mt in enumerate(masks):
                    if c >> t & 1:
                        m ^= mt
                slot = _lane_slot(kb, lane, lanes, m)
                vals.append(
                    kb.let(
                        f"{name}G{rounds}_{j}_{c}", swap[slot + j * workgroup_size if j else slot]
                    )
                )
            for t in range(len(masks)):
                bit = 1 << t
                for c in range(0, group, 2 * bit):
                    vals[c] = kb.let(
                        f"{name}R{rounds}_{t}_{j}_{c}", vals[c + bit] + vals[c] * signs[t]
                    )
            cur[j] = vals[0]
        rounds += 1
    return [kb.let(f"{name}{j}", x) for j, x in enumerate(cur)]


def _lane_signs(vector_at: Callable[..., Val | int], lane: Val, lanes: int, j: int) -> Val:
    """The signs of this lane's ``j``-th ``vec4`` as four bits (bit ``c`` set where element
    ``c``'s is -1): every lane's nibble is known when the kernel is built, packed eight to a
    ``u32`` word, and the lane shifts its own out (a select between words past eight lanes),
    which costs a few operations where hashing each element's index costs ten each."""
    words = [0] * -(-lanes // 8)
    for ln in range(lanes):
        first = 4 * vector_at(ln, j)
        nibble = sum(1 << c for c in range(4) if _sign(first + c) < 0)
        words[ln // 8] |= nibble << 4 * (ln % 8)
    word = lit(words[0], u32)
    for k in range(1, len(words)):
        word = select(word, lit(words[k], u32), (lane / 8).eq(k))
    return word >> ((lane if lanes <= 8 else lane % 8) * 4) & 15


def _lane_slot(kb: KernelBuilder, lane: Val, lanes: int, mask: int) -> Val:
    """The local invocation index of the lane ``mask`` apart from ``lane`` in its row (rows
    start at multiples of ``lanes``: xor the local index where ``lanes`` is a power of two)."""
    if lanes & (lanes - 1) == 0:
        return kb.lid.x ^ mask
    return kb.lid.x - lane + (lane ^ mask)


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


__all__ = [
    "Stage",
    "across_lanes",
    "check_block",
    "exchange_bytes",
    "load4",
    "plan",
    "registers",
    "sign",
    "stages",
]
