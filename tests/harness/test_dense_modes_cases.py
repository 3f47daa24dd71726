"""kvdsl.harness.dense_modes: the dense cache passes' cases run on the interpreter against the
reference, and each case's verdict catches a wrong word, a word written outside the pass's
rows and a moved scale."""

from __future__ import annotations

import pytest

from kvdsl import catalog
from kvdsl.harness.cases import cases_for
from kvdsl.kernels.dense_convert import DenseConvertConfig
from kvdsl.kernels.dense_modes import DenseRetainConfig, DenseWindowShiftConfig
from tests.helpers.case_outputs import (
    assert_cases_pass,
    assert_changes_are_caught,
    reference_outputs,
)

CONFIGS = [
    DenseRetainConfig(2, 64, format="int4_asym", scales="side"),
    DenseRetainConfig(2, 96, format="q8_0"),
    DenseWindowShiftConfig(2, 64, format="int8", region="shift", scales="side"),
    DenseWindowShiftConfig(2, 64, format="q4_0", region="append", rotary=True),
    DenseWindowShiftConfig(2, 32, format="int4", region="all", rotary=True, input_type="f16"),
    DenseWindowShiftConfig(2, 64, format="int4_asym", region="append", scales="side"),
    DenseConvertConfig(2, 64, source="f16", format="int4", scales="side"),
    DenseConvertConfig(2, 64, source="int4_asym", source_scales="side", format="q8_0"),
]


def _id(cfg) -> str:
    return f"{cfg.mode}-{getattr(cfg, 'region', '')}-{cfg.format.value}-{cfg.scales.value}"


@pytest.mark.parametrize("cfg", CONFIGS, ids=_id)
def test_cases_pass_on_the_interpreter(cfg):
    assert_cases_pass(catalog.build_config(cfg), cfg, 3, seed=4)


@pytest.mark.parametrize("cfg", CONFIGS, ids=_id)
def test_a_wrong_output_is_caught(cfg):
    """The reference's outputs pass (written rows only); one word's bit 15 flipped, or a side
    scale changed, fails; one element written outside the pass's rows fails."""
    for case in cases_for(cfg, 3, seed=1):
        got = reference_outputs(case)
        assert case.against_reference(got) == []
        for out in case.expected:
            mask = case.written.get(out)
            if mask is None or mask.any():
                assert_changes_are_caught(case, got, out, 1.0)


def test_window_cases_cover_sliding_zeroing_and_appending():
    """The shift cases slide rows (a past row lands elsewhere), zero rows and leave appended
    rows to the other pass, across the three cases."""
    cfg = DenseWindowShiftConfig(2, 64, format="int8", region="shift")
    zeroed = kept = skipped = 0
    for case in cases_for(cfg, 3, seed=2):
        want, mask = case.expected["present_key"], case.written["present_key"]
        zeroed += int(((want == 0) & mask).sum())
        kept += int(((want != 0) & mask).sum())
        skipped += int((~mask).sum())
    assert zeroed and kept and skipped
