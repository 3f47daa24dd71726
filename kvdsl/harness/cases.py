"""Random verification cases per mode: inputs, params, poisoned outputs and expected results.

A case generator takes a mode's config, a numpy ``Generator`` and a case number, picks a shape
(small enough for the software adapter, varied: batch 1-3, odd token counts, partial last
workgroups), makes random non-zero inputs, and states the expected outputs with
:mod:`kvdsl.reference`. Outputs start poisoned; ``written`` masks say which elements a pass
must write (the rest must keep the poison).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

from kvdsl import reference
from kvdsl.ir.types import SCALARS
from kvdsl.kernels.config import KernelConfig, window_bindings
from kvdsl.kernels.copy import CopyConfig
from kvdsl.kernels.transpose import TransposeConfig
from kvdsl.reference.judge import compare, compare_quantized, holds_poison, poison, values

#: Arrays by name: a case's buffers, its expected outputs, a run's outputs.
Arrays = dict[str, np.ndarray]


@dataclass
class Case:
    """One verification input and what it must produce."""

    shape: dict[str, int]
    buffers: dict[str, np.ndarray]
    params: dict[str, int | float]
    expected: dict[str, np.ndarray]
    written: dict[str, np.ndarray] = field(default_factory=dict)
    tolerance: dict[str, float] = field(default_factory=dict)
    # Outputs quantised after approximate math, by bit width: one step off is allowed in a few
    # elements (a value within rounding error of a .5 boundary may round either way).
    quantized: dict[str, int] = field(default_factory=dict)
    # Every quantised output, by bit width. Against the GPU each may be one step off in a few
    # elements: WGSL's f32 division is accurate only to 2.5 ULP, so a GPU (an H200 through
    # Vulkan did) may round ``x / scale`` near a .5 boundary the other way; llvmpipe divides
    # exactly, as the interpreter does.
    codes: dict[str, int] = field(default_factory=dict)

    def label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.shape.items())

    def against_reference(
        self, got: dict[str, np.ndarray], want: dict[str, np.ndarray] | None = None
    ) -> list[str]:
        """What is wrong with the outputs ``got`` against the reference (or ``want``, another
        run's outputs of the same names): each expected output within its tolerance (quantised
        ones: :data:`quantized`'s rule), and no element written outside :data:`written`. Empty
        when nothing is."""
        return [f"{self.label()} {name}: {p}" for name, _, p in self.judge(got, want) if p]

    def judge(
        self,
        got: Arrays,
        want: Arrays | None = None,
        tolerance: dict[str, float] | None = None,
        codes: dict[str, int] | None = None,
    ) -> Iterator[tuple[str, float, str | None]]:
        """``(name, largest error, problem or None)`` of each output of ``want`` (default: the
        reference) in ``got``, within ``tolerance`` (default :data:`tolerance`); the outputs
        named in ``codes`` (default :data:`quantized`) are quantised, compared by bit width;
        elements outside :data:`written` must be untouched."""
        want = self.expected if want is None else want
        tolerance = self.tolerance if tolerance is None else tolerance
        codes = self.quantized if codes is None else codes
        return self.judge_outputs(got, want, tolerance, codes)

    def judge_outputs(
        self, got: Arrays, want: Arrays, tolerance: dict[str, float], codes: dict[str, int]
    ) -> Iterator[tuple[str, float, str | None]]:
        """:meth:`judge` with every argument given (a subclass refines the comparison here)."""
        for name, expected in want.items():
            mask = self.written.get(name)
            if name in codes:
                err, problem = compare_quantized(got[name], expected, codes[name], mask)
            else:
                err, problem = compare(got[name], expected, tolerance.get(name, 0.0), mask)
            yield name, err, problem


def flat(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each of ``arrays`` as a contiguous 1-D array, as a case's buffers and outputs are held."""
    return {k: np.ascontiguousarray(a).reshape(-1) for k, a in arrays.items()}


def dtype(name: str) -> np.dtype:
    """The numpy dtype of the WGSL scalar type ``name`` (numpy reads "f16" as float128)."""
    return SCALARS[name].dtype


CASES: dict[str, Callable[[KernelConfig, np.random.Generator, int], Case]] = {}


def case_generator(mode: str):
    def register(fn: Callable[[KernelConfig, np.random.Generator, int], Case]):
        CASES[mode] = fn
        return fn

    return register


def cases_for(cfg: KernelConfig, n: int, seed: int = 0) -> list[Case]:
    """``n`` cases for ``cfg``'s mode, deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    cases = [CASES[cfg.mode](cfg, rng, i) for i in range(n)]
    if cfg.window:
        return [window_case(cfg, case, i) for i, case in enumerate(cases)]
    return cases


def run_judge(cfg: KernelConfig, params: dict, want: Arrays) -> Case:
    """How ``kvdsl verify`` holds ``cfg``'s GPU outputs to the interpreter's ``want``, for a run
    on any inputs of any shape with ``params``: a case of the mode, its tolerances and its
    quantised outputs (:meth:`Case.judge` with its ``codes``); an element the interpreter left
    holding the poison (``kvdsl inputs`` poisons the outputs) must hold it on the GPU too, every
    other is judged."""
    written = {name: ~holds_poison(w) for name, w in want.items()}
    return dataclasses.replace(cases_for(cfg, 1)[0], params=dict(params), written=written)


def window_case(cfg: KernelConfig, case: Case, i: int) -> Case:
    """``case`` (of the whole cache) cut to one window of a windowed kernel: the cache bindings,
    expected outputs and written masks to slices ``[headBase, end)``; ``seqlens_k`` and the
    shape's ``batch`` to the batches up to the window's last; the BSH sources to those batches
    from ``batchBase`` on, which is the window's first batch on odd ``i`` where the cache holds
    more than one (the window then starts at that batch), else 0 (the window starts inside the
    first batch). The window leaves out the last slice where there are three or more."""
    heads, batch = cfg.kv_heads, case.shape["batch"]
    slices = batch * heads
    count = case.params.get("count", slices * case.params.get("kvSeq", 0))
    per_slice = count // slices
    first = heads if i % 2 == 1 and batch > 1 else min(1, slices - 1)
    end = slices - 1 if slices - first > 1 else slices
    batch_base = first // heads if i % 2 == 1 else 0
    last = -(-end // heads)  # the batches up to the window's last
    cache, sources = window_bindings(cfg.mode)

    def cut(bufs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = dict(bufs)
        for name, a in bufs.items():
            if name in cache:
                out[name] = a.reshape(slices, -1)[first:end].reshape(-1).copy()
            elif name in sources:
                out[name] = a.reshape(batch, -1)[batch_base:last].reshape(-1).copy()
            elif name == "seqlens_k":
                out[name] = a[:last].copy()
        return out

    params = case.params | ({"batchSize": last} if "batchSize" in case.params else {})
    params |= {
        "count": (end - first) * per_slice,
        "headBase": first,
        "batchBase": batch_base,
    }
    shape = case.shape | {"batch": last, "headBase": first, "slices": end - first}
    shape |= {"batchBase": batch_base}
    return Case(
        shape,
        cut(case.buffers),
        params,
        cut(case.expected),
        cut(case.written),
        case.tolerance,
        case.quantized,
        case.codes,
    )


def _tokens(rng: np.random.Generator, i: int, most: int = 40) -> int:
    return [1, int(rng.integers(2, most)), int(rng.integers(most, 2 * most))][i % 3]


@case_generator("transpose")
def transpose_case(cfg: TransposeConfig, rng: np.random.Generator, i: int) -> Case:
    batch, seq = 1 + i % 3, _tokens(rng, i)
    hidden = cfg.kv_heads * cfg.head_dim
    dt_in, dt_out = dtype(cfg.input_type), dtype(cfg.present_type)
    key = values(rng, (batch, seq, hidden), dt_in)
    value = values(rng, (batch, seq, hidden), dt_in)
    pk, pv = reference.transpose(key, value, cfg.kv_heads, dt_out)
    size = pk.size
    return Case(
        {"batch": batch, "kvSeq": seq},
        {
            "key": key.reshape(-1),
            "value": value.reshape(-1),
            "present_key": poison(size, dt_out),
            "present_value": poison(size, dt_out),
        },
        {"batchSize": batch, "kvSeq": seq},
        {"present_key": pk.reshape(-1), "present_value": pv.reshape(-1)},
    )


@case_generator("copy")
def copy_case(cfg: CopyConfig, rng: np.random.Generator, i: int) -> Case:
    rows = [1, int(rng.integers(2, 64)), int(rng.integers(200, 400))][i % 3]
    dt = dtype(cfg.present_type)
    src_k = values(rng, (rows, cfg.head_dim), dt)
    src_v = values(rng, (rows, cfg.head_dim), dt)
    pk, pv = reference.copy(src_k, src_v)
    return Case(
        {"rows": rows},
        {
            "src_k": src_k.reshape(-1),
            "src_v": src_v.reshape(-1),
            "present_key": poison(src_k.size, dt),
            "present_value": poison(src_k.size, dt),
        },
        {"count": rows},
        {"present_key": pk.reshape(-1), "present_value": pv.reshape(-1)},
    )
