"""``transpose``: BSH new K/V → BNSH present cache, one element (or one vec4) per invocation.

Drop-in for the template's ``mode == "transpose"`` branch: bindings ``key``, ``value`` (read) and
``present_key``, ``present_value`` (read_write); params ``batchSize``, ``kvSeq``; one invocation per
destination element, ``ceil(total / WG)`` workgroups folded at ``fold`` in x.

``window`` (:class:`kvdsl.nodes.index.CacheWindow`) adds the params ``count`` (the window's
present rows), ``headBase`` and ``batchBase``: one invocation per element of the window's
``count`` rows, the present bound from slice ``headBase`` on and ``key``/``value`` from batch
``batchBase`` on.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvdsl.ir import Buffer, Dispatch, Kernel, KernelBuilder, Scalar, u32, vec, with_contract
from kvdsl.kernels.config import CacheConfig, Element, FLOATS, builds, choice, multiple_of
from kvdsl.kernels.extents import times, window_batches
from kvdsl.kernels.config import require

from kvdsl.nodes import words
from kvdsl.nodes.index import cache_window, flat_index


@dataclass(frozen=True)
class TransposeConfig(CacheConfig):
    """A transpose variant.

    ``vec4`` moves four head-dim elements per invocation (``head_dim`` must divide by 4);
    ``input_type`` / ``present_type`` are the element types of the new K/V and the cache;
    ``words`` (with ``vec4``) carries f16 vectors as ``vec2<u32>`` words of four halves
    (:data:`kvdsl.nodes.words.HALVES`), so the module needs no ``enable f16;`` (the flat variants).
    """

    vec4: bool = False
    input_type: Element = choice(Element.F32, FLOATS)
    present_type: Element = choice(Element.F32, FLOATS)
    words: bool = False
    mode = "transpose"

    def check_fields(self) -> None:
        if self.vec4:
            multiple_of("head_dim", self.head_dim, 4, " for vec4")
        if self.words:
            require(self.vec4, "words", self.words, "vec4=True (words carry f16 vectors)")


@builds(TransposeConfig)
def transpose(cfg: TransposeConfig, name: str = "transpose") -> Kernel:
    """Build the transpose kernel for ``cfg``."""
    kb = KernelBuilder(name, cfg.workgroup_size)
    width = 4 if cfg.vec4 else 1
    ty_in, ty_out = cfg.input_type.scalar, cfg.present_type.scalar

    def bind(name: str, ty: Scalar, access: str) -> Buffer:
        if cfg.words:  # f16 vectors in u32 words; f32 ones as they are
            return words.binding(kb, name, ty, width, access)
        return kb.binding(name, vec(4, ty) if cfg.vec4 else ty, access)

    key, value = bind("key", ty_in, "read"), bind("value", ty_in, "read")
    present_key = bind("present_key", ty_out, "read_write")
    present_value = bind("present_value", ty_out, "read_write")
    elem_out = present_key.binding.elem
    heads = kb.const("KV_HEADS", u32, cfg.kv_heads)
    kb.workgroup_const("WG")
    suffix = "_V4" if cfg.vec4 else ""
    head_dim = kb.const("HEAD_DIM" + suffix, u32, cfg.head_dim // width)
    hidden = kb.const("KV_HIDDEN" + suffix, u32, cfg.kv_heads * cfg.head_dim // width)
    batch_size, kv_seq = kb.param("batchSize"), kb.param("kvSeq")
    rows = kb.param("count") if cfg.window else batch_size * heads * kv_seq
    win = cache_window(kb, cfg.window)

    index = flat_index(kb, cfg.fold, "index")
    total = kb.let("total", rows * head_dim)
    with kb.if_(index >= total):
        kb.ret()
    at = index
    if cfg.window:
        kb.comment("The window's element -> the global element: the window starts at headBase.")
        at = kb.let("gIndex", index + win.head_base * kv_seq * head_dim)
    d = kb.let("d4" if cfg.vec4 else "d", at % head_dim)
    token = kb.let("token", at / head_dim % kv_seq)
    head = kb.let("head", at / (head_dim * kv_seq) % heads)
    batch = kb.let("batch", at / (head_dim * kv_seq * heads))
    src = kb.let("src", (win.batch(batch) * kv_seq + token) * hidden + head * head_dim + d)
    present_key[index] = words.to(kb, elem_out, key[src])
    present_value[index] = words.to(kb, elem_out, value[src])
    items = rows * head_dim
    doc = (
        "Transpose copy [batch, token, head*headDim] -> present [batch, head, token, headDim].\n"
        + (
            "Each invocation copies one vec4 along d; "
            if cfg.vec4
            else "Each invocation copies one element; "
        )
        + "adjacent invocations write adjacent destinations."
    )
    kernel = kb.build(Dispatch(items.node, cfg.workgroup_size, cfg.fold), doc)
    new = times(batch_size, kv_seq, hidden)
    if cfg.window:
        batches = window_batches(rows, cfg.kv_heads, kv_seq, win.head_base, win.batch_base)
        new = times(batches, kv_seq, hidden)
    return with_contract(
        kernel, {"key": new, "value": new, "present_key": items, "present_value": items}
    )
