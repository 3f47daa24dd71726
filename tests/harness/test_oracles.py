"""The harness's comparators and verdicts against planted faults, without a GPU.

Each test plants a known difference (an element written outside its window, a value one ulp or
one quantisation step off, a tolerance exactly at its bound, a backend that raises) and states
the verdict by hand: the error, the problem's text, which backend is blamed. The GPU and the
interpreter are replaced by stand-ins where only the runner's bookkeeping is under test
(``docs/testing.md``: these tests kill the mutants of ``kvdsl/harness``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kvdsl.interp
import kvdsl.runtime
from kvdsl.harness import Case, Result, cases_for, verify_variant
from kvdsl.interp import InterpError
from kvdsl.kernels.build import BuildConfig
from kvdsl.kernels.copy import CopyConfig
from kvdsl.kernels.quant import AppendQuantConfig
from kvdsl.reference.judge import POISON_BITS, compare, compare_quantized, poison
from kvdsl.runtime import FeatureError

F32 = np.float32


def bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.dtype.itemsize}")


# ---- poison -------------------------------------------------------------------------------------


def test_poison_is_a_payload_nan_of_each_width():
    p = poison(3, np.float32)
    assert p.dtype == np.float32 and p.shape == (3,) and np.isnan(p).all()
    assert (bits(p) == 0x7FC0DEAD).all()
    h = poison((2, 2), np.float16)
    assert h.dtype == np.float16 and h.shape == (2, 2) and (bits(h) == 0x7E5A).all()
    i = poison(4, np.int32)
    assert i.dtype == np.int32 and (i == 0x7FC0DEAD).all()
    assert POISON_BITS == {4: 0x7FC0DEAD, 2: 0x7E5A}


# ---- compare ------------------------------------------------------------------------------------


def test_equal_arrays_agree_in_any_shape():
    got = F32([[1.5, -2.25], [0.5, 3.0]])
    assert compare(got, [1.5, -2.25, 0.5, 3.0]) == (0.0, "")
    assert compare(got.reshape(-1), got) == (0.0, "")
    assert compare(np.int32([7, -9]), [7, -9]) == (0.0, "")


def test_default_is_bit_exact():
    want = F32([1.0, 2.0, 3.0])
    got = want.copy()
    got[1] = np.nextafter(F32(2.0), F32(3.0))
    err, problem = compare(got, want)
    assert err == pytest.approx(2.0**-22)
    assert problem == f"1 elements differ, first at 1: {got[1]!r} != {want[1]!r}"
    # -0.0 and 0.0 differ bit for bit.
    assert compare(F32([-0.0]), F32([0.0]))[1] == "1 elements differ, first at 0: " + (
        f"{F32(-0.0)!r} != {F32(0.0)!r}"
    )


def test_bit_exact_error_is_the_largest_difference():
    want = F32([1.0, 2.0, 3.0, 4.0])
    got = F32([1.0, 2.5, 3.0, 3.0])
    assert compare(got, want) == (1.0, f"2 elements differ, first at 1: {got[1]!r} != {want[1]!r}")


def test_integers_stay_exact_under_a_tolerance():
    got, want = np.int32([5, 6, -3]), np.int32([5, 9, -3])
    assert compare(got, want, 0.5) == (
        3.0,
        f"1 elements differ, first at 1: {got[1]!r} != {want[1]!r}",
    )
    u = np.uint32([0xFFFFFFFF, 4])
    assert compare(u, np.uint32([0xFFFFFFFF, 1]), 0.25)[0] == 3.0


def test_shape_mismatch():
    assert compare(F32([1, 2, 3]), F32([1, 2, 3, 4])) == (
        float("inf"),
        "shape (3,) != expected (4,)",
    )


def test_written_outside_the_mask():
    want = F32([1.0, 2.0, 3.0, 4.0, 5.0])
    mask = np.array([True, True, False, True, False])
    got = np.where(mask, want, poison(5, F32))
    assert compare(got, want, 0.0, mask) == (0.0, "")
    assert compare(got, want, 0.5, mask.reshape(5, 1)) == (0.0, "")
    bad = got.copy()
    bad[2], bad[4] = F32(9.0), F32(7.0)
    assert compare(bad, want, 0.0, mask) == (
        float("inf"),
        f"element 2 was written but should not be ({bad[2]!r})",
    )
    # Only the poison's exact bits count as untouched: another NaN was written.
    other = got.copy()
    other[4] = np.float32(np.nan)
    assert compare(other, want, 0.0, mask)[1].startswith("element 4 was written")


def test_masked_elements_are_not_compared():
    want = F32([1.0, 2.0, 3.0])
    mask = np.array([True, False, True])
    got = np.where(mask, want, poison(3, F32))
    got[0] = F32(1.25)
    assert compare(got, want, 0.0, mask) == (
        0.25,
        f"1 elements differ, first at 0: {got[0]!r} != {want[0]!r}",
    )
    nothing = np.zeros(3, bool)
    assert compare(poison(3, F32), want, 0.0, nothing) == (0.0, "")
    assert compare(poison(3, F32), want, 0.1, nothing) == (0.0, "")
    assert compare(poison(3, np.int32), np.int32([1, 2, 3]), 0.0, nothing) == (0.0, "")


def test_integer_error_with_a_mask():
    mask = np.array([False, True, True])
    got = np.where(mask, np.int32([0, 4, 10]), poison(3, np.int32))
    assert compare(got, np.int32([100, 4, 7]), 0.0, mask) == (
        3.0,
        f"1 elements differ, first at 2: {got[2]!r} != {np.int32(7)!r}",
    )


def test_tolerance_is_relative_to_the_expected_magnitude():
    want = F32([2.0, -2.0, 0.0])
    at_bound = F32([2.75, -2.75, 0.25])  # 0.25 * (1 + |w|)
    assert compare(at_bound, want, 0.25) == (0.75, "")
    past = F32([2.875, -2.0, 0.0])
    assert compare(past, want, 0.25) == (
        0.875,
        f"1 elements differ, first at 0: {past[0]!r} != {want[0]!r}",
    )
    past = F32([2.0, -2.875, 0.0])
    assert compare(past, want, 0.25)[1].startswith("1 elements differ, first at 1:")
    past = F32([2.0, -2.0, 0.375])
    assert compare(past, want, 0.25)[1].startswith("1 elements differ, first at 2:")


def test_tolerance_error_ignores_unwritten_elements():
    want = F32([2.0, 100.0, -1.0])
    mask = np.array([True, False, True])
    got = np.where(mask, F32([2.5, 0.0, -1.0]), poison(3, F32))
    assert compare(got, want, 0.25, mask) == (0.5, "")


def test_nan_where_a_value_belongs_is_a_difference():
    want = F32([1.0, 2.0])
    got = F32([1.0, np.nan])
    assert compare(got, want, 0.5)[1].startswith("1 elements differ, first at 1:")
    assert compare(got, want)[1].startswith("1 elements differ, first at 1:")


def test_comparing_infinities_never_warns():
    inf = F32([np.inf, -np.inf, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compare(inf, inf) == (0.0, "")
        # Within a tolerance an infinity is no value: inf - inf is NaN, never within it.
        assert compare(inf, inf, 0.25) == (
            0.0,
            f"2 elements differ, first at 0: {inf[0]!r} != {inf[0]!r}",
        )
    with warnings.catch_warnings():
        # Two poisoned arrays leave nanmax nothing but NaNs to take the largest of (numpy warns);
        # the verdict is what matters here.
        warnings.simplefilter("ignore", RuntimeWarning)
        assert compare(poison(2, F32), poison(2, F32))[1] == ""


def test_float16_tolerance():
    want = np.float16([1.0, 2.0])
    got = np.float16([1.0, 2.001953125])  # one f16 ulp at 2
    assert compare(got, want)[1] != ""
    assert compare(got, want, 2e-3) == (pytest.approx(0.001953125), "")


# ---- compare_quantized --------------------------------------------------------------------------


def codes8(n: int = 200, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(-100, 100, n).astype(np.int32)


def test_int8_codes_one_step_in_a_few():
    want = codes8()
    assert compare_quantized(want.copy(), want, 8) == (0.0, "")
    one = want.copy()
    one[3] += 1
    assert compare_quantized(one, want, 8) == (1.0, "")
    two = one.copy()
    two[7] -= 1  # 2 of 200 = 1%: at the share, still allowed
    assert compare_quantized(two, want, 8) == (1.0, "")
    three = two.copy()
    three[9] += 1
    assert compare_quantized(three, want, 8) == (1.0, "1.50% of codes differ, by up to 1 steps")
    assert compare_quantized(three, want, 8, share=0.02) == (1.0, "")
    far = want.copy()
    far[5] += 2
    assert compare_quantized(far, want, 8) == (2.0, "0.50% of codes differ, by up to 2 steps")


def test_quantized_keeps_the_poison_check():
    want = codes8(10)
    mask = np.ones(10, bool)
    mask[4] = False
    got = np.where(mask, want, poison(10, np.int32))
    assert compare_quantized(got, want, 8, mask) == (0.0, "")
    got[6] += 1  # one code one step off, 11% of the window's: one code is always allowed
    assert compare_quantized(got, want, 8, mask) == (1.0, "")
    got[7] -= 1  # two of nine: too many
    assert compare_quantized(got, want, 8, mask) == (
        1.0,
        "22.22% of codes differ, by up to 1 steps",
    )
    assert compare_quantized(got, want, 8, mask, share=0.25) == (1.0, "")
    got[4] = want[4]
    err, problem = compare_quantized(got, want, 8, mask)
    assert err == float("inf") and problem.startswith("element 4 was written")
    assert compare_quantized(np.int32([1, 2]), np.int32([1, 2, 3]), 8) == (
        float("inf"),
        "shape (2,) != expected (3,)",
    )


def test_int4_codes_are_compared_per_nibble():
    rng = np.random.default_rng(2)
    lo, hi = rng.integers(1, 15, 400), rng.integers(1, 15, 400)
    want = (lo | (hi << 4)).astype(np.uint32)
    high = want.copy()
    high[0] += 16  # the high nibble one step up: 16 as a word, 1 as a code
    assert compare_quantized(high, want, 4) == (1.0, "")
    low = want.copy()
    low[1] -= 1
    assert compare_quantized(low, want, 4) == (1.0, "")
    both = want.copy()
    both[2] += 17  # both nibbles one step: 2 of 800 codes
    assert compare_quantized(both, want, 4) == (1.0, "")
    wrapped = want.copy()
    wrapped[3] = (want[3] & 0xF0) | ((want[3] & 0xF) + 2)
    assert compare_quantized(wrapped, want, 4) == (2.0, "0.12% of codes differ, by up to 2 steps")
    # As words the high nibble's step would be 16 steps.
    assert compare_quantized(high, want, 8)[0] == 16.0


# ---- Case.judge ---------------------------------------------------------------------------------


def small_case() -> Case:
    rng = np.random.default_rng(5)
    a = rng.uniform(1, 2, 6).astype(F32)
    q = rng.integers(-50, 50, 200).astype(np.int32)
    mask = np.array([True, True, True, True, False, False])
    return Case(
        {"batch": 2, "kvSeq": 5},
        {},
        {},
        {"a": np.where(mask, a, F32(0)), "q": q},
        written={"a": mask},
        tolerance={"a": 1e-3},
        quantized={"q": 8},
        codes={"q": 8},
    )


def outputs(case: Case) -> dict[str, np.ndarray]:
    a = np.where(case.written["a"], case.expected["a"], poison(6, F32))
    return {"a": a, "q": case.expected["q"].copy()}


def test_label_names_the_shape():
    assert small_case().label() == "batch=2,kvSeq=5"


def test_judge_uses_the_cases_tolerance_mask_and_codes():
    case = small_case()
    got = outputs(case)
    assert list(case.judge(got)) == [("a", 0.0, ""), ("q", 0.0, "")]
    got["a"][1] *= F32(1 + 2e-4)
    got["q"][10] += 1
    verdict = {name: (err, problem) for name, err, problem in case.judge(got)}
    assert verdict["a"][0] == pytest.approx(abs(got["a"][1] - case.expected["a"][1]))
    assert verdict["a"][1] == "" and verdict["q"] == (1.0, "")
    assert case.against_reference(got) == []
    # Explicit tolerance and codes replace the case's: bit for bit, no step.
    strict = {name: problem for name, _, problem in case.judge(got, None, {}, {})}
    assert strict["a"].startswith("1 elements differ, first at 1:")
    assert strict["q"].startswith("1 elements differ, first at 10:")
    loose = {name: problem for name, _, problem in case.judge(got, None, {"a": 1e-3}, {"q": 8})}
    assert loose == {"a": "", "q": ""}


def test_judge_against_another_runs_outputs():
    case = small_case()
    got = outputs(case)
    other = {"q": got["q"].copy()}
    other["q"][0] += 5
    verdicts = list(case.judge(got, other))
    assert [v[0] for v in verdicts] == ["q"]
    assert verdicts[0][1] == 5.0 and verdicts[0][2].startswith("0.50% of codes differ, by up to 5")
    assert case.against_reference(got, other) == [
        "batch=2,kvSeq=5 q: 0.50% of codes differ, by up to 5 steps"
    ]


def test_against_reference_names_case_and_output():
    case = small_case()
    got = outputs(case)
    got["a"][5] = F32(1.0)  # written outside the window
    got["q"][0] += 3
    assert case.against_reference(got) == [
        f"batch=2,kvSeq=5 a: element 5 was written but should not be ({got['a'][5]!r})",
        "batch=2,kvSeq=5 q: 0.50% of codes differ, by up to 3 steps",
    ]


def test_judge_checks_the_mask_of_each_output():
    case = small_case()
    got = outputs(case)
    case.written["q"] = np.ones(200, bool)
    case.written["q"][0] = False
    got["q"][0] = case.expected["q"][0]
    assert case.against_reference(got)[0].startswith("batch=2,kvSeq=5 q: element 0 was written")


# ---- verify_variant -----------------------------------------------------------------------------


class Stand:
    """A backend stand-in: returns the reference's outputs, changed by ``plant``; records calls."""

    def __init__(self, plant=None, error: Exception | None = None) -> None:
        self.plant, self.error, self.calls = plant, error, []

    def __call__(self, kernel, buffers, params, **options):
        """``options``: what the runner passes the interpreter past these (its work budget,
        the loop-trip record), which a stand-in does not use."""
        self.calls.append((kernel, buffers, params))
        if self.error is not None:
            raise self.error
        case = self.case_of(buffers, params)
        out = {k: np.array(v, copy=True) for k, v in buffers.items()}
        for name, want in case.expected.items():
            mask = case.written.get(name)
            out[name] = want.copy() if mask is None else np.where(mask, want, buffers[name])
        return out if self.plant is None else self.plant(out)

    cases: list[Case] = []

    def case_of(self, buffers, params) -> Case:
        for case in self.cases:
            if case.params == params and all(
                np.array_equal(bits(case.buffers[k]), bits(v)) for k, v in buffers.items()
            ):
                return case
        raise AssertionError("not a case of this variant")


