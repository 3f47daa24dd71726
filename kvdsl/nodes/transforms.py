"""The append row transforms of the vectors a lane holds: K's RMSNorm, then its NeoX rotation,
whole or partial, stated once for every writer whose lanes hold runs of a row (the dense
quantiser's lanes: ``dense_append``/``dense_build``, ``paged_append`` into a dense format).

A lane holds its ``j``-th vector of K as loaded (f32 lanes) and knows the row's vector it is
(``at(j)``); :func:`transform_lane` norms it (:class:`kvdsl.nodes.rmsnorm.Norm`) and rotates
it with its partner ``half`` vectors away, loaded beside it and normed alike
(:func:`kvdsl.nodes.rotary.rotate_with_partner`), or with the lane's own partner where the
quantiser pairs the runs (:func:`kvdsl.nodes.rotary.rotate_lane_pairs`). With a partial rotary
a vector past the rotated part passes through, normed. The fused ``qkv`` kernels norm Q and K
(and rotate them) through the same two nodes. With a Walsh-Hadamard ``rotation`` the row's
lanes then rotate K together (:func:`rotated_lane`).
"""

from __future__ import annotations

from typing import Callable

from kvdsl.ir import KernelBuilder, Val
from kvdsl.ir.builder import Shared
from kvdsl.nodes import rotation
from kvdsl.nodes.rmsnorm import Norm
from kvdsl.nodes.rotary import Rotation, rotate_lane_pairs, rotate_with_partner


def transform_lane(
    kb: KernelBuilder,
    k: list[Val],
    at: Callable[[int], Val],
    load: Callable[[Val], Val],
    norm: Norm | None,
    rot: Rotation | None,
    paired: bool = False,
) -> list[Val]:
    """The lane's vectors of K (``k``: its ``j``-th is the row's vector ``at(j)``, as loaded),
    RMS-normed with ``norm`` and then NeoX-rotated with ``rot``, named ``k{j}``; ``load(i)``
    loads the row's vector ``i`` (a partner, normed here as the lane's own are). ``paired``:
    vectors ``j`` and ``j + len(k) / 2`` are a pair (whole-head rotary only)."""
    if paired:
        own = []
        for j, x in enumerate(k):
            own.append(x if norm is None else kb.let(f"kOwn{j}", norm.apply(x, at(j))))
        return rotate_lane_pairs(kb, own, lambda j: kb.let(f"kDr{j}", at(j)), rot)
    out = []
    for j, x in enumerate(k):
        a = kb.let(f"kAt{j}", at(j))
        if norm is not None:
            x = norm.apply(x, a)
        if rot is None:
            out.append(kb.let(f"k{j}", x))
            continue
        x = kb.let(f"kOwn{j}", x)

        def partner_of(i: Val, j: int = j) -> Val:
            p = load(i)
            return kb.let(f"kPair{j}", p if norm is None else norm.apply(p, i))

        out.append(rotate_with_partner(kb, x, a, partner_of, rot, j))
    return out


def rotated_lane(
    kb: KernelBuilder,
    k: list[Val],
    vector_at: Callable[..., Val | int],
    lane: Val,
    lanes: int,
    block: int,
    workgroup_size: int,
    swap: Shared | None = None,
) -> list[Val]:
    """The lane's vectors of K (``k``, normed and NeoX-rotated: its ``j``-th the row's vector
    ``vector_at(lane, j)``) Walsh-Hadamard rotated over blocks of ``block``, the row's
    ``lanes`` lanes together (:func:`kvdsl.nodes.rotation.across_lanes`), named ``kRot{j}``.
    Every invocation of the workgroup calls it (a row's values are exchanged at a barrier);
    ``swap``: workgroup memory the kernel has used before to exchange them through."""
    kb.comment(f"K's row Walsh-Hadamard rotated (blocks of {block}), its lanes together.")
    args = (lanes, block, workgroup_size, "kRot", swap)
    return rotation.across_lanes(kb, k, vector_at, lane, *args)
