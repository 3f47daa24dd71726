"""Every runtime input a host can pass to the kernels a session dispatches has a defined result:
clamped as the kernel documents (equal to the reference), or refused before any dispatch with an
error naming the field, the value and what is allowed; and no dispatch writes outside the
addressed sequence. Each row runs on the interpreter, each binding an exact copy of its range
(any stray access is ``OutOfBounds``, two writers a ``RaceError``), and on the GPU with every
binding between poisoned canary batches that must stay untouched. The table is docs/errors.md's
"Runtime inputs of a session's kernels"."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import reference
from kvdsl.contract import params_bytes, workgroups
from kvdsl.reference import formats as fm
from kvdsl.reference.judge import poison, values
from kvdsl.runtime.errors import BufferError, ParamsError
from kvdsl.session import Bound, GpuHost, InterpHost, cache_format
from kvdsl.session.host import ALIGN, aligned
from tests.helpers.session import host_class

HEADS, DIM = 2, 8
FLOAT = cache_format("f32", HEADS, DIM)
DENSE = cache_format("int8", HEADS, DIM)
PROGRAMS = {
    "merge_share append": FLOAT._append,
    "merge_share retain": FLOAT._retain,
    "window_shift all": FLOAT._shift,
    "dense_append": DENSE._append,
    "copy": DENSE._copy,
    "dense_read": DENSE._read,
}


def dispatch(
    host, program, arrays, shape, params, seqlens=None, checked=True, exact=False, inputs=None
):
    """``arrays`` bound on ``host``, each between canaries of its own size; the read_write
    bindings after the dispatch. Raises what the host refuses, and fails if a canary moved.

    The interpreter binds each array exactly (a stray access is ``OutOfBounds``); the GPU binds
    the trailing canary too, so that a write past the array lands in it (WebGPU drops or clamps
    an access past a binding, which would hide it), unless ``exact``. Each canary is its own
    random bytes, so a row copied from one binding's canary into another's shows.
    ``checked=False`` dispatches without the host's checks (a host that forgot them);
    ``inputs``: the values of integer inputs the contract's sizes read (a page table's)."""
    bound, canaries = {}, {}
    for name, a in arrays.items():
        data = np.ascontiguousarray(a).reshape(-1)
        pad = aligned(max(data.nbytes, 4))
        buf = host.buffer(name, 2 * pad + ALIGN)
        seed = sum(name.encode()) + 1000 * len(bound)
        fence = np.random.default_rng(seed).integers(0, 256, pad, np.uint8).tobytes()
        host.write(buf, 0, fence)
        host.write(buf, pad, data)
        tail = buf.size - pad - data.nbytes
        host.write(buf, pad + data.nbytes, (fence * 2)[:tail])
        whole = exact or isinstance(host, InterpHost)
        bound[name] = Bound(buf, pad, data.nbytes if whole else buf.size - pad)
        canaries[name] = (data, fence, (fence * 2)[:tail], pad)
    if checked:
        host.dispatch(program, bound, shape, params, seqlens, inputs)
    else:
        data = params_bytes(program.entry, params)
        host._dispatch(program, bound, params, data, workgroups(program.entry, params))
    out = {}
    for name, r in bound.items():
        raw = host.read(r.buffer)
        data, before, after, pad = canaries[name]
        assert raw[:pad] == before, f"{program.name}: the canary before '{name}' was written"
        assert (
            raw[pad + data.nbytes :] == after
        ), f"{program.name}: the canary after '{name}' was written"
        if program.binding(name).access == "read_write":
            out[name] = np.frombuffer(raw[pad : pad + data.nbytes], data.dtype).copy()
    return out


def _rng():
    return np.random.default_rng(7)


def window_case(mode, seqlens, cap, key_seq):
    """Inputs, shape, params and the reference's present (None: refused) of a seqlens_k mode."""
    rng = _rng()
    seqlens = np.array(seqlens, np.int32)
    batch = len(seqlens)
    new_k, new_v = (values(rng, (batch, key_seq, HEADS * DIM), np.float32) for _ in range(2))
    shape_ = (batch, HEADS, cap, DIM)
    past_k, past_v = (values(rng, shape_, np.float32) for _ in range(2))
    keep = min(key_seq, cap)
    rows = cap if mode in ("merge_share retain", "window_shift all") else key_seq
    shape = {"batch": batch, "seq": cap, "keySeq": key_seq}
    params = {"count": batch * HEADS * rows, "seq": cap, "keySeq": key_seq}
    if mode == "merge_share append":
        arrays = {"new_k": new_k, "new_v": new_v, "seqlens_k": seqlens}
        w = reference.merge_share_append(
            new_k[:, key_seq - keep :], new_v[:, key_seq - keep :], seqlens, cap, HEADS
        ) if keep else None  # fmt: skip
        want = _over(w, shape_)
    elif mode == "merge_share retain":
        arrays = {"past_k": past_k, "past_v": past_v, "seqlens_k": seqlens}
        want = _over(reference.merge_share_retain(past_k, past_v, seqlens, keep), shape_)
    elif mode == "window_shift all":
        arrays = {"past_k": past_k, "past_v": past_v, "new_k": new_k, "new_v": new_v}
        arrays["seqlens_k"] = seqlens
        w = reference.window_shift(past_k, past_v, new_k, new_v, seqlens, "all")
        want = _over(w, shape_)
    else:  # dense_append
        arrays = {"src_k": new_k, "src_v": new_v, "seqlens_k": seqlens}
        params = {"count": batch * HEADS * key_seq, "keySeq": key_seq, "seq": cap}
        want = None
        if 1 <= key_seq <= cap:
            w = fm.dense_append(new_k, new_v, seqlens, cap, HEADS, "int8")
            p = poison(w.key.shape, np.uint32)
            want = (np.where(w.mask(w.key), w.key, p), np.where(w.mask(w.value), w.value, p))
        n = batch * HEADS * cap * DENSE.unit
        arrays |= {"present_key": poison(n, np.uint32), "present_value": poison(n, np.uint32)}
        return arrays, shape, params, seqlens, want
    n = batch * HEADS * cap * DIM
    arrays |= {"present_key": poison(n, np.float32), "present_value": poison(n, np.float32)}
    return arrays, shape, params, seqlens, want


