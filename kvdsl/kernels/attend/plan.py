"""``attend``'s dispatch params for a batch: the row blocks and the split of the keys."""

from __future__ import annotations

from kvdsl.kernels.attend.config import TARGET_WORKGROUPS, AttendConfig


def plan(
    cfg: AttendConfig, *, batch: int, queries: int, longest: int, target: int = TARGET_WORKGROUPS
) -> dict[str, int]:
    """The dispatch params of :func:`attend` for ``batch`` sequences of at most ``longest``
    rows and ``queries`` new tokens each: ``rowBlocks``, and ``chunks`` ranges of ``chunk``
    keys. The chunks are as many as bring the workgroups to ``target``, each of at least
    ``workgroup_size`` keys (every invocation scores one) and at most ``max_chunk``."""
    blocks = -(-(cfg.group * queries) // cfg.rows)
    chunks = max(1, -(-target // (batch * cfg.kv_heads * blocks)))
    chunk = -(-max(longest, 1) // chunks)
    chunk = min(max(chunk, cfg.workgroup_size), cfg.max_chunk)
    chunks = -(-max(longest, 1) // chunk)
    return {
        "batch": batch,
        "queries": queries,
        "rowBlocks": blocks,
        "chunk": chunk,
        "chunks": chunks,
    }
