"""Random inputs of a catalog variant for a shape the host chooses (``kvdsl inputs --shape``).

Data bindings get random non-zero values of their host type (:func:`kvdsl.reference.judge.values`:
floats in ±[0.25, 2), integers over their full range, so any packed code or word). The integer
inputs that address memory get values a host may pass, as the verification cases make them:

- ``seqlens_k``: each sequence's tokens after the step, less one, mixing every kind the cases do
  (:func:`~kvdsl.harness.modes.adversarial_seqlens`: right-padded, an append in the middle, the
  cache filled, past its capacity); a paged one fits the sequence's table row and the pool, at
  least the new tokens; a rotary one at most ``positions`` rows of the table.
- ``page_table``: each sequence's pages, distinct over the pool (no two sequences write one
  page: :func:`~kvdsl.harness.paged.allocate`), ``-1`` past a sequence's last page.
- ``slot_mapping``: an append's distinct slots of the pool; a read's any slots of it.
- ``token_positions``: rows of the rotary table.
- ``page_pairs``: copies from pages onto other pages, each page in one pair at most.
- ``live_pages``: distinct pages of the pool.

An ``attend`` variant's quantised cache holds random values as its format's reference encoder
stores them (:func:`kvdsl.harness.attend_cache.random_cache`): finite scales, codes of values.

A shape these cannot be made valid for is a :class:`ShapeError` naming the variable, its value
and what is allowed.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from kvdsl.harness.attend_cache import random_cache
from kvdsl.harness.modes import adversarial_seqlens
from kvdsl.harness.paged import allocate
from kvdsl.kernels.config import KernelConfig
from kvdsl.reference.judge import values

#: The integer inputs whose values address memory, made by :func:`shaped_inputs`'s rules.
ADDRESSES = (
    "seqlens_k",
    "page_table",
    "slot_mapping",
    "token_positions",
    "page_pairs",
    "live_pages",
)

#: mode → (the shape variable of the new tokens per sequence, that of the cache's rows per head)
#: that ``seqlens_k`` is made for; a mode not named here: ``("keySeq", "seq")``.
SEQLENS = {"append_quant": ("seq", "totalSeq"), "attend": ("queries", "seq")}

#: The modes that address pools through ``page_table`` and append new tokens.
PAGED_APPENDS = ("paged_append", "paged_qkv")


class ShapeError(ValueError):
    """A shape for which no valid inputs exist; the message names the variable, its value and
    what is allowed."""


def _page_size(cfg: KernelConfig) -> int:
    return getattr(cfg, "page_size")


def _need(shape: dict[str, int], name: str, least: int, why: str) -> None:
    if shape[name] < least:
        raise ShapeError(f"{name}={shape[name]}: expected at least {least} ({why})")


def shaped_inputs(
    cfg: KernelConfig,
    shape: dict[str, int],
    counts: dict[str, tuple[int, np.dtype]],
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """One random array per binding of ``cfg``'s variant for ``shape`` (its shape variables'
    values): ``counts`` gives each binding's host values and dtype (the contract's sizes). The
    address inputs are valid (the module's rules); the rest random."""
    made: dict[str, np.ndarray] = {}
    names = set(counts)
    if "seqlens_k" in names:
        made["seqlens_k"] = _seqlens(cfg, shape, names, counts["seqlens_k"][0], rng)
    if "page_table" in names and cfg.mode.startswith("kivi_"):
        rows = shape["batch"] * shape["maxPages"]
        _need(shape, "pages", rows, f"batch x maxPages = {rows} distinct pages (KIVI's tables)")
        made["page_table"] = rng.permutation(shape["pages"])[:rows].astype(np.int32)
    elif "page_table" in names:
        made["page_table"] = _page_table(cfg, shape, made["seqlens_k"], rng)
    if "slot_mapping" in names:
        made["slot_mapping"] = _slots(cfg, shape, counts["slot_mapping"][0], rng)
    if "token_positions" in names:
        _need(shape, "positions", 1, "rows of the rotary table: each token's position is one")
        n = counts["token_positions"][0]
        made["token_positions"] = rng.integers(0, shape["positions"], n).astype(np.int32)
    if "page_pairs" in names:
        copies, pages = shape["copies"], shape["pages"]
        _need(shape, "pages", 2 * copies, f"copies={copies} pairs of distinct pages")
        order = rng.permutation(pages)
        pairs = np.stack([order[:copies], order[copies : 2 * copies]], axis=1)
        made["page_pairs"] = pairs.astype(np.int32).reshape(-1)
    if cfg.mode == "attend" and getattr(cfg, "format", None) is not None:
        made |= random_cache(cfg, shape, rng)
    if cfg.mode.startswith("kivi_"):  # f16 pairs in words: finite halves, as a writer stores
        stored = {"residual_k", "residual_v", "k_stats", "v_stats", "kivi_pages"}
        for name in sorted(names & stored):
            halves = rng.standard_normal(2 * counts[name][0]).astype(np.float16)
            made[name] = halves.view(np.uint32)
    if "live_pages" in names:
        _need(shape, "pages", shape["live"], f"live={shape['live']} distinct pages of the pool")
        made["live_pages"] = rng.permutation(shape["pages"])[: shape["live"]].astype(np.int32)
    out = {}
    for name, (n, dt) in counts.items():
        a = made.get(name)
        if a is None:
            a = values(rng, (n,), dt)
        elif a.size != n:  # the rules above and the contract's sizes disagree
            raise AssertionError(f"binding '{name}': made {a.size} values, the contract sizes {n}")
        out[name] = np.ascontiguousarray(a.astype(dt, copy=False)).reshape(-1)
    return out


def _seqlens(
    cfg: KernelConfig, shape: dict[str, int], names: set[str], batch: int, rng
) -> np.ndarray:
    """``seqlens_k`` for ``shape`` (``batch``: its entries)."""
    paged = "page_table" in names
    if paged:
        p, tables = _page_size(cfg), shape["maxPages"]
        new = shape["keySeq"] if cfg.mode in PAGED_APPENDS else shape.get("queries", 0)
        cap = tables * p
        if new > cap:
            raise ShapeError(
                f"maxPages={tables}: expected at least {-(-new // p)} (a table row of pages of "
                f"{p} tokens holds the keySeq={new} new tokens)"
            )
        lo = max(new - 1, -1)
        if cfg.mode == "attend":  # every cached row of a sequence is one the new tokens see
            lo = max(lo, 0)
    else:
        if cfg.mode == "attend" and "groups" in shape:  # KIVI's contiguous cache: seq in groups
            shape = shape | {"seq": shape["groups"] * cfg.kivi_group}
        new_var, cap_var = SEQLENS.get(cfg.mode, ("keySeq", "seq"))
        if new_var not in shape or cap_var not in shape:
            raise ShapeError(
                f"mode {cfg.mode}: seqlens_k is made for shape variables {new_var} and "
                f"{cap_var}, which this variant lacks: give --case"
            )
        new, cap = shape[new_var], shape[cap_var]
        lo = -1
    if cfg.mode == "attend":  # the chunks cover every sequence's rows
        _need(shape, "chunks", -(-max(new, 1) // shape["chunk"]), "chunks of chunk keys: "
              "they cover the new tokens' rows")  # fmt: skip
        cap = min(cap, shape["chunk"] * shape["chunks"])
    top = cap - 1
    if "positions" in shape and names & {"cos_cache", "rotary_table"}:
        # a rotary kernel reads rows up to the sequence's last token of the table
        _need(shape, "positions", max(new, 1), "rows of the rotary table: one per new token")
        top = min(top, shape["positions"] - 1)
    if paged:
        seqlens = rng.integers(lo, max(top, lo) + 1, batch)
        return _fit_pool(cfg, shape, seqlens, lo).astype(np.int32)
    seqlens = adversarial_seqlens(rng, batch, new, max(cap, 1), int(rng.integers(0, 4)))
    return np.minimum(seqlens, top).astype(np.int32)


def _fit_pool(cfg: KernelConfig, shape: dict[str, int], seqlens: np.ndarray, lo: int):
    """``seqlens`` shortened (not below ``lo``) until the sequences' pages fit the pool."""
    if "pages" not in shape:  # paged_window: page ids are numbers it moves, of no pool
        return seqlens
    p, pages = _page_size(cfg), shape["pages"]
    seqlens = seqlens.astype(np.int64)
    need: Callable[[], int] = lambda: int(sum(-(-(int(s) + 1) // p) for s in seqlens))
    while need() > pages and seqlens.max() > lo:
        b = int(np.argmax(seqlens))
        seqlens[b] = max(lo, (-(-(int(seqlens[b]) + 1) // p) - 1) * p - 1)
    if need() > pages:
        least = need()
        raise ShapeError(
            f"pages={pages}: expected at least {least} (batch={len(seqlens)} sequences' "
            f"keySeq={lo + 1} new tokens, in pages of {p} tokens no two sequences share)"
        )
    return seqlens


def _page_table(cfg: KernelConfig, shape: dict[str, int], seqlens: np.ndarray, rng) -> np.ndarray:
    """Each sequence's pages for its ``seqlens`` tokens, distinct over the pool."""
    p, tables = _page_size(cfg), shape["maxPages"]
    needs = [-(-(max(int(s), -1) + 1) // p) for s in seqlens]
    pages = shape.get("pages", sum(needs))
    table, _ = allocate(rng, needs, pages - sum(needs), fork=False)
    out = np.full((len(needs), tables), -1, np.int32)
    width = min(tables, table.shape[1])
    out[:, :width] = table[:, :width]
    return out.reshape(-1)


def _slots(cfg: KernelConfig, shape: dict[str, int], tokens: int, rng) -> np.ndarray:
    """An append's distinct slots of the pool, or a read's any slots of it."""
    p, pages = _page_size(cfg), shape["pages"]
    if cfg.mode in PAGED_APPENDS:
        least = -(-tokens // p)
        _need(shape, "pages", least, f"{tokens} new tokens, one slot each, in pages of {p}")
        return rng.permutation(pages * p)[:tokens].astype(np.int32)
    if tokens:
        _need(shape, "pages", 1, "the slots read are slots of the pool")
    return rng.integers(0, max(pages * p, 1), tokens).astype(np.int32)
