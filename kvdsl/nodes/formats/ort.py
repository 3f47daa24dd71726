"""ONNX Runtime WebGPU's 4-bit cache rows ("TurboQuant", its ``Q4`` cache), byte for byte, as
:mod:`kvdsl.reference.ort_tq` states them in numpy.

A row of ``d`` values (``d`` a power of two, at least 8) is stored in the basis of the
unsigned Walsh-Hadamard transform of the whole head (:meth:`OrtQ4.rotate_row`: butterflies at
pair distance 1, 2, 4, ... ``d / 2``, then every value times ``1 / sqrt(d)``; no signs, no
blocks), as ``d / 8 + 1`` u32 words: the rotated row's L2 norm (an f32's bits), then ``d``
four-bit centroid indices, 8 a word, value ``8 w + j`` in bits ``4 j .. 4 j + 3`` of word ``1 +
w`` (the layout of an inline ``int4`` row: :class:`kvdsl.nodes.formats.RowScaled`'s header and
fields).

- The quantiser gives one lane a whole row (:attr:`OrtQ4.whole_row_lane`), which sums its
  squares in the order of ORT's workgroup (:meth:`OrtQ4.run_stat`), so that the norm is ORT's
  to the bit; the scale is the norm (``sqrt``), its inverse ``1 / norm`` (0 for a zero row).
- A value's index is the number of ORT's 15 boundaries :data:`BOUNDARIES` at most ``x *
  inv`` (ORT's ``searchsorted_tq``), by the helper ``fn ortIndex``.
- An index decodes to ORT's centroid :data:`CENTROIDS` (``fn ortCentroid``, a tree of selects
  on the index's bits) times the norm: the row in the rotated basis. The transform is its own
  inverse: a reader rotates Q by it and its output back by it (:meth:`OrtQ4.rotate_shared`).

The tables are ORT's literals (``turbo_quant_common.wgsl.template``), each an f32 written as
the double it is, so that WGSL and the interpreter read the same value.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from kvdsl.ir import KernelBuilder, Op, Val, call, construct, f32, lit, select, u32
from kvdsl.ir.builder import Shared
from kvdsl.ir.tree import FnCall
from kvdsl.nodes import rotation
from kvdsl.nodes.formats.base import F32X2, Load, Load4, Scale, Stats
from kvdsl.nodes.formats.scaled import RowScaled
from kvdsl.nodes.rotation import butterflies4


def _f32(x: float) -> float:
    """``x`` rounded to f32, as a Python float (exact)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


#: ``TQ_CENTROIDS``: ORT's 4-bit codebook, ascending (f32).
CENTROIDS = tuple(
    _f32(c)
    for c in (-0.2377, -0.1809, -0.1419, -0.1104, -0.0829, -0.0578, -0.0342, -0.0113)
    + (0.0113, 0.0342, 0.0578, 0.0829, 0.1104, 0.1419, 0.1809, 0.2377)
)
#: ``TQ_BOUNDARIES``: ORT's 15 decision boundaries, ascending (f32).
BOUNDARIES = tuple(
    _f32(b)
    for b in (-0.2093, -0.1614, -0.1261, -0.0966, -0.0704, -0.0460, -0.0227, 0.0)
    + (0.0227, 0.0460, 0.0704, 0.0966, 0.1261, 0.1614, 0.2093)
)
#: ORT's workgroup for one row: at most this many threads sum its squares.
MAX_THREADS = 64
INDEX_FN = "ortIndex"
CENTROID_FN = "ortCentroid"


def inverse_sqrt(d: int) -> float:
    """ORT's ``1.0f / sqrt(f32(d))`` in f32 (each step correctly rounded: a double's rounding
    to f32 of a square root or a quotient of f32s is the f32 one)."""
    return _f32(1.0 / _f32(math.sqrt(d)))


