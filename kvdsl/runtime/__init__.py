"""Run kernels on the GPU through wgpu, and validate WGSL under naga (wgpu) and Tint (Dawn).

Kernels run on a WebGPU implementation: wgpu-native through ``wgpu``, or Dawn through
``wgpudawn``, chosen by an explicit value: ``use_webgpu(WebGPU("dawn", dawn_enable=(...)))``
(:mod:`~kvdsl.runtime.webgpu`) before the first kernel runs (wgpu-native otherwise). The library
never reads the environment; the ``kvdsl`` command reads ``KVDSL_WEBGPU``,
``KVDSL_DAWN_ENABLE``, ``KVDSL_DAWN_DISABLE`` and ``KVDSL_LOOP_BOUNDING`` once, at its start
(``WebGPU.from_environment``), and so do the test suite's ``conftest.py`` and the benchmark
scripts. Both implementations share one code path; what differs (feature names, timestamp
units, one device per adapter, Dawn's toggles) is kept in one module.

Devices get WebGPU's default limits, raised to exactly what a kernel's ``limits`` state (a
device per feature and limit set), and request a feature only when a module needs it. Buffers
are bound by name from numpy arrays, the params struct is packed by WGSL's uniform layout, and
the host contract is checked before dispatch (:mod:`~kvdsl.runtime.contract`). What a host
passes is checked once, for every backend: :mod:`~kvdsl.runtime.inputs` (``check_inputs``: each
params field against its type, each array against its binding's by kind, width and byte order)
and :mod:`~kvdsl.runtime.paged` (``check_pages``: the slot and page ids of the paged modes, no two
writers of one slot or page); ``kvdsl run`` applies both before the interpreter or the GPU runs,
and the paged session's host applies ``check_pages`` to everything it passes. naga's compile
errors come with the WGSL line; Tint validates in a subprocess. ``time_kernel`` times dispatches
with timestamp queries (``nanoseconds_per_tick``: the length of a query's tick on a device).
:mod:`~kvdsl.runtime.windows` runs a windowed variant over a cache past one binding:
``plan_windows`` (pure Python, the limits as arguments) cuts the cache into windows of whole
``(batch, kv head)`` slices and the windows into buffers, and ``run_windows`` dispatches once
per window over bound sub-ranges (docs/host.md)."""

from kvdsl.runtime.device import adapter_info, compile_wgsl, current_webgpu, use_webgpu
from kvdsl.runtime.errors import (
    BufferError,
    CompileError,
    DeviceError,
    FeatureError,
    PagedInputError,
    ParamsError,
    WebGPULoaded,
)
from kvdsl.runtime.execute import run, run_source, subgroup_size, time_kernel
from kvdsl.runtime.submit import nanoseconds_per_tick
from kvdsl.runtime.inputs import check_inputs
from kvdsl.runtime.layout import pack_params, params_layout
from kvdsl.runtime.paged import check_pages
from kvdsl.runtime.tint import tint_check
from kvdsl.runtime.webgpu import IMPLEMENTATIONS, WebGPU
from kvdsl.runtime.windows import Limits, WindowError, plan_windows, run_windows

__all__ = [
    "IMPLEMENTATIONS",
    "BufferError",
    "Limits",
    "WindowError",
    "CompileError",
    "DeviceError",
    "FeatureError",
    "PagedInputError",
    "ParamsError",
    "WebGPU",
    "WebGPULoaded",
    "adapter_info",
    "check_inputs",
    "check_pages",
    "compile_wgsl",
    "current_webgpu",
    "nanoseconds_per_tick",
    "pack_params",
    "params_layout",
    "plan_windows",
    "run",
    "run_source",
    "run_windows",
    "subgroup_size",
    "tint_check",
    "time_kernel",
    "use_webgpu",
]