def stands(monkeypatch, cfg, n=3, seed=0, interp=None, gpu=None):
    Stand.cases = cases_for(cfg, n, seed)
    interp, gpu = interp or Stand(), gpu or Stand()
    monkeypatch.setattr(kvdsl.interp, "run", interp)
    monkeypatch.setattr(kvdsl.runtime, "run", gpu)
    return interp, gpu


KERNEL = object()  # the stand-ins never look at it
COPY = CopyConfig(8)


def test_verify_variant_runs_each_case_on_both_backends(monkeypatch):
    interp, gpu = stands(monkeypatch, COPY)
    steps = []
    result = verify_variant("v", COPY, KERNEL, on_step=lambda: steps.append(1))
    assert result.variant == "v" and result.ok and result.problems == []
    assert result.shapes == [c.label() for c in Stand.cases] == ["rows=1", "rows=49", "rows=339"]
    assert result.max_error == 0.0 and result.unsupported is None and len(steps) == 3
    for stand in (interp, gpu):
        assert len(stand.calls) == 3
        for (kernel, buffers, params), case in zip(stand.calls, Stand.cases):
            assert kernel is KERNEL and params == case.params
            assert buffers is not case.buffers and buffers.keys() == case.buffers.keys()


def test_verify_variant_takes_n_cases_and_seed(monkeypatch):
    stands(monkeypatch, COPY, 2, seed=4)
    result = verify_variant("v", COPY, KERNEL, 2, seed=4)
    assert result.shapes == [c.label() for c in cases_for(COPY, 2, 4)] == ["rows=1", "rows=32"]


