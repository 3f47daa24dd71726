"""Decode attention (``attend``, then ``attend_merge`` where it splits) beside a copy of the
cache bytes it reads, on the GPU host.

    . scripts/on-gpu.sh && python benchmarks/attention.py --out OUT [--trials 3] [--quick]

writes ``OUT/attention.json`` (the device and one row per measurement), which
``benchmarks/report.py --attention OUT`` (default ``benchmarks/results/attention``) turns into the
decode-attention section of ``docs/performance-caches.md`` (:mod:`report_attention`).

What is timed, at the attention issue's shape (8 KV heads × 128, 32 query heads, one new token):

- **bandwidth**: for each cache element (f32, f16 in words, and each quantised format the
  kernel reads) at 8,192 and 32,768 tokens, batch 1 and 4, a contiguous BNSH cache: the
  attend dispatch plus its merge, against a ``vec4<f32>`` copy of exactly the cache bytes the
  kernel reads, timed alternately ``--trials`` times and compared by median; the chunk count
  :func:`kvdsl.kernels.attend.plan` picks, beside every candidate chunk size from the workgroup
  size to the most a workgroup holds;
- **latency**: 512 tokens, batch 1 (f16), against the empty dispatch;
- **paged**: the f16 and int4 caches in NHD pages at 8,192 tokens, batch 4, beside the
  contiguous cache's time;
- **chain**: for the 4-bit formats at 8,192 tokens, the chain a runtime would otherwise run
  (``dense_read`` of the cache into f32 rows, then attend over f32) against attend reading the
  4-bit cache itself;
- **rotation**: int8 and int4 caches rotated in blocks of the whole head (Q rotated at load)
  beside the same caches unrotated, at 8,192 tokens batch 4 and 32,768 tokens batch 1;
- **kivi**: attend over KIVI's 2-bit cache (``format="kivi2"``, groups of :data:`KIVI_GROUPS`
  tokens, half a group in the f16 residual) at 8,192 tokens, batch 4, plus its merge, beside a
  copy of the cache bytes, at every candidate chunk size as the bandwidth rows (the row of the
  planned chunk kept, with the best candidate's time).

The GPU is shared: each ratio is of times measured side by side in one run. A GPU met idle
(while the host fills a setup's arrays) or shared with other work runs in slow states, which
slow a kernel bound by latency far more than a copy bound by bandwidth (measured on an H100:
the same attend 3.2x slower while the copy beside it ran at 1,450 GB/s, not 2,600): each
setup's measurements start after ``--settle`` seconds of copies (:func:`roofline.settle`), as
``benchmarks/gpu.py --settle`` does, and a setup whose copy ran under ``SLOW`` of the run's best
copy bandwidth is timed again after more settling; the rows record the copy's GB/s.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
for _p in (REPO, REPO / "benchmarks"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import roofline  # noqa: E402
from kvdsl import runtime  # noqa: E402
from kvdsl.kernels.attend import AttendConfig, CacheLayout, attend, attend_merge, plan  # noqa: E402
from kvdsl.kernels.config import Element  # noqa: E402
from kvdsl.runtime.contract import evaluate  # noqa: E402

KV_HEADS, HEAD_DIM, Q_HEADS = 8, 128, 32
LENGTHS, BATCHES = (8192, 32768), (1, 4)
QUANTISED = ("int8", "int4", "int4_asym", "q8_0", "q4_0", "ort_q4")
#: KIVI's groups (tokens per K scale) whose attend is timed, at batch 4 × 8,192 tokens.
KIVI_GROUPS = (128, 64, 32)
#: The (batch, rows a sequence) KIVI is timed at.
KIVI_SIZE = (4, 8192)
#: The formats whose rotated form is timed beside them.
ROTATED = ("int8", "int4")
#: The (batch, tokens) the rotated caches are timed at.
ROTATION_SIZES = ((4, 8192), (1, 32768))
#: Copies of this many bytes or more set the run's best copy bandwidth, and one below
#: ``SLOW`` of it has its setup timed again after ``RETRY_SETTLE`` seconds more of copies
#: (at most ``RETRIES`` times; the fastest try is kept).
BIG_COPY, SLOW, RETRY_SETTLE, RETRIES = 1 << 26, 0.8, 3.0, 2


def median_us(times: list[float]) -> float:
    return float(np.median(times)) * 1e6


#: The cache elements timed (``--formats``); all by default.
CHOSEN: list[str] = []


def formats() -> list[str]:
    """The cache elements attend reads: f32, f16 and, where its config takes a ``format``,
    the quantised formats (those of ``--formats`` only, where given)."""
    takes = any(f.name == "format" for f in fields(AttendConfig))
    every = ["f16", "f32"] + (list(QUANTISED) if takes else [])
    return [f for f in every if not CHOSEN or f in CHOSEN]


def config(element: str, **kw: Any) -> AttendConfig:
    """The issue's shape with a cache of ``element``."""
    base = AttendConfig(kv_heads=KV_HEADS, head_dim=HEAD_DIM, q_heads=Q_HEADS, **kw)
    if element in ("f16", "f32"):
        return replace(base, cache_type=Element(element))
    return replace(base, format=element)


