"""The catalog: named kernel variants over the KV-cache shapes of real model families.

Each variant is a mode's config; :func:`build` makes its kernel. Shapes (KV heads × head dim, and
the rotated pairs per head of a partial rotary) come from the models' published configs:

| key          | model family                      | KV heads | head dim | notes                     |
|--------------|-----------------------------------|----------|----------|---------------------------|
| qwen25_05b   | Qwen2.5-0.5B-Instruct             | 2        | 64       | GQA 14:2                  |
| llama32_1b   | Llama-3.2-1B                      | 8        | 64       | GQA 32:8                  |
| phi3_mini    | Phi-3-mini-4k-instruct            | 32       | 96       | MHA                       |
| llama31_8b   | Llama-3.1-8B / Mistral-7B         | 8        | 128      | GQA 32:8                  |
| qwen3_06b    | Qwen3-0.6B                        | 8        | 128      | QK RMSNorm                |
| gemma2_2b    | Gemma-2-2B                        | 4        | 256      | sliding-window layers     |
| gemma3_1b    | Gemma-3-1B                        | 1        | 256      | MQA, QK norm, sliding     |
| phi2         | Phi-2                             | 32       | 80       | rotary on 32 dims: half 16 |
| stablelm3b   | StableLM-3B-4E1T / Pythia-2.8B    | 32       | 80       | rotary on 20 dims: half 10 |

The models are :mod:`kvdsl.catalog.models`; a family's variants are one module each:
:mod:`~kvdsl.catalog.template` (the template's modes), :mod:`~kvdsl.catalog.dense`,
:mod:`~kvdsl.catalog.paged`, :mod:`~kvdsl.catalog.qkv`, :mod:`~kvdsl.catalog.attend` (which adds
the query heads and gpt-oss-20b) and :mod:`~kvdsl.catalog.kivi`.
"""

from __future__ import annotations

import difflib
from typing import Any, Callable, Iterable

from kvdsl.catalog import attend, dense, kivi, paged, qkv, template
from kvdsl.catalog.models import MODELS, Model
from kvdsl.ir import Kernel
from kvdsl.kernels.config import BUILDERS, KernelConfig, as_dict

__all__ = ["MODELS", "MODES", "VARIANTS", "Model"]

#: mode name → (config class, kernel builder), as each builder registers itself beside its
#: definition (:func:`kvdsl.kernels.config.builds`; importing :mod:`kvdsl.kernels` imports them
#: all).
MODES: dict[str, tuple[type[KernelConfig], Callable[..., Kernel]]] = BUILDERS


def _variants() -> dict[str, KernelConfig]:
    v: dict[str, KernelConfig] = {}
    for family in (template, dense, paged, qkv, attend, kivi):
        for named in family.NAMED:
            v |= named(MODELS)
    return dict(sorted(v.items()))


VARIANTS: dict[str, KernelConfig] = _variants()


class UnknownVariant(KeyError):
    """A variant name that is not in the catalog."""

    def __str__(self) -> str:
        name = str(self.args[0])
        return f"unknown variant {name!r}{did_you_mean(name)} (see `kvdsl list`)"


def suggest(name: str, names: Iterable[str] | None = None) -> tuple[list[str], str | None]:
    """The names of ``names`` (default: the catalog's variants) spelled like ``name``, up to
    three, best first (``difflib.get_close_matches`` at 0.75); where none is, the beginning of a
    name that ``name`` misspells (at 0.8), else None. ``emitted/kvdsl.js`` finds the same."""
    names = list(VARIANTS if names is None else names)
    near = difflib.get_close_matches(name, names, 3, 0.75)
    if near:
        return near, None
    n = len(name)
    beginnings = {v[:k] for v in names for k in (n - 1, n, n + 1) if 0 < k < len(v)}
    begins = difflib.get_close_matches(name, beginnings, 1, 0.8)
    return [], begins[0] if begins else None


def did_you_mean(name: str, names: Iterable[str] | None = None) -> str:
    """``; did you mean ...?`` naming the names :func:`suggest` finds, or the beginning of a
    name that ``name`` misspells (``kvdsl list`` lists the variants that begin so); '' where
    nothing is near."""
    near, begins = suggest(name, names)
    if near:
        return f"; did you mean {' or '.join(map(repr, near))}?"
    if begins is not None:
        return f"; did you mean a variant beginning {begins!r} (`kvdsl list {begins}`)?"
    return ""


def config(name: str) -> KernelConfig:
    """The config of variant ``name``."""
    if name not in VARIANTS:
        raise UnknownVariant(name)
    return VARIANTS[name]


def build_config(cfg: KernelConfig, name: str | None = None) -> Kernel:
    """The kernel of any mode's config."""
    _, builder = MODES[cfg.mode]
    return builder(cfg, name or cfg.mode)


def build(name: str) -> Kernel:
    """The kernel of variant ``name``."""
    return build_config(config(name), name)


def all_kernels() -> dict[str, Kernel]:
    """Every catalog variant's kernel by name."""
    return {name: build(name) for name in VARIANTS}


def describe(name: str) -> dict[str, Any]:
    """The variant's config as a dict."""
    return as_dict(config(name))
