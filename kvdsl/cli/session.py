"""``kvdsl session``: a scenario of chained cache operations on a host, checked against the
numpy oracle, with each step's GPU time and host overhead."""

from __future__ import annotations

import argparse
from dataclasses import replace
import os
import sys
import time

import numpy as np

from kvdsl import catalog
from kvdsl.cli.inputs import UsageError
from kvdsl.cli.options import command, count, positive

SCENARIOS = {
    "decode": "a prefill of ragged prompts, then STEPS decode steps of one token",
    "mixed": "a prefill, then STEPS operations drawn from decode, merge, shift and read (a "
    "paged cache: decode, extend, fork, compact, window and read)",
}
#: The operations a table of times lists, in order.
OPS = ("prefill", "decode", "attend", "extend", "merge", "shift", "fork", "compact", "window")
OPS += ("read",)


def _progress(done: int, total: int, started: float) -> None:
    width = 30
    filled = width * done // total
    rate = done / max(time.perf_counter() - started, 1e-9)
    sys.stderr.write(
        f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} steps, {rate:.0f}/s "
    )
    sys.stderr.flush()


def _plan(
    args: argparse.Namespace, rng: np.random.Generator, floats: bool, paged: bool = False
) -> list[tuple]:
    """The scenario's operations after the prefill, as (name, tokens)."""
    if args.scenario == "decode":
        return [("decode", 1)] * args.steps
    if paged:
        kinds = ["decode"] * 6 + ["extend", "compact", "window", "read"]
        kinds += ["fork"] if args.batch > 1 else []
        out = []
        for _ in range(args.steps):
            kind = kinds[int(rng.integers(len(kinds)))]
            n = int(rng.integers(1, 9)) if kind == "extend" else 1
            if kind == "window":
                n = int(rng.integers(args.page_size, 4 * args.page_size + 1))
            if kind == "fork":
                src, dst = (int(x) for x in rng.choice(args.batch, 2, replace=False))
                n = (src, dst)
            out.append((kind, n))
        return out
    kinds = ["decode"] * 6 + ["merge", "read"] + (["shift"] if floats else [])
    out = []
    for _ in range(args.steps):
        kind = kinds[int(rng.integers(len(kinds)))]
        out.append((kind, int(rng.integers(1, 9)) if kind in ("merge", "shift") else 1))
    return out


#: Copies of a layer's K and V a session keeps: contiguous, the live cache and the one a step
#: writes, on the device (or in memory), and the oracle's; paged, the pools, those a compaction
#: fills and the oracle's of each.
COPIES = {False: 3, True: 4}


def available_memory() -> int | None:
    """Bytes of memory this machine can give a process now (Linux's MemAvailable, else its
    physical memory); None where neither is known."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def _check_memory(args: argparse.Namespace, spec, paged: bool, have: int | None = None) -> None:
    """Refuse, before anything is allocated, a session whose caches need more memory than the
    machine has available (``have``: that memory, else :func:`available_memory`)."""
    from kvdsl.session import cache_format
    from kvdsl.session.paged_rows import paged_rows
    from kvdsl.session.session import BINDING

    def layer_bytes(spec) -> int:
        """One layer's K and V caches, every copy the session keeps."""
        if paged:
            rows = paged_rows(spec)
            one = spec.pool_pages * rows.page_values * rows.dtype.itemsize
        else:
            row = cache_format(spec.format, spec.kv_heads, spec.head_dim).row_bytes
            one = spec.batch * spec.kv_heads * spec.capacity * row
        return one * 2 * COPIES[paged]  # K and V

    layer = layer_bytes(spec)
    if not paged and layer // (2 * COPIES[paged]) > BINDING:
        return  # the session refuses it first, naming the binding and the rows that fit
    have = available_memory() if have is None else have
    if have is None or spec.layers * layer <= have:
        return
    most = have // layer
    lo, hi = 0, spec.batch  # the largest batch whose layers fit: a bisection (pages round up)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if spec.layers * layer_bytes(replace(spec, batch=mid)) <= have:
            lo = mid
        else:
            hi = mid - 1
    fewer = [f"--layers at most {most}"] if most else []
    fewer += [f"--batch at most {lo}"] if lo else []
    fewer.append(f"a smaller {'' if lo else '--batch, '}--capacity or --kv-heads")
    raise UsageError(
        f"--layers={spec.layers}: the session needs {_gib(spec.layers * layer)} ({_gib(layer)} "
        f"a layer: K and V, {COPIES[paged]} copies each), past the {_gib(have)} of memory "
        f"available; give {', '.join(fewer[:-1]) + ', or ' if fewer[:-1] else ''}{fewer[-1]}"
    )


