"""The append row transforms of the vectors a lane holds: K's RMSNorm, then its NeoX rotation,
whole or partial, stated once for every writer whose lanes hold runs of a row (the dense
quantiser's lanes: ``dense_append``/``dense_build``, ``paged_append`` into a dense format), and
the whole of a dense writer's lane before its quantiser (:func:`transform_run`).

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

from kvdsl.ir import Buffer, KernelBuilder, Val
from kvdsl.ir.builder import Shared
from kvdsl.nodes import rotation, words
from kvdsl.nodes.quantise import Quantiser
from kvdsl.nodes.rmsnorm import Norm, reduced_inverse_rms
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


def lane_norm(
    kb: KernelBuilder,
    k: list[Val],
    lane: Val,
    lanes: Val,
    row_lanes: int,
    workgroup_size: int,
    head_dim: Val,
    eps: Val,
    weight: Buffer,
) -> Norm:
    """K RMSNorm of the row whose ``lanes`` (``row_lanes`` of them) hold ``k`` (the lane's
    vectors, f32 lanes): its ``invRms`` reduced in workgroup memory (a barrier every invocation
    reaches) and the weight's vectors (``vec4`` of f32 or f16 words)."""
    sums = (tuple(k), lane, lanes, workgroup_size, row_lanes)
    inv_rms = reduced_inverse_rms(kb, head_dim, eps, *sums)
    return Norm(inv_rms, lambda a: words.as_f32(kb, weight[a]))


def transform_run(
    kb: KernelBuilder,
    q: Quantiser,
    lane: Val,
    k: list[Val],
    v: list[Val],
    load: Callable[[Val], Val],
    norm: Norm | None,
    rot: Rotation | None,
    block: int,
    workgroup_size: int,
) -> tuple[list[Val], list[Val]]:
    """A dense writer's lane of K and V rows before the quantiser ``q``: K normed and rotated
    (:func:`transform_lane`, ``load`` loading a partner), Walsh-Hadamard rotated over blocks of
    ``block`` (0: not), then K and V in the basis of the format's own rotation where it has
    one (:meth:`kvdsl.nodes.formats.Format.rotate_row`: the lane holds the rows whole)."""
    if norm is not None or rot is not None:
        k = transform_lane(kb, k, lambda j: q.vector_at(lane, j), load, norm, rot, q.paired)
    if block:
        k = rotated_lane(kb, k, q.vector_at, lane, q.lanes, block, workgroup_size)
    if q.fmt.rotated:
        kb.comment(f"The rows in {q.fmt.name}'s own basis (the lane holds them whole).")
        k, v = q.fmt.rotate_row(kb, "kOrt", k), q.fmt.rotate_row(kb, "vOrt", v)
    return k, v
