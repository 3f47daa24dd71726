"""Run kernels on the GPU through wgpu, and validate WGSL under naga (wgpu) and Tint (Dawn).

The WebGPU implementation is an explicit choice: ``use_webgpu(WebGPU("dawn"))`` before the first
GPU work (wgpu-native otherwise); see :mod:`kvdsl.runtime.webgpu`.
"""

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
