"""kvdsl.harness.dense: the dense modes' cases run on the interpreter against the reference, and
DenseCase's comparison of packed cache rows (codes one step off in a few elements, scales
within a few ulps, never more)."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp
from kvdsl.harness.cases import cases_for
from kvdsl.harness.dense import DenseCase
from kvdsl.kernels.dense import (
    DenseAppendConfig,
    DenseBuildConfig,
    DenseReadConfig,
    dense_append,
    dense_build,
    dense_read,
)
from kvdsl.reference import formats as fm

CONFIGS = [
    DenseAppendConfig(2, 64, format="int8", k_norm=True, rotary=True),
    DenseAppendConfig(2, 64, format="q8_0", k_norm=True, rotary=True),
    DenseAppendConfig(2, 64, format="int4_asym", scales="side", k_norm=True),
    DenseAppendConfig(2, 32, format="q4_0", rotary=True, input_type="f16"),
    DenseBuildConfig(2, 64, format="q4_0", rotary=True),
    DenseBuildConfig(2, 64, format="int4", scales="side", k_norm=True),
    DenseReadConfig(2, 96, format="q8_0"),
    DenseReadConfig(2, 64, format="int4", scales="side"),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.mode}-{c.format.value}")
def test_cases_pass_on_the_interpreter(cfg):
    build = {"dense_append": dense_append, "dense_build": dense_build, "dense_read": dense_read}[
        cfg.mode
    ]
    kernel = build(cfg)
    for case in cases_for(cfg, 3, seed=4):
        out = interp.run(kernel, dict(case.buffers), case.params)
        assert case.against_reference(out) == []


def rows_case(fmt: str, inline: bool = True) -> tuple[DenseCase, np.ndarray]:
    x = np.random.default_rng(6).standard_normal((40, 64)).astype(np.float32)
    words, _ = fm.quantize_rows(fmt, x, inline)
    case = DenseCase(
        {},
        {},
        {},
        {"present_key": words.reshape(-1)},
        quantized={"present_key": 8},
        layout={"present_key": (fmt, 64, inline)},
    )
    return case, words


@pytest.mark.parametrize("fmt", ["int8", "q8_0", "int4", "q4_0"])
def test_one_code_one_step_off_passes_two_steps_fail(fmt):
    case, words = rows_case(fmt)
    got = words.copy()
    col = 5  # a code word (past int8's scale word; inside q8_0's first block's codes)
    got[3, col] ^= 1 << 8  # one field's lowest bit: one step
    assert case.against_reference({"present_key": got.reshape(-1)}) == []
    got[4, col] ^= 2 << 8  # another field two steps off
    problems = case.against_reference({"present_key": got.reshape(-1)})
    assert problems and "by up to 2 steps" in problems[0]
    # Without the allowance (not a quantised output) any difference fails.
    strict = DenseCase({}, {}, {}, case.expected, layout=case.layout)
    assert strict.against_reference({"present_key": got.reshape(-1)})


def test_a_scale_an_ulp_apart_passes_a_wrong_scale_fails():
    case, words = rows_case("int8")
    got = words.copy()
    got[2, 0] += 1  # the f32 scale word, one ulp up
    assert case.against_reference({"present_key": got.reshape(-1)}) == []
    got[3, 0] = np.float32(got[3, 0].view(np.float32) * 1.01).view(np.uint32)
    problems = case.against_reference({"present_key": got.reshape(-1)})
    assert problems and "scales differ" in problems[0]