def plant_value(name: str, i: int, value: float):
    def plant(out):
        out[name].reshape(-1)[i] = value
        return out

    return plant


def test_interpreter_difference_is_blamed_on_the_interpreter(monkeypatch):
    interp, gpu = stands(monkeypatch, COPY, interp=Stand(plant_value("present_value", 0, 0.5)))
    result = verify_variant("v", COPY, KERNEL, 1, ("interp",))
    assert not result.ok and gpu.calls == []
    want = Stand.cases[0].expected["present_value"][0]
    assert result.problems == [
        f"interp vs reference [rows=1] present_value: 1 elements differ, first at 0: "
        f"{F32(0.5)!r} != {want!r}"
    ]
    assert result.max_error == pytest.approx(abs(float(want) - 0.5))


def test_gpu_is_judged_against_the_interpreter(monkeypatch):
    interp, gpu = stands(
        monkeypatch,
        COPY,
        1,
        interp=Stand(plant_value("present_key", 1, 3.0)),
        gpu=Stand(plant_value("present_key", 1, 3.0)),
    )
    result = verify_variant("v", COPY, KERNEL, 1, ("interp", "gpu"))
    # The interpreter is wrong against the reference; the GPU agrees with the interpreter.
    assert len(result.problems) == 1
    assert result.problems[0].startswith("interp vs reference [rows=1] present_key:")