def fill(kernel, params: dict, known: dict[str, np.ndarray], rng) -> dict[str, np.ndarray]:
    """Every binding of ``kernel``: ``known`` ones as given, the rest sized by the kernel's own
    extents and filled with random bits (integer words) or values (floats)."""
    out = dict(known)
    extents = dict(kernel.extents)
    for b in kernel.bindings:
        if b.name in out:
            continue
        n = evaluate(extents[b.name], kernel, params, out) * b.host_values
        dtype = b.host.dtype
        if dtype.kind == "f":
            out[b.name] = rng.standard_normal(n, dtype=np.float32).astype(dtype)
        else:
            out[b.name] = rng.integers(0, 1 << 8 * dtype.itemsize - 2, n).astype(dtype)
    return out


def cache_bytes(kernel, buffers: dict[str, np.ndarray]) -> int:
    """The bytes of the cache bindings (the rows and scales it reads)."""
    skip = {"seqlens_k", "query", "output", "partials", "sinks", "page_table"}
    return sum(a.nbytes for n, a in buffers.items() if n not in skip)


class Bench:
    """Times kernels on buffers uploaded once; tells a copy run in a slow state of the GPU."""

    def __init__(self, repeats: int, settle: float = 0.5):
        self.repeats, self.seconds = repeats, settle
        self.copies: dict[int, tuple] = {}
        self.best_gbps = 0.0

    def settle(self, seconds: float | None = None) -> None:
        """Copies for the settle time: the GPU out of the slow states it idled into."""
        seconds = self.seconds if seconds is None else seconds
        if seconds > 0:
            roofline.settle(seconds)

    def time(self, kernel, buffers, params, reuse, workgroups=None) -> float:
        return median_us(
            runtime.time_kernel(
                kernel, buffers, params, workgroups, repeats=self.repeats, warmup=10, reuse=reuse
            )
        )

    def copy(self, nbytes: int) -> float:
        if nbytes not in self.copies:
            self.copies[nbytes] = (roofline.copy_kernel(), *roofline.copy_buffers(nbytes), {})
        k, b, p, reuse = self.copies[nbytes]
        us = self.time(k, b, p, reuse)
        if nbytes >= BIG_COPY:
            self.best_gbps = max(self.best_gbps, nbytes / us / 1e3)
        return us

    def slow(self, nbytes: int, copy_us: float) -> bool:
        """Whether a copy of ``nbytes`` (64 MB or more) ran below :data:`SLOW` of the run's best
        copy bandwidth: a GPU shared or in a slow state, where a kernel bound by latency loses
        far more than the copy does, so that their ratio is not the kernel's."""
        return nbytes >= BIG_COPY and nbytes / copy_us / 1e3 < SLOW * self.best_gbps


