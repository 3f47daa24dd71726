"""Fuzzing: random configs, shapes and runtime inputs on the interpreter, a sample on the GPU, and
mutated WGSL through the frontend.

- every mode's config space (walks, the flat ones with their K RMSNorm reductions and pair
  walks included, regions, rotary (partial rotary too), K norm, bits, element types, odd
  workgroup sizes and tiny dispatch folds) with the mode's verification cases: the interpreter
  finds no out-of-bounds access and no race and equals the reference;
- adversarial runtime inputs for the modes that read ``seqlens_k`` (any i32, keySeq past the
  capacity, empty and tiny caches), with every buffer sized exactly as the kernel's host-side
  contract says: either the host check rejects the input, or the interpreter runs it cleanly and
  equals the reference;
- a sample of the config fuzz on the GPU adapter, equal to the interpreter;
- mutated WGSL (token deletions, insertions, swaps on emitted catalog kernels) through
  :func:`kvdsl.frontend.parse`: it parses or raises a located ``FrontendError``, nothing else.

CI runs a bounded number of examples (the whole file in well under a minute on two cores). A
long run sets the examples per test (the GPU sample gets a twentieth)::

    KVDSL_FUZZ_EXAMPLES=5000 pytest tests/harness/test_fuzz.py -p no:cacheprovider

``KVDSL_FUZZ_DB=DIR`` keeps each failing example in ``DIR`` (every fuzz that takes
:func:`examples`' settings), and a later run given the same ``DIR`` replays it first.
"""

from __future__ import annotations

import dataclasses
import random
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvdsl import catalog
from kvdsl.harness import CASES, Case
from kvdsl.harness.modes import _rotary
from kvdsl.emit import emit
from kvdsl.interp import run as interp_run
from kvdsl.kernels.build import BuildConfig, build
from kvdsl.kernels.config import ConfigError
from kvdsl.kernels.copy import CopyConfig, copy
from kvdsl.kernels.merge import MergeConfig, merge
from kvdsl.kernels.merge_share import MergeShareConfig, merge_share
from kvdsl.kernels.qkv import QkvConfig, qkv
from kvdsl.kernels.quant import AppendQuantConfig, BuildQuantConfig, append_quant, build_quant
from kvdsl.kernels.transpose import TransposeConfig, transpose
from kvdsl.kernels.window_shift import WindowShiftConfig, window_shift
from kvdsl.nodes.walks import lanes
from kvdsl.runtime.contract import check_contract
from kvdsl.runtime.errors import BufferError
from tests.helpers.features import allow_refusal
from tests.helpers.fuzz import LONG, contract_sized, examples, window_case

BUILDERS = {
    TransposeConfig: transpose,
    CopyConfig: copy,
    MergeConfig: merge,
    MergeShareConfig: merge_share,
    WindowShiftConfig: window_shift,
    BuildConfig: build,
    BuildQuantConfig: build_quant,
    AppendQuantConfig: append_quant,
    QkvConfig: qkv,
}
FLOAT = st.sampled_from(["f32", "f16"])
BINDINGS = st.sampled_from(["template", "packed"])
# Odd and tiny workgroup sizes and folds: the walks must not rely on powers of two, and a fold
# of 1-3 puts most workgroups in y.
DISPATCH = st.fixed_dictionaries(
    {
        "workgroup_size": st.sampled_from([1, 3, 7, 32, 48, 64, 100, 256]),
        "fold": st.sampled_from([1, 2, 3, 65535]),
    }
)


def _pairs(draw: st.DrawFn, walk: str, d: int, rotary: bool, k_norm: bool = False):
    """``pairs``: None, False, or True where the pair walk applies (flat, rotary or K RMSNorm,
    half a row a whole number of vec4)."""
    applies = walk == "flat" and (rotary or k_norm) and d % 8 == 0
    return draw(st.sampled_from([None, False, True] if applies else [None, False]))