def test_gpu_alone_is_judged_against_the_reference(monkeypatch):
    interp, gpu = stands(monkeypatch, COPY, 1, gpu=Stand(plant_value("present_key", 0, 3.0)))
    result = verify_variant("v", COPY, KERNEL, 1, ("gpu",))
    assert interp.calls == [] and len(gpu.calls) == 1
    assert result.problems == [
        f"gpu vs reference [rows=1] present_key: 1 elements differ, first at 0: {F32(3.0)!r} != "
        f"{Stand.cases[0].expected['present_key'][0]!r}"
    ]


def test_gpu_difference_against_the_interpreter(monkeypatch):
    stands(monkeypatch, COPY, 1, gpu=Stand(plant_value("present_value", 2, 0.5)))
    result = verify_variant("v", COPY, KERNEL, 1)
    assert len(result.problems) == 1
    assert result.problems[0].startswith("gpu vs interp [rows=1] present_value: 1 elements differ")


def test_interpreter_error_becomes_a_problem_and_the_gpu_still_runs(monkeypatch):
    interp, gpu = stands(monkeypatch, COPY, 2, interp=Stand(error=InterpError("out of bounds")))
    result = verify_variant("v", COPY, KERNEL, 2)
    assert result.problems == ["interp [rows=1]: out of bounds", "interp [rows=49]: out of bounds"]
    assert len(gpu.calls) == 2  # judged against the reference, and right