def _over(w, shape_):
    """The present of a pass that writes ``w``'s mask over a poisoned buffer."""
    p = poison(shape_, np.float32)
    if w is None:
        return p, p
    return w.over(p, p)


I32_MIN, I32_MAX = -(2**31), 2**31 - 1

#: (id, seqlens_k, capacity, keySeq): inputs every seqlens_k mode gives a defined result.
SEQLENS = [
    ("seqlens_k -1 (empty)", [-1, 5, 2], 8, 3),
    ("seqlens_k below -1, down to i32 min", [-2, I32_MIN, 4], 8, 3),
    ("seqlens_k past the capacity", [8, 20, 3], 8, 3),
    ("seqlens_k i32 max", [I32_MAX, 7, 0], 8, 3),
    ("seqlens_k decreasing over the batch", [9, 4, 0], 8, 2),
    ("seqlens_k below the new tokens (right-padded)", [0, 1, 2], 8, 4),
    ("keySeq past the capacity", [3, 40, -1], 6, 9),
    ("keySeq equal to the capacity", [5, 9, -1], 6, 6),
    ("capacity 1", [0, 3, -5], 1, 1),
]
WINDOW_MODES = ("merge_share append", "merge_share retain", "window_shift all", "dense_append")

#: (mode, id): inputs a mode refuses, with the error class and what its message must say.
REFUSED = {
    ("dense_append", "keySeq past the capacity"): (ParamsError, r"requires keySeq <= seq; got count=\d+, keySeq=9, seq=6"),
}  # fmt: skip


def _judge(mode, got, want):
    for name, w in zip(("present_key", "present_value"), want):
        g = got[name]
        if mode == "dense_append":
            problem = DENSE.judge(g, np.asarray(w, np.uint32), exact=False)
            assert problem == "", f"{name}: {problem}"
        else:
            assert np.array_equal(
                g.view(np.uint32), np.asarray(w, np.float32).reshape(-1).view(np.uint32)
            ), name