@st.composite
def configs(draw: st.DrawFn, modes: tuple[str, ...] = tuple(catalog.MODES)):
    """A valid config of any mode, small enough for the interpreter, every walk included."""
    mode = draw(st.sampled_from(modes))
    h = draw(st.integers(1, 3))
    even = 2 * draw(st.integers(1, 12))
    d = draw(st.sampled_from([even, 4 * draw(st.integers(1, 6)), draw(st.integers(1, 24))]))
    kw = draw(DISPATCH)
    if mode == "qkv":
        return _qkv(draw, h, kw)
    if mode == "transpose":
        vec4 = d % 4 == 0 and draw(st.booleans())
        return TransposeConfig(h, d, vec4, draw(FLOAT), draw(FLOAT), **kw)
    if mode == "copy":
        walk = draw(st.sampled_from(["cooperative", "per_row", "flat"]))
        return CopyConfig(d, walk, draw(st.sampled_from(["f32", "f16", "i32", "u32"])), **kw)
    if mode == "merge":
        walk = draw(st.sampled_from(["cooperative", "per_row", "flat"]))
        return MergeConfig(h, d, walk, draw(FLOAT), draw(FLOAT), **kw)
    if mode == "merge_share":
        region = draw(st.sampled_from(["retain", "append"]))
        walks = ["cooperative", "per_row", "flat"] + (["hybrid"] if region == "append" else [])
        walk = draw(st.sampled_from(walks))
        rotary = region == "append" and draw(st.booleans())
        d = even if rotary else d
        pairs = _pairs(draw, walk, d, rotary)
        cfg = MergeShareConfig(
            h, d, region, walk, rotary, draw(FLOAT), draw(FLOAT), pairs=pairs, **kw
        )
        return _partial(draw, cfg)
    if mode == "window_shift":
        region = draw(st.sampled_from(["all", "shift", "append"]))
        walk = draw(st.sampled_from(["per_row", "flat"]))
        rotary = region != "shift" and draw(st.booleans())
        d = even if rotary else d
        pairs = _pairs(draw, walk, d, rotary and region == "append")  # pairs only append
        cfg = WindowShiftConfig(
            h, d, region, rotary, draw(FLOAT), draw(FLOAT), walk=walk, pairs=pairs, **kw
        )
        return _partial(draw, cfg)
    k_norm, rotary = draw(st.booleans()), draw(st.booleans())
    d = even if rotary else d
    eps = draw(st.sampled_from([1e-6, 1e-5, 0.5]))
    walk = draw(st.sampled_from(["per_row", "flat"]))
    bits = draw(st.sampled_from([8, 4])) if mode != "build" else 8
    if mode != "build" and bits == 4:
        d = even
        if walk == "flat":  # one invocation packs four elements (eight with rotary)
            d = (8 if rotary else 4) * draw(st.integers(1, 3))
    # The drop-ins' block walk reduces across the subgroup too: rows of a power of two of
    # vectors (8-128 elements), where the block walk serves the config.
    sg_drop_in = walk == "per_row" and k_norm and draw(st.booleans())
    if sg_drop_in:
        d = 8 * 2 ** draw(st.integers(0, 4))
    reduction = "workgroup"
    if walk == "flat" and k_norm:
        # The row's partials are reduced in workgroup memory: no row may straddle two.
        per_row = d // lanes(d, rotary)
        kw["workgroup_size"] = per_row * draw(st.integers(1, max(1, 256 // per_row)))
        if per_row & (per_row - 1) == 0 and draw(st.booleans()):
            reduction = "subgroup"
    walks = dict(walk=walk, reduction=reduction, pairs=_pairs(draw, walk, d, rotary, k_norm))
    if mode == "build":
        cfg = BuildConfig(
            h,
            d,
            k_norm=k_norm,
            rotary=rotary,
            eps=eps,
            input_type=draw(FLOAT),
            present_type=draw(FLOAT),
            **walks,
            **kw,
        )
    else:
        lo, hi = (-128, 127) if bits == 8 else (-8, 7)
        qmin = draw(st.integers(lo, hi - 1))
        qmax = draw(st.integers(max(qmin + 1, 1), hi))  # the cases scale by qmax
        common = dict(bits=bits, qmin=qmin, qmax=qmax, k_norm=k_norm, rotary=rotary, eps=eps)
        common |= dict(input_type=draw(FLOAT), bindings=draw(BINDINGS), **walks, **kw)
        if mode == "build_quant":
            cfg = BuildQuantConfig(h, d, **common)
        else:
            # The reference rotates append_quant's K at its row (the absolute position);
            # "past_seq", the template's position, is compared with the legacy template in the
            # parity tests instead.
            cfg = AppendQuantConfig(h, d, rotary_position="row", **common)
    if sg_drop_in:
        try:
            cfg = dataclasses.replace(cfg, reduction="subgroup")
        except ConfigError:
            pass
    return _partial(draw, cfg)


def _qkv(draw: st.DrawFn, h: int, kw: dict) -> QkvConfig:
    """A ``qkv`` config: GQA groups of 1-4, any transforms, an f32/f16 or a dense cache (side
    scales where they fit 8 bindings), partial rotary where the plain walk takes it, and a
    workgroup of whole rows where the kernel reduces rows."""
    fmt = draw(st.sampled_from([None, "int8", "int4", "int4_asym", "q8_0", "q4_0"]))
    d = 32 * draw(st.integers(1, 2)) if fmt in ("q8_0", "q4_0") else 8 * draw(st.integers(1, 6))
    q_norm, k_norm, rotary, bias = (draw(st.booleans()) for _ in range(4))
    half = None
    if rotary and fmt is None and draw(st.booleans()):
        half = 4 * draw(st.integers(1, d // 8))
    fields = dict(q_norm=q_norm, k_norm=k_norm, rotary=rotary, rotary_half=half, bias=bias)
    fields |= dict(input_type=draw(FLOAT), q_type=draw(FLOAT), fold=kw["fold"])
    fields |= dict(q_layout=draw(st.sampled_from(["bnsh", "bsh"])))
    if fmt is None:
        fields["present_type"] = draw(FLOAT)
    else:
        fields["format"] = fmt
        side = fmt not in ("q8_0", "q4_0") and 5 + (q_norm or k_norm) + rotary + bias < 8
        fields["scales"] = draw(st.sampled_from(["inline", "side"] if side else ["inline"]))
    per_row = d // 4 if fmt else d // 8
    if fmt or q_norm or k_norm:
        fields["workgroup_size"] = per_row * draw(st.integers(1, max(1, 256 // per_row)))
    else:
        fields["workgroup_size"] = kw["workgroup_size"]
    q_heads = h * draw(st.sampled_from([1, 2, 4]))
    try:
        return QkvConfig(h, d, q_heads=q_heads, **fields)
    except ConfigError:  # past WebGPU's workgroup memory: a row a workgroup
        return QkvConfig(h, d, q_heads=q_heads, **(fields | {"workgroup_size": per_row}))


def _partial(draw: st.DrawFn, cfg):
    """``cfg``, or with rotary sometimes partial rotary: ``rotary_half`` below ``head_dim / 2``
    where the config's walk takes it."""
    if not cfg.rotary or not draw(st.booleans()):
        return cfg
    try:
        return dataclasses.replace(cfg, rotary_half=draw(st.integers(1, cfg.head_dim // 2)))
    except ConfigError:  # the pair walk, or the flat int4 walk with a half not a multiple of 4
        return cfg


def _case(cfg, seed: int, i: int) -> Case:
    return CASES[cfg.mode](cfg, np.random.default_rng(seed), i)


@examples(200)
@given(
    cfg=configs(),
    seed=st.integers(0, 2**32 - 1),
    i=st.integers(0, 5),
    subgroup=st.sampled_from([4, 8, 16, 32, 64, 128]),
)
def test_configs_on_interpreter(cfg, seed: int, i: int, subgroup: int) -> None:
    """Any config, the mode's adversarial shapes: no OOB, no race, equal to the reference, and
    buffers that fit the kernel's host-side contract; subgroup kernels at any subgroup size."""
    kernel = BUILDERS[type(cfg)](cfg)
    case = _case(cfg, seed, i)
    check_contract(kernel, case.buffers, case.params)
    got = interp_run(kernel, contract_sized(kernel, case), case.params, subgroup_size=subgroup)
    assert case.against_reference(got) == [], (cfg, case.label())


@pytest.mark.usefixtures("gpu")
@settings(parent=examples(8), max_examples=max(LONG // 20, 8))
@given(cfg=configs(), seed=st.integers(0, 2**32 - 1), i=st.integers(0, 5))
def test_configs_gpu_sample(cfg, seed: int, i: int) -> None:
    """A sample of the config fuzz on the GPU adapter: equal to the interpreter."""
    from kvdsl.runtime import FeatureError, adapter_info
    from kvdsl.runtime import run as gpu_run

    kernel = BUILDERS[type(cfg)](cfg)
    case = _case(cfg, seed, i)
    want = interp_run(kernel, dict(case.buffers), case.params)
    try:
        got = gpu_run(kernel, dict(case.buffers), case.params)
    except FeatureError as err:  # f16 or subgroups on an adapter without them: refused, clearly
        info = adapter_info()
        assert ("shader-f16" in str(err) and not info["shader_f16"]) or (
            "subgroup" in str(err) and not info["subgroups"]
        ), err
        allow_refusal(err)  # only where KVDSL_EXCUSE_FEATURES excuses it
        return
    assert case.against_reference(got, {k: want[k] for k in case.expected}) == [], (
        cfg,
        case.label(),
    )


# ---- adversarial runtime inputs ----------------------------------------------------------------

I32 = st.integers(-(2**31), 2**31 - 1)
SEQLEN = st.one_of(
    st.integers(-3, 40),  # empty, right-padded, middle, full, past the capacity
    st.sampled_from([-(2**31), -2, 2**31 - 1, 2**31 - 2, 2**16]),
    I32,
)
WINDOW_CONFIGS = configs(("merge_share", "window_shift", "append_quant"))


@st.composite
def window_inputs(draw: st.DrawFn):
    """A config reading ``seqlens_k`` and adversarial runtime inputs for it."""
    cfg = draw(WINDOW_CONFIGS)
    batch = draw(st.integers(1, 3))
    # A capacity of 0 is allowed where the capacity divides nothing (the host requires seq >= 1
    # where it sizes the batches).
    divides = cfg.mode != "append_quant" and cfg.region in ("retain", "all", "shift")
    cap = draw(st.integers(1 if divides else 0, 12))
    key_seq = draw(st.integers(1, 14))
    seqlens = np.array(draw(st.lists(SEQLEN, min_size=batch, max_size=batch)), np.int32)
    return cfg, cap, key_seq, seqlens, draw(st.integers(0, 2**32 - 1))


@examples(200)
@given(window_inputs())
def test_runtime_inputs_on_interpreter(inputs) -> None:
    """Any ``seqlens_k``, keySeq past the capacity, empty caches: with buffers sized by the
    host-side contract, either the host check rejects the input or the interpreter runs it with
    no out-of-bounds access and equals the reference."""
    cfg, cap, key_seq, seqlens, seed = inputs
    kernel = BUILDERS[type(cfg)](cfg)
    case = window_case(cfg, cap, key_seq, seqlens, seed)
    if case is None:
        # The rotary tables would need more positions than were allocated: the host rejects it.
        rot = _rotary(np.random.default_rng(0), 4, cfg.half)
        table = "rotary_table" if cfg.region == "all" else "cos_cache"  # all: one packed table
        short = rot.table(cfg.half) if cfg.region == "all" else rot.cos.reshape(-1)
        rows = key_seq if cfg.region == "append" else cap  # the rows the pass walks per batch
        params = {"count": len(seqlens) * cfg.kv_heads * rows, "seq": cap, "keySeq": key_seq}
        with pytest.raises(BufferError, match=f"'{table}'.* holds"):
            check_contract(kernel, {"seqlens_k": seqlens, table: short}, params)
        return
    check_contract(kernel, case.buffers, case.params)
    got = interp_run(kernel, dict(case.buffers), case.params)
    assert case.against_reference(got) == [], (cfg, cap, key_seq, seqlens)


# ---- the frontend on mutated WGSL --------------------------------------------------------------

TOKEN = re.compile(
    r"\s+|//[^\n]*|[A-Za-z_][A-Za-z0-9_]*|0x[0-9a-fA-F]+[iu]?|[0-9.]+[eE]?[-+]?[0-9]*[a-z]?|."
)
SOURCES = [emit(catalog.build(n)) for n in list(catalog.VARIANTS)[::6]]
SPARE = ["(", ")", "{", "}", ";", ",", "let", "var", "fn", "return", "if", "for", "u32", "f32",
         "0u", "1.5", "-", "*", "/", "<", ">", "=", "@", "[", "]", "x", "array", "<f32>", ".",
         "--", ">=", "&&", "/*", "*/", "\u00e9", "\u00a0", "\u2028", "\u00b2"]  # fmt: skip


def mutate(text: str, rng: random.Random, n: int) -> str:
    """``text`` with ``n`` random token deletions, insertions, swaps or duplications."""
    toks = TOKEN.findall(text)
    for _ in range(n):
        i = rng.randrange(len(toks))
        kind = rng.randrange(4)
        if kind == 0:
            del toks[i]
        elif kind == 1:
            toks.insert(i, rng.choice(SPARE + [t for t in toks[i : i + 40] if t.strip()]))
        elif kind == 2:
            j = rng.randrange(len(toks))
            toks[i], toks[j] = toks[j], toks[i]
        else:
            toks.insert(i, toks[rng.randrange(len(toks))])
    return "".join(toks)


@examples(400)
@given(src=st.sampled_from(SOURCES), seed=st.integers(0, 2**32 - 1), n=st.integers(1, 4))
def test_frontend_on_mutated_wgsl(src: str, seed: int, n: int) -> None:
    """Mutated kernels parse, or fail with a located FrontendError, never otherwise."""
    from kvdsl.frontend import FrontendError, parse

    text = mutate(src, random.Random(seed), n)
    try:
        parse(text)
    except FrontendError as err:
        # A module without an entry point has no line to point at: the one unlocated error.
        if err.line is None:
            assert "a module with 0 @compute entry points" in err.message, str(err)
        else:
            assert 1 <= err.line <= text.count("\n") + 1, str(err)
        assert str(err).startswith("<wgsl>:"), str(err)


@examples(1)
@given(seed=st.integers(0, 2**32 - 1))
def test_mutated_wgsl_the_frontend_takes_compiles_under_naga_and_tint(seed: int) -> None:
    """What the frontend takes of 1,500 mutated kernels, naga and Tint take too: kvdsl reads no
    text as WGSL that WGSL's compilers refuse (such as a keyword run into the next name,
    ``constN``, read as ``const N``; a comparison that WGSL's template-list discovery reads
    as a list), naga's refusal of ``a--b`` (``a - -b``, as Tint reads it) aside."""
    from kvdsl.frontend import FrontendError, parse
    from kvdsl.ir.features import limits
    from tests.helpers.wgsl import refused_by_compilers

    rng = random.Random(seed)
    taken: dict[str, str] = {}
    need: dict[str, dict[str, int]] = {}  # the limits past the defaults each mutant states
    for k in range(1500):
        src = SOURCES[rng.randrange(len(SOURCES))]
        text = mutate(src, rng, rng.randint(1, 4))
        try:
            kernel = parse(text)
        except FrontendError:
            continue
        taken[f"mutant{k}"] = text
        need[f"mutant{k}"] = limits(kernel)
    assert len(taken) > 20  # about 6% of mutants parse
    refused = refused_by_compilers(taken, need)
    # A device's limits are not WGSL's: a mutant may name @group(40) or @binding(2000), which
    # kvdsl renumbers (its interface is the bindings' order) and the compilers' devices refuse.
    refused = {n: e for n, e in refused.items() if not DEVICE_LIMITS.search(e)}
    # kvdsl takes the subgroup builtins without `enable subgroups;`, as naga does (and prints
    # the directive back); Tint asks for it (docs/grammar.md).
    refused = {n: e for n, e in refused.items() if not NO_SUBGROUPS_ENABLE.search(e)}
    # `a--b` in an expression is `a - -b`, as Tint reads it; naga's tokeniser is not WGSL's.
    refused = {n: e for n, e in refused.items() if not NAGA_MINUS_MINUS.search(e)}
    assert not refused, (len(refused), next(iter(refused.values())))


NAGA_MINUS_MINUS = re.compile(r'^naga: .*found "--"', re.S)
NO_SUBGROUPS_ENABLE = re.compile(r"^tint: .*(without|requires enabling) extension 'subgroups'")
DEVICE_LIMITS = re.compile(
    r"max_bind_groups|greater than the maximum number|Too many bindings|infringes limits"
)