@dataclass(frozen=True)
class OrtQ4(RowScaled):
    """ORT's rotated 4-bit rows (the module docstring): one f32 norm a row, 4-bit indices of
    :data:`CENTROIDS`, the row rotated by the unsigned whole-head Walsh-Hadamard transform."""

    only_bits = (4, "ORT's indices")

    @property
    def family(self) -> str:
        return "ort_tq"

    def takes(self, d: int) -> bool:
        return d >= 8 and d & (d - 1) == 0

    def head_dims(self) -> str:
        return "a power of two, at least 8 (ORT's rotation is over the whole head)"

    # ---- its rotation ------------------------------------------------------------------------

    @property
    def rotated(self) -> bool:
        return True

    @property
    def whole_row_lane(self) -> bool:
        return True

    def rotate_row(self, kb: KernelBuilder, name: str, row: list[Val]) -> list[Val]:
        """ORT's order to the bit: the butterflies at distances 1 and 2 inside each ``vec4``,
        then between ``vec4``s at distances 4 .. ``d / 2``, then ``1 / sqrt(d)``."""
        out = [kb.let(f"{name}B{i}", butterflies4(kb, x, f"{name}H{i}")) for i, x in enumerate(row)]
        out = rotation.register_stages(kb, out, 4 * len(row), name)
        scale = inverse_sqrt(4 * len(row))
        return [kb.let(f"{name}R{i}", x * scale) for i, x in enumerate(out)]

    def rotate_shared(
        self, kb: KernelBuilder, rows: Shared, count: int, d4: int, t: Val, wg: Val
    ) -> None:
        """``1 / sqrt(d)`` and the butterflies at distances 1 and 2 as each ``vec4`` is read,
        then one pass per distance 4 .. ``d / 2`` over ``vec4`` pairs, a barrier after each
        (the scale first: a reader's rows are compared within a tolerance, not to the bit)."""
        kb.comment(f"ORT's rotation of {count} rows: 1 / sqrt(d), butterflies inside each vec4.")
        with kb.for_range("ortE", t, count * d4, wg) as e:
            y = kb.let("ortIn", rows[e] * inverse_sqrt(4 * d4))
            rows[e] = butterflies4(kb, y, "ortHalf")
        kb.barrier()
        rotation.stages(kb, rows, count, d4, 4 * d4, t, wg, "ORT's rotation", "ort")

    # ---- the quantiser -----------------------------------------------------------------------

    def partial(self, kb: KernelBuilder, name: str, x: Val) -> Val:
        """``(sum of squares, 0)`` of a ``vec4<f32>``'s lanes (a run of a whole row sums in
        ORT's order instead: :meth:`run_stat`)."""
        sq = kb.let(f"{name}Sq", x * x)
        return kb.let(f"{name}Stat", construct(F32X2, (sq.x + sq.y) + (sq.z + sq.w), 0.0))

    def combine(self, a: Val, b: Val) -> Val:
        return construct(F32X2, a.x + b.x, 0.0)

    def run_stat(self, kb: KernelBuilder, name: str, run: list[Val]) -> Val:
        """A whole row's sum of squares as ORT's workgroup sums it: ``w = min(d / 2, 64)``
        threads, thread ``t`` adding the squares of ``t, t + w, ...`` in order, then a tree
        ``p[t] += p[t + s]`` for ``s = w / 2 .. 1`` (here lane ``c`` of ``vec4`` ``i`` is
        thread ``4 i + c``)."""
        d = 4 * len(run)
        if d < 8:
            return super().run_stat(kb, name, run)
        wv = min(d // 2, MAX_THREADS) // 4
        sq = [kb.let(f"{name}Sq{i}", x * x) for i, x in enumerate(run)]
        part = []
        for i in range(wv):
            acc = sq[i]
            for n in range(i + wv, len(run), wv):
                acc = acc + sq[n]
            part.append(kb.let(f"{name}P{i}", acc))
        h = wv // 2
        while h:
            part = [kb.let(f"{name}T{h}_{i}", part[i] + part[i + h]) for i in range(h)]
            h //= 2
        p = part[0]
        return kb.let(f"{name}Stat", construct(F32X2, (p.x + p.z) + (p.y + p.w), 0.0))

    def scale(self, stat: Val) -> Val:
        return call(Op.SQRT, stat.x)

    def code(self, kb: KernelBuilder, name: str, x: Val, sc: Scale) -> Val:
        _declare(kb)
        return kb.fn_call(INDEX_FN, x * sc.inv)

    # ---- the decoder -------------------------------------------------------------------------

    def dequantise(self, field: Val, stat_words: list[Val]) -> Val:
        """``centroid[field] * norm`` (``fn ortCentroid``, declared by :meth:`decode`)."""
        return Val(FnCall(CENTROID_FN, (field.node,)), f32) * stat_words[0]

    def decode(
        self, kb: KernelBuilder, name: str, load: Load, e: Val, stats: Stats, inline: bool
    ) -> Val:
        _declare(kb)
        return super().decode(kb, name, load, e, stats, inline)

    def decode4(
        self, kb: KernelBuilder, name: str, load: Load4, e: Val | int, stats: Stats, inline: bool
    ) -> Val:
        _declare(kb)
        return super().decode4(kb, name, load, e, stats, inline)


def _declare(kb: KernelBuilder) -> None:
    """Declare ``fn ortIndex`` (the number of boundaries at most ``u``) and ``fn ortCentroid``
    (index ``i``'s centroid: a select on each of its four bits) once a kernel."""
    if any(f.name == INDEX_FN for f in kb.functions):
        return
    with kb.function(INDEX_FN, [("u", f32)], u32) as (u,):
        n = None
        for b in BOUNDARIES:
            step = select(lit(0, u32), lit(1, u32), u >= b)
            n = step if n is None else n + step
        kb.return_(n)
    with kb.function(CENTROID_FN, [("i", u32)], f32) as (i,):
        level = [lit(c, f32) for c in CENTROIDS]
        bit = 0
        while len(level) > 1:
            on = kb.let(f"bit{bit}", ((i >> bit) & 1 if bit else i & 1).eq(1))
            level = [select(level[2 * k], level[2 * k + 1], on) for k in range(len(level) // 2)]
            bit += 1
        kb.return_(level[0])