def test_missing_feature_marks_unsupported_once(monkeypatch):
    interp, gpu = stands(monkeypatch, COPY, 3, gpu=Stand(error=FeatureError("no shader-f16")))
    result = verify_variant("v", COPY, KERNEL)
    assert result.unsupported == "no shader-f16" and result.ok
    assert len(gpu.calls) == 1 and len(interp.calls) == 3


def test_gpu_compares_only_the_expected_outputs(monkeypatch):
    # Inputs come back too (a backend returns every binding); only outputs are judged.
    stands(monkeypatch, COPY, 1, gpu=Stand(plant_value("src_k", 0, 7.0)))
    assert verify_variant("v", COPY, KERNEL, 1).ok


def test_gpu_gets_the_cases_tolerance(monkeypatch):
    cfg = BuildConfig(2, 8, rotary=True)

    def off(out):
        out["present_key"][3] *= F32(1 + 1e-5)
        return out

    stands(monkeypatch, cfg, 1, gpu=Stand(off))
    result = verify_variant("v", cfg, KERNEL, 1)
    assert result.ok and 0 < result.max_error < 1e-4


def test_gpu_codes_may_move_one_step_the_interpreters_may_not(monkeypatch):
    cfg = AppendQuantConfig(2, 8)

    def step(out):
        a = out["present_value"]
        i = int(np.flatnonzero(np.abs(a) < 100)[0])
        a[i] += 1
        return out

    stands(monkeypatch, cfg, 1, gpu=Stand(step))
    assert verify_variant("v", cfg, KERNEL, 1).ok
    stands(monkeypatch, cfg, 1, interp=Stand(step))
    result = verify_variant("v", cfg, KERNEL, 1, ("interp",))
    assert result.problems[0].startswith("interp vs reference")


