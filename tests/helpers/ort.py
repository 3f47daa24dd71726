"""Rows for the ORT 4-bit TurboQuant checks (the reference and the kernels draw the same)."""

from __future__ import annotations

import numpy as np


def seeded_rows(n: int, d: int, seed: int) -> np.ndarray:
    """Gaussian rows, never zero: two large channels a row (10-50x), some rows scaled by 1e3 or
    1e-3, an offset on some; float32."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    for r in range(n):
        x[r, rng.choice(d, 2, replace=False)] *= rng.uniform(10, 50, 2)
    x[0::7] *= 1e3
    x[1::7] *= 1e-3
    x[2::5] += 0.7
    return x.astype(np.float32)
