"""Row writes shared by the per-row walks of the appending modes."""

from __future__ import annotations

from dataclasses import dataclass

from kvdsl.ir import Buffer, KernelBuilder, Scalar, Val, array, convert, f32
from kvdsl.nodes import walks
from kvdsl.nodes.rotary import rotate_row


@dataclass(frozen=True)
class RowRotary:
    """The cos/sin tables and the half width a rotated row needs."""

    cos: Buffer
    sin: Buffer
    half: Val


def append_row(
    kb: KernelBuilder,
    new_k: Buffer,
    new_v: Buffer,
    present_key: Buffer,
    present_value: Buffer,
    n_src: Val,
    dst: Val,
    head_dim: Val,
    head_dim_n: int,
    cache: Scalar,
    rotary: RowRotary | None = None,
    pos: Val | None = None,
) -> None:
    """Copy the new row at ``n_src`` to the cache row at ``dst``, converted to ``cache``.

    With ``rotary``, K goes through an f32 ``var`` row rotated at ``pos`` first (NeoX).
    """
    if rotary is not None:
        k = kb.var("k", array(f32, head_dim_n))
        with walks.row_elements(kb, head_dim) as d:
            k[d] = convert(f32, new_k[n_src + d])
        rotate_row(kb, k, rotary.cos, rotary.sin, pos, rotary.half)
        with walks.row_elements(kb, head_dim) as d:
            present_key[dst + d] = convert(cache, k[d])
            present_value[dst + d] = convert(cache, new_v[n_src + d])
    else:
        with walks.row_elements(kb, head_dim) as d:
            present_key[dst + d] = convert(cache, new_k[n_src + d])
            present_value[dst + d] = convert(cache, new_v[n_src + d])
