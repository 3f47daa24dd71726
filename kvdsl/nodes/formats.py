"""Dense quantised cache rows: the formats, their scales reduced in the kernel, the packing of a
row into u32 words and the reading back of one element.

The formats are those :mod:`kvdsl.reference.formats` states in numpy (the meaning, rounding and
byte order are written there once); here is how a kernel makes and reads them:

- A row's values are staged in workgroup memory by the invocations that hold its vectors, each
  writing its vector's *partial* statistic (:func:`partial`): the max-abs of the symmetric
  formats, q4_0's signed value of largest magnitude (the first of equal magnitudes: its scale
  needs the sign), or ``(min, max)`` for ``int4_asym``. After a barrier a group's statistic is
  its partials combined in order (:func:`group_stat`, straight-line code): exact, as max and min
  are, so every invocation that needs a group's scale computes the same one. A group is the
  whole row (dense formats: reduced in two levels, groups of its vectors first) or a 32-element
  block (ggml's).
- The scale (:func:`scale_of`) and ``inv = 1 / scale`` (0 for a zero scale) come from the
  statistic. Dense code words hold ``32 / bits`` codes: an int8 word is the invocation's own
  vector, a 4-bit word an even vector's and the next one's, read from the staged values
  (:func:`vector_word`); an inline row starts with its scale (and zero point) as f32 bits
  (``bitcast``, :func:`header_word`). A ggml row is its blocks' bytes: two blocks are whole
  words (17 for q8_0, 9 for q4_0), each word's bytes a block's f16 scale (``pack2x16float``, no
  ``shader-f16``), codes, or the zero padding of an odd number of blocks
  (:func:`q8_0_words`, :func:`q4_0_words`).
- :func:`decode` reads element ``e`` of a stored row back as f32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kvdsl.ir import (
    KernelBuilder,
    Op,
    Shared,
    Val,
    bitcast,
    call,
    clamp,
    construct,
    convert,
    f32,
    i32,
    lit,
    max_,
    min_,
    pack2x16float,
    round_,
    select,
    u32,
    unpack2x16float,
    vec,
)

F32X2 = vec(2, f32)
#: Elements of a ggml block.
BLOCK = 32


@dataclass(frozen=True)
class Format:
    """A cache row format: ``bits`` per code; ``block`` elements per scale (0: the whole row);
    ``stats``, the f32 words of a dense row's scale (2 with a zero point; 0 for ggml, whose
    f16 scales sit in its blocks); ``block_bytes`` of a ggml block (0 for dense);
    ``divisor``: the scale is the statistic over it (``amax / 127``; q4_0's ``max / -8``)."""

    name: str
    bits: int
    block: int
    stats: int
    block_bytes: int
    divisor: float

    @property
    def ggml(self) -> bool:
        """Whether rows are ggml blocks (their scales always inside them)."""
        return self.block_bytes > 0

    @property
    def asymmetric(self) -> bool:
        """Whether the format stores a zero point (the row's minimum)."""
        return self.stats == 2

    @property
    def per_word(self) -> int:
        """Codes per u32 word of a dense row."""
        return 32 // self.bits

    def elements_multiple(self) -> int:
        """What a row's length must divide by: a whole code word, or whole ggml blocks."""
        return BLOCK if self.ggml else self.per_word

    def header_words(self, inline: bool) -> int:
        """The scale words that open a dense row stored inline."""
        return self.stats if inline else 0

    def row_words(self, d: int, inline: bool) -> int:
        """The u32 words of one stored row of ``d`` elements (ggml's padded to a whole word)."""
        if self.ggml:
            return -(-(d // BLOCK * self.block_bytes) // 4)
        return d // self.per_word + self.header_words(inline)

    def side_words(self, inline: bool) -> int:
        """The f32 words of one row's scale in the side buffer (0 inline)."""
        return 0 if inline else self.stats

    def bytes_per_row(self, d: int, inline: bool) -> int:
        """Bytes one (token, head) row takes, scales included."""
        return 4 * (self.row_words(d, inline) + self.side_words(inline))


FORMATS = {
    f.name: f
    for f in (
        Format("int8", 8, 0, 1, 0, 127.0),
        Format("int4", 4, 0, 1, 0, 7.0),
        Format("int4_asym", 4, 0, 2, 0, 15.0),
        Format("q8_0", 8, BLOCK, 0, 34, 127.0),
        Format("q4_0", 4, BLOCK, 0, 18, -8.0),
    )
}


def _abs(x: Val) -> Val:
    return call(Op.ABS, x)


def _trunc(x: Val) -> Val:
    return call(Op.TRUNC, x)


def signed(fmt: Format) -> bool:
    """Whether the format's scale keeps the sign of its group's largest-magnitude value (q4_0);
    the other symmetric formats need its magnitude alone."""
    return not fmt.asymmetric and fmt.divisor < 0


def combine(fmt: Format, a: Val, b: Val) -> Val:
    """Two statistics (``vec2<f32>``) in order: the larger magnitude; for a signed format
    (:func:`signed`) ``b`` where its magnitude is strictly larger (so the first of equal
    magnitudes stays); or the min and max of both."""
    if fmt.asymmetric:
        return construct(F32X2, min_(a.x, b.x), max_(a.y, b.y))
    if not signed(fmt):
        return construct(F32X2, max_(a.x, b.x), 0.0)
    return select(a, b, _abs(b.x) > _abs(a.x))


def partial(kb: KernelBuilder, fmt: Format, name: str, x: Val) -> Val:
    """The statistic of a ``vec4<f32>`` ``x``'s lanes in order, as ``vec2<f32>``: ``(max-abs,
    0)``, ``(signed max-magnitude, 0)`` for a signed format, or ``(min, max)``."""
    if fmt.asymmetric:
        lo = min_(min_(x.x, x.y), min_(x.z, x.w))
        hi = max_(max_(x.x, x.y), max_(x.z, x.w))
        return kb.let(name, construct(F32X2, lo, hi))
    if not signed(fmt):
        mag = max_(max_(_abs(x.x), _abs(x.y)), max_(_abs(x.z), _abs(x.w)))
        return kb.let(f"{name}Stat", construct(F32X2, mag, 0.0))
    m = kb.var(name, f32, x.x)
    for lane in (x.y, x.z, x.w):
        m.set(select(m, lane, _abs(lane) > _abs(m)))
    return kb.let(f"{name}Stat", construct(F32X2, m, 0.0))


def group_stat(kb: KernelBuilder, fmt: Format, name: str, stats: Shared, first: Val, n: int) -> Val:
    """The statistic of ``n`` partials ``stats[first ..]``, combined in order (a group: a row's
    vectors or groups of them, or a block's eight), as straight-line code."""
    acc = kb.var(name, F32X2, stats[first])
    for j in range(1, n):  # unrolled: independent loads, no loop for the driver to bound
        acc.set(combine(fmt, acc, stats[first + j]))
    return acc


@dataclass(frozen=True)
class Scale:
    """A group's scale, its inverse (0 for a zero scale) and zero point (``int4_asym``)."""

    scale: Val
    inv: Val
    zero: Val | None = None


def scale_of(kb: KernelBuilder, fmt: Format, name: str, stat: Val) -> Scale:
    """The scale of a group's statistic: ``|m| / 127`` (int8, q8_0), ``|m| / 7`` (int4),
    ``m / -8`` (q4_0), ``(max - min) / 15`` with zero point ``min`` (int4_asym)."""
    if fmt.asymmetric:
        s = kb.let(name, (stat.y - stat.x) / 15.0)
    elif fmt.divisor < 0:
        s = kb.let(name, stat.x / fmt.divisor)
    else:
        s = kb.let(name, _abs(stat.x) / fmt.divisor)
    inv = kb.let(f"{name}Inv", select(lit(0.0, f32), 1.0 / s, s.ne(0.0)))
    return Scale(s, inv, stat.x if fmt.asymmetric else None)


def code(kb: KernelBuilder, fmt: Format, name: str, x: Val, sc: Scale) -> Val:
    """The unsigned ``bits``-wide field of value ``x`` (u32): int8's two's-complement byte,
    int4's ``q + 8``, int4_asym's ``q``, q8_0's ``roundf`` byte, q4_0's ``min(15, trunc(x *
    id + 8.5))``."""
    if fmt.name == "q8_0":
        v = kb.let(name, x * sc.inv)
        whole = kb.let(f"{name}Whole", _trunc(v))
        # C's roundf (halves away from zero), exactly: the fraction doubled is exact in f32.
        r = whole + _trunc((v - whole) * 2.0)
        return convert(u32, convert(i32, r)) & 0xFF
    if fmt.name == "q4_0":
        return convert(u32, min_(convert(i32, x * sc.inv + 8.5), 15))
    if fmt.asymmetric:
        return convert(u32, clamp(round_((x - sc.zero) * sc.inv), 0.0, 15.0))
    qmax = fmt.divisor
    q = convert(i32, clamp(round_(x * sc.inv), -qmax, qmax))
    if fmt.bits == 8:
        return convert(u32, q) & 0xFF
    return convert(u32, q + 8)


def codes_word(kb: KernelBuilder, fmt: Format, name: str, values: list[Val], sc: Scale) -> Val:
    """The code word of ``values`` (f32, as many as a word holds): value ``l`` in field ``l``."""
    word = None
    for lane, x in enumerate(values):
        field = code(kb, fmt, f"{name}{lane}", x, sc)
        word = field if lane == 0 else word | (field << (fmt.bits * lane))
    return word


def vector_word(
    kb: KernelBuilder, fmt: Format, name: str, x: Val, sc: Scale, staged: list[Val] | None = None
) -> Val:
    """The code word an invocation packs from its own ``vec4<f32>`` ``x``: int8's four codes,
    or with ``staged`` (the next vector's four values, read from the staged row) a 4-bit
    format's eight."""
    return codes_word(kb, fmt, name, [x.member(c) for c in "xyzw"] + (staged or []), sc)


def header_word(fmt: Format, w: Val, sc: Scale) -> Val:
    """Word ``w`` of an inline dense row's header: the scale's f32 bits, then the zero point's."""
    if fmt.asymmetric:
        return select(bitcast(u32, sc.zero), bitcast(u32, sc.scale), w.eq(0))
    return bitcast(u32, sc.scale)


def q8_0_words(
    kb: KernelBuilder,
    name: str,
    own: Val,
    d: Val,
    elem: Callable[[Val], Val],
    block_scale: Callable[[str, Val], Scale],
    blocks: int,
    store: Callable[[Val, Val], None],
) -> None:
    """The q8_0 words of the invocation holding vector ``d`` (``own``) of a row of ``blocks``
    blocks: two blocks (68 bytes) are 17 whole words, so in the pair of block ``blk = d / 8``,
    vector ``j = d % 8`` of the odd block is word ``9 + j``, its own four codes; of the even
    block, word ``j`` is the previous vector's last two codes (block 0: the f16 scale) below its
    own first two, and its last vector also writes word 8: its last two codes below the odd
    block's scale (zero padding where the row has no odd block). ``store(w, word)`` stores the
    row's word ``w``; ``elem(e)`` loads element ``e`` of the staged row."""
    fmt = FORMATS["q8_0"]
    blk = kb.let(f"{name}Blk", d / 8)
    j = kb.let(f"{name}J", d % 8)
    pair = kb.let(f"{name}PairAt", blk / 2 * 17)
    sc = block_scale(f"{name}D", blk)
    q = [code(kb, fmt, f"{name}Q{lane}", own.member(c), sc) for lane, c in enumerate("xyzw")]
    with kb.if_((blk % 2).eq(1)):
        store(pair + 9 + j, q[0] | (q[1] << 8) | (q[2] << 16) | (q[3] << 24))
    with kb.else_():
        # Vector 0 of a block has no previous vector: its index is clamped into the row.
        prev = kb.let(f"{name}Prev", max_(d * 4, 2) - 2)
        p0 = code(kb, fmt, f"{name}P0", elem(prev), sc)
        p1 = code(kb, fmt, f"{name}P1", elem(prev + 1), sc)
        half = pack2x16float(construct(F32X2, sc.scale, 0.0))
        low = select(p0 | (p1 << 8), half, j.eq(0))
        store(pair + j, low | ((q[0] | (q[1] << 8)) << 16))
        with kb.if_(j.eq(7)):
            last = blocks - 1
            nxt = block_scale(f"{name}N", min_(blk + 1, last))
            next_half = pack2x16float(construct(F32X2, nxt.scale, 0.0))
            high = select(lit(0, u32), next_half, blk + 1 <= last)
            store(pair + 8, q[2] | (q[3] << 8) | (high << 16))


def q4_0_words(
    kb: KernelBuilder,
    name: str,
    d: Val,
    elem: Callable[[Val], Val],
    block_scale: Callable[[str, Val], Scale],
    blocks: int,
    store: Callable[[Val, Val], None],
) -> None:
    """The q4_0 words the invocation holding vector ``d`` writes: two blocks (36 bytes) are 9
    whole words, so in the pair of block ``blk = d / 8`` vector ``j = d % 8`` of the even block
    writes word ``j < 5`` (word 0 opens with the block's f16 scale, word 4 closes with the odd
    block's, or zero padding where the row has none), and of the odd block word ``5 + j`` for
    ``j < 4``; code byte ``i`` of a block is elements ``i`` and ``i + 16`` of the staged row."""
    fmt = FORMATS["q4_0"]
    blk = kb.let(f"{name}Blk", d / 8)
    j = kb.let(f"{name}J", d % 8)
    pair = kb.let(f"{name}PairAt", blk / 2 * 9)
    first = kb.let(f"{name}First", blk * BLOCK)

    def code_byte(tag: str, i: Val, sc: Scale) -> Val:
        lo = code(kb, fmt, f"{name}Lo{tag}", elem(first + i), sc)
        hi = code(kb, fmt, f"{name}Hi{tag}", elem(first + i + BLOCK // 2), sc)
        return lo | (hi << 4)

    with kb.if_((blk % 2).eq(1).land(j < 4)):
        sc = block_scale(f"{name}D", blk)
        word = None
        for k in range(4):
            b = code_byte(str(k), j * 4 + k, sc)
            word = b if k == 0 else word | (b << (8 * k))
        store(pair + 5 + j, word)
    with kb.elif_((blk % 2).eq(0).land(j < 5)):
        sc = block_scale(f"{name}E", blk)
        last = blocks - 1
        nxt = block_scale(f"{name}N", min_(blk + 1, last))
        half = kb.let(f"{name}Half", pack2x16float(construct(F32X2, sc.scale, 0.0)))
        next_half = pack2x16float(construct(F32X2, nxt.scale, 0.0))
        next_half = kb.let(f"{name}NextHalf", select(lit(0, u32), next_half, blk + 1 <= last))
        word = None
        for k in range(4):
            if k < 2:  # word 0 opens with the scale; the code index is clamped into the block
                i = max_(j * 4 + k, 2) - 2
                b = select(code_byte(str(k), i, sc), (half >> (8 * k)) & 0xFF, j.eq(0))
            else:  # word 4 closes with the odd block's scale
                i = min_(j * 4 + (k - 2), BLOCK // 2 - 1)
                b = select(code_byte(str(k), i, sc), (next_half >> (8 * (k - 2))) & 0xFF, j.eq(4))
            b = kb.let(f"{name}B{k}", b)
            word = b if k == 0 else word | (b << (8 * k))
        store(pair + j, word)


def _byte(load: Callable[[Val], Val], at: Val) -> Val:
    """Byte ``at`` of a row of little-endian words (``load(w)`` loads word ``w``)."""
    return (load(at / 4) >> ((at % 4) * 8)) & 0xFF


def _signed_byte(b: Val) -> Val:
    """A two's-complement byte (u32 in 0..255) as i32."""
    return bitcast(i32, b << 24) >> lit(24, u32)


def decode(
    kb: KernelBuilder,
    fmt: Format,
    name: str,
    load: Callable[[Val], Val],
    e: Val,
    stats: Callable[[int], Val],
    inline: bool,
) -> Val:
    """Element ``e`` of a stored row as f32: ``load(w)`` loads the row's word ``w``;
    ``stats(i)`` a side buffer's stat word ``i`` (unused inline). Dequantised as the reference:
    ``q * scale`` (``int4_asym``: ``q * scale + zero``; ggml: ``q * f16 d``)."""
    if fmt.ggml:
        blk = kb.let(f"{name}Blk", e / BLOCK)
        j = kb.let(f"{name}J", e % BLOCK)
        start = kb.let(f"{name}At", blk * fmt.block_bytes)
        bits = (load(start / 4) >> ((start % 4) * 8)) & 0xFFFF
        d = kb.let(f"{name}D", unpack2x16float(bits).x)
        if fmt.name == "q8_0":
            q = _signed_byte(_byte(load, start + 2 + j))
        else:
            packed = _byte(load, start + 2 + j % (BLOCK // 2))
            nib = (packed >> select(lit(0, u32), lit(4, u32), j >= BLOCK // 2)) & 0xF
            q = convert(i32, nib) - 8
        return kb.let(name, convert(f32, q) * d)
    head = fmt.header_words(inline)
    scale = bitcast(f32, load(lit(0, u32))) if inline else stats(0)
    per = fmt.per_word
    field = (load(e / per + head) >> ((e % per) * fmt.bits)) & ((1 << fmt.bits) - 1)
    if fmt.bits == 8:
        return kb.let(name, convert(f32, _signed_byte(field)) * scale)
    if fmt.asymmetric:
        zero = bitcast(f32, load(lit(1, u32))) if inline else stats(1)
        return kb.let(name, convert(f32, field) * scale + zero)
    return kb.let(name, convert(f32, convert(i32, field) - 8) * scale)
