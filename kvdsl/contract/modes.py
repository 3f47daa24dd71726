"""Every mode's contract (:data:`CONTRACTS`, one :class:`~kvdsl.contract.record.Contract` a
mode, stated in its family's module: :mod:`~kvdsl.contract.cache`,
:mod:`~kvdsl.contract.attend`, :mod:`~kvdsl.contract.kivi`), and what a variant's is: its shape
variables, params formulas and meanings and bindings' sizes, a window's added.

A binding's size is ``(rows, width)``: ``rows`` an expression of the shape variables
(:mod:`kvdsl.contract.expr`) and ``width`` the host values per row (f32, f16, i32 or u32 numbers
of the host's array; a packed int4 cache row is ``head_dim / 2`` u32 words). The element count
of the binding's WGSL array is ``rows * width / values per element``
(:func:`kvdsl.contract.index.bindings`). The shape variables are the keys of the verification
cases' ``Case.shape`` (:mod:`kvdsl.harness.cases`, :mod:`kvdsl.harness.modes`); a test holds the
two to each other.
"""

from __future__ import annotations

import re

from kvdsl.contract import attend, cache, kivi
from kvdsl.contract.record import Contract, Sizes
from kvdsl.kernels.config import ROTARY_TABLE, KernelConfig, window_bindings

#: The families of modes, each a module of contracts.
FAMILIES = (cache, attend, kivi)
#: mode → its contract
CONTRACTS: dict[str, Contract] = {m: c for f in FAMILIES for m, c in f.CONTRACTS.items()}

#: The shape variables a windowed variant (``window=True``) adds, after the mode's: the window's
#: first slice, its slices, and the first batch of its bound BSH source range. Its ``batch`` is
#: the batches up to the window's last (``seqlens_k``'s rows; the sources hold batches
#: ``[batchBase, batch)``).
WINDOW_SHAPE = ("headBase", "slices", "batchBase")
#: The params a windowed variant adds (``count`` only where the mode has none: ``transpose``).
WINDOW_MEANINGS = {
    "count": "the window's rows",
    "headBase": "the window's first (batch, kv head) slice: where the bound cache ranges start",
    "batchBase": "the first batch of the bound BSH source ranges (0 when bound whole)",
}

#: The config fields a value formula (:meth:`Contract.formulas`) may name; :func:`values` puts in
#: the variant's numbers.
CONSTANTS = ("kv_heads", "q_heads")

#: mode → its shape variables (:attr:`Contract.shape`)
SHAPES = {mode: c.shape for mode, c in CONTRACTS.items()}


def formulas(cfg: KernelConfig) -> dict[str, str | None]:
    """Each params field of ``cfg``'s variant as a formula of the shape variables and
    :data:`CONSTANTS` (None: a value the host chooses, with no formula: ``append_quant``'s
    ``pastSeq`` with ``rotary_position="past_seq"``). ``tests/contract`` holds every formula to
    the kernel's extents and to the verification cases' params."""
    contract = CONTRACTS[cfg.mode]
    own = contract.formulas(cfg)
    if not cfg.window:
        return own
    per = contract.rows(cfg)
    return own | {"count": f"slices * {per}", "headBase": "headBase", "batchBase": "batchBase"}


def values(cfg: KernelConfig) -> dict[str, str | None]:
    """Each params field's value for a shape: :func:`formulas` with the variant's
    :data:`CONSTANTS` put in (the contract's expression language over shape variables)."""
    numbers = {k: str(getattr(cfg, k)) for k in CONSTANTS if hasattr(cfg, k)}

    def put(formula: str) -> str:
        return re.sub(r"[A-Za-z_][A-Za-z0-9_]*", lambda m: numbers.get(m[0], m[0]), formula)

    return {k: None if f is None else put(f) for k, f in formulas(cfg).items()}


def shape(cfg: KernelConfig, bindings: list[str]) -> list[str]:
    """The shape variables of ``cfg``'s variant, whose kernel has ``bindings``."""
    rotary = ["positions"] if {"cos_cache", ROTARY_TABLE} & set(bindings) else []
    own = CONTRACTS[cfg.mode].shape_of(cfg)
    table = ["maxPages"] if "page_table" in bindings and "maxPages" not in own else []
    return own + table + rotary + (list(WINDOW_SHAPE) if cfg.window else [])


def meanings(cfg: KernelConfig) -> dict[str, str]:
    """What each params field of ``cfg``'s variant means (a windowed one's base params too),
    with its formula (:func:`formulas`, ``×`` for ``*``) where it is more than a shape
    variable's name."""
    own = CONTRACTS[cfg.mode].meanings_of(cfg)
    if cfg.window:  # a window's count is the window's rows
        own = own | {k: v for k, v in WINDOW_MEANINGS.items() if k not in own or k == "count"}
    table, out = formulas(cfg), {}
    for field, words in own.items():
        formula = table.get(field)
        if formula is not None and " " in formula:  # more than one name or number
            words = f"{words}: {formula.replace(' * ', ' × ')}"
        out[field] = words
    return out


def sizes(cfg: KernelConfig) -> Sizes:
    """The sizes of the bindings of ``cfg``'s variant: the mode's, or a window's.

    A windowed variant binds the cache's ``slices`` slices (rows of ``head_dim`` values per
    head instead of ``hidden`` per token) and the sources' batches ``[batchBase, batch)``.
    """
    table = CONTRACTS[cfg.mode].sizes(cfg)
    if not cfg.window:
        return table
    cache, sources = window_bindings(cfg.mode)
    out = dict(table)
    for name, (rows, width) in table.items():
        if name not in cache and name not in sources:
            continue
        per = rows.removeprefix("batch * ")  # every cache and source row is per batch
        if name in cache:
            out[name] = (f"slices * {per}", width // cfg.kv_heads)
        else:
            out[name] = (f"(batch - batchBase) * {per}", width)
    return out
