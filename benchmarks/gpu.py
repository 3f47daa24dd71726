"""GPU benchmark: every catalog mode and walk at realistic sizes against a vec4 copy roofline and
the legacy template, in one run.

    python benchmarks/gpu.py [--small] [--out DIR] [--variants NAME|MODE ...] [--report] ...

Run from the repository root (``--help`` lists every option). It writes ``gpu.csv`` and
``device.json`` under ``--out``; ``benchmarks/report.py`` makes the docs page from them.

**What runs** (one representative config per distinct catalog option set, reshaped to 8 KV heads ×
head dim 128, at batch 1 and 4, an 8,192-token cache, prefill and decode appends) and **the bytes
each measurement must move** (the counting rule per mode): ``benchmarks/plans.py``.

**Measured.** Each kernel's median GPU time over ``--repeats`` dispatches recorded back to back in
one submission after at least ``--warmup`` dispatches and ~10 ms of untimed GPU work, so clocks
lowered while the host uploaded buffers are back up; the kernel, its roofline and the template
are each timed ``--trials`` times, alternately, and keep their best median: the GPU may be
shared and its speed moves by 2x over seconds (:func:`kvdsl.runtime.time_kernel`, timestamp
queries at each pass's start and end); GB/s = bytes / time. A row whose copy ran in a slow
state of the GPU (:func:`slow_copy`), or that fell short (:func:`short`: under
``--retry-below`` % of the copy, 90 by default, or a decode append over 1.5x the floor), is
timed again after a second of copies, up to ``--retry-slow`` times (2); interference only slows
a timing, so the kernel, the copy and the template each keep their fastest time over the
attempts, as over the trials. A slow stretch of the GPU can outlast those retries: a row whose
copy is still slow after them is timed once more at the end of the run (with ``--retry-slow``
0, never), when the stretch may be over; the ``retries`` column counts every attempt after the
first. The roofline is :func:`roofline.copy_kernel` moving the same bytes (half read, half
written, through two buffer pairs as K and V move), timed the same way in the same run; % of
roofline = roofline time / kernel time. The legacy template is rendered for the same variables
(``tests/helpers/legacy.py``: ``legacy_vars`` from the config's fields, the walk as the vendor:
per-row and hybrid walks are Apple's) and timed as raw WGSL with the same buffers, params and
its own dispatch geometry (``legacy_workgroups``); ``template/kvdsl`` is its time over kvdsl's.
Where the template's interface differs from kvdsl's (kvdsl converts types the template cannot)
or it does not compile, the row says so. The empty dispatch (:func:`roofline.empty_kernel`) is
the floor; ``x floor`` is a decode-size append's time over it (``decode``: one new token, in a
pass whose work is the new rows alone: merge_share and window_shift append, append_quant), timed
at the run's start. A decode row's trials time the empty dispatch too, alternately with the
kernel and the copy: ``floor_beside_x`` is the kernel's time over that one, a ratio within one
state of the GPU as the copy's is.

A ``qkv`` or ``paged_qkv`` row also times its unfused chain of kvdsl's kernels (``plans.chain_plans``: the split,
Q's ``build``, K's RMSNorm ``build``, the ``merge_share`` append), each kernel the best of
``--trials``: ``chain_us`` is the sum of their times, ``chain_x`` that sum over the fused
kernel's time.

**Limits.** When a planned buffer passes WebGPU's default ``max-storage-buffer-binding-size``
(128 MiB; at batch 4 the largest K or V buffer is 134 MB), the run raises the limit
(:func:`kvdsl.runtime.device.configure`, this benchmark only) and records the limits in
``device.json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

WARM_SECONDS = 0.01  # GPU work run untimed before each measurement (see ``timed``)
# A row whose copy took over SLOW_RETRY times what it should (:func:`slow_copy`) met a slow
# state of the GPU, and one short of its target (:func:`short`) may have: ``--retry-slow`` times
# it again after RETRY_SETTLE s of copies.
SLOW_RETRY = 1.4
DECODE_TARGET = 1.5  # a decode append's target: this many times the empty dispatch
RETRY_SETTLE = 1.0
REPO = Path(__file__).resolve().parent.parent
for _p in (REPO, REPO / "benchmarks"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))
os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())

import roofline  # noqa: E402
from arguments import UsageError, bench_options  # noqa: E402
from kvdsl import catalog, runtime  # noqa: E402
from kvdsl.emit import emit  # noqa: E402
from kvdsl.runtime import device as gpu  # noqa: E402
from plans import (  # noqa: E402, F401  (plans' public names stay importable from gpu)
    FULL,
    HEAD_DIM,
    HEADS,
    SHAPE_FIELDS,
    SMALL,
    Plan,
    Pool,
    biggest_buffer,
    contiguous,
    chain_plans,
    decode_append,
    element_sizes,
    options,
    plans,
    representatives,
    reshape,
)

DEFAULT_OUT = REPO / "benchmarks" / "out"

COLUMNS = (
    "mode", "variant", "options", "batch", "tokens", "cache", "decode", "bytes",
    "kvdsl_us", "kvdsl_gbps", "roofline_us", "roofline_gbps", "pct_roofline",
    "template_us", "template_pct_roofline", "template_over_kvdsl", "floor_us", "floor_x",
    "template_floor_x", "kvdsl_status", "template_status", "retries", "floor_beside_us",
    "floor_beside_x", "contiguous", "contiguous_us", "kvdsl_over_contiguous", "chain_us", "chain_x",
)  # fmt: skip


def slow_copy(copy_us: float, nbytes: int, floor_us: float, best_gbps: float) -> bool:
    """Whether a copy of ``nbytes`` that took ``copy_us`` ran in a slow state of the GPU: over
    :data:`SLOW_RETRY` times the empty dispatch plus the bytes at the run's best copy bandwidth.
    On the H200 a 1-token copy takes ~1.25x the floor and a 134 MB one ~1.03x that sum; slow
    states of the GPU take 1.6-2.6x."""
    return copy_us > SLOW_RETRY * (floor_us + nbytes / best_gbps / 1e3)


def short(row: dict[str, Any], below_pct: float) -> bool:
    """Whether a measured row fell short of its target: a decode append over
    :data:`DECODE_TARGET` times the empty dispatch, any other row under ``below_pct`` % of the
    copy beside it (0: never)."""
    k, r = row.get("kvdsl_us"), row.get("roofline_us")
    if not below_pct or not k or not r:
        return False
    if row["decode"]:
        return k > DECODE_TARGET * row["floor_us"]
    return 100 * r / k < below_pct


def fastest(row: dict[str, Any], again: dict[str, Any]) -> dict[str, Any]:
    """``row`` with each of the kernel's, the copy's and the template's times the faster of its
    own and ``again``'s (a side that failed in one attempt keeps the other's time and status)."""
    out = dict(row)
    for us, status in (("kvdsl_us", "kvdsl_status"), ("roofline_us", None),
                       ("template_us", "template_status"), ("floor_beside_us", None),
                       ("contiguous_us", None)):  # fmt: skip
        t = again.get(us)
        if t and (not out.get(us) or t < out[us]):
            out[us] = t
            if status:
                out[status] = again[status]
    return out


# -- the template ---------------------------------------------------------------------------------


def template_vars(cfg: Any) -> dict[str, Any]:
    """The legacy template variables for ``cfg`` (``tests/helpers/legacy.py:legacy_vars``)."""
    from tests.helpers import legacy

    kw: dict[str, Any] = {"head_dim": cfg.head_dim, "workgroup_size": cfg.workgroup_size}
    kw |= {"fold": cfg.fold, "kv_heads": getattr(cfg, "kv_heads", 2)}
    for field, name in (("present_type", "present_type"), ("rotary", "rotary"),
                        ("k_norm", "k_norm"), ("eps", "eps"), ("bits", "bits"), ("qmin", "qmin"),
                        ("qmax", "qmax"), ("vec4", "vec4")):  # fmt: skip
        if hasattr(cfg, field):
            kw[name] = getattr(cfg, field)
    if cfg.mode == "transpose":
        kw["input_type"] = cfg.input_type
    if hasattr(cfg, "walk"):
        # A flat variant is compared with the template's own walk for the mode (non-Apple).
        kw["vendor"] = "nvidia" if cfg.walk in ("cooperative", "flat") else "apple"
    if cfg.mode == "merge_share":
        kw["share_region"] = cfg.region
    if cfg.mode == "window_shift":
        kw["shift_region"] = cfg.region
    return legacy.legacy_vars(cfg.mode, **kw)


def template_has_walk(cfg: Any) -> bool:
    """Whether the template renders ``cfg``'s walk: every walk but ``merge_share``'s per-row
    append, which it only reaches inside the hybrid walk (cooperative below ``WG`` rows)."""
    walk = getattr(cfg, "walk", None)
    return not (cfg.mode == "merge_share" and cfg.region == "append" and walk == "per_row")


def _with_workgroup(lvars: dict[str, Any], wg: int) -> dict[str, Any]:
    """Template variables with another workgroup size (both spellings the template reads)."""
    out = dict(lvars)
    if "tunables" in out:
        out["tunables"] = {**out["tunables"], "COPY_WORKGROUP_SIZE": wg}
    if "copyWorkgroupSize" in out:
        out["copyWorkgroupSize"] = wg
    return out


def find_template(explicit: str | None = None) -> Path | None:
    """The template file: ``explicit`` (which must exist), else tests/helpers/legacy.py's (beside
    the repository, inside it, or in ``.seed/``, where the GPU host's checkout keeps a copy)."""
    from tests.helpers import legacy

    if explicit is not None:
        if not Path(explicit).is_file():
            raise UsageError(f"--template: no such file {explicit!r}")
        return Path(explicit)
    return legacy.TEMPLATE if legacy.TEMPLATE.is_file() else None


