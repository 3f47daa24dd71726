"""index.json's `use` of each binding (read, write, read_write): what the kernel's statements do
with it, held to the verifier's stores for every variant, to the loads and stores the
interpreter counts on a sample, and to what a write-only binding's prior contents can change
(nothing the kernel stores)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kvdsl import catalog
from kvdsl.cli.make_inputs import from_shape
from kvdsl.frontend import parse
from kvdsl.interp import run
from kvdsl.ir.uses import binding_uses
from kvdsl.ir.verify import Verifier, verify
from kvdsl.reference.judge import poison
from tests.helpers.contract import SMALL as CONTRACT_SMALL
from tests.helpers.paths import ROOT

INDEX = json.loads((ROOT / "emitted" / "index.json").read_text())


def test_every_variants_use_is_its_kernels():
    """index.json states binding_uses; a binding written is one the verifier saw stored to, a
    binding declared read is never written, and the params are read."""
    for name, e in INDEX.items():
        kernel = catalog.build(name)
        uses = binding_uses(kernel)
        assert {b["name"]: b["use"] for b in e["bindings"][: len(uses)]} == uses, name
        assert all(b["use"] == "read" for b in e["bindings"][len(uses) :]), name
        v = Verifier(kernel)
        verify(kernel, v, house=False)
        written = {n for n, u in uses.items() if u != "read"}
        assert written == {b.name for b in kernel.bindings if b.name in v.stored}, name
        assert all(uses[b.name] == "read" for b in kernel.bindings if b.access == "read"), name


#: A variant of every mode, and those that read a binding they write.
SAMPLE = sorted(
    {next(n for n, c in catalog.VARIANTS.items() if c.mode == m) for m in catalog.MODES}
    & set(catalog.VARIANTS)
    | {n for n, e in INDEX.items() if any(b["use"] == "read_write" for b in e["bindings"])}
)
#: The catalog's small shape with room for 200 tokens in all.
SMALL = CONTRACT_SMALL | {"total": 200}


@pytest.mark.parametrize("name", SAMPLE)
def test_use_is_what_the_interpreter_sees(name):
    """On random inputs (kvdsl inputs'): the bindings loaded are those of use read or
    read_write, those stored those of use write or read_write; a write binding's contents before
    the run change none of the elements the kernel stores, nor any other output."""
    kernel, e = catalog.build(name), INDEX[name]
    shape = ",".join(f"{v}={SMALL[v]}" for v in e["shape"])
    chosen = {"scale": 0.125, "softcap": 30.0}
    needed = {p["name"] for p in e["params"] if "value" not in p}
    _, buffers, params = from_shape(name, shape, 3, {k: chosen[k] for k in needed})
    seen: dict[str, list[int]] = {}
    first = run(kernel, buffers, params, None, accesses=seen)
    if "chunks" in e["shape"] and catalog.config(name).mode == "attend":
        # attend stores output with one chunk and partials with more: both runs together
        one = shape.replace("chunks=2", "chunks=1")
        _, b1, p1 = from_shape(name, one, 3, {k: chosen[k] for k in needed})
        also: dict[str, list[int]] = {}
        run(kernel, b1, p1, None, accesses=also)
        for k, (loads, stores) in also.items():
            before = seen.get(k, [0, 0])
            seen[k] = [before[0] + loads, before[1] + stores]
    uses = binding_uses(kernel)
    for b in kernel.bindings:
        loaded, stored = seen.get(b.name, [0, 0])
        assert (loaded > 0, stored > 0) == (uses[b.name] != "write", uses[b.name] != "read"), (
            b.name,
            seen.get(b.name),
            uses[b.name],
        )
    rng = np.random.default_rng(4)
    other = dict(buffers)
    for b in kernel.bindings:
        if uses[b.name] == "write":  # other contents: random bits, not the poison
            a = buffers[b.name]
            bits = rng.integers(0, 2**31, a.size).astype(f"u{a.dtype.itemsize}")
            other[b.name] = bits.view(a.dtype)
    second = run(kernel, other, params, None)
    for out, want in first.items():
        bits = f"u{want.dtype.itemsize}"
        if uses[out] == "write":  # what the kernel left unwritten is the other contents
            unwritten = want.view(bits) == poison(1, want.dtype).view(bits)
            want = np.where(unwritten, other[out], want)
        assert (second[out].view(bits) == want.view(bits)).all(), out


def _uses(body: str, decls: str = "", helper: str = "") -> dict[str, str]:
    wgsl = (
        "@group(0) @binding(0) var<storage, read> a: array<u32>;\n"
        "@group(0) @binding(1) var<storage, read_write> b: array<u32>;\n"
        "@group(0) @binding(2) var<storage, read_write> c: array<atomic<u32>>;\n"
        f"{decls}{helper}"
        "@compute @workgroup_size(1)\n"
        f"fn main(@builtin(global_invocation_id) gid: vec3<u32>) {{\n{body}\n}}\n"
    )
    return binding_uses(parse(wgsl))


R, W, RW = "read", "write", "read_write"

#: (main's body, the uses of a, b and c, why); an untouched binding is read (nothing written).
USES = [
    ("b[0] = a[1];", (R, W, R), "a read, b written"),
    ("b[0] += 1u;", (R, RW, R), "a compound assignment reads"),
    ("b[a[0]] = 1u;", (R, W, R), "an index of a store is a load"),
    ("let x = b[0]; b[1] = x;", (R, RW, R), "a load and a store"),
    ("atomicStore(&c[0], 1u);", (R, R, W), "atomicStore writes"),
    ("let x = atomicLoad(&c[0]); b[0] = x;", (R, W, R), "atomicLoad reads"),
    ("atomicAdd(&c[0], 1u);", (R, R, RW), "atomicAdd reads and writes"),
    ("b[0] = arrayLength(&a);", (R, W, R), "arrayLength loads nothing"),
    ("var b: u32 = 1u; b = b + 2u;", (R, R, R), "a local of a binding's name hides it"),
    ("{ let b = 3u; } b[0] = a[0];", (R, W, R), "a local out of scope hides nothing"),
    ("put(2u);", (R, W, R), "a helper's store"),
    ("let p = &b[0]; *p = 1u;", (R, RW, R), "a pointer into a read_write binding: both"),
]


@pytest.mark.parametrize("body, want, why", USES, ids=[u[2] for u in USES])
def test_use_follows_wgsl(body, want, why):
    helper = "fn put(v: u32) { b[0] = v; }\nfn unused() { atomicStore(&c[0], a[9]); }\n"
    got = _uses(body, helper=helper)
    assert got == dict(zip("abc", want)), (why, got)
