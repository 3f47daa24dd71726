"""Validate WGSL modules under Tint (Dawn's compiler) on Dawn's Null backend.

Run as a script, not imported: ``python tint_worker.py`` reads ``{"sources": {name: wgsl},
"limits": {name: {limit: value}}}`` as JSON on stdin (the limits a module needs past WebGPU's
defaults, as wgpu-py names them; a module without any is checked on a device with none raised;
each device has the features of WGSL's extensions) and writes ``{name: error text or null}`` as JSON on stdout. The Null adapter's own limits may
be below a module's need (it allows 8 storage buffers per stage): such a module is compiled by
Tint (parse, resolve, validation) without Dawn's pipeline checks. It lives in its own process because
wgpudawn and wgpu-native must not be loaded into one process, and it imports nothing from kvdsl
for the same reason. The Null backend runs Tint's front end (parse, resolve, validation) and
Dawn's pipeline checks, but generates no backend code.
"""

from __future__ import annotations

import json
import os
import sys


def _check(device, wgsl: str, pipeline: bool = True) -> str | None:
    device.push_error_scope("validation")
    device.push_error_scope("internal")
    module = device.create_shader_module(code=wgsl)
    info = module.get_compilation_info_sync()
    errors = [f"{m.line_num}:{m.line_pos}: {m.message}" for m in info.messages if m.type == "error"]
    if not errors and pipeline:
        device.create_compute_pipeline(layout="auto", compute={"module": module})
    internal = device.pop_error_scope_async().sync_wait()
    validation = device.pop_error_scope_async().sync_wait()
    scoped = [e.message.strip() for e in (validation, internal) if e is not None]
    # Dawn's scoped message repeats the compilation messages with the source excerpt.
    return "\n".join(scoped or errors) or None


def main() -> None:
    os.environ["WGPU_BACKEND_TYPE"] = "Null"
    import wgpudawn

    job = json.load(sys.stdin)
    sources, limits = job["sources"], job["limits"]
    adapter = wgpudawn.gpu.request_adapter_sync()
    # The features of WGSL's extensions (kvdsl.runtime.device.STAGE_FEATURES beside shader-f16
    # and subgroups): Tint takes an extension's directive only on a device with its feature.
    wgsl = ("shader-f16", "subgroups", "clip-distances", "dual-source-blending", "primitive-index")
    features = [f for f in wgsl if f in adapter.features]
    devices = {}
    results = {}
    for name, wgsl in sources.items():
        wanted = limits.get(name, {})
        need = tuple(sorted((k, min(n, adapter.limits[k])) for k, n in wanted.items()))
        if need not in devices:
            # One device per adapter under Dawn: each device past the first on a fresh adapter.
            source = adapter if not devices else wgpudawn.gpu.request_adapter_sync()
            devices[need] = source.request_device_sync(
                required_features=features, required_limits=dict(need)
            )
        try:
            results[name] = _check(devices[need], wgsl, dict(need) == wanted)
        except Exception as e:  # wgpudawn raises for some errors instead of scoping them
            results[name] = f"{type(e).__name__}: {e}"
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
