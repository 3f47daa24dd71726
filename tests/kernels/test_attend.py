"""``attend``: split-K decode attention on the interpreter and the GPU against the float64
reference (:mod:`kvdsl.reference.attention`), over contiguous and paged caches; planted bugs in
its WGSL each fail."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from kvdsl import interp
from kvdsl.emit import emit
from kvdsl.frontend import parse
from kvdsl.kernels.attend import AttendConfig, CacheLayout, RowLayout, attend, attend_merge, plan
from kvdsl.kernels.config import ConfigError, Element
from kvdsl.nodes.paged import PageLayout, Pool
from kvdsl.reference.attention import attention
from kvdsl.reference.paged import pool_arrays
from kvdsl.runtime import run as gpu_run
from tests.helpers.attend import attend_output

#: exp and tanh are approximate on GPUs (WGSL: exp within 3 + 2|x| ULP); the outputs are
#: weighted means of values of magnitude ~1, computed in f32.
TOL = 2e-5
F16_TOL = 2e-3


def _dtype(e: Element):
    return np.float16 if e is Element.F16 else np.float32


def _rows(x: np.ndarray, layout: RowLayout) -> np.ndarray:
    """BNSH ``[B, H, S, D]`` as ``layout`` (flat)."""
    return (x if layout is RowLayout.BNSH else x.transpose(0, 2, 1, 3)).reshape(-1)


def _from_rows(flat: np.ndarray, layout: RowLayout, shape) -> np.ndarray:
    b, h, s, d = shape
    if layout is RowLayout.BNSH:
        return flat.reshape(shape)
    return flat.reshape(b, s, h, d).transpose(0, 2, 1, 3)


class Case:
    """Random inputs of one attend dispatch pair and what the reference says of them."""

    def __init__(self, cfg: AttendConfig, lengths, queries: int, chunk: int, seed: int = 0,
                 window: int | None = None, softcap: float | None = None, seq: int | None = None):  # fmt: skip
        rng = np.random.default_rng(seed)
        self.cfg, self.queries = cfg, queries
        b, hk, hq, d = len(lengths), cfg.kv_heads, cfg.q_heads, cfg.head_dim
        lengths = np.asarray(lengths)
        seq = seq or int(lengths.max())
        ct = _dtype(cfg.cache_type)
        k = (rng.standard_normal((b, hk, seq, d)) * 1.5).astype(ct)
        v = rng.standard_normal((b, hk, seq, d)).astype(ct)
        q = rng.standard_normal((b, hq, queries, d)).astype(_dtype(cfg.q_type))
        sinks = (rng.standard_normal(hq) * 2).astype(np.float32)
        scale = np.float32(0.8 / math.sqrt(d))
        chunk = min(chunk, cfg.max_chunk)
        self.buffers = {
            "seqlens_k": (lengths - 1).astype(np.int32),
            "query": _rows(q, cfg.q_layout),
        }
        self.params = dict(batch=b, queries=queries, scale=float(scale), chunk=chunk)
        self.params["rowBlocks"] = -(-(cfg.group * queries) // cfg.rows)
        if cfg.cache is CacheLayout.BNSH:
            self.buffers |= {"key": k.reshape(-1), "value": v.reshape(-1)}
            self.params["seq"] = seq
            span = seq
        else:
            span = self._paged(rng, k, v, lengths, window)
        self.params["chunks"] = chunks = -(-span // chunk)
        if cfg.sliding_window:
            self.params["window"] = window
        if cfg.softcap:
            self.params["softcap"] = softcap
        if cfg.sinks:
            self.buffers["sinks"] = sinks
        self.q_shape = (b, hq, queries, d)
        self.buffers["output"] = np.full(b * hq * queries * d, np.nan, _dtype(cfg.o_type))
        self.buffers["partials"] = np.full(b * hq * queries * chunks * (d + 4), np.nan, np.float32)
        self.want = attention(
            q,
            k.astype(np.float64),
            v.astype(np.float64),
            lengths,
            scale=float(scale),
            window=window if cfg.sliding_window else None,
            softcap=softcap if cfg.softcap else None,
            sinks=sinks if cfg.sinks else None,
        )

    def _paged(self, rng, k, v, lengths, window) -> int:
        """Scatter each sequence's rows over shuffled pages of a NaN-poisoned pool; pages wholly
        before every new token's window are released (-1 in the table, NaN in the pool)."""
        cfg = self.cfg
        p, (b, hk, seq, d) = cfg.page_size, k.shape
        max_pages = -(-seq // p) + 1
        table = np.full((b, max_pages), -1, np.int32)
        owned = [-(-int(n) // p) for n in lengths]
        ids = rng.permutation(sum(owned) + 3)
        kp = np.full((len(ids), p, hk, d), np.nan, k.dtype)
        vp = np.full_like(kp, np.nan)
        at = 0
        for s, n in enumerate(lengths):
            for page in range(owned[s]):
                first = page * p
                if window is not None and first + p <= n - self.queries - window + 1:
                    continue  # released: every row of it is before every window
                pid = int(ids[at])
                at += 1
                table[s, page] = pid
                rows = slice(first, min(first + p, int(n)))
                kp[pid, : rows.stop - first] = k[s, :, rows].transpose(1, 0, 2)
                vp[pid, : rows.stop - first] = v[s, :, rows].transpose(1, 0, 2)
        arrays = pool_arrays(kp, vp, cfg.page_layout.value, cfg.pool.value)
        names = ("kv_pages",) if cfg.pool is Pool.COMBINED else ("key_pages", "value_pages")
        self.buffers |= dict(zip(names, arrays)) | {"page_table": table.reshape(-1)}
        self.params["maxPages"] = max_pages
        return max_pages * p

    def run(self, backend, kernels=None) -> np.ndarray:
        """The output of the attend dispatch (and the merge, with several chunks)."""
        got = attend_output(backend, self.cfg, self.buffers, self.params, kernels)
        return _from_rows(got, self.cfg.o_layout, self.q_shape)

    def check(self, backend) -> None:
        got = self.run(backend)
        tol = F16_TOL if Element.F16 in (self.cfg.o_type, self.cfg.q_type) else TOL
        assert not np.isnan(got).any(), "an output element was left unwritten"
        np.testing.assert_allclose(got, self.want, rtol=tol, atol=tol)


BACKENDS = {"interp": interp.run, "gpu": gpu_run}

LLAMA = dict(kv_heads=2, head_dim=32, q_heads=8)
CASES = {
    # name: (config, lengths, queries, chunk, window, softcap)
    "bnsh_decode_one_chunk": (AttendConfig(**LLAMA), [37, 90, 5], 1, 512, None, None),
    "bnsh_decode_split": (AttendConfig(**LLAMA), [300, 129, 1], 1, 64, None, None),
    "bnsh_spec_rowblocks": (AttendConfig(**LLAMA, max_queries=8), [200, 9], 8, 48, None, None),
    "bnsh_f16_options": (
        AttendConfig(
            **LLAMA,
            max_queries=3,
            cache_type=Element.F16,
            sliding_window=True,
            softcap=True,
            sinks=True,
        ),
        [211, 40],
        3,
        32,
        50,
        3.0,
    ),
    "bnsh_mqa_wide": (
        AttendConfig(
            kv_heads=1,
            head_dim=256,
            q_heads=16,
            q_layout=RowLayout.BSH,
            o_layout=RowLayout.BSH,
            o_type=Element.F16,
            sinks=True,
        ),
        [150, 33],
        1,
        64,
        None,
        None,
    ),
    "paged_nhd_split": (
        AttendConfig(**LLAMA, cache=CacheLayout.PAGED, max_queries=2),
        [100, 17, 64],
        2,
        32,
        None,
        None,
    ),
    "paged_hnd_combined_window": (
        AttendConfig(
            **LLAMA,
            cache=CacheLayout.PAGED,
            page_layout=PageLayout.HND,
            pool=Pool.COMBINED,
            cache_type=Element.F16,
            sliding_window=True,
            sinks=True,
            q_type=Element.F16,
            q_layout=RowLayout.BSH,
        ),
        [150, 70],
        1,
        48,
        40,
        None,
    ),
    "paged_gqa16_softcap": (
        AttendConfig(
            kv_heads=1,
            head_dim=64,
            q_heads=16,
            cache=CacheLayout.PAGED,
            page_size=32,
            softcap=True,
            max_queries=2,
        ),
        [77, 140],
        2,
        64,
        None,
        5.0,
    ),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", CASES)
def test_attend_matches_the_reference(name, backend):
    cfg, lengths, queries, chunk, window, cap = CASES[name]
    Case(cfg, lengths, queries, chunk, seed=len(name), window=window, softcap=cap).check(
        BACKENDS[backend]
    )


def test_chunk_count_does_not_change_the_answer():
    cfg = AttendConfig(**LLAMA, sinks=True)
    outs = [Case(cfg, [257, 100], 1, chunk).run(interp.run) for chunk in (32, 100, 257)]
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(outs[0], outs[2], rtol=1e-6, atol=1e-6)


PLANTED = {
    # what the bug is: (kernel it is in, text, replacement, keys per chunk)
    "mask off by one": ("attend", "j <= pos0", "j < pos0", 32),
    "dropped sink": ("attend", "l0 = l0 * keep0 + exp(sink0 - sinkTop0);", "l0 = l0 * keep0;", 512),
    "merge drops the sink": ("attend_merge", "l = l + exp(sink - top);", "", 32),
    "merge forgets the max rescale": ("attend_merge", "exp(m0 - newTop)", "1.0f", 32),
    "merge keeps the sums of a smaller maximum": (
        "attend_merge",
        "let keep = exp(top - newTop);",
        "let keep = 1.0f;",
        16,
    ),
    "wrong GQA head map": ("attend", "(hk * GROUP + (row0 + r)", "(hk + (row0 + r)", 32),
    "window off by one": ("attend", "pos1 - j < params.window", "pos1 - j <= params.window", 32),
}


@pytest.mark.parametrize("bug", PLANTED)
def test_planted_bugs_fail(bug):
    """Each bug, planted in the emitted WGSL and run through the parser and interpreter, moves
    the output away from the reference, where the kernels as emitted pass the same case."""
    cfg = AttendConfig(**LLAMA, max_queries=2, sinks=True, sliding_window=True)
    where, text, planted, chunk = PLANTED[bug]
    case = Case(cfg, [120, 66], 2, chunk, window=70)
    kernels = {"attend": attend(cfg), "attend_merge": attend_merge(cfg)}
    case.check(interp.run)
    source = emit(kernels[where])
    assert text in source
    bad = parse(source.replace(text, planted), where, dispatch=kernels[where].dispatch)
    kernels[where] = replace(bad, extents=kernels[where].extents, requires=kernels[where].requires)
    with pytest.raises(AssertionError):
        case.check(lambda k, b, p: interp.run(kernels[k.name], b, p))


@pytest.mark.parametrize(
    "fields,message",
    [
        (dict(q_heads=6), "q_heads=6: expected a multiple of kv_heads (4)"),
        (dict(head_dim=30), "head_dim=30: expected a multiple of 4"),
        (dict(max_queries=9), "max_queries=9"),
        (dict(cache="ring"), "cache='ring'"),
        (dict(workgroup_size=100), "workgroup_size=100: expected a multiple of head_dim / 4"),
    ],
)
def test_bad_configs_name_the_field(fields, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        AttendConfig(**({"kv_heads": 4, "head_dim": 64, "q_heads": 16} | fields))


@pytest.mark.parametrize(
    "batch,longest,queries", [(1, 8192, 1), (4, 32768, 1), (1, 300, 8), (64, 40, 2)]
)
def test_plan_covers_the_keys_and_fills_the_target(batch, longest, queries):
    cfg = AttendConfig(kv_heads=8, head_dim=128, q_heads=32, max_queries=8)
    p = plan(cfg, batch=batch, queries=queries, longest=longest, target=1024)
    assert p["chunk"] * p["chunks"] >= longest
    assert cfg.workgroup_size <= p["chunk"] <= cfg.max_chunk or p["chunks"] == 1
    assert p["rowBlocks"] * cfg.rows >= cfg.group * queries
    groups = batch * cfg.kv_heads * p["rowBlocks"] * p["chunks"]
    short = p["chunk"] in (cfg.workgroup_size, cfg.max_chunk) or p["chunks"] == 1
    assert groups >= 1024 or short  # past the target only where the chunk bounds stop it


def test_the_plan_runs():
    cfg = AttendConfig(**LLAMA, sinks=True)
    case = Case(cfg, [300, 129, 1], 1, 64)
    p = plan(cfg, batch=3, queries=1, longest=300, target=16)
    case.params |= p
    case.buffers["partials"] = np.full(3 * 8 * p["chunks"] * 36, np.nan, np.float32)
    got = case.run(interp.run)
    np.testing.assert_allclose(got, case.want, rtol=TOL, atol=TOL)


def test_every_attend_fits_the_default_workgroup_memory():
    """The chunk a workgroup holds is sized by WebGPU's count of workgroup memory (each
    ``var<workgroup>`` rounded up to 16 bytes): no config needs a limit past the default, at
    one query row (8 bytes of statistics) as at many."""
    from kvdsl.ir.features import limits

    tried = 0
    for head_dim in (32, 64, 128, 256):
        for group, queries in ((1, 1), (1, 2), (4, 1), (8, 2), (4, 8)):
            for cache in ("bnsh", "paged"):
                for wg in (None, 8, 16, 32, 64, 96, 256):
                    kw = {} if wg is None else {"workgroup_size": wg}
                    try:
                        cfg = AttendConfig(
                            1, head_dim, group, max_queries=queries, cache=cache, **kw
                        )
                    except ConfigError:
                        continue
                    assert "maxComputeWorkgroupStorageSize" not in limits(attend(cfg)), cfg
                    tried += 1
    assert tried > 100
