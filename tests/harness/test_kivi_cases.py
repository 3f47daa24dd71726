"""KIVI's flush cases judged as ``kvdsl verify`` judges a GPU's outputs against the
interpreter's: in the paged pool, as in the contiguous cache, a code that moved one step (a
GPU's f32 division may round ``(x - min) * (1 / scale)`` the other way) is accepted; a code two
steps off, a stat word changed or a word written outside the group is refused, and the
interpreter against the reference stays bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from kvdsl import interp
from kvdsl.harness.cases import cases_for
from kvdsl.harness.kivi import KiviPoolCase
from kvdsl.kernels.kivi import KiviFlushConfig, kivi_flush

PAGED = KiviFlushConfig(2, 64, group=32, cache="paged", page_size=64)
CONTIGUOUS = KiviFlushConfig(2, 64, group=32)


def outputs(cfg: KiviFlushConfig):
    """A case of ``cfg`` (two sequences, a page entry each written) and the interpreter's
    outputs, equal to the reference's."""
    case = cases_for(cfg, 3, seed=4)[2]
    out = interp.run(kivi_flush(cfg), dict(case.buffers), case.params)
    assert not case.against_reference(out)
    return case, {name: out[name] for name in case.expected}


def as_gpu(case, got, want) -> list[str]:
    """The problems ``kvdsl verify`` finds in a GPU's outputs ``got`` against ``want``."""
    return [f"{name}: {p}" for name, _, p in case.judge(got, want, case.tolerance, case.codes) if p]


def moved(words: np.ndarray, i: int, lane: int, steps: int) -> np.ndarray:
    """``words`` with code ``lane`` of word ``i`` moved ``steps`` steps (down from 2 or 3)."""
    out = words.copy()
    shift = 2 * lane
    code = int(out[i] >> np.uint32(shift)) & 3
    code = code + steps if code + steps <= 3 else code - steps
    out[i] = (out[i] & ~np.uint32(3 << shift)) | np.uint32(code << shift)
    return out


def pool_words(case, codes: bool) -> np.ndarray:
    """The written words of the pool holding codes (or stats)."""
    written = case.written["kivi_pages"]
    return np.flatnonzero(written & (case.code_words if codes else ~case.code_words))


def test_the_paged_case_judges_its_pool_by_word_kind():
    case, _ = outputs(PAGED)
    assert isinstance(case, KiviPoolCase) and case.codes == {"kivi_pages": 2}
    codes, stats = pool_words(case, True), pool_words(case, False)
    # A head's part: K's codes [64, 4], K's stats [64, 2], V's codes [64, 4], V's stats [64, 2].
    assert codes.size == 2 * stats.size > 0
    part = case.code_words[:768].reshape(-1)
    assert part[:256].all() and not part[256:384].any()
    assert part[384:640].all() and not part[640:].any()


@pytest.mark.parametrize("lanes", [[5], [0, 15], [3, 7, 11]])
def test_a_code_one_step_off_in_the_pool_is_accepted(lanes):
    case, want = outputs(PAGED)
    pool = want["kivi_pages"]
    words = pool_words(case, True)
    for n, lane in enumerate(lanes):
        pool = moved(pool, int(words[7 * n + 3]), lane, 1)
    assert np.count_nonzero(pool != want["kivi_pages"]) == len(lanes)
    assert as_gpu(case, {"kivi_pages": pool}, want) == []
    # The interpreter against the reference stays bit for bit.
    problems = case.against_reference({"kivi_pages": pool})
    assert len(problems) == 1 and f"{len(lanes)} elements differ" in problems[0], problems


def test_the_contiguous_case_accepts_the_same_move():
    case, want = outputs(CONTIGUOUS)
    assert isinstance(case, KiviPoolCase) and case.codes == {"kivi_cache": 2}
    written = np.flatnonzero(case.written["kivi_cache"] & case.code_words)
    got = {"kivi_cache": moved(want["kivi_cache"], int(written[3]), 5, 1)}
    assert as_gpu(case, got, want) == []
    stat = np.flatnonzero(case.written["kivi_cache"] & ~case.code_words)[2]
    got["kivi_cache"][stat] ^= np.uint32(1)
    assert as_gpu(case, got, want)[0].startswith("kivi_cache: stat words: 1 elements differ")


def test_a_code_two_steps_off_in_the_pool_is_refused():
    case, want = outputs(PAGED)
    pool = moved(want["kivi_pages"], int(pool_words(case, True)[3]), 5, 2)
    assert as_gpu(case, {"kivi_pages": pool}, want) == [
        "kivi_pages: code words: 0.01% of codes differ, by up to 2 steps"
    ]


def test_many_codes_a_step_off_in_the_pool_are_refused():
    """A step in more than 1% of the codes (one in each word: 6.25%) is no rounding."""
    case, want = outputs(PAGED)
    pool = want["kivi_pages"]
    for i in pool_words(case, True):
        pool = moved(pool, int(i), 5, 1)
    assert as_gpu(case, {"kivi_pages": pool}, want) == [
        "kivi_pages: code words: 6.25% of codes differ, by up to 1 steps"
    ]


@pytest.mark.parametrize("flip", [1, 1 << 16], ids=["scale", "minimum"])
def test_a_stat_word_changed_in_the_pool_is_refused(flip):
    case, want = outputs(PAGED)
    pool = want["kivi_pages"].copy()
    i = int(pool_words(case, False)[5])
    pool[i] ^= np.uint32(flip)
    # A code a step off beside it is still accepted; the stat word is not.
    pool = moved(pool, int(pool_words(case, True)[3]), 5, 1)
    assert as_gpu(case, {"kivi_pages": pool}, want) == [
        f"kivi_pages: stat words: 1 elements differ, first at {np.count_nonzero(~case.code_words[:i])}"
        f": {pool[i]!r} != {want['kivi_pages'][i]!r}"
    ]


def test_a_word_written_outside_the_group_is_refused():
    case, want = outputs(PAGED)
    outside = np.flatnonzero(~case.written["kivi_pages"] & case.code_words)
    pool = want["kivi_pages"].copy()
    pool[outside[0]] = 0
    problems = as_gpu(case, {"kivi_pages": pool}, want)
    assert problems == [
        f"kivi_pages: element {outside[0]} was written but should not be ({np.uint32(0)!r})"
    ]
