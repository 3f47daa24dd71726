"""benchmarks/big_cache.py at a small size: every mode by windows on the software adapter, with
the windows planned at limits scaled down with the cache (one batch's source per binding, two
per buffer, as at full size under WebGPU's defaults)."""

from __future__ import annotations

import pytest

from kvdsl.runtime.windows import Limits, WindowError
from tests.helpers.paths import benchmark

big = benchmark("big_cache")
TOKENS = 40
BATCH_BYTES = TOKENS * 8 * 128 * 4  # one batch of Llama's f32 K (8 heads x 128)


def test_every_mode_by_windows_at_a_small_size(capsys, gpu):
    argv = ["--batch", "3", "--tokens", str(TOKENS)]
    argv += ["--binding", str(BATCH_BYTES), "--buffer", str(2 * BATCH_BYTES)]
    assert big.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("device ") and "max-buffer-size 268435456" in lines[0]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert list(rows) == list(big.VARIANTS)
    for mode, line in rows.items():
        assert line.endswith(" ok"), line
        assert big.VARIANTS[mode] in line
        if mode != "append_quant":  # a packed int4 cache is half: two windows, one buffer
            assert " 3 windows " in line and " 2 buffers " in line, line


def test_a_failing_mode_is_reported_and_fails_the_run(capsys, gpu, monkeypatch):
    make = big.make_case

    def wrong(mode, cfg, rng, batch, tokens):
        case = make(mode, cfg, rng, batch, tokens)
        case.expected["present_key"] = case.expected["present_key"].copy()
        case.expected["present_key"][-1] += 1  # the last window's last element
        return case

    monkeypatch.setattr(big, "make_case", wrong)
    argv = ["--batch", "3", "--tokens", str(TOKENS), "--modes", "merge"]
    argv += ["--binding", str(BATCH_BYTES), "--buffer", str(2 * BATCH_BYTES)]
    assert big.main(argv) == 1
    assert "FAIL present_key" in capsys.readouterr().out


def test_a_cache_that_cannot_be_windowed_says_why():
    with pytest.raises(WindowError, match="one batch of the source is 163840 bytes"):
        big.run_mode("build", 3, TOKENS, Limits(65536, 131072), 0)
