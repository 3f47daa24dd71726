"""Quantised cache-row formats as values behind one protocol (:class:`Format`, in
:mod:`.base`): each states its words per row, its block and scale placement, its in-kernel
quantiser (partials, scale, codes, packing) and its decoder, from its own parameters. Writers
(:mod:`kvdsl.nodes.quantise`) and readers (``dense_read``, ``paged_read``, ``dense_convert``)
call the protocol and never test a format's name, so a new format is one class (a subclass of
:class:`Symmetric`, :class:`Asymmetric`, :class:`Ggml` or :class:`Format`) passed as a config's
``format``, and its numpy meaning is :mod:`kvdsl.reference.formats`' ``family`` at its ``bits``.

The built-in set (:data:`FORMATS`): ``int8`` and ``int4`` (symmetric, one scale per row),
``int4_asym`` (scale and zero point per row), ggml's ``q8_0`` and ``q4_0`` (f16 scales in
32-element blocks), ONNX Runtime WebGPU's ``ort_q4`` (an f32 norm and 4-bit centroid indices,
the row rotated by its own whole-head Walsh-Hadamard transform).
"""

from __future__ import annotations

from typing import Any

from kvdsl.nodes.formats.base import BLOCK, F32X2, Format, Scale
from kvdsl.nodes.formats.ggml import Ggml, GgmlQ4, GgmlQ8
from kvdsl.nodes.formats.ort import OrtQ4
from kvdsl.nodes.formats.scaled import Asymmetric, RowScaled, Symmetric

INT8 = Symmetric("int8", 8, twos=True)
INT4 = Symmetric("int4", 4)
INT4_ASYM = Asymmetric("int4_asym", 4)
Q8_0 = GgmlQ8("q8_0", 8)
Q4_0 = GgmlQ4("q4_0", 4)
ORT_Q4 = OrtQ4("ort_q4", 4)

#: The built-in formats by name, in the catalog's order.
FORMATS: dict[str, Format] = {f.name: f for f in (INT8, INT4, INT4_ASYM, Q8_0, Q4_0, ORT_Q4)}


def format_of(value: Any) -> Format:
    """The format a config's ``format`` field names: a :class:`Format` itself, or a built-in's
    name (a string or a format enum member)."""
    if isinstance(value, Format):
        return value
    name = getattr(value, "value", value)
    if name not in FORMATS:
        raise ValueError(f"format {name!r}: expected one of {', '.join(FORMATS)} or a Format")
    return FORMATS[name]


__all__ = [
    "BLOCK",
    "F32X2",
    "FORMATS",
    "INT4",
    "INT4_ASYM",
    "INT8",
    "ORT_Q4",
    "Asymmetric",
    "Format",
    "Ggml",
    "GgmlQ4",
    "GgmlQ8",
    "OrtQ4",
    "Q4_0",
    "Q8_0",
    "RowScaled",
    "Scale",
    "Symmetric",
    "format_of",
]
