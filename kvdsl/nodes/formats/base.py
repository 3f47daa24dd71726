"""The protocol every quantised cache-row format follows, and the pieces its members share.

A :class:`Format` is a frozen value: its ``name`` and ``bits`` per code, and from them everything
a writer or a reader needs, with no test of a name anywhere outside the format's own class:

- its storage: :attr:`Format.block` elements per scale (0: the whole row), :attr:`Format.stats`
  f32 words of a dense row's scale (its zero point included), :attr:`Format.block_bytes` of a
  ggml block, and from them :meth:`Format.row_words`, :meth:`Format.side_words` and
  :meth:`Format.bytes_per_row` of a row of ``d`` elements with its scales inline or aside;
- its in-kernel quantiser: a vector's partial statistic (:meth:`Format.partial`), two partials
  combined in order (:meth:`Format.combine`; exact, as max and min are, so every invocation that
  needs a group's scale computes the same one), the group's scale and its inverse
  (:meth:`Format.scale_of`), one value's unsigned ``bits``-wide code (:meth:`Format.code`) and
  the packing of codes into words (:meth:`Format.codes_word`, and the block bytes of ggml's
  formats);
- its decoder, :meth:`Format.decode`: element ``e`` of a stored row back as f32, in registers,
  and :meth:`Format.decode4`: four elements at once as ``vec4<f32>`` (each word and scale
  loaded once where the format overrides it; :class:`Format`'s own calls :meth:`Format.decode`
  four times, so every format has it);
- its own rotation, where it has one (:attr:`Format.rotated`: ORT's 4-bit rows are stored in the
  basis of a whole-head Walsh-Hadamard transform): :meth:`Format.rotate_row` of a whole row in
  registers (a writer rotates K and V before quantising; the quantiser then gives one lane a
  whole row, :attr:`Format.whole_row_lane`) and :meth:`Format.rotate_shared` of rows in
  workgroup memory (attention rotates Q alike and its output back);
- :attr:`Format.family`, the key of its numpy reference (:mod:`kvdsl.reference.formats` reads
  ``family`` and ``bits``, so the reference states the same meaning from the parameters alone,
  without the kernels' code).

The members are :mod:`kvdsl.nodes.formats.scaled` (one scale per row: :class:`Symmetric`,
:class:`Asymmetric`), :mod:`kvdsl.nodes.formats.ggml` (ggml's 32-element blocks) and
:mod:`kvdsl.nodes.formats.ort` (ONNX Runtime WebGPU's rotated 4-bit rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar

from kvdsl.ir import (
    KernelBuilder,
    Op,
    Val,
    bitcast,
    call,
    construct,
    f32,
    i32,
    lit,
    max_,
    select,
    u32,
    vec,
)
from kvdsl.ir.builder import Shared
from kvdsl.ir.tree import Name

F32X2 = vec(2, f32)
#: Elements of a ggml block.
BLOCK = 32

F32X4 = vec(4, f32)
#: Elements a :meth:`Format.decode4` call decodes.
LANES = 4

Load = Callable[[Val], Val]
#: A row's word ``w`` where ``w`` may be known when the kernel is built (an int) or not (u32).
Load4 = Callable[["Val | int"], Val]
Stats = Callable[[int], Val]


@dataclass(frozen=True)
class Scale:
    """A group's scale, its inverse (0 for a zero scale) and zero point (asymmetric formats)."""

    scale: Val
    inv: Val
    zero: Val | None = None


