"""kvdsl: a typed IR, WGSL emitter, numpy interpreter and wgpu runner for WebGPU KV-cache kernels."""

__version__ = "0.1.0"
