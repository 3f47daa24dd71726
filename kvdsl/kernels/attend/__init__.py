"""``attend``: decode attention of the new tokens' queries over a KV cache, split over the keys.

For sequence ``b`` of ``seqlens_k[b] + 1`` cached rows (the new tokens' rows last) and its
``queries`` new tokens, each query head ``h`` reads KV head ``h / GROUP`` and gives
``softmax(scale * q . k) v`` over the keys its token sees (:mod:`kvdsl.reference.attention`
states the meaning: causal inside the new tokens, an optional sliding ``window``, soft-capping,
one sink logit per head).

The cache is contiguous (BNSH ``[batch, kvHeads, seq, headDim]``, ``seq`` its capacity: the
buffer-sharing cache) or paged (:mod:`kvdsl.nodes.paged`: a page table and ``seqlens_k``, NHD
or HND pages, separate or combined pools); a row whose page entry is negative (a page a sliding
window released) is not seen. Q and O are BNSH ``[batch, qHeads, queries, headDim]`` or BSH
``[batch, queries, qHeads * headDim]``, f32 or f16 (carried in u32 words).

A cache row is, as kvdsl's writers write it (:mod:`kvdsl.kernels.attend.cache` and
:mod:`kvdsl.kernels.attend.kivi` state each kind's bytes): f32 or f16 (``cache_type``;
``format`` unset); a ``format`` of :mod:`kvdsl.nodes.formats` (any
:class:`~kvdsl.nodes.formats.Format` value, a user's included), its scales inline or, with
``scales="side"``, in ``scales`` or ``scale_pages``, dequantised in registers by the format's
own decoder, never through an f32 copy of the cache; the template's int8 or int4
(``format="template_int8"`` / ``"template_int4"``, contiguous only: ``build_quant``'s and
``append_quant``'s layout, which no format of :mod:`kvdsl.nodes.formats` has, its scales per
channel or per tensor as ``params.perChannel`` says, in ``kv_scale``); or KIVI's mixed cache
(``format="kivi2"`` / ``"kivi4"``, ``kivi_group``), as ``kivi_append`` and ``kivi_flush`` write
it.

A quantised combined pool (which no writer of kvdsl fills) is read in the layout
:class:`~kvdsl.nodes.paged.PageGeometry` states for it, its side scales in their own pages.

Split-K (flash-decoding): the keys are cut into ``chunks`` ranges of ``chunk`` rows (at most
``MAX_CHUNK``); workgroup ``(b, kv head, row block, chunk)`` reads its range once for a block
of at most ``ROWS`` of its KV head's ``GROUP × queries`` query rows, and writes each row's
partial: the unnormalised output ``sum exp(logit - m) v`` and, in one more vector, the maximum
logit ``m`` and the sum ``l`` of ``exp(logit - m)``. With one chunk the kernel writes the
output itself; otherwise :func:`attend_merge` combines the partials in a second dispatch.

Inside a workgroup, in three steps between barriers:

1. *scores*: invocation ``t`` takes keys ``start + t``, ``start + t + WG``, ...,
   :data:`~kvdsl.kernels.attend.config.SCORE_KEYS` of them a trip, and scores each against
   the block's queries (held in workgroup memory; each query vector read once for the trip's
   keys), into ``logits[row][key]``; a trip's key rows are loaded as straight-line lets (runs
   of :data:`ROW_LOADS` units over its keys, back to back) before their dot products, so
   their loads are in flight together (over a KIVI cache, invocation ``t`` takes the
   :data:`~kvdsl.kernels.attend.config.KIVI_KEYS` consecutive keys from ``KIVI_KEYS * t``
   past the multiple of KIVI_KEYS below ``start``, a trip); its largest score per row goes to
   ``part[row][t]``;
2. *weights*: every row's maximum ``m`` is reduced from ``part`` in two levels (a few
   invocations a row each take every few entries, then one a row takes theirs), each
   invocation turns its keys' logits into ``exp(logit - m)`` and its sum per row into
   ``part``, whose total ``l`` is reduced the same way;
3. *values*: invocation ``t`` holds unit ``t % HEAD_UNITS`` of the output of every row of the
   block, over keys ``start + t / HEAD_UNITS`` in steps of ``KEY_GROUPS``, :data:`VALUE_KEYS`
   keys a trip whose value loads are issued first (keys past the end read the last key and
   weigh zero): each value unit is loaded once, zeroed where no row of the block weighs its
   key (a released page may hold NaN), then multiplied into every row's sum; the key groups'
   sums are added as a tree in workgroup memory at the end.

A unit is 16 bytes: a vec4 of f32, or eight f16 halves as ``vec4<u32>`` words (four halves as
``vec2<u32>`` where ``head_dim`` is not a multiple of 8), or the template's ``vec4<i32>`` or
``vec4<u32>`` (KIVI's: eight values of a key, from one code word, or four residual words). A
format's rows are read word by word: the scores load each word of a key's row (and each scale
word) once, where the decoder first needs it; in the values an invocation decodes its unit of
eight values (four for an 8-bit format) of each key. In a paged cache each key's row base is
kept in workgroup memory by the scores, so the values read no page table. The latency of the
cache's loads, not their count, bounds a decode: these are what keeps many in flight.

Logits of keys a row does not see are :data:`HIDDEN`, and weigh zero; a value a row does not
weigh is never multiplied in (a released page may hold anything).
"""

from kvdsl.kernels.attend.config import HIDDEN, AttendConfig, CacheLayout, RowLayout
from kvdsl.kernels.attend.kernel import attend
from kvdsl.kernels.attend.merge import attend_merge
from kvdsl.kernels.attend.plan import plan

__all__ = ["HIDDEN", "AttendConfig", "CacheLayout", "RowLayout", "attend", "attend_merge", "plan"]
