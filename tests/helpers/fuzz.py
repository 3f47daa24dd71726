"""Hypothesis settings of the fuzz tests, and the cases they build: buffers cut to a kernel's
contract, and adversarial runtime inputs of the modes that read ``seqlens_k`` (the config fuzz
in ``tests/harness/test_fuzz.py``, the generated kernels of ``tests/interp/test_exec_fuzz*.py``,
the flat walk and word tests of ``tests/nodes/``)."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, settings

from kvdsl import reference
from kvdsl.harness import Case
from kvdsl.harness.modes import _quant, _quant_inputs, _rotary, _row_inputs
from kvdsl.harness.cases import dtype
from kvdsl.reference.judge import poison, values
from kvdsl.runtime.contract import evaluate

LONG = int(os.environ.get("KVDSL_FUZZ_EXAMPLES", "0"))
#: A folder where a long run keeps the examples that fail, replayed first by the next run given
#: it (on a GPU host, a folder under $OUT, so the failing example comes back as files). None
#: keeps nothing (CI, and a run without it).
DATABASE = os.environ.get("KVDSL_FUZZ_DB")


def database():
    """The example database of every fuzz test: :data:`DATABASE`'s folder, else none. Never
    hypothesis' default ``.hypothesis/`` (which it uses where ``CI`` is not set): examples kept
    there by one test are replayed by another whose key collides (a state machine is keyed by
    its class's source, which the narrow and the broad session machines share), drawn by other
    strategies than those that made them."""
    from hypothesis.database import DirectoryBasedExampleDatabase

    return DirectoryBasedExampleDatabase(DATABASE) if DATABASE else None


def examples(ci: int) -> settings:
    """Hypothesis settings: ``ci`` examples, or the long run's count."""
    return settings(
        max_examples=LONG or ci,
        deadline=None,
        database=database(),
        derandomize=not LONG,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def contract_sized(kernel, case: Case) -> dict[str, np.ndarray]:
    """The case's buffers with every input cut to exactly its extent: enough for the kernel."""
    bufs = dict(case.buffers)
    for b in kernel.bindings:
        if b.access == "read":
            need = evaluate(dict(kernel.extents)[b.name], kernel, case.params, bufs)
            bufs[b.name] = bufs[b.name][: need * b.host_values]
    return bufs


ROTARY_LIMIT = 1 << 16  # cos/sin entries a fuzz case may allocate; more is a host-rejected case


def window_case(cfg, cap: int, key_seq: int, seqlens: np.ndarray, seed: int) -> Case | None:
    """A case of ``cfg`` for the given capacity, new tokens and ``seqlens_k``; None when the
    rotary tables its positions need are too large to allocate here."""
    rng = np.random.default_rng(seed)
    h, d, batch = cfg.kv_heads, cfg.head_dim, len(seqlens)
    keep = min(key_seq, cap)  # only the newest `cap` new tokens fit
    if cfg.mode == "window_shift":
        ct, it = dtype(cfg.present_type), dtype(cfg.input_type)
        shape = (batch, h, cap, d)
        past_k, past_v = (values(rng, shape, ct) for _ in range(2))
        new_k, new_v = (values(rng, (batch, key_seq, h * d), it) for _ in range(2))
        positions = max(key_seq, int(seqlens.max()) + 1)
        rot = None
        if cfg.rotary:
            if positions * cfg.half > ROTARY_LIMIT:
                return None
            rot = _rotary(rng, positions, cfg.half)
        w = reference.window_shift(
            past_k, past_v, new_k.astype(np.float32), new_v.astype(np.float32), seqlens,
            cfg.region, rot,
        )  # fmt: skip
        bufs = {"seqlens_k": seqlens}
        if cfg.region != "append":
            bufs |= {"past_k": past_k, "past_v": past_v}
        if cfg.region != "shift":
            bufs |= {"new_k": new_k, "new_v": new_v}
        if rot is not None and cfg.region == "all":  # one packed table: cos, then sin
            bufs["rotary_table"] = rot.table(cfg.half)
        elif rot is not None:
            bufs |= {"cos_cache": rot.cos, "sin_cache": rot.sin}
        rows = key_seq if cfg.region == "append" else cap
        params = {"count": batch * h * rows, "seq": cap, "keySeq": key_seq}
        tol = 2e-3 if cfg.present_type == "f16" else 2e-5
        tolerance = {"present_key": tol if cfg.rotary else 0.0}
        quantized: dict[str, int] = {}
    elif cfg.mode == "merge_share":
        ct, it = dtype(cfg.present_type), dtype(cfg.input_type)
        shape = (batch, h, cap, d)
        if cfg.region == "retain":
            past_k, past_v = (values(rng, shape, ct) for _ in range(2))
            # With keySeq > cap the window is the whole cache, as for keySeq == cap.
            w = reference.merge_share_retain(past_k, past_v, seqlens, keep)
            bufs = {"seqlens_k": seqlens, "past_k": past_k, "past_v": past_v}
            params = {"count": batch * h * cap, "seq": cap, "keySeq": key_seq}
        else:
            new_k, new_v = (values(rng, (batch, key_seq, h * d), it) for _ in range(2))
            rot = _rotary(rng, cap, cfg.half) if cfg.rotary else None
            kept = (x[:, key_seq - keep :].astype(np.float32) for x in (new_k, new_v))
            w = reference.merge_share_append(*kept, seqlens, cap, h, rot, ct)
            bufs = {"seqlens_k": seqlens, "new_k": new_k, "new_v": new_v}
            if rot is not None:
                bufs |= {"cos_cache": rot.cos, "sin_cache": rot.sin}
            params = {"count": batch * h * key_seq, "seq": cap, "keySeq": key_seq}
        tol = 2e-3 if cfg.present_type == "f16" else 2e-5
        tolerance = {"present_key": tol if cfg.rotary else 0.0}
        quantized = {}
    else:
        bufs, k, v, norm, rot = _row_inputs(cfg, rng, batch, key_seq, cap)
        q = _quant(cfg, rng, bool(seed % 2))
        w = reference.append_quant(
            k[:, key_seq - keep :], v[:, key_seq - keep :], seqlens, cap, h, q, norm, rot
        )
        bufs = _quant_inputs(cfg, bufs | {"seqlens_k": seqlens}, q, rot)
        params = {"count": batch * h * key_seq, "seq": key_seq, "pastSeq": 0, "totalSeq": cap}
        params["perChannel"] = int(q.per_channel)
        tolerance = {}
        quantized = {"present_key": cfg.bits} if cfg.k_norm or cfg.rotary else {}
    bufs = {k: np.ascontiguousarray(a).reshape(-1) for k, a in bufs.items()}
    n = w.key.size
    bufs |= {"present_key": poison(n, w.key.dtype), "present_value": poison(n, w.value.dtype)}
    flat = {"present_key": w.key.reshape(-1), "present_value": w.value.reshape(-1)}
    mask = {"present_key": w.mask.reshape(-1), "present_value": w.mask.reshape(-1)}
    case = Case({"cap": cap, "keySeq": key_seq}, bufs, params, flat, mask, tolerance)
    case.quantized = quantized
    return case
