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

Split-K (flash-decoding): the keys are cut into ``chunks`` ranges of ``chunk`` rows (at most
``MAX_CHUNK``); workgroup ``(b, kv head, row block, chunk)`` reads its range once for a block
of at most ``ROWS`` of its KV head's ``GROUP × queries`` query rows, and writes each row's
partial: the unnormalised output ``sum exp(logit - m) v`` and, in one more vector, the maximum
logit ``m`` and the sum ``l`` of ``exp(logit - m)``. With one chunk the kernel writes the
output itself; otherwise :func:`attend_merge` combines the partials in a second dispatch.

Inside a workgroup, in three steps between barriers:

1. *scores*: invocation ``t`` takes keys ``start + t``, ``start + t + WG``, ... and scores each
   against the block's queries (held in workgroup memory), into ``logits[row][key]``; a key's
   row is loaded as straight-line lets (:data:`ROW_LOADS` units back to back) before its dot
   products, so its loads are in flight together; its largest score per row goes to
   ``part[row][t]``;
2. *weights*: every row's maximum is read from ``part``, each invocation turns its keys' logits
   into ``exp(logit - m)`` and its sum per row into ``part``, whose total is ``l``;
3. *values*: invocation ``t`` holds unit ``t % HEAD_UNITS`` of the output of every row of the
   block, over keys ``start + t / HEAD_UNITS`` in steps of ``KEY_GROUPS``, :data:`VALUE_KEYS`
   keys a trip whose value loads are issued first (keys past the end read the last key and
   weigh zero): each value unit is loaded once; the key groups' sums are added in workgroup
   memory at the end.

A unit is 16 bytes: a vec4 of f32, or eight f16 halves as ``vec4<u32>`` words (four halves as
``vec2<u32>`` where ``head_dim`` is not a multiple of 8). In a paged cache each key's row base
is kept in workgroup memory by the scores, so the values read no page table. The latency of
the cache's loads, not their count, bounds a decode: these are what keeps many in flight.

Logits of keys a row does not see are :data:`HIDDEN`, and weigh zero; a value a row does not
weigh is never multiplied in (a released page may hold anything).
"""

from kvdsl.kernels.attend.config import AttendConfig, CacheLayout, RowLayout
from kvdsl.kernels.attend.kernel import attend
from kvdsl.kernels.attend.merge import attend_merge
from kvdsl.kernels.attend.plan import plan

__all__ = ["AttendConfig", "CacheLayout", "RowLayout", "attend", "attend_merge", "plan"]
