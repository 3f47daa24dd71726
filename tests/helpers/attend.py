"""Running kvdsl's attend kernel the way a host does: the dispatch, then the merge where the
sequence is split into several chunks."""

from __future__ import annotations

import numpy as np

from kvdsl.kernels.attend import attend, attend_merge


def attend_output(backend, cfg, buffers: dict, params: dict, kernels=None) -> np.ndarray:
    """The ``output`` binding (float64, as the kernel lays it out) after the attend dispatch on
    ``backend`` (``interp.run`` or the runtime's ``run``), and the merge with several chunks;
    ``kernels`` (main, merge) in place of the ones ``cfg`` builds."""
    main, merge = kernels or (attend(cfg), attend_merge(cfg))
    out = backend(main, buffers, params)
    if params["chunks"] > 1:
        inputs = {"partials": out["partials"], "output": buffers["output"]}
        if cfg.sinks:
            inputs["sinks"] = buffers["sinks"]
        keep = ("batch", "queries", "chunks")
        out = backend(merge, inputs, {n: params[n] for n in keep})
    return out["output"].astype(np.float64)


def attend_decode(run, reader, query: np.ndarray, cache: dict, batch: int, seq: int) -> np.ndarray:
    """One new token a sequence (``query``, ``[B, Hq, 1, D]``) attending over a contiguous
    cache of ``seq`` rows (``cache``'s ``present_key`` and ``present_value``) by the attend
    kernel of ``reader``, in one chunk, scale 0.125: the output, flat, float32."""
    rows = batch * reader.q_heads
    bufs = {
        "seqlens_k": np.full(batch, seq - 1, np.int32),
        "query": np.ascontiguousarray(query).reshape(-1),
        "key": cache["present_key"],
        "value": cache["present_value"],
        "output": np.full(rows * reader.head_dim, np.nan, np.float32),
        "partials": np.full(rows * (reader.head_dim + 4), np.nan, np.float32),
    }
    params = dict(batch=batch, seq=seq, queries=1, chunk=seq, chunks=1, rowBlocks=1, scale=0.125)
    return run(attend(reader), bufs, params)["output"]