def render_template(path: Path, vars: dict, bindings, params_struct) -> str:
    """``tests/helpers/legacy.py:render``, for the template at ``path`` (the GPU host may hold a
    copy)."""
    import jinja2
    from tests.helpers import legacy

    if path == legacy.TEMPLATE:
        return legacy.render(vars, bindings, params_struct)
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(path.parent),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    decls = legacy.resource_declarations(bindings, params_struct)
    return env.get_template(path.name).render(**vars, env={"wgsl": {"resourceDeclarations": decls}})


def _describe(b) -> str:
    return f"{b.name}:{b.elem}"


def _interface(bindings, cfg: Any) -> tuple[str, ...]:
    """Binding names and element types; a walk's vector bindings (every mode but transpose), and
    a transpose's in words, compare by their host's scalar (f16 carried in u32 words is f16
    data)."""
    if getattr(cfg, "walk", None) is not None or getattr(cfg, "words", False):
        return tuple(f"{b.name}:{b.host}" for b in bindings)
    return tuple(map(_describe, bindings))


# -- the run -------------------------------------------------------------------------------------


def _error(e: BaseException) -> str:
    """One line for a failure: naga's ``error:`` line where there is one, else the first."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    said = next((ln[ln.index("error:") :] for ln in lines if "error:" in ln), "")
    said = said or (lines[0] if lines else "")
    return f"{type(e).__name__}: {said}"[:200]


def _median_us(times: list[float]) -> float:
    return float(np.median(times)) * 1e6


def run(args: argparse.Namespace, log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Measure every selected config; write the CSV and device.json under ``args.out``."""
    from tests.helpers import legacy

    size = dict(SMALL if args.small else FULL)
    if args.batches:
        size["batches"] = tuple(args.batches)
    trials = args.trials
    selection = representatives(args.variants)
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"--out: cannot write to {str(out)!r} ({err.strerror})") from None
    big = biggest_buffer(selection, size)
    limits = gpu.requested_limits()
    if big > limits["max-storage-buffer-binding-size"] or big > limits["max-buffer-size"]:
        want = 1 << max(27, math.ceil(math.log2(big)))
        limits = gpu.configure(
            {"max-storage-buffer-binding-size": want, "max-buffer-size": max(want, 1 << 28)}
        )
        log(f"raised buffer limits for benchmarking: {limits['max-storage-buffer-binding-size']} B")
    info = runtime.adapter_info() | {"requested_limits": limits, "largest_buffer": big}
    log(f"device: {info['device']} ({info['backend']}, {info['vendor']}), {info['description']}; "
        f"WebGPU: {info['implementation']}")  # fmt: skip
    template = find_template(args.template)
    log(f"template: {template or 'not found (legacy columns empty)'}")
    repeats, warmup = args.repeats, args.warmup
    warm_seconds = 0.0 if args.small else WARM_SECONDS  # a smoke run on a CPU adapter: no clocks
    started = time.perf_counter()

    # Device buffers shared by the timings of one config (and by every roofline copy of a size):
    # each large array is uploaded once, not once per timing.
    device_buffers: dict = {}
    roof_buffers: dict = {}

    def timed(kernel: Any, buffers: dict, params: dict | None, nbytes: int = 0, **kw) -> float:
        # The GPU lowers its clocks when idle (the host spends seconds uploading between
        # kernels), so a fixed number of warm-up dispatches is too little for µs-size kernels:
        # warm up for at least WARM_SECONDS of GPU work, estimated from the bytes at 4 TB/s.
        ahead = max(warmup, min(2000, math.ceil(warm_seconds / max(nbytes / 4e12, 5e-6))))
        return _median_us(
            runtime.time_kernel(
                kernel,
                buffers,
                params,
                repeats=repeats,
                warmup=ahead,
                **({"reuse": device_buffers} | kw),
            )
        )

    if args.settle > 0:
        nbytes = 1 << 16 if args.small else 1 << 28
        t0 = time.perf_counter()
        rounds = roofline.settle(args.settle, nbytes)
        info["settle_s"] = args.settle
        log(f"settled: {rounds} rounds of {nbytes} B copies in {time.perf_counter() - t0:.1f} s")
    empty, empty_buffers = roofline.empty_kernel(), roofline.empty_buffers()

    def empty_us() -> float:
        """The empty dispatch: the floor of decode-size work."""
        return timed(empty, empty_buffers, None, workgroups=(1, 1, 1))

    floor = empty_us()
    log(f"empty dispatch: {floor:.2f} us")
    copy_kernel, roof = roofline.copy_kernel(), {}

    def roofline_us(nbytes: int) -> float:
        buffers, params = roof.get(nbytes) or roof.setdefault(nbytes, roofline.copy_buffers(nbytes))
        return timed(copy_kernel, buffers, params, nbytes, reuse=roof_buffers)

    # The run's best copy bandwidth so far (GB/s), from a reference copy and every copy of
    # 64 MB or more: what tells a slow copy (slow_copy) from a fast one.
    reference = 1 << 16 if args.small else 1 << 28
    best_gbps = reference / roofline_us(reference) / 1e3
    roof.pop(reference, None)
    roof_buffers.clear()
    retry_settle = 0.0 if args.small else RETRY_SETTLE

    def measure(kernel, buffers, params, plan, nbytes, decode, legacy_wgsl, legacy_status, lbind,
                lstruct, name, beside=None) -> dict[str, Any]:  # fmt: skip
        """One attempt at a row: kvdsl's kernel and the copy of the same bytes timed alternately,
        ``trials`` times each, each keeping its best (the GPU may be shared and its clocks move;
        interference only slows a run down), for a decode append the empty dispatch too, a
        paged append's contiguous twin (``beside``: kernel, buffers, params, bytes) too, then
        the template's forms."""
        got: dict[str, Any] = {}
        kt, rt, ft, ct = [], [], [], []
        for _ in range(trials):
            try:
                kt.append(timed(kernel, buffers, params, nbytes))
                got["kvdsl_status"] = "ok"
                if beside is not None:
                    ct.append(timed(*beside))
            except runtime.FeatureError as e:  # this device cannot run it: not a failure
                got["kvdsl_status"] = "n/a: " + _error(e)
                break
            except Exception as e:
                got["kvdsl_status"] = _error(e)
                break
            try:
                rt.append(roofline_us(nbytes))
                if decode:
                    ft.append(empty_us())
            except Exception as e:
                got["kvdsl_status"] += "; roofline: " + _error(e)
                break
        if ft:
            got["floor_beside_us"] = min(ft)
        if kt:
            got["kvdsl_us"] = min(kt)
        if rt:
            got["roofline_us"] = min(rt)
        if ct:
            got["contiguous_us"] = min(ct)
        got["template_status"] = legacy_status
        if legacy_wgsl is not None:
            try:
                lparams = plan.params_of(lstruct)
                times = []
                for lv, text in legacy_wgsl:
                    for _ in range(trials):
                        times.append(
                            timed(
                                text,
                                pool.buffers(lbind, plan),
                                lparams,
                                nbytes,
                                workgroups=legacy.legacy_workgroups(lv, lparams),
                                bindings=lbind,
                                params_struct=lstruct,
                                label="legacy_" + name,
                                limits=legacy.template_limits(lbind),
                            )
                        )
                got["template_us"] = min(times)
                got["template_status"] = "ok"
            except Exception as e:
                got["template_status"] = _error(e)
        return got

    def template_forms(cfg: Any, kernel: Any) -> tuple:
        """The template's renders for ``cfg`` (or None), why not, its bindings and params."""
        legacy_wgsl, legacy_status, lbind, lstruct = None, "", None, None
        try:
            if cfg.mode not in legacy.MODES:
                return None, "n/a: the template has no such mode", None, None
            lvars = template_vars(cfg)
            lbind = legacy.legacy_bindings(lvars)
            lstruct = legacy.legacy_params_struct(lvars)
            if template is None:
                legacy_status = "template file not found"
            elif not template_has_walk(cfg):
                legacy_status = (
                    "n/a: the template has no per-row append; its Apple append is the hybrid walk"
                )
            elif _interface(lbind, cfg) != _interface(kernel.bindings, cfg):
                legacy_status = "n/a: template interface " + ",".join(map(_describe, lbind))
            else:
                # Against a flat variant the template gets its best workgroup size of 64 and 256.
                sizes = (64, 256) if getattr(cfg, "walk", None) == "flat" else (None,)
                legacy_wgsl = []
                for wg in sizes:
                    lv = lvars if wg is None else _with_workgroup(lvars, wg)
                    legacy_wgsl.append((lv, render_template(template, lv, lbind, lstruct)))
        except Exception as e:
            legacy_status = "render error: " + _error(e)
        return legacy_wgsl, legacy_status, lbind, lstruct

    def again(row: dict[str, Any], attempt: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """``row`` timed once more: a slow state lasts seconds, so the GPU is kept busy first;
        each side keeps its fastest time (interference only slows, as over the trials)."""
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < retry_settle:
            roofline_us(row["bytes"])
        return fastest(row, attempt()) | {"retries": row["retries"] + 1}

    def over_budget() -> bool:
        return budget is not None and time.perf_counter() - started >= budget

    def contiguous_form(cfg: Any, plan: Any, row: dict) -> tuple | None:
        """A paged append's contiguous twin of the same format at ``plan``'s size (kernel,
        buffers, params, bytes it moves), named in ``row``; None for other modes."""
        twin = contiguous(cfg)
        if twin is None:
            return None
        label, ccfg = twin
        ckernel = catalog.build_config(ccfg, "contiguous")
        same = (p for p in plans(ccfg, size) if (p.batch, p.tokens) == (plan.batch, plan.tokens))
        cplan = next(same)
        row["contiguous"] = f"{label}: {options(ccfg)}"
        cbytes = cplan.moved(element_sizes(ckernel))
        cbuf = pool.buffers(ckernel.bindings, cplan)
        return ckernel, cbuf, cplan.params_of(ckernel.params), cbytes

    def attempts(kernel: Any, forms: tuple, name: str, plan: Any, row: dict) -> Callable:
        """One attempt at ``row`` (``plan``'s row of ``kernel``, :func:`measure`) each time it is
        called, on buffers made once."""
        buffers = pool.buffers(kernel.bindings, plan)
        params = plan.params_of(kernel.params)
        nbytes, decode = row["bytes"], bool(row["decode"])
        beside = contiguous_form(selection[name], plan, row)
        return lambda: measure(kernel, buffers, params, plan, nbytes, decode, *forms, name, beside)

    def chain_us(cfg: Any, plan: Any) -> dict[str, Any]:
        """A ``qkv`` row's unfused chain (:func:`plans.chain_plans`): the sum of its kernels'
        times, each the best of ``trials``; ``chain_x`` is that sum over the fused kernel's."""
        total = 0.0
        try:
            for step, p in chain_plans(cfg, plan):
                k = catalog.build_config(step)
                bufs, params = pool.buffers(k.bindings, p), p.params_of(k.params)
                moved = p.moved(element_sizes(k))
                total += min(timed(k, bufs, params, moved) for _ in range(trials))
        except Exception as e:
            return {"kvdsl_status": "chain: " + _error(e)}
        return {"chain_us": total}

    def release() -> None:
        pool.arrays.clear()  # keep host memory bounded to one config's sizes
        device_buffers.clear()  # and device memory

    pool, rows = Pool(), []
    # Rows whose copy was still slow after their retries: (index in rows, plan), timed once
    # more at the end of the run, when the slow stretch they met may be over.
    late: list[tuple[int, Any]] = []
    total = sum(1 for cfg in selection.values() for _ in plans(cfg, size))
    budget = args.budget
    for index, (name, cfg) in enumerate(selection.items()):
        if over_budget():
            # A device session ends hard: stop between configs, with the CSV and device.json
            # written and the configs left named, rather than be killed mid-row.
            left = list(selection)[index:]
            info["unmeasured"] = left
            log(f"budget of {budget:g} s reached: {len(left)} configs left: {' '.join(left)}")
            break
        try:
            kernel = catalog.build_config(cfg, name)
            emit(kernel)  # an emitter failure is this variant's row, before any timing
        except Exception as e:  # a broken variant is a row, not the end of the run
            rows.append({"mode": cfg.mode, "variant": name, "options": options(cfg),
                         "kvdsl_status": "build error: " + _error(e)})  # fmt: skip
            log(f"{name}: {rows[-1]['kvdsl_status']}")
            continue
        forms = template_forms(cfg, kernel)
        z = element_sizes(kernel)
        for plan in plans(cfg, size):
            nbytes = plan.moved(z)
            row = {"mode": cfg.mode, "variant": name, "options": options(cfg),
                   "batch": plan.batch, "tokens": plan.tokens, "cache": plan.cache,
                   "decode": int(decode_append(cfg, plan)), "bytes": nbytes,
                   "floor_us": floor, "retries": 0}  # fmt: skip
            attempt = attempts(kernel, forms, name, plan, row)
            row |= attempt()
            while (
                row["retries"] < args.retry_slow
                and row.get("roofline_us")
                and (
                    slow_copy(row["roofline_us"], nbytes, floor, best_gbps)
                    or short(row, args.retry_below)
                )
            ):
                row = again(row, attempt)
            if cfg.mode in ("qkv", "paged_qkv") and row.get("kvdsl_us"):
                row |= chain_us(cfg, plan)
            if row.get("roofline_us") and nbytes >= 64e6:
                best_gbps = max(best_gbps, nbytes / row["roofline_us"] / 1e3)
            if args.retry_slow and slow_copy(row.get("roofline_us") or 0, nbytes, floor, best_gbps):
                late.append((len(rows), plan))
            rows.append(derive(row))
            log(progress(len(rows), total, row, time.perf_counter() - started))
            # Each row as it is logged: a run killed inside a config (its last, the device
            # session ending) still leaves every row its log shows.
            write_csv(out / "gpu.csv", rows)
        release()
    if late:
        log(f"late: {len(late)} rows whose copy stayed slow, timed again at the end of the run")
    for name in dict.fromkeys(rows[i]["variant"] for i, _ in late):
        if over_budget():
            log(f"budget of {budget:g} s reached: late rows of {name} and after left as they are")
            break
        cfg = selection[name]
        kernel = catalog.build_config(cfg, name)
        forms = template_forms(cfg, kernel)
        for i, plan in ((i, plan) for i, plan in late if rows[i]["variant"] == name):
            rows[i] = derive(again(rows[i], attempts(kernel, forms, name, plan, rows[i])))
            log(progress(i + 1, total, rows[i], time.perf_counter() - started) + " late")
        release()
    write_csv(out / "gpu.csv", rows)
    info |= {"small": bool(args.small), "repeats": repeats, "warmup": warmup,
             "retry_slow": args.retry_slow, "retry_below": args.retry_below,
             "floor_us": floor, "seconds": time.perf_counter() - started,
             "sizes": {k: list(v) if isinstance(v, tuple) else v for k, v in size.items()},
             "heads": HEADS, "head_dim": HEAD_DIM,
             "date": time.strftime("%Y-%m-%d", time.gmtime())}  # fmt: skip
    (out / "device.json").write_text(json.dumps(info, indent=2) + "\n")
    return rows


def derive(row: dict[str, Any]) -> dict[str, Any]:
    """GB/s, % of roofline, ratios, x floor from the measured times."""
    nbytes, k = row["bytes"], row.get("kvdsl_us")
    r, t = row.get("roofline_us"), row.get("template_us")
    if k:
        row["kvdsl_gbps"] = nbytes / k / 1e3
    if r:
        row["roofline_gbps"] = roofline.copy_bytes(nbytes) / r / 1e3
    if k and r:
        row["pct_roofline"] = 100 * r / k
    if t and r:
        row["template_pct_roofline"] = 100 * r / t
    if t and k:
        row["template_over_kvdsl"] = t / k
    c = row.get("contiguous_us")
    if c and k:
        row["kvdsl_over_contiguous"] = k / c
    if row.get("chain_us") and k:
        row["chain_x"] = row["chain_us"] / k
    if row["decode"]:
        row["floor_x"] = k / row["floor_us"] if k else None
        row["template_floor_x"] = t / row["floor_us"] if t else None
        f = row.get("floor_beside_us")
        row["floor_beside_x"] = k / f if k and f else None
    return row


def _fmt(v: Any, digits: int = 1) -> str:
    if v is None or v == "":
        return "-"
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def progress(done: int, total: int, row: dict, elapsed: float) -> str:
    """One line per measurement: where the run is and what it measured."""
    return (
        f"[{done:>3}/{total} {elapsed:6.1f}s] {row['variant']:<48} B={row['batch']} "
        f"tok={row['tokens']:<5} kvdsl {_fmt(row.get('kvdsl_us'), 2):>9} us "
        f"{_fmt(row.get('pct_roofline'), 0):>4}% roof, template "
        f"{_fmt(row.get('template_us'), 2):>9} us  {row.get('template_status', '')[:50]}"
        + (f" (timed {row['retries'] + 1}x)" if row.get("retries") else "")
    )


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """The rows as CSV with :data:`COLUMNS` (empty cells where a figure is missing)."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({c: _csv_cell(row.get(c)) for c in COLUMNS})


def _csv_cell(v: Any) -> Any:
    if isinstance(v, float):
        return f"{v:.6g}"
    return "" if v is None else v


def table(rows: list[dict[str, Any]]) -> str:
    """The terminal table."""
    head = (f"{'variant':<48} {'B':>2} {'tok':>5} {'MB':>8} {'kvdsl us':>9} {'GB/s':>7} "
            f"{'%roof':>6} {'tmpl us':>9} {'%roof':>6} {'t/k':>6} {'xfloor':>7}  note")  # fmt: skip
    lines = [head, "-" * len(head)]
    for r in rows:
        note = r.get("template_status", "")
        note = "" if note == "ok" else note
        if r.get("kvdsl_status", "ok") != "ok":
            note = "kvdsl: " + r["kvdsl_status"] + ("; " + note if note else "")
        lines.append(
            f"{r['variant']:<48} {_fmt(r.get('batch')):>2} {_fmt(r.get('tokens')):>5} "
            f"{_fmt(r.get('bytes', 0) / 1e6 if r.get('bytes') else None, 2):>8} "
            f"{_fmt(r.get('kvdsl_us'), 2):>9} {_fmt(r.get('kvdsl_gbps'), 0):>7} "
            f"{_fmt(r.get('pct_roofline'), 0):>6} {_fmt(r.get('template_us'), 2):>9} "
            f"{_fmt(r.get('template_pct_roofline'), 0):>6} "
            f"{_fmt(r.get('template_over_kvdsl'), 2):>6} {_fmt(r.get('floor_x'), 2):>7}  "
            f"{note[:70]}"
        )
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    """The benchmark's options."""
    return bench_options(
        argparse.ArgumentParser(prog="gpu.py", description=__doc__.splitlines()[0]),
        str(DEFAULT_OUT),
    )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the table, write the CSV (and with --report, the docs)."""
    args = parser().parse_args(argv)
    try:
        return bench(args)
    except (UsageError, catalog.UnknownVariant) as e:  # bad input (a variant, a path): one line
        print(f"gpu.py: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # the runtime's errors (no adapter, a device failure): one line
        print(f"gpu.py: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


def bench(args: argparse.Namespace) -> int:
    """The benchmark for parsed ``args``: 0 when every kvdsl row ran, 1 otherwise. A failure of
    the run itself (no adapter, timestamps the device got wrong) raises: :func:`main` prints it
    as one line."""
    if args.repeats is None:
        args.repeats = 5 if args.small else 100
    if args.warmup is None:
        args.warmup = 1 if args.small else 10
    rows = run(args, lambda s: print(s, flush=True))
    print()
    print(table(rows))
    print(f"\nwrote {Path(args.out) / 'gpu.csv'} and device.json ({len(rows)} rows)")
    if args.report:
        import report

        report.main([str(args.out)])
    ok = all(r.get("kvdsl_status") == "ok" or r.get("kvdsl_status", "").startswith("n/a: ")
             for r in rows)  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    # The script's edge: KVDSL_WEBGPU and KVDSL_DAWN_ENABLE choose the WebGPU implementation.
    runtime.use_webgpu(runtime.WebGPU.from_environment(os.environ))
    sys.exit(main())
