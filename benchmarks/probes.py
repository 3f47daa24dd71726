"""What the walk-design probes share (``probe8.py`` on; the older ones are records of kernels
since changed and keep their own copies): the benchmark's batch-4 sizes, each catalog variant's
benchmark plans with their buffers (:func:`measurements`), and a *race* that times text forms of
one kernel alternately with the two-pair copy of the same bytes."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
sys.path.insert(0, str(Path(__file__).resolve().parent))

import roofline  # noqa: E402
from kvdsl.ir import Kernel  # noqa: E402
from kvdsl.runtime import device as gpu  # noqa: E402
from kvdsl.runtime import run_source, time_kernel  # noqa: E402
from kvdsl import catalog  # noqa: E402
from kvdsl.emit import emit  # noqa: E402
from kvdsl.ir import workgroups  # noqa: E402
from plans import FULL, SMALL, Plan, Pool, element_sizes, plans, reshape  # noqa: E402

#: The six workgroup K RMSNorm drop-in representatives, the rows probes 29-42 turn on.
KNORM_DROPINS = [
    "build_quant_int8_knorm_qwen3_06b",
    "append_quant_int8_knorm_qwen3_06b",
    "build_quant_int4_knorm_qwen3_06b",
    "append_quant_int4_knorm_qwen3_06b",
    "build_knorm_qwen3_06b",
    "build_knorm_rotary_qwen3_06b",
]


def sizes(argv: list[str]) -> dict[str, Any]:
    """The benchmark's sizes at batch 4 (``--small``: llvmpipe smoke sizes at batch 2), with
    the storage-binding limit raised as the benchmark raises it (8,192-token copies bind 134 MB)."""
    small = "--small" in argv
    gpu.configure({"max-storage-buffer-binding-size": 1 << 28, "max-buffer-size": 1 << 28})
    return dict(SMALL if small else FULL) | {"batches": (2 if small else 4,)}


class Race:
    """Times forms of kernels beside the copy; device buffers are reused across calls."""

    def __init__(self, settle: float = 1.0) -> None:
        self.copy = roofline.copy_kernel()
        self.reuse: dict = {}
        self.roof_reuse: dict = {}
        self.settle = settle

    def _time(self, kernel: Kernel, text: str, wg, bufs, params, warmup: int) -> float:
        ts = time_kernel(
            text, bufs, params, wg, bindings=kernel.bindings, params_struct=kernel.params,
            repeats=30, warmup=warmup, label=kernel.name, reuse=self.reuse,
        )  # fmt: skip
        return float(np.median(ts)) * 1e6

    def run(
        self,
        label: str,
        kernel: Kernel,
        forms: dict[str, tuple[str, tuple[int, int, int]]],
        bufs: dict[str, np.ndarray],
        params: dict[str, Any],
        nbytes: int,
        rounds: int = 3,
    ) -> dict[str, float]:
        """Each form (name → (WGSL, workgroups)) and the copy of ``nbytes`` timed alternately
        ``rounds`` times, the best median kept; prints and returns µs per name (and "copy")."""
        cbufs, cparams = roofline.copy_buffers(nbytes)
        warmup = 2000 if nbytes < 1e6 else 300
        if nbytes < 1e6 and self.settle:
            # Decode-size work alone lets the GPU clock down (probe 26's 1-token copies took
            # 10-11 µs where the benchmark's take 5.1-5.4): heavy copies first bring it back up.
            roofline.settle(self.settle)
        best: dict[str, float] = {}
        for _ in range(rounds):
            for name, (text, wg) in forms.items():
                us = self._time(kernel, text, wg, bufs, params, warmup)
                best[name] = min(best.get(name, us), us)
            ts = time_kernel(self.copy, cbufs, cparams, repeats=30, warmup=warmup,
                             reuse=self.roof_reuse)  # fmt: skip
            best["copy"] = min(best.get("copy", np.inf), float(np.median(ts)) * 1e6)
        for name, us in best.items():
            pct = 100 * best["copy"] / us
            print(f"{label:<48} {name:<10} {us:9.2f} us {pct:5.0f}% copy", flush=True)
        return best


@dataclass
class Measurement:
    """One benchmark plan of a catalog variant (reshaped as the benchmark does), ready to race."""

    variant: str
    cfg: Any
    kernel: Kernel
    text: str
    plan: Plan
    bufs: dict[str, np.ndarray]
    params: dict[str, Any]
    wg: tuple[int, int, int]
    nbytes: int

    @property
    def label(self) -> str:
        return f"{self.variant} tok={self.plan.tokens}"


def measurements(
    variants: list[str],
    size: dict[str, Any],
    pool: Pool,
    decode: bool = True,
    tweak: Callable[[Any], Any] | None = None,
) -> Iterator[Measurement]:
    """Each plan of each variant at ``size`` (without ``decode``: not the 1-token ones), with
    its emitted WGSL, buffers from ``pool``, params, workgroups and bytes that must move.
    ``tweak`` maps each (reshaped) config to the one to build, e.g. another workgroup size."""
    for variant in variants:
        cfg = reshape(catalog.config(variant))
        cfg = tweak(cfg) if tweak else cfg
        kernel = catalog.build_config(cfg, variant)
        text, z = emit(kernel), element_sizes(kernel)
        for plan in plans(cfg, size):
            if plan.tokens == 1 and not decode:
                continue
            bufs = pool.buffers(kernel.bindings, plan)
            params = plan.params_of(kernel.params)
            wg = workgroups(kernel, params)
            yield Measurement(variant, cfg, kernel, text, plan, bufs, params, wg, plan.moved(z))


@contextmanager
def patched(module: Any, **attrs: Any) -> Iterator[None]:
    """``module``'s attributes ``attrs`` set (a walk constant, a policy function, a runtime
    setting) while the block runs, then put back."""
    saved = {name: getattr(module, name) for name in attrs}
    for name, value in attrs.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def emit_with(m: Measurement, module: Any, **attrs: Any) -> str:
    """``m``'s kernel built and emitted with ``module``'s attributes ``attrs`` set for the
    build (:func:`patched`)."""
    with patched(module, **attrs):
        return emit(catalog.build_config(m.cfg, m.variant))


def outputs(m: Measurement, text: str) -> dict[str, np.ndarray]:
    """The WGSL form ``text`` of ``m``'s kernel run once on its buffers: its outputs."""
    return run_source(text, m.kernel.bindings, m.kernel.params, dict(m.bufs), m.params, m.wg)


