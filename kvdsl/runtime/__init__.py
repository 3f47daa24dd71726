"""Run kernels on the GPU through wgpu, and validate WGSL under naga (wgpu) and Tint (Dawn)."""

from kvdsl.runtime.device import adapter_info, compile_wgsl
from kvdsl.runtime.errors import BufferError, CompileError, DeviceError, FeatureError, ParamsError
from kvdsl.runtime.execute import run, run_source, subgroup_size, time_kernel
from kvdsl.runtime.layout import pack_params, params_layout
from kvdsl.runtime.tint import tint_check

__all__ = [
    "BufferError",
    "CompileError",
    "DeviceError",
    "FeatureError",
    "ParamsError",
    "adapter_info",
    "compile_wgsl",
    "pack_params",
    "params_layout",
    "run",
    "run_source",
    "subgroup_size",
    "tint_check",
    "time_kernel",
]
