"""The model families whose published configs give the catalog's shapes (:data:`MODELS`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Model:
    """A model family's KV-cache shape, its query heads (``num_attention_heads``) and its rotary: ``half`` pairs per head (the first ``2 * half``
    dimensions rotate), or None where rotary turns the whole head."""

    name: str
    kv_heads: int
    head_dim: int
    half: int | None = None
    q_heads: int | None = None

    @property
    def shape(self) -> dict[str, int]:
        """The config fields of the shape: ``kv_heads`` and ``head_dim``."""
        return {"kv_heads": self.kv_heads, "head_dim": self.head_dim}

    @property
    def heads(self) -> dict[str, Any]:
        """The shape's config fields and ``q_heads``."""
        return self.shape | {"q_heads": self.q_heads}

    @property
    def rotary(self) -> dict[str, Any]:
        """The config fields of the model's rotary: ``rotary`` and ``rotary_half``."""
        return {"rotary": True, "rotary_half": self.half}


def partial_rotary(models: dict[str, Model]) -> dict[str, Model]:
    """The models whose rotary turns only part of a head (Phi-2, GPT-NeoX, StableLM)."""
    return {key: m for key, m in models.items() if m.half is not None}


MODELS = {
    "qwen25_05b": Model("Qwen2.5-0.5B-Instruct", 2, 64, q_heads=14),
    "llama32_1b": Model("Llama-3.2-1B", 8, 64, q_heads=32),
    "phi3_mini": Model("Phi-3-mini-4k-instruct", 32, 96, q_heads=32),
    "llama31_8b": Model("Llama-3.1-8B / Mistral-7B", 8, 128, q_heads=32),
    "qwen3_06b": Model("Qwen3-0.6B", 8, 128, q_heads=16),
    "gemma2_2b": Model("Gemma-2-2B", 4, 256, q_heads=8),
    "gemma3_1b": Model("Gemma-3-1B", 1, 256, q_heads=4),
    # Partial rotary: partial_rotary_factor 0.4 (Phi-2), 0.25 (StableLM-3B-4E1T, Pythia-2.8B's
    # rotary_pct) of head dim 80.
    "phi2": Model("Phi-2", 32, 80, half=16, q_heads=32),
    "stablelm3b": Model("StableLM-3B-4E1T / Pythia-2.8B", 32, 80, half=10, q_heads=32),
}
#: gpt-oss-20b's shape, which only the attend variants use.
GPT_OSS = Model("gpt-oss-20b", 8, 64, q_heads=64)
