"""`kvdsl run` checks what the host passes once, for every backend, before any runs: each bad
params value, buffer and paged input gets the same one line and exit code 2 from the
interpreter, the GPU and both (docs/errors.md, "Buffers and params" and "Paged inputs").
Inputs that are right in another byte order run as their values say on both backends."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kvdsl import cli
from kvdsl.reference.judge import poison, values
from kvdsl.runtime import BufferError, check_inputs
from kvdsl.runtime import run as gpu_run
from kvdsl.interp import run as interp_run
from tests.helpers.wgsl import scale_kernel
from tests.helpers.backends import assert_as_numpy, ieee_adapter

#: A kernel with an integer field of each sign and a float one.
SCALE = scale_kernel("n: u32, shift: i32, scale: f32", "src[i] * params.scale + f32(params.shift)")
STRUCT = "struct Params { n: u32, shift: i32, scale: f32 }"
GOOD = {"n": 64, "shift": -3, "scale": 1.5}

BACKENDS = ("interp", "gpu", "both")


def _run(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def refused_alike(capsys, argv: list[str], message: str) -> None:
    """``argv`` gets ``kvdsl run: message`` as its one stderr line and exit code 2 on every
    backend, and prints nothing."""
    for backend in BACKENDS:
        code, out, err = _run(capsys, argv + ["--backend", backend])
        assert (code, out, err) == (2, "", f"kvdsl run: {message}\n"), (backend, code, err)


@pytest.fixture
def scale(tmp_path) -> tuple[Path, np.ndarray]:
    """The WGSL file and random inputs for it."""
    src = tmp_path / "scale.wgsl"
    src.write_text(SCALE)
    a = values(np.random.default_rng(7), (64,), np.float32)
    return src, a


def _npz(path: Path, **arrays: np.ndarray) -> str:
    np.savez(path, **arrays)
    return str(path)


def _params_argv(scale, tmp_path, params: str) -> list[str]:
    src, a = scale
    inputs = _npz(tmp_path / "in.npz", src=a, dst=poison(64, np.float32))
    return ["run", str(src), "--inputs", inputs, "--workgroups", "1,1,1", "--params", params]


#: (id, --params, the refusal): each a value the interpreter wrapped, cut, or failed on.
BAD_PARAMS = [
    ("i32 past its range", '{"n": 64, "shift": 3000000000, "scale": 1.5}',
     "params field 'shift' is i32: 3000000000 is outside [-2147483648, 2147483647]"),
    ("a fraction for u32", '{"n": 64.5, "shift": 1, "scale": 1.5}',
     "params field 'n' is u32: got 64.5, expected an integer"),
    ("1e30 for u32", '{"n": 1e30, "shift": 1, "scale": 1.5}',
     "params field 'n' is u32: got 1e+30, expected an integer"),
    ("an unknown field", '{"n": 64, "shift": 1, "scale": 1.5, "count": 2}',
     f"params has no field 'count'; the params are {STRUCT}"),
    ("u32 negative", '{"n": -1, "shift": 1, "scale": 1.5}',
     "params field 'n' is u32: -1 is outside [0, 4294967295]"),
    ("two fields missing", '{"shift": 1}',
     f"params fields 'n', 'scale' are missing; the params are {STRUCT}"),
    ("null", '{"n": null, "shift": 1, "scale": 1.5}',
     "params field 'n' is u32: got null, expected an integer"),
    ("a 26-digit number", '{"n": 10000000000000000000000000, "shift": 1, "scale": 1.5}',
     "params field 'n' is u32: 10000000000000000000000000 is outside [0, 4294967295]"),
    ("a boolean", '{"n": true, "shift": 1, "scale": 1.5}',
     "params field 'n' is u32: got true, expected an integer"),
    ("text", '{"n": "64", "shift": 1, "scale": 1.5}',
     "params field 'n' is u32: got '64', expected an integer"),
    ("f32 past its range", '{"n": 64, "shift": 1, "scale": 1e39}',
     "params field 'scale' is f32: 1e+39 is outside its range: expected a finite number from "
     "-3.4028235e+38 to 3.4028235e+38"),
    ("a float for f32 given as text", '{"n": 64, "shift": 1, "scale": "1.5"}',
     "params field 'scale' is f32: got '1.5', expected a number"),
]  # fmt: skip


@pytest.mark.parametrize("row", BAD_PARAMS, ids=[r[0] for r in BAD_PARAMS])
def test_bad_params_are_refused_alike_on_every_backend(capsys, tmp_path, scale, gpu, row):
    _, params, message = row
    refused_alike(capsys, _params_argv(scale, tmp_path, params), message)


#: (id, the src array, the refusal): arrays the interpreter read as raw bytes or failed on.
BAD_ARRAYS = [
    ("int64 whose values fit", np.arange(64, dtype=np.int64),
     "binding 'src' (array<f32>) got an array of 64-bit signed integers (int64), expected "
     "32-bit floats (float32)"),
    ("float64", np.linspace(-1, 1, 64),
     "binding 'src' (array<f32>) got an array of 64-bit floats (float64), expected 32-bit "
     "floats (float32)"),
    ("text", np.array(["1.5"] * 64),
     "binding 'src' (array<f32>) got an array of text, expected 32-bit floats (float32)"),
    ("booleans", np.ones(64, bool),
     "binding 'src' (array<f32>) got an array of booleans (true/false), expected 32-bit floats "
     "(float32)"),
    ("big-endian int32", np.arange(64, dtype=">i4"),
     "binding 'src' (array<f32>) got an array of 32-bit signed integers (int32), expected "
     "32-bit floats (float32)"),
]  # fmt: skip


@pytest.mark.parametrize("row", BAD_ARRAYS, ids=[r[0] for r in BAD_ARRAYS])
def test_bad_arrays_are_refused_alike_on_every_backend(capsys, tmp_path, scale, gpu, row):
    _, array, message = row
    src, _ = scale
    inputs = _npz(tmp_path / "in.npz", src=array, dst=poison(64, np.float32))
    argv = ["run", str(src), "--inputs", inputs, "--workgroups", "1,1,1", "--params"]
    refused_alike(capsys, argv + ['{"n": 64, "shift": 1, "scale": 1.5}'], message)


def test_every_missing_and_unknown_buffer_is_named_at_once(capsys, tmp_path, scale, gpu):
    src, a = scale
    inputs = _npz(tmp_path / "in.npz", source=a, out=a)
    argv = ["run", str(src), "--inputs", inputs, "--workgroups", "1,1,1", "--params"]
    refused_alike(
        capsys,
        argv + ['{"n": 64, "shift": 1, "scale": 1.5}'],
        "bindings 'src' (array<f32>, read), 'dst' (array<f32>, read_write) have no buffer; "
        "buffers 'source', 'out' have no binding; the kernel's bindings are src, dst",
    )


def test_an_array_of_python_objects_is_refused_alike(capsys, tmp_path, scale, gpu):
    src, a = scale
    inputs = _npz(tmp_path / "in.npz", src=np.array([1.5] * 64, object), dst=a)
    argv = ["run", str(src), "--inputs", inputs, "--workgroups", "1,1,1", "--params"]
    refused_alike(
        capsys,
        argv + ['{"n": 64, "shift": 1, "scale": 1.5}'],
        f"--inputs: {inputs!r}: array 'src' cannot be read: it holds objects rather than numbers, "
        "or is cut short",
    )


def test_params_for_a_kernel_without_them_are_refused(capsys, tmp_path, gpu):
    src = tmp_path / "plain.wgsl"
    src.write_text(
        "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"
        "@compute @workgroup_size(64)\n"
        "fn main(@builtin(global_invocation_id) gid: vec3<u32>) { out[gid.x] = gid.x; }\n"
    )
    inputs = _npz(tmp_path / "in.npz", out=np.zeros(64, np.uint32))
    argv = ["run", str(src), "--inputs", inputs, "--workgroups", "1,1,1", "--params"]
    refused_alike(
        capsys, argv + ['{"n": 1}'], "params has no field 'n': kernel plain takes no params"
    )


def test_every_short_binding_is_named_at_once(capsys, tmp_path, gpu):
    rng = np.random.default_rng(3)
    rows, d = 4, 64  # copy_llama32_1b: rows of 64 floats
    short = values(rng, (rows * d - 4,), np.float32)
    inputs = _npz(
        tmp_path / "in.npz", src_k=short, src_v=short,
        present_key=poison(rows * d, np.float32), present_value=poison(rows * d, np.float32),
    )  # fmt: skip
    argv = ["run", "copy_llama32_1b", "--inputs", inputs, "--params", f'{{"count": {rows}}}']
    each = "holds 63 elements, but kernel copy_llama32_1b touches 64 for these params"
    refused_alike(
        capsys,
        argv,
        f"binding 'src_k' (array<vec4<f32>>) {each} (count * HEAD_DIM / 4u); "
        f"binding 'src_v' (array<vec4<f32>>) {each} (count * HEAD_DIM / 4u)",
    )


def test_a_big_endian_array_runs_as_its_values_say(capsys, tmp_path, scale, gpu):
    """A ``>f4`` array (an .npz from a big-endian host) holds the values a ``<f4`` one does:
    it is converted, and every backend gives what the little-endian inputs give."""
    src, a = scale
    got = {}
    for order in ("<", ">"):
        inputs = _npz(tmp_path / f"in{order == '>'}.npz", src=a.astype(f"{order}f4"), dst=poison(64, np.float32))  # fmt: skip
        out = tmp_path / f"out{order == '>'}.npz"
        argv = ["run", str(src), "--inputs", inputs, "--workgroups", "1,1,1", "--params"]
        argv += ['{"n": 64, "shift": -3, "scale": 1.5}', "--backend", "both", "--out", str(out)]
        # Another GPU than llvmpipe may fuse the product into the sum: an ulp apart.
        argv += [] if ieee_adapter() else ["--tol", "1e-6"]
        code, stdout, err = _run(capsys, argv)
        assert code == 0 and err == "" and "GPU == interpreter" in stdout, (code, stdout, err)
        with np.load(out) as res:
            got[order] = (res["dst"], res["interp.dst"])
    want = a * np.float32(1.5) + np.float32(-3)
    for order, (gpu_dst, interp_dst) in got.items():
        assert np.array_equal(interp_dst, want), order
        assert_as_numpy(gpu_dst, want, "gpu", order)
        assert gpu_dst.dtype == np.dtype("<f4"), order


def test_the_python_entries_check_and_convert_alike(gpu):
    """``kvdsl.runtime.run`` takes a big-endian array as its values; ``check_inputs`` hands the
    interpreter the same arrays, and refuses what the GPU refuses."""
    from kvdsl.frontend import parse

    kernel = parse(SCALE)
    a = values(np.random.default_rng(5), (64,), np.float32)
    buffers = {"src": a.astype(">f4"), "dst": poison(64, np.float32)}
    want = a * np.float32(1.5) + np.float32(-3)
    got = gpu_run(kernel, buffers, GOOD, (1, 1, 1))["dst"]
    assert_as_numpy(got, want, gpu_run)
    checked = check_inputs(kernel.bindings, kernel.params, buffers, GOOD, kernel.name)
    assert checked["src"].dtype == np.dtype("<f4")
    assert np.array_equal(interp_run(kernel, checked, GOOD, (1, 1, 1))["dst"], want)
    with pytest.raises(BufferError, match=r"^binding 'src' \(array<f32>\) got a list of 2 values, expected a numpy array of 32-bit floats \(float32\)$"):  # fmt: skip
        gpu_run(kernel, buffers | {"src": [1, 2]}, GOOD, (1, 1, 1))


# ---- paged inputs ------------------------------------------------------------------------------

H, D, P, PAGES = 8, 128, 16, 4  # the llama31_8b paged variants: pages of 16 tokens × 8 × 128


def _pools(rng) -> dict[str, np.ndarray]:
    return {n: values(rng, (PAGES * P * H * D,), np.float32) for n in ("key_pages", "value_pages")}


def _append_slots(tmp_path: Path, slots: np.ndarray) -> list[str]:
    rng = np.random.default_rng(21)
    batch, key_seq = 2, 2
    src = {n: values(rng, (batch * key_seq * H * D,), np.float32) for n in ("src_k", "src_v")}
    inputs = _npz(tmp_path / "in.npz", **src, slot_mapping=slots, **_pools(rng))
    params = f'{{"count": {batch * H * key_seq}, "keySeq": {key_seq}}}'
    return ["run", "paged_append_slot_mapping_p16_nhd_llama31_8b", "--inputs", inputs, "--params", params]  # fmt: skip


def _append_table(tmp_path: Path, table, seqlens) -> list[str]:
    rng = np.random.default_rng(22)
    batch, key_seq, max_pages = len(seqlens), 2, len(table[0])
    src = {n: values(rng, (batch * key_seq * H * D,), np.float32) for n in ("src_k", "src_v")}
    arrays = {"seqlens_k": np.asarray(seqlens, np.int32), "page_table": np.asarray(table, np.int32)}
    inputs = _npz(tmp_path / "in.npz", **src, **arrays, **_pools(rng))
    params = f'{{"count": {batch * H * key_seq}, "keySeq": {key_seq}, "maxPages": {max_pages}}}'
    return ["run", "paged_append_page_table_p16_nhd_llama31_8b", "--inputs", inputs, "--params", params]  # fmt: skip


def _copy(tmp_path: Path, pairs) -> list[str]:
    pairs = np.asarray(pairs, np.int32)
    inputs = _npz(tmp_path / "in.npz", page_pairs=pairs, **_pools(np.random.default_rng(23)))
    params = f'{{"count": {len(pairs)}}}'
    return ["run", "paged_copy_f32_separate_p16_llama31_8b", "--inputs", inputs, "--params", params]  # fmt: skip


#: (id, argv maker, the refusal): races the GPU ran silently (exit 0), and ids past the pool.
PAGED = [
    ("one slot for two tokens", lambda t: _append_slots(t, np.array([5, 40, 20, 40], np.int32)),
     "slot_mapping: slot 40 is given to tokens [1, 3] in one step: expected each slot at most "
     "once a step (which token lands would be the GPU's choice)"),
    ("a page in two tables, written by both", lambda t: _append_table(t, [[2, 1], [2, 1]], [17, 17]),
     "page_table: page 1 is shared (sequences [0, 1]' tables name it 2 times) and sequence 0 "
     "writes it: expected a page written by one sequence alone (copy it to a page of its own "
     "first: paged_copy)"),
    ("copy: two pairs onto one page", lambda t: _copy(t, [[0, 2], [1, 2]]),
     "page_pairs: page 2 is the destination of 2 pairs: expected each destination once a pass"),
    ("a slot below -1", lambda t: _append_slots(t, np.array([5, -7, 20, 33], np.int32)),
     "slot_mapping[1] = -7: expected -1 (none) or a slot from 0 to 63"),
    ("a page past the pool", lambda t: _append_table(t, [[2, 4], [3, -1]], [17, 3]),
     "page_table[1] = 4: expected -1 (none) or a page from 0 to 3"),
]  # fmt: skip


@pytest.mark.parametrize("row", PAGED, ids=[r[0] for r in PAGED])
def test_paged_inputs_are_refused_alike_on_every_backend(capsys, tmp_path, gpu, row):
    _, make, message = row
    refused_alike(capsys, make(tmp_path), message)


def test_a_big_endian_slot_mapping_is_its_values(capsys, tmp_path, gpu):
    """A ``>i4`` slot mapping lands each token where its ``<i4`` twin does, on both backends
    (read as raw bytes, it named slots past the pool and a race that was not there)."""
    slots = np.array([5, 40, 20, 63], np.int32)
    got = {}
    for order in ("<", ">"):
        sub = tmp_path / order.replace("<", "le").replace(">", "be")
        sub.mkdir()
        out = sub / "out.npz"
        argv = _append_slots(sub, slots.astype(f"{order}i4"))
        code, stdout, err = _run(capsys, argv + ["--backend", "both", "--out", str(out)])
        assert code == 0 and err == "", (order, err)
        with np.load(out) as res:
            got[order] = {k: res[k] for k in res.files}
    assert got["<"].keys() == got[">"].keys()
    for name in got["<"]:
        assert np.array_equal(got["<"][name], got[">"][name]), name


def test_pages_written_are_the_references_pages():
    """The pages the runtime's check sees written are those the reference's slots fall in, for
    random tables (ids of -1 included), lengths (below -1, right-padded, up to the table's end)
    and step sizes."""
    from kvdsl.reference.paged import table_places
    from kvdsl.runtime.paged import pages_written

    rng = np.random.default_rng(31)
    for _ in range(200):
        batch, max_pages, size = int(rng.integers(1, 5)), int(rng.integers(1, 5)), 16
        table = rng.integers(-1, 12, (batch, max_pages)).astype(np.int32)
        key_seq = int(rng.integers(1, 40))
        seqlens = rng.integers(-3, max_pages * size, batch).astype(np.int32)
        slots, _ = table_places(table, seqlens, key_seq, size)
        got = pages_written(table, seqlens, key_seq, size)
        for b in range(batch):
            want = np.unique(slots[b][slots[b] >= 0] // size)
            assert np.array_equal(got[b], want), (table, seqlens, key_seq, b)


# ---- a variant's requirements ------------------------------------------------------------------

APPEND = "dense_append_int4_asym_llama31_8b"  # 8 heads of 128, keySeq new tokens a batch


def _append(tmp_path: Path, key_seq: int, seq: int) -> list[str]:
    rng = np.random.default_rng(41)
    batch = 2
    src = {n: values(rng, (batch * key_seq * H * D,), np.float32) for n in ("src_k", "src_v")}
    cache = {n: np.full(batch * H * 8 * D, 0xDEADBEEF, np.uint32) for n in ("present_key", "present_value")}  # fmt: skip
    lens = np.array([seq - key_seq, 0], np.int32)
    inputs = _npz(tmp_path / "in.npz", **src, seqlens_k=lens, **cache)
    params = json.dumps({"count": batch * H * key_seq, "keySeq": key_seq, "seq": seq})
    return ["run", APPEND, "--inputs", inputs, "--params", params]


def test_a_variants_requirements_are_refused_alike_on_every_backend(capsys, tmp_path, gpu):
    """``keySeq <= seq`` (index.json's ``requires``) in the words of kvdsl.js and the session
    host (kvdsl.contract.check_requirements of the variant's entry), before any backend runs."""
    from kvdsl import catalog
    from kvdsl.contract import ContractError, check_requirements, entry

    params = {"count": 2 * H * 3, "keySeq": 3, "seq": 2}
    e = entry(catalog.build(APPEND), catalog.config(APPEND))
    with pytest.raises(ContractError) as err:
        check_requirements(e, params, name=APPEND)
    assert "requires keySeq <= seq; got count=48, keySeq=3, seq=2: " in str(err.value)
    refused_alike(capsys, _append(tmp_path, 3, 2), str(err.value))
    # keySeq == seq is taken: the interpreter appends the rows.
    code, out, err_ = _run(capsys, _append(tmp_path, 2, 2) + ["--backend", "interp"])
    assert (code, err_) == (0, ""), err_
    assert "present_key: uint32" in out