@pytest.fixture(params=["interp", "gpu"])
def host(request):
    return host_class(request)()


@pytest.mark.parametrize("case", SEQLENS, ids=[c[0] for c in SEQLENS])
@pytest.mark.parametrize("mode", WINDOW_MODES)
def test_seqlens_inputs(host, mode, case):
    """Clamped as documented (the reference's result, nothing outside the window), or refused
    naming the field and the value."""
    what, seqlens, cap, key_seq = case
    arrays, shape, params, lens, want = window_case(mode, seqlens, cap, key_seq)
    refusal = REFUSED.get((mode, what))
    if refusal is not None:
        with pytest.raises(refusal[0], match=refusal[1]):
            dispatch(host, PROGRAMS[mode], arrays, shape, params, lens)
        return
    got = dispatch(host, PROGRAMS[mode], arrays, shape, params, lens)
    _judge(mode, got, want)


def _bad(mode, change):
    """A good case of ``mode`` with ``change`` applied to (arrays, shape, params)."""
    if mode in WINDOW_MODES:
        arrays, shape, params, lens, _ = window_case(mode, [3, 5], 8, 2)
    else:
        rng = _rng()
        rows = 6
        unit = DENSE.unit
        if mode == "copy":
            arrays = {k: values(rng, rows * unit, np.uint32) for k in ("src_k", "src_v")}
            arrays |= {k: poison(rows * unit, np.uint32) for k in ("present_key", "present_value")}
        else:
            k = fm.quantize_rows("int8", values(rng, (rows, DIM), np.float32))[0]
            arrays = {"cache_key": k, "cache_value": k.copy()}
            arrays |= {n: poison(rows * DIM, np.float32) for n in ("key", "value")}
        shape, params, lens = {"rows": rows}, {"count": rows}, None
    change(arrays, shape, params)
    return arrays, shape, params, lens


#: (mode, id, change, error, message): host values that are refused before any dispatch.
REFUSALS = [
    ("merge_share append", "keySeq 0", lambda a, s, p: p.update(keySeq=0, count=0), ParamsError, r"requires keySeq >= 1; got count=0, keySeq=0"),
    ("dense_append", "keySeq 0", lambda a, s, p: p.update(keySeq=0, count=0), ParamsError, r"requires keySeq >= 1"),
    ("merge_share retain", "capacity 0", lambda a, s, p: p.update(seq=0), ParamsError, r"requires seq >= 1; got count=\d+, keySeq=2, seq=0"),
    ("window_shift all", "capacity 0", lambda a, s, p: p.update(seq=0), ParamsError, r"requires seq >= 1"),
    ("merge_share append", "count past the batches", lambda a, s, p: p.update(count=p["count"] + HEADS * 2), BufferError, r"binding 'new_k' .* holds \d+ elements, but kernel \S+ touches \d+"),
    ("merge_share retain", "count past the batches", lambda a, s, p: p.update(count=p["count"] + 1), BufferError, r"binding 'past_k'"),
    ("window_shift all", "count past the batches", lambda a, s, p: p.update(count=p["count"] + 8), BufferError, r"binding 'seqlens_k' .* holds"),
    ("dense_append", "count past the batches", lambda a, s, p: p.update(count=p["count"] + 1), BufferError, r"binding 'src_k' .* holds"),
    ("merge_share append", "seqlens_k shorter than the batch", lambda a, s, p: a.update(seqlens_k=a["seqlens_k"][:1]), BufferError, r"binding 'seqlens_k' is bound to 4 bytes; the contract sizes it 8"),
    ("merge_share append", "a params field past u32", lambda a, s, p: p.update(count=2**32), ParamsError, r"params field 'count' is u32: 4294967296 is outside \[0, 4294967295\]"),
    ("merge_share retain", "a negative params field", lambda a, s, p: p.update(keySeq=-1), ParamsError, r"params field 'keySeq' is u32: -1 is outside"),
    ("merge_share append", "a shape that is not the buffers'", lambda a, s, p: s.update(seq=9), BufferError, r"binding 'present_key' is bound to \d+ bytes; the contract sizes it \d+"),
    ("copy", "count past the rows", lambda a, s, p: p.update(count=7), BufferError, r"binding 'src_k' .* holds 18 elements, but kernel \S+ touches 21"),
    ("dense_read", "count past the rows", lambda a, s, p: p.update(count=7), BufferError, r"binding 'cache_key' .* holds 18 elements, but kernel \S+ touches 21"),
    ("dense_read", "a binding missing", lambda a, s, p: a.pop("value"), BufferError, r"binding 'value' has no range"),
    ("copy", "a range for no binding", lambda a, s, p: a.update(extra=np.zeros(4, np.uint32)), BufferError, r"range 'extra' has no binding"),
]  # fmt: skip


