"""Inputs of the interpreter tests (``test_interp.py``, ``test_interp_execution.py``): random
never-zero values of both signs and poisoned outputs."""

from __future__ import annotations

import numpy as np

RNG = np.random.default_rng(7)


def nonzero(shape, dtype=np.float32) -> np.ndarray:
    """Random values in ±[0.5, 1.5): never zero, of both signs (a sign dropped or flipped
    shows)."""
    sign = RNG.choice(np.array([-1.0, 1.0]), shape)
    return ((RNG.random(shape) + 0.5) * sign).astype(dtype)


def poison(n: int, dtype=np.float32) -> np.ndarray:
    """``n`` NaNs (0xDEADBEEF for u32): an element left unwritten shows."""
    return np.full(n, np.nan, dtype) if dtype != np.uint32 else np.full(n, 0xDEADBEEF, np.uint32)
