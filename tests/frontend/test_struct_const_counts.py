"""A struct const's integer member as an array's element count (``array<f32, T.rows *
T.cols>``), as runtimes size their tiles from one config struct: the frontend folds it to the
number (the IR's ``Array.n``), and the kernel runs on both backends as numpy says; a count
folded wrong leaves part of the tile out of bounds or unread."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp, runtime
from kvdsl.emit import emit
from kvdsl.frontend import parse
from kvdsl.ir.tree import WorkgroupVar
from kvdsl.ir.types import Array, f32
from tests.helpers.wgsl import assert_tint_takes

TILED = """struct Tile {
  rows: u32,
  cols: u32,
  scale: f32,
}

const T = Tile(4u, 16u, 0.5);

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

var<workgroup> tile: array<f32, T.rows * T.cols>;

@compute @workgroup_size(T.rows * T.cols)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let i = wid.x * 64u + lid.x;
  tile[lid.x] = x[i] * T.scale;
  workgroupBarrier();
  let r = lid.x / T.cols;
  let c = lid.x % T.cols;
  out[i] = tile[(T.rows - 1u - r) * T.cols + c];
}
"""


# WGSL's module-scope declarations are order-independent: the tile and the workgroup sized from
# T above T, T above its struct and of members folded from consts declared below, the tile's
# element an alias declared below.
BELOW = """var<workgroup> tile: array<Word, T.rows * T.cols>;

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(T.rows * T.cols)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let i = wid.x * WIDTH + lid.x;
  tile[lid.x] = x[i] * T.scale;
  workgroupBarrier();
  let r = lid.x / T.cols;
  let c = lid.x % T.cols;
  out[i] = tile[(T.rows - 1u - r) * T.cols + c];
}

const T = Tile(ROWS, WIDTH / ROWS, 0.5);

const WIDTH: u32 = 64u;

struct Tile {
  rows: u32,
  cols: u32,
  scale: f32,
}

alias Word = f32;

const ROWS = 4u;
"""


@pytest.mark.parametrize("name, text, seed", [("tiled", TILED, 48), ("below", BELOW, 49)])
def test_a_struct_const_member_sizes_a_workgroup_array_and_runs_as_numpy_says(
    name, text, seed, gpu
):
    k = parse(text, f"{name}.wgsl")
    assert k.workgroup_vars == (WorkgroupVar("tile", Array(f32, 64)),)
    assert k.workgroup_size == (64, 1, 1)
    assert parse(emit(k), f"{name}.wgsl") == k
    x = np.random.default_rng(seed).standard_normal(3 * 64).astype(np.float32)
    want = (x.reshape(3, 4, 16)[:, ::-1, :] * np.float32(0.5)).reshape(-1)
    for run in (interp.run, runtime.run):
        got = run(k, {"x": x, "out": np.full(3 * 64, np.nan, np.float32)}, {}, (3, 1, 1))["out"]
        np.testing.assert_array_equal(got, want, err_msg=run.__module__)
    assert_tint_takes({name: text})
