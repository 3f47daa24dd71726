"""What the host-contract tests share: a seed per variant, a small value of every shape variable,
and params that drive a dispatch through each branch of its rule."""

from __future__ import annotations

import zlib

from kvdsl.contract import evaluate

#: A small value of every shape variable of the catalog, for which every variant has inputs.
SMALL = {
    "batch": 2, "keySeq": 3, "seq": 5, "kvSeq": 3, "pastSeq": 2, "totalSeq": 6, "perChannel": 1,
    "rows": 3, "pages": 8, "maxPages": 3, "copies": 2, "live": 3, "window": 20, "positions": 8,
    "headBase": 1, "slices": 2, "batchBase": 0, "queries": 1, "chunk": 48, "chunks": 2,
    "groups": 2, "flushGroup": 1, "total": 60,
}  # fmt: skip


def seed(name: str) -> int:
    """A seed of its own per variant, the same every run."""
    return zlib.crc32(name.encode())


def dispatch_cases(e: dict, params: dict) -> list[dict]:
    """``params`` with the first field the dispatch's items read set to 0, to just past the fold,
    to 3 folds and to the most a u32 holds (past WebGPU's 65535 workgroups per dimension for most
    variants)."""
    d = e["dispatch"]
    first = d["items"].split()[0]
    unit = evaluate(d["items"], params | {first: 1})
    fold_items = d["per_workgroup"] * d["fold"]
    return [
        params | {first: n}
        for n in (0, fold_items // unit + 1, 3 * fold_items // unit + 5, 2**32 - 1)
    ]
