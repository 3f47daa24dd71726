"""Probe 42 (H200): the workgroup K RMSNorm drop-ins with fewer values live across the barrier,
each form's registers read beside its time.

Probe 41 found the 2,048-token drop-ins sensitive to how many workgroups a multiprocessor
holds: at 1,024 workgroups a module the driver compiles to at most 32 registers runs them in
one wave, one at 33-40 spills a fifth of a wave past the first (naga's int8 K RMSNorm drop-in:
35 registers, 75% of the copy), one at 41-64 takes two nearly full waves (Tint's: 64, 89%).
Probes 33 and 40 moved loads across the norm's barrier and gained under one compiler what they
lost under the other, without reading the registers. This builds each workgroup K RMSNorm
drop-in, then moves ``let`` statements of its step loop from before the first barrier to just
after it (:func:`sink`; their values are loads of read-only bindings and arithmetic, so the
move changes no result), in these forms:

- ``emitted``: as the catalog emits it;
- ``k-only``: only what the workgroup-memory store needs (K's vectors and their indices) stays
  before the barrier: the norm weights, V, the scales, the destination follow it;
- ``k+v``: V's loads stay before the barrier too (the rest follows it);
- ``tables`` (the appends): the window's ``seqlens_k`` load stays too, so only the norm
  weights, the scales and what follows from them move: probe 33's form.

Each form is checked on the device to write the same bytes as the emitted one and timed
alternately with the copy (:func:`probes.race_forms`, three rounds, medians) at batch 4, 2,048
tokens and one token. The process runs under ``benchmarks/vklayer``'s layer
(:mod:`shaderstats`), which records the driver's statistics of every pipeline: each form's
register count is printed beside its time (NVIDIA; llvmpipe offers none). Run it under both
implementations (``KVDSL_WEBGPU=dawn``): a form is worth keeping only if it holds under both.

    python benchmarks/probe42.py [--small]
"""

from __future__ import annotations

import dataclasses
import sys

import probes
from kvdsl.emit import emit
from kvdsl.ir.nodes import Barrier, Comment, For, Index, Kernel, Let, Name, Stmt, walk

VARIANTS = probes.KNORM_DROPINS


def _names(node: object) -> set[str]:
    return {n.name for n in walk(node) if type(n) is Name}


def _reads(node: object, binding: str) -> bool:
    return any(type(n) is Index and n.base == Name(binding) for n in walk(node))


def sink(kernel: Kernel, keep: tuple[str, ...] = ()) -> Kernel:
    """``kernel`` with each ``let`` of its step loop that comes before the loop's first barrier
    and that nothing before the barrier needs moved to just after it, in order; a ``let`` that
    reads a binding named in ``keep`` stays (with what it needs). Refuses a ``let`` that reads
    workgroup memory (the barrier orders it)."""
    (i, loop), *_ = [(i, s) for i, s in enumerate(kernel.body) if type(s) is For]
    at = next(j for j, s in enumerate(loop.body) if type(s) is Barrier)
    before, after = loop.body[:at], loop.body[at + 1 :]
    shared = {w.name for w in kernel.workgroup_vars}
    needed: set[str] = set()
    for s in before:
        if type(s) is not Let and type(s) is not Comment:
            needed |= _names(s)  # a store to workgroup memory, a guard: stays, with its inputs
        elif type(s) is Let and any(_reads(s.value, b) for b in keep):
            needed |= {s.name} | _names(s.value)
    for s in reversed(before):  # lets come before their readers: one backward pass closes
        if type(s) is Let and s.name in needed:
            needed |= _names(s.value)
    stay: list[Stmt] = []
    moved: list[Stmt] = []
    for s in before:
        if type(s) is Let and s.name not in needed:
            if _names(s.value) & shared:
                raise ValueError(f"let {s.name} reads workgroup memory")
            moved.append(s)
        else:
            stay.append(s)
    if not moved:
        raise ValueError(f"{kernel.name}: nothing to move below the barrier")
    body = (*stay, loop.body[at], Comment("Moved below the barrier (probe 42):"), *moved, *after)
    new_loop = dataclasses.replace(loop, body=body)
    return dataclasses.replace(kernel, body=(*kernel.body[:i], new_loop, *kernel.body[i + 1 :]))


def forms(kernel: Kernel) -> dict[str, str]:
    """The forms' WGSL (see the module); ``tables`` only where it differs from ``k+v``."""
    out = {
        "emitted": emit(kernel),
        "k-only": emit(sink(kernel)),
        "k+v": emit(sink(kernel, keep=("src_v",))),
        "tables": emit(sink(kernel, keep=("src_v", "seqlens_k"))),
    }
    if out["tables"] == out["k+v"]:
        del out["tables"]
    return out


def main(argv: list[str]) -> None:
    probes.race_with_registers(__file__, argv, VARIANTS, lambda m: forms(m.kernel))


if __name__ == "__main__":
    main(sys.argv[1:])