def same_bytes(m: Measurement, a: str, b: str) -> None:
    """Run the WGSL forms ``a`` and ``b`` of ``m``'s kernel on its buffers and print, per output,
    the share of 16-bit units (f16 halves) the two wrote alike (:func:`alike`)."""
    alike(m, outputs(m, a), outputs(m, b))


def alike(m: Measurement, a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    """Print, per output of two runs ``a`` and ``b`` of ``m``, the share of 16-bit units they
    wrote alike."""
    for name in a:
        same = a[name].view(np.uint16) == b[name].view(np.uint16)
        print(f"{m.label} {name}: {100 * same.mean():.4f}% of halves equal", flush=True)


def start(argv: list[str], seconds: float = 30.0) -> tuple[dict[str, Any], Pool, Race]:
    """A probe's sizes (:func:`sizes`), buffer pool and race, after ``seconds`` of copies
    (:func:`settle`; not with ``--small``)."""
    size = sizes(argv)
    small = "--small" in argv
    if not small:
        roofline.settle(seconds)
    return size, Pool(), Race(settle=0.0 if small else 1.0)


def race_settings(
    race: Race, m: Measurement, module: Any, forms: dict[str, dict[str, Any]], rounds: int = 3
) -> None:
    """``m``'s WGSL run under each of ``forms`` (name → ``module`` attributes set while it is
    compiled and timed, :func:`patched`), raced as :func:`race_forms` does."""
    setting = {
        name: (m.text, lambda a=attrs: patched(module, **a)) for name, attrs in forms.items()
    }
    race_forms(race, m, setting, rounds)


def race_forms(
    race: Race,
    m: Measurement,
    forms: dict[str, tuple[str, Callable[[], Any]]],
    rounds: int = 3,
) -> None:
    """Forms of ``m``'s kernel (name → (WGSL, a context manager factory for its settings, e.g.
    :func:`contextlib.nullcontext`)): first checked to write the same bytes, then timed
    alternately with the copy ``rounds`` times. Prints each form's fastest time and the median
    over rounds of the copy timed right after it over the kernel's time: a slow stretch of the
    GPU that falls beside some rounds then moves a ratio, not the race's pairing of bests."""
    outs = []
    for text, setting in forms.values():
        with setting():
            outs.append(outputs(m, text))
    for other in outs[1:]:
        alike(m, outs[0], other)
    label = f"{m.label} B={m.plan.batch}"
    times: dict[str, list[float]] = {name: [] for name in forms}
    ratios: dict[str, list[float]] = {name: [] for name in forms}
    for _ in range(rounds):
        for name, (text, setting) in forms.items():
            with setting():
                got = race.run(label, m.kernel, {name: (text, m.wg)}, m.bufs, m.params,
                               m.nbytes, 1)  # fmt: skip
            times[name].append(got[name])
            ratios[name].append(100 * got["copy"] / got[name])
    for name in forms:
        print(
            f"{label:<48} {name:<10} best {min(times[name]):9.2f} us, "
            f"median {float(np.median(ratios[name])):5.1f}% of the copy beside it",
            flush=True,
        )


def race_with_registers(
    script: str, argv: list[str], variants: list[str], forms_of: Callable[[Measurement], dict]
) -> None:
    """A register probe's ``main``: rerun ``script`` in a process with the Vulkan layer on
    (:func:`shaderstats.rerun_with_layer`), which then, for each plan of ``variants``, runs
    each form of ``forms_of(m)`` (name → WGSL) once, prints the driver's register count of
    the module it created (:class:`shaderstats.Registers`; ``-`` without the layer or
    statistics) and races the forms (:func:`race_forms`)."""
    import shaderstats
    from kvdsl.runtime import adapter_info

    if "--child" not in argv:
        sys.exit(shaderstats.rerun_with_layer(script, argv, f"{Path(script).stem}-"))
    size, pool, race = start(argv, 0 if "--small" in argv else 20)
    print(f"{adapter_info()['implementation']}: {adapter_info()['device']}", flush=True)
    regs = shaderstats.Registers()
    for m in measurements(variants, size, pool):
        texts = forms_of(m)
        for name, text in texts.items():
            label = f"{m.variant} {name}"
            if label not in regs.module:
                with regs.creating(label):
                    outputs(m, text)
                print(f"{label:<56} registers {regs.of(label)}", flush=True)
        race_forms(race, m, {name: (text, nullcontext) for name, text in texts.items()})
