"""Run a variant's cases through the interpreter and the GPU and judge them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from kvdsl.harness.cases import Case, cases_for
from kvdsl.ir import Kernel
from kvdsl.ir.portability import LLVMPIPE_LOOP_TRIPS
from kvdsl.kernels.config import KernelConfig


@dataclass
class Result:
    """The verdict on one variant."""

    variant: str
    shapes: list[str] = field(default_factory=list)
    max_error: float = 0.0
    problems: list[str] = field(default_factory=list)
    # Why the GPU could not run the variant here (the adapter lacks a feature its module
    # enables), or None: the interpreter's checks still ran; nothing was compared on the GPU.
    unsupported: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


def _judge(
    result: Result, case: Case, what: str, got: dict, want: dict, tol: dict, codes: dict
) -> None:
    for name, err, problem in case.judge(got, want, tol, codes):
        result.max_error = max(result.max_error, err)
        if problem:
            result.problems.append(f"{what} [{case.label()}] {name}: {problem}")


def _gpu_case(
    result: Result, kernel: Kernel, case: Case, interp_out: dict | None, counted: dict
) -> None:
    """Run ``case`` on the GPU and judge it against the interpreter (or the reference); an
    adapter without a feature the module enables marks the result unsupported instead. On
    llvmpipe a case whose loop trips the interpreter ``counted`` past llvmpipe's cap is a
    problem (:mod:`kvdsl.cli.loops` says why the count is a sound bound)."""
    from kvdsl.ir.portability import LLVMPIPE_LOOPS
    from kvdsl.runtime import FeatureError, adapter_info, run as gpu_run

    if "past" in counted and adapter_info()["vendor"] == "llvmpipe":
        result.problems.append(
            f"gpu [{case.label()}]: not judged: the interpreter counts up to "
            f"{counted['most']:,} loop trips for one invocation, and {LLVMPIPE_LOOPS}"
        )
        return

    try:
        gpu_out = gpu_run(kernel, dict(case.buffers), case.params)
    except FeatureError as err:
        result.unsupported = str(err)
        return
    want = interp_out if interp_out is not None else case.expected
    what = "gpu vs interp" if interp_out is not None else "gpu vs reference"
    # The interpreter computes in the same precision as the GPU; approximate builtins
    # (inverseSqrt, cos, sin, division) and contraction into fma keep a small tolerance there,
    # and a quantised code may move by one step.
    expected = {k: want[k] for k in case.expected}
    _judge(result, case, what, gpu_out, expected, case.tolerance, case.codes)


def verify_variant(
    name: str,
    cfg: KernelConfig,
    kernel: Kernel,
    n_cases: int = 3,
    backends: tuple[str, ...] = ("interp", "gpu"),
    seed: int = 0,
    on_step: Callable[[], None] | None = None,
    max_steps: int | None = None,
) -> Result:
    """Interpreter vs reference and GPU vs interpreter over ``n_cases`` random cases.

    The interpreter also proves that no access is out of bounds and no two invocations write
    one element; its errors become problems of the result. ``max_steps`` is its work budget
    (:func:`kvdsl.interp.run`'s; None: the default).
    """
    result = Result(name)
    for case in cases_for(cfg, n_cases, seed):
        result.shapes.append(case.label())
        interp_out = None
        counted = {"mark": LLVMPIPE_LOOP_TRIPS}
        if "interp" in backends:
            from kvdsl.interp import MAX_STEPS, InterpError, run as interp_run

            try:
                interp_out = interp_run(
                    kernel,
                    dict(case.buffers),
                    case.params,
                    max_steps=max_steps or MAX_STEPS,
                    loop_trips=counted,
                )
            except InterpError as err:
                result.problems.append(f"interp [{case.label()}]: {err}")
            else:
                _judge(
                    result,
                    case,
                    "interp vs reference",
                    interp_out,
                    case.expected,
                    case.tolerance,
                    case.quantized,
                )
        if "gpu" in backends and result.unsupported is None:
            _gpu_case(result, kernel, case, interp_out, counted)
        if on_step is not None:
            on_step()
    return result