@dataclass(frozen=True)
class Format:
    """A cache row format: ``name`` (as configs, ``index.json`` and messages spell it) and
    ``bits`` per code. A subclass states the rest from these two (see the module docstring)."""

    name: str
    bits: int

    #: Elements per scale: 0 for one scale per row.
    block: ClassVar[int] = 0
    #: The one code width a family takes and what its codes are, as its messages say
    #: (``(8, "q8_0's codes")``); None where any width of :meth:`__post_init__`'s does.
    only_bits: ClassVar[tuple[int, str] | None] = None

    def __post_init__(self) -> None:
        if type(self.bits) is not int or self.bits not in (1, 2, 4, 8):
            raise ValueError(
                f"format {self.name!r}: bits={self.bits!r}: expected 1, 2, 4 or 8 (a vec4's"
                " codes fill whole bytes of a u32 word)"
            )
        if self.only_bits is not None and self.bits != self.only_bits[0]:
            bits, codes = self.only_bits
            raise ValueError(f"format {self.name!r}: bits={self.bits}: {codes} are {bits} bits")

    @property
    def value(self) -> str:
        """The format's name, as a config's format member spells it (``cfg.format.value``)."""
        return self.name

    def __str__(self) -> str:
        return self.name

    @property
    def family(self) -> str:
        """The key of the format's numpy reference (:mod:`kvdsl.reference.formats`), which with
        :attr:`bits` states its meaning there."""
        raise NotImplementedError(f"format {self.name!r} states no family")

    # ---- storage ---------------------------------------------------------------------------

    @property
    def stats(self) -> int:
        """The f32 words of a dense row's scale (2 with a zero point; 0 for ggml, whose f16
        scales sit in its blocks)."""
        return 1

    @property
    def block_bytes(self) -> int:
        """Bytes of a ggml block (0 for a format with one scale per row)."""
        return 0

    @property
    def ggml(self) -> bool:
        """Whether rows are ggml blocks (their scales always inside them)."""
        return self.block_bytes > 0

    @property
    def asymmetric(self) -> bool:
        """Whether the format stores a zero point."""
        return self.stats == 2

    @property
    def per_word(self) -> int:
        """Codes per u32 word of a dense row."""
        return 32 // self.bits

    @property
    def levels(self) -> int:
        """The codes a ``bits``-wide field holds: ``2 ** bits``."""
        return 1 << self.bits

    @property
    def mask(self) -> int:
        """The ``bits``-wide field's mask."""
        return self.levels - 1

    def elements_multiple(self) -> int:
        """What a row's length must divide by: a whole code word, or whole ggml blocks."""
        return BLOCK if self.ggml else self.per_word

    def takes(self, d: int) -> bool:
        """Whether rows of ``d`` elements can be stored (:meth:`head_dims` says which can)."""
        return d % self.elements_multiple() == 0

    def head_dims(self) -> str:
        """The row lengths :meth:`takes`, in words (for messages)."""
        return f"a multiple of {self.elements_multiple()}"

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

    # ---- its own rotation ------------------------------------------------------------------

    @property
    def rotated(self) -> bool:
        """Whether the format's rows are stored rotated by its own transform (K's and V's alike;
        a reader's Q is rotated the same way and its output rotated back)."""
        return False

    @property
    def whole_row_lane(self) -> bool:
        """Whether the quantiser gives one lane a whole row (its statistic summed by one lane,
        in the format's own order: :meth:`run_stat`)."""
        return False

    def rotate_row(self, kb: KernelBuilder, name: str, row: list[Val]) -> list[Val]:
        """A whole row held as ``vec4<f32>`` (``row[i]``: elements ``4 i .. 4 i + 3``) in the
        format's rotated basis, in registers, the results named ``{name}...``."""
        raise NotImplementedError(f"format {self.name!r} has no rotation of its own")

    def rotate_shared(
        self, kb: KernelBuilder, rows: Shared, count: int, d4: int, t: Val, wg: Val
    ) -> None:
        """Rotate ``count`` rows of ``d4`` ``vec4<f32>`` in workgroup memory ``rows`` (after a
        barrier, by invocations ``t`` of ``wg``; a barrier after each pass). The format's
        rotation is its own inverse where a reader rotates its output back with it."""
        raise NotImplementedError(f"format {self.name!r} has no rotation of its own")

    # ---- the quantiser ---------------------------------------------------------------------

    def partial(self, kb: KernelBuilder, name: str, x: Val) -> Val:
        """The statistic of a ``vec4<f32>`` ``x``'s lanes in order, as ``vec2<f32>``; here
        ``(max-abs, 0)``."""
        mag = max_(max_(abs_(x.x), abs_(x.y)), max_(abs_(x.z), abs_(x.w)))
        return kb.let(f"{name}Stat", construct(F32X2, mag, 0.0))

    def combine(self, a: Val, b: Val) -> Val:
        """Two statistics (``vec2<f32>``) in order; here the larger magnitude."""
        return construct(F32X2, max_(a.x, b.x), 0.0)

    def run_stat(self, kb: KernelBuilder, name: str, run: list[Val]) -> Val:
        """The statistic of a lane's run of ``vec4<f32>``: here its vectors' partials combined
        in order."""
        acc = self.partial(kb, f"{name}0", run[0])
        for j, x in enumerate(run[1:], 1):
            acc = kb.let(f"{name}Run{j}", self.combine(acc, self.partial(kb, f"{name}{j}", x)))
        return acc

    def scale(self, stat: Val) -> Val:
        """The scale of a group's statistic (an expression)."""
        raise NotImplementedError(f"format {self.name!r} states no scale")

    def zero(self, stat: Val) -> Val | None:
        """The zero point of a group's statistic (None: the format has none)."""
        return None

    def scale_of(self, kb: KernelBuilder, name: str, stat: Val) -> Scale:
        """The group's :class:`Scale` of ``stat``: the scale named ``name``, its inverse (0 for a
        zero scale) and the zero point."""
        s = kb.let(name, self.scale(stat))
        inv = kb.let(f"{name}Inv", select(lit(0.0, f32), 1.0 / s, s.ne(0.0)))
        return Scale(s, inv, self.zero(stat))

    def code(self, kb: KernelBuilder, name: str, x: Val, sc: Scale) -> Val:
        """The unsigned ``bits``-wide field (u32, at most :attr:`mask`) of value ``x``."""
        raise NotImplementedError(f"format {self.name!r} states no code")

    def codes_word(self, kb: KernelBuilder, name: str, values: list[Val], sc: Scale) -> Val:
        """The code word of ``values`` (f32, as many as a word holds): value ``l`` in field
        ``l``."""
        word = None
        for lane, x in enumerate(values):
            field = self.code(kb, f"{name}{lane}", x, sc)
            word = field if lane == 0 else word | (field << (self.bits * lane))
        return word

    # ---- the decoder -----------------------------------------------------------------------

    def decode(
        self, kb: KernelBuilder, name: str, load: Load, e: Val, stats: Stats, inline: bool
    ) -> Val:
        """Element ``e`` (u32) of a stored row as f32, named ``name``: ``load(w)`` loads the
        row's u32 word ``w``; ``stats(i)`` a side buffer's f32 scale word ``i`` of the row
        (unused inline)."""
        raise NotImplementedError(f"format {self.name!r} states no decoder")

    def decode4(
        self, kb: KernelBuilder, name: str, load: Load4, e: Val | int, stats: Stats, inline: bool
    ) -> Val:
        """Elements ``e .. e + 3`` of a stored row as ``vec4<f32>``, named ``name``: the values
        :meth:`decode` gives. ``e`` is a multiple of :data:`LANES`, a u32 value or an int (an
        element the kernel knows when it is built: then a format that overrides this passes
        ``load`` the int index of each word, which a reader may serve from words it loaded
        once). Here four :meth:`decode` calls, whose ``load`` gets u32 values."""
        lanes = [
            self.decode(kb, f"{name}{c}", load, _plus(e, n), stats, inline)
            for n, c in enumerate("xyzw")
        ]
        return kb.let(name, construct(F32X4, *lanes))