@pytest.mark.parametrize(
    "mode,change,error,message", [r[:1] + r[2:] for r in REFUSALS], ids=[f"{r[0]}-{r[1]}" for r in REFUSALS]
)  # fmt: skip
def test_refused_before_dispatch(host, mode, change, error, message):
    arrays, shape, params, lens = _bad(mode, change)
    with pytest.raises(error, match=message):
        dispatch(host, PROGRAMS[mode], arrays, shape, params, lens, exact=True)


#: (mode, id, change): reads and copies of fewer rows than the buffers hold.
def test_a_count_short_of_the_rows_writes_only_those_rows(host):
    """copy and dense_read of ``count`` rows write the first ``count`` rows and no more."""
    for mode in ("copy", "dense_read"):
        arrays, shape, params, lens = _bad(mode, lambda a, s, p: p.update(count=4))
        got = dispatch(host, PROGRAMS[mode], arrays, shape, params, lens)
        outs = ("present_key", "src_k") if mode == "copy" else ("key", "cache_key")
        g = got[outs[0]]
        n = g.size // 6 * 4
        if mode == "copy":
            assert np.array_equal(g[:n], arrays["src_k"][:n])
        else:
            want = fm.dequantize_rows("int8", arrays["cache_key"], None, DIM).reshape(-1)
            assert np.array_equal(g[:n], want[:n])
        assert (g[n:].view(np.uint32) == 0x7FC0DEAD).all()


def test_a_write_past_the_sequences_reaches_a_canary(gpu):
    """The canaries can fail: a host that skips its checks and dispatches one batch more than
    its buffers hold makes the kernel write that batch's rows, which land in the canary after
    the cache (the range binds it), and the check names it."""
    arrays, shape, params, lens = _bad("merge_share append", lambda a, s, p: None)
    params = dict(params, count=params["count"] + HEADS * 2)
    with pytest.raises(AssertionError, match=r"the canary after 'present_key' was written"):
        dispatch(GpuHost(), PROGRAMS["merge_share append"], arrays, shape, params, lens, False)


