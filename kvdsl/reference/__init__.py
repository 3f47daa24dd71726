"""Reference semantics: what each mode of the KV-cache template means, in plain numpy.

Written from the meaning of each mode (concatenation, transposition, windows, rotation,
normalisation, quantisation), independently of any kernel's invocation walk, so that the IR
interpreter, the emitted kernels and the legacy template can all be checked against it.

Conventions (see :mod:`kvdsl.reference.modes`): new tokens BSH ``[B, S, H*D]``, caches BNSH
``[B, H, S, D]`` (``D/2`` u32 words for packed int4), ``seqlens_k`` ``[B]`` signed; float math in
float32, converted to the cache's element type at the end. Passes that write only part of a cache
return :class:`Written` (values + mask of written elements).

Where the template's arithmetic can wrap or disagrees with its own comments, these functions
state the intended meaning: window starts are clamped rather than wrapped (``share_window``,
``window_plan``), ``append_quant`` rotates each row at its absolute position (the row index) and
clamps its window like ``merge_share``, and ``window_shift`` rotates appended keys in every
region that writes them when rotary caches are given.

:mod:`~kvdsl.reference.formats` states the dense formats and ggml's q8_0/q4_0 blocks byte for
byte, checked against llama.cpp's ``gguf`` quantisers, keyed by a format's parameters (``spec``: its
family and bits), so a kernel's format value is checked without the reference importing the
kernels; :mod:`~kvdsl.reference.paged` the paged
model (pools, the two addressings, gather, page copy, compaction, the window's table update);
:mod:`~kvdsl.reference.judge` how an output is held to an oracle (random non-zero inputs, poisoned
outputs, comparison and its tolerances), which the harness and the sessions share."""

from kvdsl.reference.elementwise import (
    channel_scales,
    dequantize,
    pack_int4,
    quantize,
    rms_norm,
    rotate_neox,
    split_heads,
    unpack_int4,
)
from kvdsl.reference.modes import (
    KNorm,
    Quant,
    Rotary,
    Written,
    append_quant,
    build,
    build_quant,
    combine,
    copy,
    merge,
    merge_share,
    merge_share_append,
    merge_share_retain,
    share_window,
    transpose,
)
from kvdsl.reference.qkv import qkv
from kvdsl.reference.window import REGIONS, WindowPlan, window_plan, window_shift

__all__ = [
    "KNorm",
    "Quant",
    "REGIONS",
    "Rotary",
    "WindowPlan",
    "Written",
    "append_quant",
    "build",
    "build_quant",
    "channel_scales",
    "combine",
    "copy",
    "dequantize",
    "merge",
    "merge_share",
    "merge_share_append",
    "merge_share_retain",
    "pack_int4",
    "qkv",
    "quantize",
    "rms_norm",
    "rotate_neox",
    "share_window",
    "split_heads",
    "transpose",
    "unpack_int4",
    "window_plan",
    "window_shift",
]