def _plus(e: Val | int, n: int) -> Val:
    """``e + n`` as a u32 value (a literal where ``e`` is an int)."""
    return lit(e + n, u32) if isinstance(e, int) else (e + n if n else e)


def div(e: Val | int, n: int) -> Val | int:
    """``e / n``: an int where ``e`` is one (known when the kernel is built), else u32."""
    return e // n if isinstance(e, int) else e / n


def shr(word: Val, shift: Val | int) -> Val:
    """``word >> shift``, or ``word`` itself for a shift of int 0."""
    return word if isinstance(shift, int) and shift == 0 else word >> shift


def named(kb: KernelBuilder, name: str, x: Val) -> Val:
    """``x`` as a name: itself where it is one (a reader's let), else a let ``name``."""
    return x if isinstance(x.node, Name) else kb.let(name, x)


def abs_(x: Val) -> Val:
    """WGSL's ``abs(x)``."""
    return call(Op.ABS, x)


def trunc(x: Val) -> Val:
    """WGSL's ``trunc(x)``: ``x`` rounded toward zero."""
    return call(Op.TRUNC, x)


def byte(load: Load, at: Val) -> Val:
    """Byte ``at`` of a row of little-endian words (``load(w)`` loads word ``w``)."""
    return (load(at / 4) >> ((at % 4) * 8)) & 0xFF


def signed_byte(b: Val) -> Val:
    """A two's-complement byte (u32 in 0..255) as i32."""
    return bitcast(i32, b << 24) >> lit(24, u32)