def _contract_arrays(program, shape):
    """Random non-zero arrays of every storage binding, each of the contract's size."""
    from kvdsl.contract import buffer_sizes

    rng = _rng()
    out = {}
    for name, size in buffer_sizes(program.entry, shape).items():
        if name == "params":
            continue
        dt = program.binding(name).host.dtype
        out[name] = values(rng, size // dt.itemsize, dt)
    return out


def _other_modes():
    from kvdsl.kernels.build import BuildConfig
    from kvdsl.kernels.dense import DenseBuildConfig
    from kvdsl.kernels.merge import MergeConfig
    from kvdsl.kernels.quant import AppendQuantConfig, BuildQuantConfig
    from kvdsl.kernels.transpose import TransposeConfig
    from kvdsl.session import Program

    b, h = 2, HEADS
    return [
        ("transpose", "batchSize past the buffers", Program.of(TransposeConfig(kv_heads=h, head_dim=DIM), "transpose"),
         {"batch": b, "kvSeq": 3}, {"batchSize": b + 1, "kvSeq": 3}, None,
         BufferError, r"binding 'key' .* holds 96 elements, but kernel transpose touches 144"),
        ("merge", "seq past pastSeq + keySeq", Program.of(MergeConfig(h, DIM), "merge"),
         {"batch": b, "pastSeq": 4, "keySeq": 2}, {"count": b * h * 7, "seq": 7, "pastSeq": 4, "keySeq": 2}, None,
         ParamsError, r"requires seq <= pastSeq \+ keySeq .*keySeq=2, pastSeq=4, seq=7"),
        ("build", "pastSeq past the rotary tables", Program.of(BuildConfig(h, DIM, rotary=True), "build"),
         {"batch": b, "seq": 3, "pastSeq": 0, "positions": 3}, {"count": b * h * 3, "seq": 3, "pastSeq": 5}, None,
         BufferError, r"binding 'cos_cache' .* holds \d+ elements, but kernel build touches \d+"),
        ("build_quant", "perChannel 1 with one scale", Program.of(BuildQuantConfig(h, DIM), "build_quant"),
         {"batch": b, "seq": 3, "pastSeq": 0, "perChannel": 0}, {"count": b * h * 3, "seq": 3, "pastSeq": 0, "perChannel": 1}, None,
         BufferError, r"binding 'k_scale' .* holds 1 elements, but kernel build_quant touches 16"),
        ("append_quant", "perChannel 1 with one scale", Program.of(AppendQuantConfig(h, DIM), "append_quant"),
         {"batch": b, "seq": 1, "totalSeq": 6, "perChannel": 0}, {"count": b * h, "seq": 1, "pastSeq": 0, "totalSeq": 6, "perChannel": 1}, np.array([2, 9], np.int32),
         BufferError, r"binding 'k_scale' .* holds 1 elements, but kernel append_quant touches 16"),
        ("dense_build", "pastSeq past the rotary tables", Program.of(DenseBuildConfig(h, DIM, rotary=True), "dense_build"),
         {"batch": b, "seq": 3, "pastSeq": 0, "positions": 3}, {"count": b * h * 3, "seq": 3, "pastSeq": 5}, None,
         BufferError, r"binding 'cos_cache' .* holds \d+ elements, but kernel dense_build touches \d+"),
    ]  # fmt: skip


OTHER = _other_modes()


@pytest.mark.parametrize("row", OTHER, ids=[f"{r[0]}-{r[1]}" for r in OTHER])
def test_the_other_modes_refuse_before_dispatch(host, row):
    """The modes a session does not dispatch go through the same host checks."""
    _, _, program, shape, params, seqlens, error, message = row
    arrays = _contract_arrays(program, shape)
    if seqlens is not None:
        arrays["seqlens_k"] = seqlens
    with pytest.raises(error, match=message):
        dispatch(host, program, arrays, shape, params, seqlens, exact=True)


def test_a_new_buffer_given_a_dropped_buffers_id_is_bound_itself(gpu, monkeypatch):
    """The GPU host keeps a dispatch's bind group by its buffers' ids. A buffer made after
    another was dropped may get the dropped one's id (CPython reuses the memory), and must then
    be bound itself, not the dropped buffer the kept group still holds (a session's new-token
    buffers are replaced as a step asks for more tokens, and a later step read the old ones'
    stale tokens). Here every buffer of a label gets one id, so each round's fresh source
    meets the last round's id: each round's copy must copy its own new rows."""
    from kvdsl.session import host as host_module
    from kvdsl.session.host import Buffer

    real = id
    monkeypatch.setattr(
        host_module, "id", lambda o: hash(o.label) if isinstance(o, Buffer) else real(o), False
    )
    host, program, rows = GpuHost(), PROGRAMS["copy"], 6
    size = rows * DENSE.unit * 4
    outs = {n: host.buffer(n, size) for n in ("src_v", "present_key", "present_value")}
    for k in range(4):
        src = host.buffer("src_k", size)
        want = values(np.random.default_rng(100 + k), rows * DENSE.unit, np.uint32)
        host.write(src, 0, want)
        bound = {n: Bound(b, 0, size) for n, b in (outs | {"src_k": src}).items()}
        host.dispatch(program, bound, {"rows": rows}, {"count": rows})
        got = np.frombuffer(host.read(outs["present_key"]), np.uint32)[: want.size]
        assert np.array_equal(got, want), f"round {k}: the copy read an earlier source"
        del src, bound
