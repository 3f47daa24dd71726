"""Formats with one scale per row, computed in the kernel from the row's values: the row is
``d / per_word`` u32 words of ``bits``-wide codes (element ``per_word * j + l`` in field ``l`` of
word ``j``), opened by its scale words when inline, else with them in a side buffer.

The code range comes from ``bits`` alone: a symmetric format's codes are ``-(2^(bits-1) - 1) ..
2^(bits-1) - 1`` around a scale ``max|x| / (2^(bits-1) - 1)``; an asymmetric one's ``0 ..
2^bits - 1`` over ``min .. max``, so a 2-bit field holds codes ``0 .. 3`` and nothing wider.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvdsl.ir import (
    KernelBuilder,
    Val,
    bitcast,
    clamp,
    construct,
    convert,
    f32,
    i32,
    lit,
    max_,
    min_,
    round_,
    u32,
)
from kvdsl.nodes.formats.base import (
    F32X2,
    F32X4,
    LANES,
    Format,
    Load,
    Load4,
    Scale,
    Stats,
    abs_,
    div,
    named,
    shr,
)


@dataclass(frozen=True)
class RowScaled(Format):
    """What the one-scale-per-row formats share: the header of an inline row, a code field's
    place and the scale words' place."""

    def header(self, sc: Scale) -> list[Val]:
        """An inline row's header words: the scale's f32 bits, then the zero point's."""
        return [bitcast(u32, sc.scale)] + ([] if sc.zero is None else [bitcast(u32, sc.zero)])

    def field(self, load: Load, e: Val, inline: bool) -> Val:
        """The unsigned code field of element ``e`` (u32)."""
        per = self.per_word
        word = load(e / per + self.header_words(inline))
        return (word >> ((e % per) * self.bits)) & self.mask

    def stat_word(self, load: Load, stats: Stats, i: int, inline: bool) -> Val:
        """The row's f32 scale word ``i`` (0: the scale, 1: the zero point)."""
        return bitcast(f32, load(lit(i, u32))) if inline else stats(i)

    def dequantise(self, field: Val, stat_words: list[Val]) -> Val:
        """The f32 value of an unsigned code field (u32) with the row's scale words: both
        :meth:`decode` and :meth:`decode4` apply it, so a row-scaled format states its values
        here."""
        raise NotImplementedError(f"format {self.name!r} states no dequantisation")

    def decode(
        self, kb: KernelBuilder, name: str, load: Load, e: Val, stats: Stats, inline: bool
    ) -> Val:
        words = [self.stat_word(load, stats, i, inline) for i in range(self.stats)]
        return kb.let(name, self.dequantise(self.field(load, e, inline), words))

    def decode4(
        self, kb: KernelBuilder, name: str, load: Load4, e: Val | int, stats: Stats, inline: bool
    ) -> Val:
        """Four fields of one code word (a word holds four or more), each scale word loaded
        once."""
        at, header = div(e, self.per_word), self.header_words(inline)
        word = named(kb, f"{name}W", load(at + header if header else at))
        shift = (e % self.per_word) * self.bits
        if inline:
            words = [bitcast(f32, named(kb, f"{name}S{i}", load(i))) for i in range(self.stats)]
        else:
            words = [named(kb, f"{name}S{i}", stats(i)) for i in range(self.stats)]
        lanes = [
            self.dequantise(shr(word, shift + n * self.bits if n else shift) & self.mask, words)
            for n in range(LANES)
        ]
        return kb.let(name, construct(F32X4, *lanes))


@dataclass(frozen=True)
class Symmetric(RowScaled):
    """``scale = max|x| / qmax`` with ``qmax = 2^(bits-1) - 1``, ``q = clamp(round_even(x /
    scale), -qmax, qmax)``; the field is ``q``'s two's complement (``twos``: int8, the order
    of ``pack4xI8``) or ``q + 2^(bits-1)`` (int4: ``1 .. 15``). Dequantised: ``q * scale``."""

    twos: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.bits < 2:
            raise ValueError(
                f"format {self.name!r}: bits={self.bits}: a symmetric format needs 2 or more"
            )

    @property
    def family(self) -> str:
        return "twos" if self.twos else "offset"

    @property
    def qmax(self) -> float:
        """The largest code's magnitude (f32)."""
        return float((self.levels >> 1) - 1)

    def scale(self, stat: Val) -> Val:
        return abs_(stat.x) / self.qmax

    def code(self, kb: KernelBuilder, name: str, x: Val, sc: Scale) -> Val:
        q = convert(i32, clamp(round_(x * sc.inv), -self.qmax, self.qmax))
        if self.twos:
            return convert(u32, q) & self.mask
        return convert(u32, q + (self.levels >> 1))

    def dequantise(self, field: Val, stat_words: list[Val]) -> Val:
        """``q * scale``, ``q`` the field as two's complement or less its offset."""
        if self.twos:
            shift = 32 - self.bits
            q = bitcast(i32, field << shift) >> lit(shift, u32)
        else:
            q = convert(i32, field) - (self.levels >> 1)
        return convert(f32, q) * stat_words[0]


@dataclass(frozen=True)
class Asymmetric(RowScaled):
    """Over the row's ``lo = min(x) .. hi = max(x)``: ``scale = (hi - lo) / (2^bits - 1)``,
    zero point ``lo``, field ``q = clamp(round_even((x - lo) / scale), 0, 2^bits - 1)``.
    Dequantised: ``q * scale + lo``."""

    @property
    def family(self) -> str:
        return "asymmetric"

    @property
    def stats(self) -> int:
        return 2

    @property
    def qmax(self) -> float:
        """The largest code (f32)."""
        return float(self.mask)

    def partial(self, kb: KernelBuilder, name: str, x: Val) -> Val:
        """``(min, max)`` of a ``vec4<f32>``'s lanes."""
        lo = min_(min_(x.x, x.y), min_(x.z, x.w))
        hi = max_(max_(x.x, x.y), max_(x.z, x.w))
        return kb.let(name, construct(F32X2, lo, hi))

    def combine(self, a: Val, b: Val) -> Val:
        return construct(F32X2, min_(a.x, b.x), max_(a.y, b.y))

    def scale(self, stat: Val) -> Val:
        return (stat.y - stat.x) / self.qmax

    def zero(self, stat: Val) -> Val | None:
        return stat.x

    def code(self, kb: KernelBuilder, name: str, x: Val, sc: Scale) -> Val:
        return convert(u32, clamp(round_((x - sc.zero) * sc.inv), 0.0, self.qmax))

    def dequantise(self, field: Val, stat_words: list[Val]) -> Val:
        """``q * scale + zero``."""
        return convert(f32, field) * stat_words[0] + stat_words[1]
