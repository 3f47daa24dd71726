"""K RMSNorm over one row held in a function-scope ``var`` array.

For a row ``k`` of ``n`` elements, a weight vector ``w`` and an epsilon::

    k'[d] = k[d] * inverseSqrt(mean(k^2) + eps) * w[d]

The sum of squares accumulates in f32 from ``d = 0`` upward (the order the template uses, so the
interpreter and the GPU add the same terms in the same order); ``k[d] * invRms`` is multiplied
before the weight.
"""

from __future__ import annotations

from kvdsl.ir import Buffer, KernelBuilder, Local, Val, convert, f32, inverse_sqrt
from kvdsl.nodes.walks import row_elements


def rms_norm_row(kb: KernelBuilder, row: Local, weight: Buffer, n: Val, eps: Val) -> Val:
    """Normalise the f32 ``var`` array ``row`` of ``n`` elements in place; returns ``invRms``."""
    ms = kb.var("ms", f32, 0.0)
    with row_elements(kb, n) as d:
        ms.set(ms + row[d] * row[d])
    inv_rms = kb.let("invRms", inverse_sqrt(ms / convert(f32, n) + eps))
    with row_elements(kb, n) as d:
        row[d] = row[d] * inv_rms * convert(f32, weight[d])
    return inv_rms
