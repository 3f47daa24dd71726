"""kvdsl.harness.dense: the dense modes' cases run on the interpreter against the reference, and
DenseCase's comparison of packed cache rows (codes one step off in a few elements, scales
within a few ulps, never more)."""

from __future__ import annotations

import numpy as np
import pytest

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
from tests.helpers.case_outputs import (
    assert_cases_pass,
    assert_changes_are_caught,
    reference_outputs,
)

CONFIGS = [
    DenseAppendConfig(2, 64, format="int8", k_norm=True, rotary=True),
    DenseAppendConfig(2, 64, format="q8_0", k_norm=True, rotary=True),
    DenseAppendConfig(2, 64, format="int4_asym", scales="side", k_norm=True),
    DenseAppendConfig(2, 32, format="q4_0", rotary=True, input_type="f16"),
    DenseBuildConfig(2, 64, format="q4_0", rotary=True),
    DenseBuildConfig(2, 64, format="int4", scales="side", k_norm=True),
    DenseAppendConfig(2, 96, format="q8_0", rotary=True, walk="staged"),
    DenseAppendConfig(2, 96, format="q4_0", k_norm=True, walk="staged"),
    DenseAppendConfig(2, 64, format="int4_asym", k_norm=True, rotary=True, walk="staged"),
    DenseBuildConfig(2, 64, format="int8", scales="side", walk="staged"),
    DenseAppendConfig(2, 80, format="int8", k_norm=True, rotary=True, walk="strided"),
    DenseAppendConfig(2, 64, format="int4", scales="side", walk="strided"),
    DenseBuildConfig(2, 128, format="int4_asym", rotary=True, walk="strided"),
    DenseAppendConfig(2, 64, format="int8", k_norm=True, rotary=True, split=False),
    DenseAppendConfig(2, 96, format="q8_0", rotary=True, walk="staged", split=False),
    DenseAppendConfig(2, 64, format="int4_asym", scales="side", walk="strided", split=False),
    DenseBuildConfig(2, 64, format="q4_0", k_norm=True, rotary=True, split=False),
    DenseAppendConfig(2, 64, format="int8", rotary=True, split=False, run=2),
    DenseAppendConfig(2, 64, format="int4", k_norm=True, walk="staged", run=2),
    DenseReadConfig(2, 96, format="q8_0"),
    DenseReadConfig(2, 64, format="int4", scales="side"),
]


def _id(c) -> str:
    walk = getattr(c, "walk", None)
    split = "" if getattr(c, "split", True) else "-both"
    split += f"-run{c.run}" if getattr(c, "run", None) else ""
    return f"{c.mode}-{c.format.value}-{c.head_dim}" + (f"-{walk.value}" if walk else "") + split


@pytest.mark.parametrize("cfg", CONFIGS, ids=_id)
def test_cases_pass_on_the_interpreter(cfg):
    build = {"dense_append": dense_append, "dense_build": dense_build, "dense_read": dense_read}[
        cfg.mode
    ]
    assert_cases_pass(build(cfg), cfg, 3, seed=4)


@pytest.mark.parametrize("cfg", CONFIGS, ids=_id)
def test_a_wrong_output_is_caught(cfg):
    """Each case's own verdict: the reference's outputs pass (written rows only where the mode
    writes part of the cache), one word's bit 15 flipped (a code 8 or 128 steps off) fails, one
    word written outside the window fails."""
    for case in cases_for(cfg, 3, seed=1):
        got = reference_outputs(case)
        assert case.against_reference(got) == []
        assert_changes_are_caught(case, got, next(iter(case.expected)), 0.5)


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