class Attention:
    """One attend (+ merge) setup: its buffers, uploaded once, for several chunk sizes."""

    def __init__(
        self, cfg: AttendConfig, batch: int, length: int, seed: int = 0, capacity: int = 0
    ):
        """``batch`` sequences of ``length`` keys in a cache of ``capacity`` rows a sequence
        (contiguous; 0: ``length``)."""
        self.cfg, self.batch, self.length = cfg, batch, length
        rng = np.random.default_rng(seed)
        self.kernel, self.merge = attend(cfg), attend_merge(cfg)
        picked = plan(cfg, batch=batch, queries=1, longest=length)
        self.picked = picked["chunk"]
        base = dict(picked, scale=1 / math.sqrt(HEAD_DIM))
        known = {"seqlens_k": np.full(batch, length - 1, np.int32)}
        if cfg.cache is CacheLayout.BNSH:
            base["seq"] = capacity or length
        else:
            pages = -(-length // cfg.page_size)
            base["maxPages"] = pages
            table = rng.permutation(batch * pages).astype(np.int32)
            known["page_table"] = table
        smallest = dict(base, chunk=cfg.workgroup_size)
        smallest["chunks"] = -(-length // cfg.workgroup_size)
        if cfg.kivi_group:  # KIVI's f16 pairs (residual rows, scales and minimums) finite
            extents = dict(self.kernel.extents)
            for name in ("residual_k", "residual_v", "kivi_cache", "kivi_pages"):
                if name in extents:
                    n = evaluate(extents[name], self.kernel, smallest, known)
                    known[name] = rng.standard_normal(2 * n).astype(np.float16).view(np.uint32)
        self.buffers = fill(self.kernel, smallest, known, rng)  # partials for the most chunks
        self.base = base
        self.bytes = cache_bytes(self.kernel, self.buffers)
        self.reuse: dict = {}
        self.merge_reuse: dict = {}

    def candidates(self) -> list[int]:
        """Chunk sizes from the workgroup size, doubling, to the most a workgroup holds, and
        the planned one."""
        out, c = {self.picked, self.cfg.max_chunk}, self.cfg.workgroup_size
        while c < self.cfg.max_chunk:
            out.add(c)
            c *= 2
        return sorted(out)

    def params(self, chunk: int) -> dict:
        return dict(self.base, chunk=chunk, chunks=-(-self.length // chunk))

    def time(self, bench: Bench, chunk: int) -> tuple[float, float]:
        """Attend's and the merge's times (0 with one chunk) at ``chunk`` keys a workgroup."""
        p = self.params(chunk)
        a = bench.time(self.kernel, self.buffers, p, self.reuse)
        if p["chunks"] == 1:
            return a, 0.0
        merge = {n: self.buffers[n] for n in ("partials", "output")}
        keep = {n: p[n] for n in ("batch", "queries", "chunks")}
        return a, bench.time(self.merge, merge, keep, self.merge_reuse)


def side_by_side(bench: Bench, setup: Attention, trials: int, log) -> tuple[dict, dict, float]:
    """Each candidate chunk's attend + merge times and the merges', and the median copy of the
    same bytes timed alternately with them, ``trials`` rounds; timed again after more settling
    where the copy ran slow (:meth:`Bench.slow`), the try with the fastest copy kept."""
    kept = None
    for attempt in range(RETRIES + 1):
        bench.settle(None if attempt == 0 else RETRY_SETTLE)
        times: dict[int, list[float]] = {c: [] for c in setup.candidates()}
        merges: dict[int, list[float]] = {c: [] for c in times}
        copies = []
        for _ in range(trials):
            for c in times:
                a, m = setup.time(bench, c)
                times[c].append(a + m)
                merges[c].append(m)
                copies.append(bench.copy(setup.bytes))
        copy = float(np.median(copies))
        if kept is None or copy < kept[2]:
            kept = (times, merges, copy)
        if not bench.slow(setup.bytes, copy):
            break
        log(
            f"  the copy ran at {setup.bytes / copy / 1e3:.0f} GB/s, under {SLOW:.0%} of the "
            f"run's best {bench.best_gbps:.0f} GB/s: timed again"
        )
    return kept


def bandwidth_rows(bench: Bench, trials: int, quick: bool, log, elements=None) -> list[dict]:
    rows = []
    for element in formats() if elements is None else elements:
        for batch in BATCHES:
            for length in LENGTHS:
                if quick and (batch, length) != (4, 8192):
                    continue
                t0 = time.time()
                setup = Attention(config(element), batch, length)
                times, merges, copy = side_by_side(bench, setup, trials, log)
                for c in times:
                    t = float(np.median(times[c]))
                    log(
                        f"  chunk {c} ({setup.params(c)['chunks']} chunks): {t:.1f} us, of it "
                        f"merge {float(np.median(merges[c])):.1f} us"
                    )
                    rows.append(
                        dict(
                            kind="bandwidth", format=element, batch=batch, tokens=length,
                            chunk=c, chunks=setup.params(c)["chunks"], planned=c == setup.picked,
                            us=t, merge_us=float(np.median(merges[c])), copy_us=copy,
                            bytes=setup.bytes, of_copy=copy / t,
                            copy_gbps=setup.bytes / copy / 1e3,
                        )
                    )  # fmt: skip
                best = min(float(np.median(v)) for v in times.values())
                mine = float(np.median(times[setup.picked]))
                log(
                    f"{element} B={batch} T={length}: planned chunk {setup.picked} "
                    f"{mine:.1f} us = {100 * copy / mine:.0f}% of copy {copy:.1f} us "
                    f"({setup.bytes / copy / 1e3:.0f} GB/s); best candidate {best:.1f} us "
                    f"(planned {100 * (mine / best - 1):.0f}% slower) [{time.time() - t0:.0f} s]"
                )
    return rows


def rotation_rows(bench: Bench, trials: int, log) -> list[dict]:
    """Attention over a rotated cache (Q rotated at load, blocks of the whole head) beside the
    same cache unrotated, each at its planned chunk, timed alternately."""
    rows = []
    for element in [f for f in ROTATED if f in formats()]:
        for batch, length in ROTATION_SIZES:
            plain = Attention(config(element), batch, length)
            turned = Attention(config(element, rotation=HEAD_DIM), batch, length)
            bench.settle()
            a, b = [], []
            for _ in range(trials):
                a.append(sum(plain.time(bench, plain.picked)))
                b.append(sum(turned.time(bench, turned.picked)))
            ta, tb = float(np.median(a)), float(np.median(b))
            log(f"{element} B={batch} T={length}: rotated {tb:.1f} us, unrotated {ta:.1f} us")
            rows.append(
                dict(kind="rotation", format=element, batch=batch, tokens=length, us=tb,
                     plain_us=ta, rotation=HEAD_DIM)
            )  # fmt: skip
    return rows


def kivi_rows(bench: Bench, trials: int, log) -> list[dict]:
    """Attend (and its merge) over a KIVI 2-bit cache of 8,192 rows a sequence, the last half
    group in the residual, beside a copy of its cache bytes, at each candidate chunk size: a
    row per group, of the planned chunk, with the best candidate's time."""
    rows = []
    batch, seq = KIVI_SIZE
    for group in KIVI_GROUPS:
        cfg = AttendConfig(KV_HEADS, HEAD_DIM, Q_HEADS, format="kivi2", kivi_group=group)
        setup = Attention(cfg, batch, seq - group // 2, capacity=seq)
        times, merges, copy = side_by_side(bench, setup, trials, log)
        t = float(np.median(times[setup.picked]))
        best = min(float(np.median(v)) for v in times.values())
        log(
            f"kivi2 g{group} B={batch} T={seq}: planned chunk {setup.picked} {t:.1f} us = "
            f"{100 * copy / t:.0f}% of copy {copy:.1f} us; best candidate {best:.1f} us"
        )
        rows.append(
            dict(kind="kivi", format=f"kivi2 g{group}", group=group, batch=batch, tokens=seq,
                 chunk=setup.picked, chunks=setup.params(setup.picked)["chunks"], us=t,
                 best_us=best, merge_us=float(np.median(merges[setup.picked])), copy_us=copy,
                 bytes=setup.bytes, of_copy=copy / t)
        )  # fmt: skip
    return rows


def latency_rows(bench: Bench, trials: int, log) -> list[dict]:
    empty_k, empty_b = roofline.empty_kernel(), roofline.empty_buffers()
    setup = Attention(config("f16"), 1, 512)
    bench.settle()
    att, empty = [], []
    for _ in range(trials):
        a, m = setup.time(bench, setup.picked)
        att.append(a + m)
        empty.append(bench.time(empty_k, empty_b, None, {}, (1, 1, 1)))
    a, e = float(np.median(att)), float(np.median(empty))
    log(f"f16 B=1 T=512: {a:.1f} us = {a / e:.2f}x the empty dispatch ({e:.2f} us)")
    return [dict(kind="latency", format="f16", batch=1, tokens=512, us=a, empty_us=e)]


def paged_rows(bench: Bench, trials: int, log) -> list[dict]:
    rows = []
    for element in [f for f in ("f16", "int4") if f in formats()]:
        flat = Attention(config(element), 4, 8192)
        paged = Attention(config(element, cache=CacheLayout.PAGED), 4, 8192)
        bench.settle()
        a, b = [], []
        for _ in range(trials):
            a.append(sum(flat.time(bench, flat.picked)))
            b.append(sum(paged.time(bench, paged.picked)))
        ta, tb = float(np.median(a)), float(np.median(b))
        log(f"{element} B=4 T=8192: paged NHD {tb:.1f} us, contiguous {ta:.1f} us")
        rows.append(
            dict(kind="paged", format=element, batch=4, tokens=8192, us=tb, contiguous_us=ta)
        )
    return rows


def chain_rows(bench: Bench, trials: int, log) -> list[dict]:
    """The 4-bit formats: attend over the 4-bit cache against dense_read into f32 rows then
    attend over them."""
    from kvdsl import catalog

    rows = []
    for element in [f for f in ("int4", "q4_0") if f in formats()]:
        name = f"dense_read_{element}_llama31_8b"
        if name not in catalog.VARIANTS:
            log(f"{element}: no {name} in the catalog; chain not timed")
            continue
        read = catalog.build(name)
        own = Attention(config(element), 4, 8192)
        over = Attention(config("f32"), 4, 8192)
        rng = np.random.default_rng(1)
        read_params = {"count": 4 * KV_HEADS * 8192}  # every K and V row, in one dispatch
        read_buffers = fill(read, read_params, {}, rng)
        bench.settle()
        chain, direct, reading = [], [], []
        for _ in range(trials):
            r = bench.time(read, read_buffers, read_params, {})
            reading.append(r)
            chain.append(r + sum(over.time(bench, over.picked)))
            direct.append(sum(own.time(bench, own.picked)))
        c, d = float(np.median(chain)), float(np.median(direct))
        log(f"{element} B=4 T=8192: attend {d:.1f} us, chain {c:.1f} us ({c / d:.2f}x)")
        rows.append(
            dict(kind="chain", format=element, batch=4, tokens=8192, us=d, chain_us=c,
                 read_us=float(np.median(reading)))
        )  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="results folder (writes attention.json)")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="batch 4 at 8,192 tokens only")
    ap.add_argument("--formats", nargs="*", default=[], help="cache elements to time (all)")
    ap.add_argument(
        "--settle", type=float, default=1.0, help="seconds of copies before each setup (1)"
    )
    args = ap.parse_args(argv)
    CHOSEN[:] = args.formats
    from kvdsl.runtime import device as gpu

    gpu.configure({"max-storage-buffer-binding-size": 1 << 30, "max-buffer-size": 1 << 30})
    info = runtime.adapter_info()
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)

    def log(line: str) -> None:
        print(line, flush=True)

    log(f"device: {info.get('device')}")
    bench = Bench(args.repeats, args.settle)
    bench.settle()
    reference = bench.copy(1 << 28)
    log(f"reference copy: {(1 << 28) / reference / 1e3:.0f} GB/s")
    rows: list[dict] = []

    def save(more: list[dict]) -> None:
        """Each section's rows written as it ends: a call cut short keeps what it timed."""
        rows.extend(more)
        result = {"device": info, "trials": args.trials, "repeats": args.repeats,
                  "settle_s": args.settle, "best_copy_gbps": bench.best_gbps, "rows": rows}  # fmt: skip
        (folder / "attention.json").write_text(json.dumps(result, indent=1, default=str) + "\n")

    # The short sections first, then the bandwidth rows a format at a time.
    sections = [lambda: latency_rows(bench, args.trials, log)]
    if not args.quick:
        if not CHOSEN or "kivi" in CHOSEN:
            sections.append(lambda: kivi_rows(bench, args.trials, log))
        sections.append(lambda: rotation_rows(bench, args.trials, log))
        sections.append(lambda: chain_rows(bench, args.trials, log))
        sections.append(lambda: paged_rows(bench, args.trials, log))
    for element in formats():
        sections.append(lambda e=element: bandwidth_rows(bench, args.trials, args.quick, log, [e]))
    for section in sections:
        save(section())
    log(f"wrote {folder / 'attention.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
