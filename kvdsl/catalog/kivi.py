"""The catalog's variants of KIVI's 2-bit cache (:mod:`kvdsl.kernels.kivi`)."""

from __future__ import annotations

from kvdsl.catalog.models import Model
from kvdsl.kernels.kivi import KiviAppendConfig, KiviCache, KiviConfig, KiviFlushConfig


def kivi_variants(models: dict[str, Model]) -> dict[str, KiviConfig]:
    """KIVI 2-bit at Llama-3.1-8B's shape: groups of 128 (36 B per token-head), 64 (40 B) and
    32 (48 B); the flush into pages of 256 tokens (two groups of 128, eight of 32)."""
    shape = models["llama31_8b"].shape
    v: dict[str, KiviConfig] = {}
    for group in (128, 64, 32):
        v[f"kivi_append_2bit_g{group}_llama31_8b"] = KiviAppendConfig(**shape, group=group)
        v[f"kivi_flush_2bit_g{group}_llama31_8b"] = KiviFlushConfig(**shape, group=group)
    for group in (128, 32):
        v[f"kivi_flush_2bit_g{group}_paged256_llama31_8b"] = KiviFlushConfig(
            **shape, group=group, cache=KiviCache.PAGED, page_size=256
        )
    return v


#: The functions that name the kivi family's variants over the catalog's models.
NAMED = (kivi_variants,)
