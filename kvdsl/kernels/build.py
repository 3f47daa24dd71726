"""``build``: a BNSH cache from new BSH K/V, K optionally RMS-normed and NeoX-rotated.

Drop-in for the template's ``mode == "build"`` branch (its final ``{% else %}``, shared with
``build_quant`` and ``append_quant`` in :mod:`kvdsl.kernels.quant`). One invocation per
destination row ``(b, hk, t)``: params ``count`` = rows (batch × kvHeads × seq), ``seq`` = new
tokens per batch (also the present's rows per head), ``pastSeq`` = the absolute position of token
0 (rotary only). Bindings ``src_k``, ``src_v`` (BSH), ``k_norm_weight`` (``[HEAD_DIM]``),
``cos_cache``/``sin_cache`` (``[positions * HALF]``), ``present_key``, ``present_value`` (BNSH).

The row program is :mod:`kvdsl.kernels.rows`' (K normed, then rotated at ``pastSeq + t``).
Walks: ``per_row`` (the template's) and ``flat`` (:mod:`kvdsl.nodes.walks`: one invocation per
present ``vec4``, ``count * HEAD_DIM_V4`` items; rotary on f16 data, and K RMSNorm reduced in
workgroup memory, walk one invocation per pair of vectors ``(dr, dr + HALF_V4)``, ``count *
HALF_V4`` items, :func:`kvdsl.nodes.walks.pairs`).

``window`` (:class:`kvdsl.nodes.index.CacheWindow`, the flat walk; with :mod:`.quant`'s modes):
``count`` is the window's rows, the present is bound from slice ``headBase`` on, ``src_k`` /
``src_v`` from batch ``batchBase`` on; the K-norm weight and rotary tables are bound whole.

Defect of the template, fixed here: it stores the f32 row ``k`` (and ``src_v``) into
``present_key``/``present_value`` without conversion, so an f16 present (or f16 ``src_k``, loaded
into the f32 row) is invalid WGSL; kvdsl converts on load and on store.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvdsl.ir import Dispatch, Kernel, KernelBuilder, Val, convert, with_contract
from kvdsl.kernels.config import Element, FLOATS, PRESENT, builds, choice
from kvdsl.kernels.extents import plus, times

from kvdsl.kernels import rows
from kvdsl.kernels.rows import RowConfig
from kvdsl.nodes import walks, words
from kvdsl.nodes.index import bnsh, cache_window
from kvdsl.nodes.rotary import Rotation, move_rotated_pair


@dataclass(frozen=True)
class BuildConfig(RowConfig):
    """A build variant: cache shape, K RMSNorm and rotary switches, element types."""

    present_type: Element = choice(Element.F32, FLOATS)
    mode = "build"

    def check_fields(self) -> None:
        super().check_fields()


@builds(BuildConfig)
def build(cfg: BuildConfig, name: str = "build") -> Kernel:
    """Build the ``build`` kernel for ``cfg`` (the flat rotary walk walks rotary pairs where
    :attr:`kvdsl.kernels.plan.WalkPlan.uses_pairs` says: by default where it loads f16)."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    plan = cfg.plan
    width = walks.lanes(cfg.head_dim, cfg.rotary, cfg.half) if plan.program else 1
    inputs = rows.declare_inputs(kb, cfg, width=width)
    ty = cfg.present_type.scalar
    present = words.elem(ty, width)
    present_key, present_value = words.bindings(kb, PRESENT, ty, width, "read_write")
    c = rows.declare_consts(kb, cfg)
    count, seq, past = rows.declare_params(kb, "count", "seq", "pastSeq")
    if plan.uses_pairs and not cfg.k_norm:
        fr = rows.flat_row(kb, cfg, c, inputs, width, pairs=True)
        pos = kb.let("pos", past + fr.t)
        rot = Rotation(inputs.cos_cache, inputs.sin_cache, pos, fr.half)

        def dst() -> Val:
            kb.comment("The present row is the walk's row.")
            return kb.let("dst", fr.it.row * fr.per_row + fr.it.d)

        src = (inputs.src_k, inputs.src_v, fr.src_base, fr.it.d)
        move_rotated_pair(kb, *src, rot, present_key, present_value, dst)
        dispatch = plan.row_dispatch(kb, count, width)
    elif plan.uses_pairs:  # with K RMSNorm: every load before the norm's barrier
        fr = rows.flat_row(kb, cfg, c, inputs, width, pairs=True)
        kl = rows.flat_k_loads(kb, fr, inputs, lambda: kb.let("pos", past + fr.t))
        v0 = kb.let("v0", inputs.src_v[fr.src_base + fr.it.d])
        v1 = kb.let("v1", inputs.src_v[fr.src_base + (fr.it.d + fr.pair)])
        k0, k1 = rows.flat_k_pair(kb, fr, kl, rows.flat_norm(kb, cfg, c, fr))
        kb.comment("The present row is the walk's row.")
        dst = kb.let("dst", fr.it.row * fr.per_row + fr.it.d)
        for at, k, v in ((dst, k0, v0), (dst + fr.pair, k1, v1)):
            present_key[at] = words.to(kb, present, k)
            present_value[at] = words.to(kb, present, v)
        dispatch = plan.dispatch(count, fr.pair)
    elif plan.program:
        fr = rows.flat_row(kb, cfg, c, inputs, width)
        kl = rows.flat_k_loads(kb, fr, inputs, lambda: kb.let("pos", past + fr.t))
        v = inputs.src_v[fr.src_base + fr.it.d]
        inv_rms = None
        if fr.k_own is not None:  # every load before the norm's barrier
            v = kb.let("v", v)
            inv_rms = rows.flat_norm(kb, cfg, c, fr)
        k = rows.flat_k(kb, fr, kl, inv_rms)
        kb.comment("The present row is the walk's row: the destination is the flat index.")
        present_key[fr.it.e] = words.to(kb, present, k)
        present_value[fr.it.e] = words.to(kb, present, v)
        dispatch = plan.dispatch(count, fr.per_row)
    else:
        row = rows.row_walk(kb, cfg.fold, c)
        k = rows.k_row(kb, c, inputs, row.src_base, lambda: kb.let("pos", past + row.t))
        dst_base = kb.let("dstBase", bnsh(row.b, row.hk, row.t, c.heads, seq, c.head_dim))
        with walks.row_elements(kb, c.head_dim) as d:
            present_key[dst_base + d] = convert(present, k[d])
            present_value[dst_base + d] = convert(present, inputs.src_v[row.src_base + d])
        dispatch = Dispatch(count.node, cfg.workgroup_size, cfg.fold)
    kernel = kb.build(dispatch, "Build a BNSH cache from new BSH K/V" + _transforms_doc(cfg) + ".")
    present_rows = times(count, cfg.head_dim)
    extents = rows.row_extents(cfg, count, seq, plus(past, seq), cache_window(kb, cfg.window))
    extents |= {"present_key": present_rows, "present_value": present_rows}
    # A flat kernel's vector bindings count vectors (a no-op for scalar bindings).
    return walks.vector_extents(with_contract(kernel, extents, {"seq >= 1": seq >= 1}))


def _transforms_doc(cfg: RowConfig) -> str:
    parts = (["K RMSNorm"] if cfg.k_norm else []) + (["rotary"] if cfg.rotary else [])
    return ", applying " + " and ".join(parts) + " to K" if parts else ""
