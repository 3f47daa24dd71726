"""ggml's block formats, byte for byte as ``quantize_row_q8_0_ref`` / ``quantize_row_q4_0_ref``
write them: blocks of :data:`BLOCK` elements, each its f16 scale ``d`` (``pack2x16float``, no
``shader-f16``) then its code bytes; a row is its blocks back to back, padded with zero bytes
to a whole u32 word.

Two blocks are whole words (:meth:`Ggml.pair_words`): the even block's words open with its
scale, and its last word closes with the odd block's scale (or the padding of a row with no
odd block); the odd block's codes are whole words after it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvdsl.ir import (
    KernelBuilder,
    Val,
    construct,
    convert,
    f32,
    i32,
    lit,
    min_,
    select,
    u32,
    unpack2x16float,
)
from kvdsl.nodes.formats.base import (
    BLOCK,
    F32X2,
    F32X4,
    LANES,
    Format,
    Load,
    Load4,
    Scale,
    Stats,
    abs_,
    trunc,
    byte,
    div,
    shr,
    signed_byte,
)


@dataclass(frozen=True)
class Ggml(Format):
    """A ggml block format: :data:`BLOCK` elements a block, each block its f16 scale and its
    codes (:meth:`block_codes`: the block's code bytes in order)."""

    block = BLOCK

    @property
    def stats(self) -> int:
        return 0

    @property
    def block_bytes(self) -> int:
        return 2 + BLOCK * self.bits // 8

    def pair_words(self) -> tuple[int, int, int]:
        """A pair of blocks in u32 words: the pair's, the even block's (scale, codes and the odd
        block's scale) and the odd block's (its codes)."""
        return self.block_bytes // 2, (self.block_bytes + 2) // 4, (self.block_bytes - 2) // 4

    def block_codes(self, kb: KernelBuilder, name: str, values: list[Val], sc: Scale) -> list[Val]:
        """A block's code bytes (u32 in 0..255, named ``{name}C{i}``) of its :data:`BLOCK`
        values."""
        raise NotImplementedError(f"format {self.name!r} states no block codes")

    def block_code(self, load: Load, start: Val, j: Val) -> Val:
        """Code ``j`` of the block at byte ``start`` as i32."""
        raise NotImplementedError(f"format {self.name!r} states no block decoder")

    def decode(
        self, kb: KernelBuilder, name: str, load: Load, e: Val, stats: Stats, inline: bool
    ) -> Val:
        """``q * f16 d``: the block's code times its f16 scale."""
        blk = kb.let(f"{name}Blk", e / BLOCK)
        j = kb.let(f"{name}J", e % BLOCK)
        start = kb.let(f"{name}At", blk * self.block_bytes)
        bits = (load(start / 4) >> ((start % 4) * 8)) & 0xFFFF
        d = kb.let(f"{name}D", unpack2x16float(bits).x)
        return kb.let(name, convert(f32, self.block_code(load, start, j)) * d)

    def decode4(
        self, kb: KernelBuilder, name: str, load: Load4, e: Val | int, stats: Stats, inline: bool
    ) -> Val:
        """Four codes of one block (:meth:`codes4`) times its f16 scale, loaded once."""
        dynamic = not isinstance(e, int)
        start = div(e, BLOCK) * self.block_bytes
        if dynamic:
            start = kb.let(f"{name}At", start)
        j = e % BLOCK
        bits = shr(load(div(start, 4)), (start % 4) * 8) & 0xFFFF
        d = kb.let(f"{name}D", unpack2x16float(bits).x)
        codes = self.codes4(kb, name, load, start, j)
        return kb.let(name, construct(F32X4, *(convert(f32, q) * d for q in codes)))

    def codes4(
        self, kb: KernelBuilder, name: str, load: Load4, start: Val | int, j: Val | int
    ) -> list[Val]:
        """Codes ``j .. j + 3`` (i32; ``j`` a multiple of 4) of the block at byte ``start``
        (ints where known when the kernel is built); here :meth:`block_code` of each."""
        at = lit(start, u32) if isinstance(start, int) else start
        return [
            self.block_code(load, at, lit(j + n, u32) if isinstance(j, int) else j + n)
            for n in range(LANES)
        ]

    def word_at(self, kb: KernelBuilder, name: str, load: Load4, at: Val | int) -> Val:
        """The four bytes of the row from byte ``at`` (even: a block's bytes are) as one u32,
        byte ``at`` lowest: one word, or the high half of one and the low half of the next."""
        if isinstance(at, int):
            w, odd = divmod(at, 4)
            if odd == 0:
                return load(w)
            return kb.let(f"{name}Q", (load(w) >> 16) | (load(w + 1) << 16))
        w = kb.let(f"{name}W", at / 4)
        odd = kb.let(f"{name}Odd", (at % 4).ne(0))
        low = kb.let(f"{name}Lo", load(w))
        high = kb.let(f"{name}Hi", load(w + select(lit(0, u32), lit(1, u32), odd)))
        return kb.let(f"{name}Q", select(low, (low >> 16) | (high << 16), odd))


@dataclass(frozen=True)
class GgmlQ8(Ggml):
    """``d = max|x| / 127``, code ``roundf(x / d)`` (halves away from zero) as a two's-complement
    byte."""

    only_bits = (8, "q8_0's codes")

    @property
    def family(self) -> str:
        return "q8_0"

    def scale(self, stat: Val) -> Val:
        return abs_(stat.x) / 127.0

    def code(self, kb: KernelBuilder, name: str, x: Val, sc: Scale) -> Val:
        v = kb.let(name, x * sc.inv)
        whole = kb.let(f"{name}Whole", trunc(v))
        # C's roundf (halves away from zero), exactly: the fraction doubled is exact in f32.
        r = whole + trunc((v - whole) * 2.0)
        return convert(u32, convert(i32, r)) & 0xFF

    def block_codes(self, kb: KernelBuilder, name: str, values: list[Val], sc: Scale) -> list[Val]:
        """Byte ``i``: element ``i``'s code."""
        return [
            kb.let(f"{name}C{i}", self.code(kb, f"{name}Q{i}", x, sc)) for i, x in enumerate(values)
        ]

    def block_code(self, load: Load, start: Val, j: Val) -> Val:
        return signed_byte(byte(load, start + 2 + j))

    def codes4(
        self, kb: KernelBuilder, name: str, load: Load4, start: Val | int, j: Val | int
    ) -> list[Val]:
        """Bytes ``j .. j + 3`` of the codes, from one word's worth of the row."""
        word = self.word_at(kb, name, load, start + 2 + j)
        return [signed_byte(shr(word, 8 * n) & 0xFF) for n in range(LANES)]


@dataclass(frozen=True)
class GgmlQ4(Ggml):
    """``d = m / -8`` for the block's signed value ``m`` of largest magnitude (the first of
    equal magnitudes), nibble ``min(15, trunc(x / d + 8.5))``; byte ``i`` holds element ``i`` in
    its low nibble and element ``i + 16`` in its high nibble."""

    only_bits = (4, "q4_0's codes")

    @property
    def family(self) -> str:
        return "q4_0"

    def partial(self, kb: KernelBuilder, name: str, x: Val) -> Val:
        """``(signed max-magnitude, 0)``: its scale needs the sign; the first of equal
        magnitudes stays."""
        m = kb.var(name, f32, x.x)
        for lane in (x.y, x.z, x.w):
            m.set(select(m, lane, abs_(lane) > abs_(m)))
        return kb.let(f"{name}Stat", construct(F32X2, m, 0.0))

    def combine(self, a: Val, b: Val) -> Val:
        """``b`` where its magnitude is strictly larger (the first of equal magnitudes stays)."""
        return select(a, b, abs_(b.x) > abs_(a.x))

    def scale(self, stat: Val) -> Val:
        return stat.x / -8.0

    def code(self, kb: KernelBuilder, name: str, x: Val, sc: Scale) -> Val:
        return convert(u32, min_(convert(i32, x * sc.inv + 8.5), 15))

    def block_codes(self, kb: KernelBuilder, name: str, values: list[Val], sc: Scale) -> list[Val]:
        """Byte ``i``: element ``i``'s nibble, then element ``i + 16``'s."""
        nib = [self.code(kb, f"{name}Q{i}", x, sc) for i, x in enumerate(values)]
        half = BLOCK // 2
        return [kb.let(f"{name}C{i}", nib[i] | (nib[i + half] << 4)) for i in range(half)]

    def block_code(self, load: Load, start: Val, j: Val) -> Val:
        packed = byte(load, start + 2 + j % (BLOCK // 2))
        nib = (packed >> select(lit(0, u32), lit(4, u32), j >= BLOCK // 2)) & 0xF
        return convert(i32, nib) - 8

    def codes4(
        self, kb: KernelBuilder, name: str, load: Load4, start: Val | int, j: Val | int
    ) -> list[Val]:
        """The low nibbles (``j < 16``) or the high nibbles of bytes ``j % 16 .. + 3``."""
        half = BLOCK // 2
        word = self.word_at(kb, name, load, start + 2 + j % half)
        if isinstance(j, int):
            high: Val | int = 4 * (j >= half)
        else:
            high = kb.let(f"{name}Nib", select(lit(0, u32), lit(4, u32), j >= half))
        return [
            convert(i32, shr(word, high + 8 * n if n else high) & 0xF) - 8 for n in range(LANES)
        ]