def _check_binding(args: argparse.Namespace, spec) -> None:
    """Refuse, naming ``--batch`` and ``--capacity`` and the most of each that fits, a
    contiguous session one layer's K cache of which (and the batch of rows a step writes past
    it) passes one binding."""
    from kvdsl.session import cache_format
    from kvdsl.session.host import aligned
    from kvdsl.session.session import BINDING

    row = cache_format(spec.format, spec.kv_heads, spec.head_dim).row_bytes

    def fits(batch: int, capacity: int) -> bool:
        head = spec.kv_heads * capacity * row  # one sequence's rows
        return batch * head + aligned(head) <= BINDING

    batch, capacity = spec.batch, spec.capacity
    if fits(batch, capacity):
        return
    most_batch = 0
    if fits(1, capacity):
        head = spec.kv_heads * capacity * row
        most_batch = (BINDING - aligned(head)) // head
    most_capacity = BINDING // ((batch + 1) * spec.kv_heads * row)
    while most_capacity > 0 and not fits(batch, most_capacity):
        most_capacity -= 1
    given = (
        f"--capacity={capacity}"
        if args.capacity is not None
        else f"capacity={capacity} (the prompt plus what the steps append)"
    )
    fixes = [f"--batch at most {most_batch}"] if most_batch else []
    fixes += [f"--capacity at most {most_capacity}"] if most_capacity else []
    fixes = fixes or ["a smaller --kv-heads or --head-dim"]
    raise UsageError(
        f"--batch={batch} and {given}: a layer's K cache is "
        f"{batch * spec.kv_heads * capacity * row} bytes ({batch} x {spec.kv_heads} kv heads x "
        f"{capacity} rows x {row} bytes), past one binding's {BINDING} (WebGPU's default "
        f"maxStorageBufferBindingSize, with a sequence's rows to spare); give " + " or ".join(fixes)
    )


def _check_csv(path: str) -> None:
    """Refuse, before the session runs, a ``--csv`` file that cannot be written."""
    import errno

    p = os.path.abspath(path)
    parent = os.path.dirname(p)
    if os.path.isdir(p):
        why = errno.EISDIR
    elif not os.path.isdir(parent):
        why = errno.ENOENT if not os.path.exists(parent) else errno.ENOTDIR
    elif not os.access(p if os.path.exists(p) else parent, os.W_OK):
        why = errno.EACCES
    else:
        return
    raise UsageError(f"--csv: cannot write {path!r} ({os.strerror(why)})")


#: What the table's columns mean, printed under it.
COLUMNS = (
    "tokens: the new tokens a step gives each sequence (not times the batch; a prefill counts "
    "the longest prompt), summed over the op's steps; GPU us: a step's GPU time (timestamp "
    "queries), host us: the host's time around it, in microseconds: the median, the 90th "
    "percentile and the largest of the op's steps"
)