def test_result_ok_is_no_problems():
    assert Result("x").ok and not Result("x", problems=["p"]).ok


def test_empty_arrays_agree_under_a_tolerance():
    assert compare(F32([]), F32([]), 0.5) == (0.0, "")
    assert compare(F32([]), F32([])) == (0.0, "")


def test_int4_two_steps_in_the_high_nibble():
    want = np.array([0x15, 0x77], np.uint32)  # high nibbles 1 and 7
    got = np.array([0x35, 0x77], np.uint32)  # 1 → 3: two steps
    assert compare_quantized(got, want, 4) == (2.0, "25.00% of codes differ, by up to 2 steps")


def test_quantized_takes_shaped_arrays_and_masks():
    want = codes8(200).reshape(20, 10)
    got = want.copy()
    got[2, 3] += 1
    assert compare_quantized(got, want.reshape(-1), 8) == (1.0, "")
    assert compare_quantized(got.reshape(-1), want, 8) == (1.0, "")
    mask = np.ones((20, 10), bool)
    mask[0, 0] = False
    got[0, 0] = poison(1, np.int32)[0]
    assert compare_quantized(got, want, 8, mask) == (1.0, "")


def test_judge_compares_int4_codes_by_nibble():
    want = np.random.default_rng(3).integers(0, 256, 300).astype(np.uint32)
    case = Case({"n": 1}, {}, {}, {"q": want}, quantized={"q": 4})
    got = want.copy()
    got[0] = (want[0] + 16) & 0xFF if want[0] < 0xF0 else want[0] - 16
    assert list(case.judge({"q": got})) == [("q", 1.0, "")]


def test_case_generator_registers_the_mode(monkeypatch):
    from kvdsl.harness import cases

    monkeypatch.setattr(cases, "CASES", dict(cases.CASES))

    def make(cfg, rng, i):
        return Case({"i": i}, {}, {}, {})

    assert cases.case_generator("planted")(make) is make
    assert cases.CASES["planted"] is make


def test_cases_default_to_seed_zero_as_the_runner_does():
    default, zero = cases_for(COPY, 3), cases_for(COPY, 3, 0)
    assert (
        [c.label() for c in default]
        == [c.label() for c in zero]
        == ["rows=1", "rows=49", "rows=339"]
    )
    assert all(
        np.array_equal(a.buffers["src_k"], b.buffers["src_k"]) for a, b in zip(default, zero)
    )
