"""How a session's cache is stored and which kernels move it: one class per cache format.

A format says what one cache row of K (or V) is on the host (``unit`` values of ``dtype`` per
row), how the oracle encodes new tokens into rows, and which programs a session dispatches for
each operation over contiguous BNSH caches of ``capacity`` rows per head:

========  ========================================  ==========================================
op        float formats (f32, f16)                  dense formats (int8, int4, int4_asym, ggml,
                                                    ort_q4)
========  ========================================  ==========================================
append    ``merge_share`` append, in place          ``dense_append``, in place
retain    ``merge_share`` retain, past → present    ``copy`` of the rows' words, past → present
shift     ``window_shift`` all, past → present      (none: refused)
read      the buffer itself                         ``dense_read`` into f32 rows
fork      ``copy`` of a sequence's rows             ``copy`` of a sequence's words
========  ========================================  ==========================================

A new layout or mode is one more class here with the same methods.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from kvdsl import reference
from kvdsl.kernels.config import Bits, Element, Walk
from kvdsl.kernels.copy import CopyConfig
from kvdsl.kernels.dense import DenseAppendConfig, DenseReadConfig, Format
from kvdsl.kernels.merge_share import MergeShareConfig
from kvdsl.kernels.quant import AppendQuantConfig
from kvdsl.kernels.window_shift import WindowShiftConfig
from kvdsl.reference import formats as fm
from kvdsl.reference.judge import compare_quantized, compare_rows
from kvdsl.session.host import Bound, Host, Program

FLOATS = ("f32", "f16")
TEMPLATE = ("template_int8", "template_int4")
FORMATS = FLOATS + fm.FORMATS + fm.ROTATED + TEMPLATE


class SessionError(ValueError):
    """A session operation or spec a session does not take: names the field, the value and
    what is allowed."""


Pair = tuple[Bound, Bound]  # K's range, V's range


@dataclass(frozen=True)
class Write:
    """What one operation's dispatches share in every layer: the ``host``, the ranges the
    kernels bind besides the caches (``inputs``: ``seqlens_k``, the format's constants), each
    sequence's last position ``lens``, ``key_seq`` new tokens per sequence, and caches of
    ``cap`` rows per head."""

    host: Host
    inputs: Mapping[str, Bound]
    lens: np.ndarray
    key_seq: int
    cap: int

    @property
    def batch(self) -> int:
        return len(self.lens)

    def dispatch(
        self,
        program: Program,
        sources: Mapping[str, Bound],
        present: Pair,
        shape: Mapping[str, int],
        params: Mapping[str, int],
    ) -> None:
        """Dispatch ``program`` reading ``sources`` and :attr:`inputs` (those of them it
        binds) and writing the cache pair ``present``."""
        bound = dict(sources) | dict(self.inputs)
        bound |= {"present_key": present[0], "present_value": present[1]}
        names = {b["name"] for b in program.storage}
        bound = {k: v for k, v in bound.items() if k in names}
        self.host.dispatch(program, bound, shape, params, self.lens)


def stored_difference(
    got: np.ndarray,
    want: np.ndarray,
    exact: bool,
    itemsize: int,
    dense: str | Format | None = None,
    head_dim: int = 0,
    page_values: int = 0,
) -> str:
    """'' when stored values ``got`` (of ``itemsize`` bytes) are ``want``'s bit for bit, or
    where not ``exact``, rows of the dense format ``dense`` (of ``head_dim`` values) whose codes
    moved by at most a step (a GPU's rounding); else the first difference, with its page where
    a page holds ``page_values`` values."""
    bits = f"u{itemsize}"
    bad = np.flatnonzero(got.reshape(-1).view(bits) != want.reshape(-1).view(bits))
    if bad.size == 0:
        return ""
    if not exact and dense is not None:
        return compare_rows(got.reshape(-1), want.reshape(-1), None, dense, head_dim, True)[1]
    i = int(bad[0])
    page = f" (page {i // page_values})" if page_values else ""
    return (
        f"{bad.size} values differ, first at {i}{page}: {got.reshape(-1)[i].item()!r} != "
        f"{want.reshape(-1)[i].item()!r}"
    )


class CacheFormat:
    """The operations on one layer's K and V caches in one format."""

    #: Whether a read's ``q * scale + zero`` may be fused into one fma (asymmetric formats).
    asymmetric = False

    name: str
    dtype: np.dtype  # the host type of a stored row
    input: np.dtype  # the host type of new tokens
    shifts = False  # whether it has a sliding-window step
    reads = False  # whether it has a read kernel (else the reference decodes what is stored)

    def __init__(self, kv_heads: int, head_dim: int) -> None:
        self.kv_heads, self.head_dim = kv_heads, head_dim

    @property
    def unit(self) -> int:
        """Host values per stored row."""
        raise NotImplementedError

    @property
    def row_bytes(self) -> int:
        """Bytes of one stored (batch, head, token) row."""
        return self.unit * self.dtype.itemsize

    def encode(self, rows: np.ndarray, side: int) -> np.ndarray:
        """Stored rows ``[..., unit]`` of new-token rows ``[..., head_dim]`` of K (``side``
        0) or V (1): the oracle's."""
        raise NotImplementedError

    def decode(self, stored: np.ndarray, side: int) -> np.ndarray:
        """f32 rows ``[..., head_dim]`` of stored rows of K (``side`` 0) or V (1), in the basis
        they are stored in (as a read kernel gives them)."""
        raise NotImplementedError

    def attended(self, decoded: np.ndarray) -> np.ndarray:
        """:meth:`decode`'s rows as attention meets them: in the rows' own basis (a format
        stored in a rotated basis rotates them back)."""
        return decoded

    def constants(self) -> dict[str, np.ndarray]:
        """Inputs the format's kernels bind unchanged for a whole session, by binding name."""
        return {}

    def attend_inputs(self) -> tuple[dict[str, np.ndarray], dict[str, int]]:
        """What ``attend`` reads of the rows besides the cache, unchanged for a whole session:
        inputs by binding name, and params by name (each one a key of the contract's shape
        too)."""
        return {}, {}

    def programs(self) -> list[Program]:
        """Every program the format dispatches."""
        raise NotImplementedError

    def append(self, w: Write, cache: Pair, new: Pair) -> None:
        """New tokens ``new`` into rows ``[end - keySeq, end)`` of each batch of ``cache``, in
        place."""
        raise NotImplementedError

    def retain(self, w: Write, past: Pair, present: Pair) -> None:
        """Every row ``append`` will not write, from ``past`` into ``present`` (here every row is
        copied: the append that follows overwrites its window)."""
        self.copy(w.host, past, present, w.batch * self.kv_heads * w.cap)

    def shift(self, w: Write, past: Pair, present: Pair, new: Pair) -> None:
        """One sliding-window step from ``past`` into ``present`` (where :attr:`shifts`)."""
        raise NotImplementedError

    def _window(
        self, w: Write, program: Program, sources: Mapping[str, Bound], present: Pair, rows: int
    ) -> None:
        """Dispatch ``program`` (``merge_share``, ``window_shift``, ``dense_append``: each sizes
        its caches by ``seq`` and its new tokens by ``keySeq``) over ``rows`` rows per head."""
        shape = {"batch": w.batch, "seq": w.cap, "keySeq": w.key_seq}
        params = {"count": w.batch * self.kv_heads * rows, "seq": w.cap, "keySeq": w.key_seq}
        w.dispatch(program, sources, present, shape, params)

    def read(self, host: Host, cache: Pair, out: Pair, rows: int) -> None:
        """``rows`` stored rows of ``cache`` as f32 rows into ``out`` (dense formats)."""
        raise NotImplementedError

    def copy(self, host: Host, src: Pair, dst: Pair, rows: int) -> None:
        """``rows`` stored rows of ``src`` into ``dst`` as they are (``copy``: a fork)."""
        bound = {"src_k": src[0], "src_v": src[1]}
        bound |= {"present_key": dst[0], "present_value": dst[1]}
        host.dispatch(self._copy, bound, {"rows": rows}, {"count": rows})

    def judge(self, got: np.ndarray, want: np.ndarray, exact: bool) -> str:
        """'' when stored rows ``got`` are ``want``'s (bit for bit where ``exact``), else the
        first difference (:func:`stored_difference`)."""
        return stored_difference(got, want, exact, self.dtype.itemsize)


class FloatFormat(CacheFormat):
    """f32 or f16 rows of ``head_dim`` values; new tokens of the same type."""

    shifts = True

    def __init__(self, kv_heads: int, head_dim: int, element: str) -> None:
        super().__init__(kv_heads, head_dim)
        self.name = element
        self.dtype = self.input = np.dtype(np.float32 if element == "f32" else np.float16)
        types = {"present_type": Element(element), "input_type": Element(element)}
        common = {"walk": Walk.FLAT} | types
        tag = f"{element}_{kv_heads}x{head_dim}"
        self._append = Program.variant(
            MergeShareConfig(kv_heads, head_dim, "append", **common), f"session_append_{tag}"
        )
        self._retain = Program.variant(
            MergeShareConfig(kv_heads, head_dim, "retain", **common), f"session_retain_{tag}"
        )
        self._shift = Program.variant(
            WindowShiftConfig(kv_heads, head_dim, "all", **common), f"session_shift_{tag}"
        )
        self._copy = Program.variant(
            CopyConfig(head_dim=head_dim, present_type=Element(element)), f"session_copy_{tag}"
        )

    @property
    def unit(self) -> int:
        return self.head_dim

    def encode(self, rows: np.ndarray, side: int) -> np.ndarray:
        return np.asarray(rows).astype(self.dtype)

    def decode(self, stored: np.ndarray, side: int) -> np.ndarray:
        return np.asarray(stored, np.float32)

    def programs(self) -> list[Program]:
        return [self._append, self._retain, self._shift, self._copy]

    def append(self, w: Write, cache: Pair, new: Pair) -> None:
        self._window(w, self._append, {"new_k": new[0], "new_v": new[1]}, cache, w.key_seq)

    def retain(self, w: Write, past: Pair, present: Pair) -> None:
        self._window(w, self._retain, {"past_k": past[0], "past_v": past[1]}, present, w.cap)

    def shift(self, w: Write, past: Pair, present: Pair, new: Pair) -> None:
        sources = {"past_k": past[0], "past_v": past[1], "new_k": new[0], "new_v": new[1]}
        self._window(w, self._shift, sources, present, w.cap)


class DenseCache(CacheFormat):
    """Dense rows with their scales inline: u32 words, in a built-in format (by name) or any
    :class:`kvdsl.nodes.formats.Format` value, encoded and decoded by the reference from the
    format's parameters (:func:`kvdsl.reference.formats.spec`)."""

    reads = True

    def __init__(self, kv_heads: int, head_dim: int, fmt: str | Format) -> None:
        super().__init__(kv_heads, head_dim)
        self.format = fmt
        self.name = str(fmt)
        self.asymmetric = fm.stat_words(fmt) == 2
        self.dtype, self.input = np.dtype(np.uint32), np.dtype(np.float32)
        tag = f"{self.name}_{kv_heads}x{head_dim}"
        self._append = Program.variant(
            DenseAppendConfig(kv_heads, head_dim, format=fmt),
            f"session_append_{tag}",
        )
        self._copy = Program.variant(
            CopyConfig(head_dim=self.unit, present_type=Element.U32), f"session_copy_{tag}"
        )
        self._read = Program.variant(
            DenseReadConfig(kv_heads, head_dim, format=fmt), f"session_read_{tag}"
        )

    @property
    def unit(self) -> int:
        return fm.row_words(self.format, self.head_dim, True)

    def encode(self, rows: np.ndarray, side: int) -> np.ndarray:
        return fm.quantize_rows(self.format, fm.stored_basis(self.format, rows), True)[0]

    def decode(self, stored: np.ndarray, side: int) -> np.ndarray:
        return fm.dequantize_rows(self.format, stored, None, self.head_dim, True)

    def attended(self, decoded: np.ndarray) -> np.ndarray:
        return fm.original_basis(self.format, decoded)

    def programs(self) -> list[Program]:
        return [self._append, self._copy, self._read]

    def append(self, w: Write, cache: Pair, new: Pair) -> None:
        self._window(w, self._append, {"src_k": new[0], "src_v": new[1]}, cache, w.key_seq)

    def read(self, host, cache, out, rows) -> None:
        bound = {"cache_key": cache[0], "cache_value": cache[1], "key": out[0], "value": out[1]}
        host.dispatch(self._read, bound, {"rows": rows}, {"count": rows})

    def judge(self, got: np.ndarray, want: np.ndarray, exact: bool) -> str:
        return stored_difference(got, want, exact, self.dtype.itemsize, self.format, self.head_dim)


class TemplateQuant(CacheFormat):
    """The legacy template's int8 (one i32 code per element) or int4 (two nibbles per u32)
    cache with one scale each for K and V, written by ``append_quant``; read back by the
    reference's dequantisation (there is no read kernel); ``attend`` reads it with the same
    scales as ``kv_scale``'s one pair (:meth:`attend_inputs`)."""

    #: K's and V's scales per bits: new tokens are in ±[0.25, 2), so int8 codes reach ±128
    #: (clamped at 127) and int4 codes ±7.
    SCALES = {8: (1 / 64, 1 / 48), 4: (2 / 7, 1 / 3)}

    def __init__(self, kv_heads: int, head_dim: int, bits: int) -> None:
        super().__init__(kv_heads, head_dim)
        self.bits = bits
        self.name = f"template_int{bits}"
        self.dtype = np.dtype(np.int32 if bits == 8 else np.uint32)
        self.input = np.dtype(np.float32)
        cfg = AppendQuantConfig(kv_heads, head_dim, bits=Bits(bits), walk=Walk.FLAT)
        self.range = (cfg.qmin, cfg.qmax)
        tag = f"{self.name}_{kv_heads}x{head_dim}"
        self._append = Program.variant(cfg, f"session_append_{tag}")
        element = Element.I32 if bits == 8 else Element.U32
        self._copy = Program.variant(
            CopyConfig(head_dim=self.unit, present_type=element), f"session_copy_{tag}"
        )

    @property
    def unit(self) -> int:
        return self.head_dim if self.bits == 8 else self.head_dim // 2

    def constants(self) -> dict[str, np.ndarray]:
        k, v = self.SCALES[self.bits]
        return {"k_scale": np.array([k], np.float32), "v_scale": np.array([v], np.float32)}

    def attend_inputs(self) -> tuple[dict[str, np.ndarray], dict[str, int]]:
        # kv_scale's one (k, v) pair (perChannel 0: per tensor): the scales append_quant
        # writes with and decode reads with.
        k, v = self.SCALES[self.bits]
        return {"kv_scale": np.array([k, v], np.float32)}, {"perChannel": 0}

    def encode(self, rows: np.ndarray, side: int) -> np.ndarray:
        scale = np.float32(self.SCALES[self.bits][side])
        q = reference.quantize(rows, scale, *self.range)
        return q if self.bits == 8 else reference.pack_int4(q)

    def decode(self, stored: np.ndarray, side: int) -> np.ndarray:
        q = stored if self.bits == 8 else reference.unpack_int4(stored)
        return reference.dequantize(q, np.float32(self.SCALES[self.bits][side]))

    def programs(self) -> list[Program]:
        return [self._append, self._copy]

    def append(self, w: Write, cache: Pair, new: Pair) -> None:
        shape = {"batch": w.batch, "seq": w.key_seq, "totalSeq": w.cap, "perChannel": 0}
        params = {"count": w.batch * self.kv_heads * w.key_seq, "seq": w.key_seq, "pastSeq": 0}
        params |= {"totalSeq": w.cap, "perChannel": 0}
        w.dispatch(self._append, {"src_k": new[0], "src_v": new[1]}, cache, shape, params)

    def judge(self, got: np.ndarray, want: np.ndarray, exact: bool) -> str:
        problem = super().judge(got, want, exact)
        if not problem or exact:
            return problem
        return compare_quantized(got.reshape(-1), want.reshape(-1), self.bits)[1]


@functools.lru_cache(maxsize=64)
def cache_format(fmt: str | Format, kv_heads: int, head_dim: int) -> CacheFormat:
    """The operations of format ``fmt`` (a name, or a :class:`kvdsl.nodes.formats.Format`
    value) for caches of ``kv_heads`` × ``head_dim`` (built once: a format holds no state but
    its programs)."""
    if isinstance(fmt, Format) or fmt in fm.FORMATS + fm.ROTATED:
        return DenseCache(kv_heads, head_dim, fmt)
    if fmt in FLOATS:
        return FloatFormat(kv_heads, head_dim, fmt)
    if fmt in TEMPLATE:
        return TemplateQuant(kv_heads, head_dim, 8 if fmt == "template_int8" else 4)
    raise SessionError(f"format={fmt!r}: expected one of {', '.join(FORMATS)}")