def _check_table(args: argparse.Namespace, spec, prompt: int, plan: list[tuple]) -> None:
    """Refuse a paged scenario whose longest sequence would outgrow its page table: positions
    are absolute, so a paged cache does not slide as a contiguous one does."""
    grows = sum(n for kind, n in plan if kind in ("decode", "extend"))
    if prompt + grows > spec.capacity:
        raise UsageError(
            f"--capacity={args.capacity}: a sequence of a {prompt}-token prompt would grow by up "
            f"to {grows} tokens in this scenario, past its page table's {spec.max_pages} pages "
            f"of {spec.page_size} ({spec.capacity} tokens; a paged cache does not slide): give "
            f"--capacity {prompt + grows} or more"
        )


def _stats(xs: list[float]) -> str:
    if not xs:
        return f"{'-':>9} {'-':>9} {'-':>9}"
    a = np.array(xs) * 1e6
    return f"{np.median(a):9.1f} {np.percentile(a, 90):9.1f} {a.max():9.1f}"


def cmd_session(args: argparse.Namespace) -> int:
    """Run a scenario of chained cache operations and time each step.

    Keep a model's KV cache (layers x batch x kv heads x capacity x head dim) in one format on
    the GPU (or in the interpreter), run a scenario of operations on it through the kernels'
    host contract, check it against a numpy oracle of the same session, and print each
    operation's GPU time (timestamp queries) and host overhead.
    """
    from kvdsl.session import GpuHost, InterpHost, PagedSession, PagedSpec, Session
    from kvdsl.session import SessionError, SessionMismatch, Spec, cache_format

    model = catalog.MODELS.get(args.model)
    if model is None:
        raise UsageError(f"--model={args.model!r}: expected one of {', '.join(catalog.MODELS)}")
    heads = args.kv_heads if args.kv_heads is not None else model.kv_heads
    head_dim = args.head_dim if args.head_dim is not None else model.head_dim
    if args.prompt < 1:
        raise UsageError(f"--prompt={args.prompt}: expected 1 or more tokens")
    growth = args.steps if args.scenario == "decode" else 8 * args.steps
    capacity = args.capacity if args.capacity is not None else args.prompt + growth
    if args.prompt > capacity:
        raise UsageError(f"--prompt={args.prompt}: expected at most the capacity ({capacity} rows)")
    paged = args.layout == "paged"
    try:
        if paged:
            pages = -(-capacity // args.page_size)
            spec = PagedSpec(
                args.layers, args.batch, heads, head_dim, args.page_size, pages, 0,
                args.page_layout, args.addressing, args.format,
            )  # fmt: skip
        else:
            spec = Spec(args.layers, args.batch, heads, head_dim, capacity, args.format)
    except SessionError as err:
        raise UsageError(str(err)) from None
    if args.csv:
        _check_csv(args.csv)
    if not paged:
        _check_binding(args, spec)
    _check_memory(args, spec, paged)
    rng = np.random.default_rng(args.seed)
    lowest = max(1, args.prompt // 2)
    prompts = rng.integers(lowest, args.prompt + 1, spec.batch)
    plan = _plan(args, rng, not paged and cache_format(spec.format, heads, head_dim).shifts, paged)
    if paged:
        _check_table(args, spec, int(prompts.max()), plan)
    if not args.attention:  # an attention option alone would be ignored
        given = {"--q-heads": args.q_heads, "--check-attention": args.check_attention}
        for flag, value in given.items():
            if value is not None:
                raise UsageError(f"{flag}={value}: an option of the attention steps; give --attention too")  # fmt: skip
    q_heads = 0
    if args.attention:
        q_heads = args.q_heads if args.q_heads is not None else heads * _group(args.model, model)
    every = args.check_attention or 1  # check every Nth attend step's output
    attention = {"q_heads": q_heads, "attention_every": every}
    host = GpuHost() if args.backend == "gpu" else InterpHost()
    try:
        if paged:
            session = PagedSession(spec, host, seed=args.seed, check_every=False, **attention)
        else:
            session = Session(spec, host, seed=args.seed, check_every=False, **attention)
    except SessionError as err:
        raise UsageError(str(err)) from None
    where = "the interpreter" if args.backend == "interp" else _adapter()
    if paged:
        cache = 2 * spec.layers * session.pool_bytes
        print(
            f"session {args.scenario}: {spec.layers} layers x batch {spec.batch} x {heads} kv "
            f"heads x head dim {head_dim}, paged: {session.pages} pages of {spec.page_size} "
            f"tokens ({spec.layout}, {spec.addressing}, {spec.max_pages} per sequence), "
            f"{spec.format} ({cache / 2**20:.1f} MiB of K and V pools, as much again for the "
            f"pools a compaction fills), on {where}"
        )
        capacity = spec.capacity
    else:
        cache = 2 * spec.layers * session.cache_bytes
        print(
            f"session {args.scenario}: {spec.layers} layers x batch {spec.batch} x {heads} kv "
            f"heads x {capacity} rows x head dim {head_dim}, {spec.format} "
            f"({cache / 2**20:.1f} MiB of K and V), on {where}"
        )
    if session.attention is not None:
        cfg = session.attention.cfg
        cadence = "" if every == 1 else f" every {every} steps"
        print(
            f"attention: {q_heads} query heads ({cfg.group} a kv head) after every decode, "
            f"attend in workgroups of {cfg.workgroup_size}, checked against float64 attention "
            f"over the oracle's rows{cadence}"
        )
    bar = sys.stderr.isatty() and len(plan) >= 100
    started = time.perf_counter()
    i, kind = -1, "prefill"
    try:
        session.prefill([int(n) for n in prompts])
        for i, (kind, n) in enumerate(plan):
            if kind == "decode":
                session.decode()
            elif kind in ("read", "compact"):
                getattr(session, kind)()
            elif kind == "fork":
                session.fork(*n)
            else:
                getattr(session, kind)(n)
            if args.check_every and (i + 1) % args.check_every == 0:
                session.check()
            if bar and (i % max(1, len(plan) // 200) == 0 or i + 1 == len(plan)):
                _progress(i + 1, len(plan), started)
        session.check()
    except SessionError as err:  # a step the session refuses: the options made it
        raise UsageError(f"step {i + 2} ({kind}): {err}") from None
    except SessionMismatch as err:
        if bar:
            sys.stderr.write("\n")
        print(f"mismatch: {err}")
        return 1
    finally:
        if bar:
            sys.stderr.write("\n")
    wall = time.perf_counter() - started
    session.gpu_times()
    steps = session.steps
    timed = all(s.gpu is not None for s in steps)
    print(f"{'op':<8} {'steps':>6} {'tokens':>7} | GPU us: {'median':>9} {'p90':>9} {'max':>9} | "
          f"host us: {'median':>9} {'p90':>9} {'max':>9}")  # fmt: skip
    for op in OPS:
        mine = [s for s in steps if s.op == op]
        if not mine:
            continue
        gpu = _stats([s.gpu for s in mine]) if timed else _stats([])
        print(
            f"{op:<8} {len(mine):>6} {sum(s.tokens for s in mine):>7} | {'':>7} {gpu} | "
            f"{'':>8} {_stats([s.host for s in mine])}"
        )
    print(COLUMNS)
    untimed = "the interpreter" if args.backend == "interp" else "no timestamp queries"
    gpu_total = f"{sum(s.gpu for s in steps):.3f} s" if timed else f"not timed ({untimed})"
    print(
        f"total: {len(steps)} steps, GPU {gpu_total}, host {sum(s.host for s in steps):.3f} s, "
        f"wall {wall:.1f} s; checked against the oracle {session.checks} times, 0 mismatches"
    )
    if session.attention is not None:
        a = session.attention
        print(f"attention checked after {a.checked} of {a.runs} decodes, 0 mismatches")
    if args.csv:
        try:
            with open(args.csv, "w") as f:
                f.write("step,op,tokens,gpu_us,host_us\n")
                for i, s in enumerate(steps):
                    gpu = "" if s.gpu is None else f"{s.gpu * 1e6:.2f}"
                    f.write(f"{i},{s.op},{s.tokens},{gpu},{s.host * 1e6:.2f}\n")
        except OSError as err:
            raise UsageError(f"--csv: cannot write {args.csv!r} ({err.strerror})") from None
        print(f"wrote {len(steps)} steps to {args.csv}")
    return 0


def _group(name: str, model) -> int:
    """Query heads per KV head of catalog model ``name`` where the catalog's attend variants
    give its query heads, else 1."""
    from kvdsl.catalog.attend import ATTEND_MODELS

    return model.q_heads // model.kv_heads if name in ATTEND_MODELS else 1


def _adapter() -> str:
    from kvdsl.runtime import adapter_info

    info = adapter_info()
    return f"{info['device']} ({info['backend']}, {info['implementation']})"


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``session`` to the subcommands ``sub``."""
    from kvdsl.session import FORMATS
    from kvdsl.session.paged_rows import ADDRESSING, LAYOUTS

    s = command(sub, cmd_session, " ".join(f"{k}: {v}." for k, v in SCENARIOS.items()))
    s.add_argument("--scenario", choices=tuple(SCENARIOS), default="decode")
    s.add_argument("--layers", type=positive, default=8)
    s.add_argument("--steps", type=count, default=256, help="operations after the prefill")
    s.add_argument("--batch", type=positive, default=4)
    s.add_argument("--format", choices=FORMATS, default="f16")
    s.add_argument("--model", default="llama31_8b", help="the catalog model of the cache's "
                   "kv heads and head dim (see kvdsl/catalog/models.py)")  # fmt: skip
    s.add_argument("--kv-heads", type=positive, help="kv heads (default: the model's)")
    s.add_argument("--head-dim", type=positive, help="head dim (default: the model's)")
    s.add_argument("--prompt", type=positive, default=128,
                   help="the longest prompt; each sequence's is drawn from half of it up")  # fmt: skip
    s.add_argument("--capacity", type=positive,
                   help="rows per head (default: the prompt plus what the steps append); a "
                   "paged cache: tokens per sequence, rounded up to whole pages")  # fmt: skip
    s.add_argument("--layout", choices=("contiguous", "paged"), default="contiguous",
                   help="contiguous BNSH caches, or pages of a pool through a page table "
                   "(or a slot mapping) with a host page allocator")  # fmt: skip
    s.add_argument("--page-size", type=positive, default=16,
                   help="tokens per page (paged: a power of two from 16 to 256)")  # fmt: skip
    s.add_argument("--page-layout", choices=LAYOUTS, default=LAYOUTS[0],
                   help="the order inside a page (paged)")  # fmt: skip
    s.add_argument("--addressing", choices=ADDRESSING, default="page_table",
                   help="how an append finds its pages (paged)")  # fmt: skip
    s.add_argument("--attention", action="store_true",
                   help="after every decode, attend (and attend_merge) over every layer's "
                   "cache, checked against float64 attention over the oracle's rows")  # fmt: skip
    s.add_argument("--q-heads", type=positive,
                   help="query heads attending, a multiple of the kv heads (default: the "
                   "model's query heads per kv head times --kv-heads)")  # fmt: skip
    s.add_argument("--check-attention", type=positive, metavar="N",
                   help="with --attention, check every Nth attention step's output (default: "
                   "each; the others are dispatched and timed alone)")  # fmt: skip
    s.add_argument("--backend", choices=("gpu", "interp"), default="gpu")
    s.add_argument("--check-every", type=count, default=0, metavar="N",
                   help="compare with the oracle every N steps (0: at the end only)")  # fmt: skip
    s.add_argument("--seed", type=count, default=0)
    s.add_argument("--csv", help="write every step's GPU and host microseconds to this file")
