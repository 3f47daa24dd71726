"""The process's wgpu adapter, its devices (one per feature set) and a pipeline cache.

Devices are created with WebGPU's default limits (8 storage buffers per stage, 65535 workgroups
per dimension, ...), not the adapter's, so a kernel that runs here also runs in a browser; only
:func:`configure` (an explicit opt-in, for benchmarks whose buffers pass 128 MiB) raises them. A
device gets ``shader-f16`` only when a module says ``enable f16;``, ``subgroups`` only when it
says ``enable subgroups;``, and ``timestamp-query`` whenever the adapter has it (it changes nothing
a shader can do).

naga (wgpu 0.32) implements the subgroup built-ins but rejects the standard ``enable subgroups;``
directive (gfx-rs/wgpu#5555) that Tint, and so every browser, requires: kvdsl emits the standard
module and :func:`naga_source` takes ``subgroups`` out of its enable directives (in a list, over
lines, around comments) before naga sees it.

The WebGPU implementation is wgpu-native (the ``wgpu`` package) unless ``KVDSL_WEBGPU=dawn``
(or ``kvdsl --webgpu dawn``) is set before this module is imported: then it is Dawn, the
implementation inside Chrome, through the ``wgpudawn`` package, which has the same Python API.
Dawn compiles WGSL with Tint, takes ``enable subgroups;`` as written, and gets its
``timestamp_quantization`` toggle turned off so timestamp queries keep their resolution (a
browser quantises them; a benchmark must not). ``KVDSL_DAWN_DISABLE`` names more toggles to
turn off (comma-separated, e.g. ``disable_workgroup_init``), for probes, and
``KVDSL_DAWN_ENABLE`` toggles to turn on: ``vulkan_enable_f16_on_nvidia`` gives an NVIDIA
adapter under Vulkan the ``shader-f16`` feature, which Dawn (and so Chrome) leaves off there by
default.

wgpu-native's naga bounds every loop of a module with a counter of its own, so that a loop
the driver cannot prove finite still ends (``WGPUShaderRuntimeChecks_ForceLoopBounding``).
:data:`LOOP_BOUNDING` false (``KVDSL_LOOP_BOUNDING=0``, for probes) creates modules through
``wgpuDeviceCreateShaderModuleTrusted`` with bounds checks alone: a host may do so for kernels
whose loops all end, as kvdsl's counted loops do.
"""

from __future__ import annotations

import functools
import os
import re
import tempfile
from dataclasses import dataclass

from kvdsl.ir.nodes import Binding
from kvdsl.runtime.errors import CompileError, DeviceError, FeatureError

IMPLEMENTATIONS = ("wgpu-native", "dawn")


def implementation_name() -> str:
    """The WebGPU implementation ``KVDSL_WEBGPU`` names (default ``wgpu-native``)."""
    name = os.environ.get("KVDSL_WEBGPU", "").strip() or "wgpu-native"
    if name not in IMPLEMENTATIONS:
        raise DeviceError(f"KVDSL_WEBGPU={name!r}: expected one of {', '.join(IMPLEMENTATIONS)}")
    return name


IMPLEMENTATION = implementation_name()
if IMPLEMENTATION == "dawn":
    try:
        import wgpudawn
    except ImportError as e:
        raise DeviceError(
            "KVDSL_WEBGPU='dawn' needs the wgpudawn package (pip install wgpudawn)"
        ) from e
    wgpudawn.install_as_wgpu()
    from wgpudawn.backends.dawn.extras import all_toggles, set_instance_extras

    # KVDSL_DAWN_DISABLE: more Dawn toggles to turn off, comma-separated (probes: what Chrome's
    # robustness or workgroup zeroing costs); timestamp quantisation is always off.
    # KVDSL_DAWN_ENABLE: toggles to turn on (vulkan_enable_f16_on_nvidia: shader-f16 on NVIDIA).
    DAWN_TOGGLES: dict[str, list[str]] | None = {}
    _known = all_toggles()
    for _kind in ("enable", "disable"):
        _var = f"KVDSL_DAWN_{_kind.upper()}"
        _names = [t for t in (t.strip() for t in os.environ.get(_var, "").split(",")) if t]
        for _name in _names:
            if _name not in _known:
                raise DeviceError(
                    f"{_var}={os.environ[_var]!r}: Unknown Dawn toggle {_name!r}: see all_toggles()"
                )
        DAWN_TOGGLES[_kind] = _names
    set_instance_extras(
        disable_toggles=["timestamp_quantization", *DAWN_TOGGLES["disable"]],
        enable_toggles=DAWN_TOGGLES["enable"],
    )
else:
    DAWN_TOGGLES = None

import wgpu  # noqa: E402  (wgpudawn's, under KVDSL_WEBGPU=dawn)


def _loop_bounding() -> bool:
    """``KVDSL_LOOP_BOUNDING``: ``1`` (the default) or ``0``."""
    text = os.environ.get("KVDSL_LOOP_BOUNDING", "").strip() or "1"
    if text not in ("0", "1"):
        raise DeviceError(f"KVDSL_LOOP_BOUNDING={text!r}: expected 0 or 1")
    return text == "1"


#: Whether naga bounds each loop with a counter of its own (wgpu-native's default; see above).
LOOP_BOUNDING = _loop_bounding()

# WebGPU's default limits, those that can reject a compute kernel.
WEBGPU_LIMITS = {
    "max-storage-buffers-per-shader-stage": 8,
    "max-uniform-buffers-per-shader-stage": 12,
    "max-compute-workgroups-per-dimension": 65535,
    "max-compute-invocations-per-workgroup": 256,
    "max-compute-workgroup-size-x": 256,
    "max-compute-workgroup-size-y": 256,
    "max-compute-workgroup-size-z": 64,
    "max-compute-workgroup-storage-size": 16384,
    "max-storage-buffer-binding-size": 134217728,
    "max-uniform-buffer-binding-size": 65536,
    "max-buffer-size": 268435456,
}

# An enable directive: "enable", a comma-separated list of extensions (a trailing comma
# allowed), ";", with any blankspace between, line breaks included, and comments (matched on the
# text with its comments blanked, so a directive inside a comment is none).
_ENABLE = re.compile(r"\benable\b([^;]*);")
_SPAN = re.compile(r"wgsl:(\d+):(\d+)")


@functools.lru_cache(maxsize=256)
def _enables(wgsl: str) -> tuple[tuple[int, int, tuple[str, ...]], ...]:
    """``(start, end, extensions)`` of each enable directive of ``wgsl`` (asked for on every
    dispatch, through :func:`extensions`: kept per text)."""
    from kvdsl.frontend.comments import UnterminatedComment, scan  # lark only when asked

    try:
        code = scan(wgsl)[1]
    except UnterminatedComment:  # not WGSL: the compiler will say so
        code = wgsl
    return tuple(
        (m.start(), m.end(), tuple(n.strip() for n in m.group(1).split(",") if n.strip()))
        for m in _ENABLE.finditer(code)
    )


def needs_f16(wgsl: str) -> bool:
    """Whether the module enables the ``f16`` extension."""
    return any("f16" in names for _, _, names in _enables(wgsl))


def needs_subgroups(wgsl: str) -> bool:
    """Whether the module enables the ``subgroups`` extension."""
    return any("subgroups" in names for _, _, names in _enables(wgsl))


def extensions(wgsl: str) -> tuple[bool, bool]:
    """(f16, subgroups): the extensions the module enables, the key of its device."""
    return needs_f16(wgsl), needs_subgroups(wgsl)


def naga_source(wgsl: str) -> str:
    """``wgsl`` as naga takes it: ``subgroups`` left out of its enable directives (see the module
    doc), a directive of nothing else dropped; the line breaks inside one stay, so naga's line
    numbers are the module's."""
    from kvdsl.frontend.comments import LINE_BREAKS

    out, last = [], 0
    for start, end, names in _enables(wgsl):
        if "subgroups" not in names:
            continue
        rest = [n for n in names if n != "subgroups"]
        breaks = "".join(c for c in wgsl[start:end] if c in LINE_BREAKS)
        out += [wgsl[last:start], (f"enable {', '.join(rest)};" if rest else "") + breaks]
        last = end
    return "".join(out) + wgsl[last:]


def shader_source(wgsl: str) -> str:
    """``wgsl`` as this process's implementation takes it: :func:`naga_source` under
    wgpu-native, unchanged under Dawn."""
    return wgsl if IMPLEMENTATION == "dawn" else naga_source(wgsl)


@dataclass
class Pipeline:
    """A compiled compute pipeline and the bind group layout its bindings go through."""

    device: wgpu.GPUDevice
    pipeline: wgpu.GPUComputePipeline
    layout: wgpu.GPUBindGroupLayout


_adapter: wgpu.GPUAdapter | None = None
_devices: dict[tuple[bool, bool], wgpu.GPUDevice] = {}
_pipelines: dict[tuple, Pipeline] = {}
_raised_limits: dict[str, int] = {}
_consumed: list[tuple[bool, bool]] = []  # the devices made so far, in order


def configure(limits: dict[str, int] | None = None) -> dict[str, int]:
    """Opt in to limits above WebGPU's defaults (benchmarks only); the limits devices will get.

    ``limits`` maps names of :data:`WEBGPU_LIMITS` to the values wanted, capped at the adapter's;
    None or ``{}`` restores the defaults. Devices and pipelines made before are dropped, so call
    this before any work whose buffers must outlive it. Kernels that run under raised limits may
    not run in a browser: everything but benchmarks keeps the defaults.
    """
    unknown = sorted(set(limits or {}) - set(WEBGPU_LIMITS))
    if unknown:
        raise DeviceError(f"unknown limits {unknown}: expected names of {sorted(WEBGPU_LIMITS)}")
    _raised_limits.clear()
    _raised_limits.update(limits or {})
    _devices.clear()
    _pipelines.clear()
    return requested_limits()


def requested_limits() -> dict[str, int]:
    """The limits a device is requested with: WebGPU's defaults (or the configured values),
    each capped at the adapter's."""
    a = adapter()
    return {k: min(_raised_limits.get(k, v), a.limits[k]) for k, v in WEBGPU_LIMITS.items()}


def _request_adapter() -> wgpu.GPUAdapter:
    # Mesa's Vulkan drivers complain and may fail without a runtime dir (CI containers).
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
    try:
        a = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    except Exception as e:  # wgpu raises plain RuntimeError with its own text
        raise DeviceError(f"no {IMPLEMENTATION} adapter: {e}") from e
    if a is None:
        raise DeviceError(f"no {IMPLEMENTATION} adapter found")
    if IMPLEMENTATION == "wgpu-native" and _opengl(a):
        # A machine with Mesa's GL but no Vulkan driver offers llvmpipe through OpenGL only.
        others = [b for b in wgpu.gpu.enumerate_adapters_sync() if not _opengl(b)]
        if not others:
            raise DeviceError(
                f"wgpu-native found only the OpenGL adapter '{a.info['device']}': naga's GLSL "
                "does not keep WGSL's integer division, remainder and float-to-integer rules "
                "there (7u / 0u gives 0u where WGSL gives 7u), so kernels would run wrong; "
                "install a Vulkan driver (Debian: apt-get install mesa-vulkan-drivers)"
            )
        a = others[0]
    return a


def _opengl(a: wgpu.GPUAdapter) -> bool:
    return str(a.info["backend_type"]).startswith("OpenGL")


def adapter() -> wgpu.GPUAdapter:
    """The process's adapter (high-performance preference), requested once: what the devices
    are checked against and :func:`adapter_info` describes."""
    global _adapter
    if _adapter is None:
        _adapter = _request_adapter()
    return _adapter


def device(f16: bool = False, subgroups: bool = False) -> wgpu.GPUDevice:
    """The device for modules that do or do not enable ``f16`` and ``subgroups``."""
    key = (f16, subgroups)
    if key not in _devices:
        a = adapter()
        features = [f for f in ("timestamp-query",) if f in a.features]
        # wgpu-native 0.32 names the subgroup feature "subgroup"; WebGPU (Dawn) "subgroups".
        sg = "subgroups" if "subgroups" in a.features else "subgroup"
        wanted = [("f16", "shader-f16", f16), ("subgroups", sg, subgroups)]
        for extension, feature, on in wanted:
            if not on:
                continue
            if feature not in a.features:
                hint = ""
                if (
                    feature == "shader-f16"
                    and IMPLEMENTATION == "dawn"
                    and (
                        a.info.get("vendor_id") == 0x10DE
                        or "nvidia" in f"{a.info.get('vendor')} {a.info.get('device')}".lower()
                    )
                    and "vulkan" in str(a.info.get("backend_type", "")).lower()
                ):  # Dawn (and Chrome) leave f16 off on NVIDIA's Vulkan driver by default
                    hint = (
                        " (Dawn gives it there with KVDSL_DAWN_ENABLE=vulkan_enable_f16_on_nvidia)"
                    )
                raise FeatureError(
                    f"the kernel enables {extension} but adapter '{a.info['device']}' "
                    f"({a.info['backend_type']}) has no '{feature}' feature{hint}"
                )
            features.append(feature)
        limits = requested_limits()
        label = "kvdsl" + "".join(f"-{e}" for e, _, on in wanted if on)
        # WebGPU lets an adapter make one device (Dawn enforces it, wgpu-native does not): the
        # first device takes the process's adapter, each later one a fresh adapter.
        source = a if not _consumed else _request_adapter()
        _consumed.append(key)
        _devices[key] = source.request_device_sync(
            label=label, required_features=features, required_limits=limits
        )
    return _devices[key]


def max_workgroups_per_dimension() -> int:
    """The per-dimension workgroup limit every device here has."""
    return device().limits["max-compute-workgroups-per-dimension"]


def compile_error(wgsl: str, message: str) -> CompileError:
    """A :class:`CompileError` for naga's ``message``, pointing at the WGSL line it names."""
    m = _SPAN.search(message)
    if m is None:
        return CompileError(message)
    line, column = int(m.group(1)), int(m.group(2))
    lines = wgsl.splitlines()
    source = lines[line - 1] if 0 < line <= len(lines) else ""
    return CompileError(message, line, column, source)


def _layout_entries(bindings: tuple[Binding, ...], has_params: bool) -> list[dict]:
    kinds = {"read": "read-only-storage", "read_write": "storage"}
    entries = [
        {
            "binding": i,
            "visibility": wgpu.ShaderStage.COMPUTE,
            "buffer": {"type": kinds[b.access]},
        }
        for i, b in enumerate(bindings)
    ]
    if has_params:
        entries.append(
            {
                "binding": len(bindings),
                "visibility": wgpu.ShaderStage.COMPUTE,
                "buffer": {"type": "uniform"},
            }
        )
    return entries


def pipeline(
    wgsl: str,
    bindings: tuple[Binding, ...] | None,
    has_params: bool,
    label: str = "kernel",
    entry_point: str | None = "main",
) -> Pipeline:
    """The compute pipeline for ``wgsl`` (entry point ``main``, or with None the module's one
    compute entry point, whatever its name), compiled once per text.

    With ``bindings`` the layout is explicit (storage bindings numbered in order, then the params
    uniform), so a module whose declarations disagree with the interface fails to compile; with
    None the layout is naga's automatic one.
    """
    accesses = None if bindings is None else tuple(b.access for b in bindings)
    key = (wgsl, accesses, has_params, entry_point, LOOP_BOUNDING)
    if key not in _pipelines:
        dev = device(*extensions(wgsl))
        try:
            module = shader_module(dev, label, shader_source(wgsl))
            if bindings is None:
                layout = "auto"
            else:
                bgl = dev.create_bind_group_layout(entries=_layout_entries(bindings, has_params))
                layout = dev.create_pipeline_layout(bind_group_layouts=[bgl])
            stage = {"module": module} | ({"entry_point": entry_point} if entry_point else {})
            pipe = dev.create_compute_pipeline(label=label, layout=layout, compute=stage)
        except wgpu.GPUError as e:
            raise compile_error(wgsl, str(e)) from None
        bgl = pipe.get_bind_group_layout(0) if bindings is None else bgl
        _pipelines[key] = Pipeline(dev, pipe, bgl)
    return _pipelines[key]


def shader_module(dev: wgpu.GPUDevice, label: str, code: str) -> wgpu.GPUShaderModule:
    """``code``'s module on ``dev``; without :data:`LOOP_BOUNDING`, created trusted (bounds
    checks kept, loops left unbounded), which only wgpu-native offers."""
    if LOOP_BOUNDING:
        return dev.create_shader_module(label=label, code=code)
    if IMPLEMENTATION != "wgpu-native":
        raise DeviceError(
            "KVDSL_LOOP_BOUNDING=0 needs wgpu-native: it turns off naga's loop counters, "
            f"and {IMPLEMENTATION} compiles with Tint"
        )
    from wgpu.backends.wgpu_native._ffi import lib

    return trusted_module(dev, label, code, lib.WGPUShaderRuntimeChecks_BoundsChecks)


def trusted_module(dev: wgpu.GPUDevice, label: str, code: str, checks: int) -> wgpu.GPUShaderModule:
    """``code``'s module created through wgpu-native's ``wgpuDeviceCreateShaderModuleTrusted``
    with the runtime checks ``checks`` (``WGPUShaderRuntimeChecks`` flags) alone."""
    from wgpu.backends.wgpu_native import _api
    from wgpu.backends.wgpu_native._ffi import ffi, lib

    source = _api.new_struct_p("WGPUShaderSourceWGSL *", code=_api.to_c_string_view(code))
    source[0].chain.next = ffi.NULL
    source[0].chain.sType = lib.WGPUSType_ShaderSourceWGSL
    descriptor = _api.new_struct_p(
        "WGPUShaderModuleDescriptor *",
        nextInChain=ffi.cast("WGPUChainedStruct *", source),
        label=_api.to_c_string_view(label),
    )
    handle = _api.libf.wgpuDeviceCreateShaderModuleTrusted(dev._internal, descriptor, checks)
    if handle == ffi.NULL:
        raise DeviceError("wgpuDeviceCreateShaderModuleTrusted returned no module")
    return _api.GPUShaderModule(label, handle, dev)


def compile_wgsl(wgsl: str) -> None:
    """Compile ``wgsl`` under naga (shader module and pipeline of its one compute entry point,
    whatever its name, as WebGPU allows); raise :class:`CompileError`."""
    pipeline(wgsl, None, False, entry_point=None)


def adapter_info() -> dict:
    """What runs the kernels: vendor, device, backend, driver and the limits that matter."""
    a = adapter()
    info = a.info
    dev = device()
    return {
        "vendor": info["vendor"],
        "device": info["device"],
        "description": info["description"],
        "architecture": info["architecture"],
        "adapter_type": info["adapter_type"],
        "backend": info["backend_type"],
        "shader_f16": "shader-f16" in a.features,
        "subgroups": bool({"subgroup", "subgroups"} & set(a.features)),
        "implementation": IMPLEMENTATION,
        "loop_bounding": LOOP_BOUNDING,
        # Dawn's toggles set beyond the default (KVDSL_DAWN_ENABLE, KVDSL_DAWN_DISABLE)
        "dawn_toggles": DAWN_TOGGLES,
        "timestamp_query": "timestamp-query" in a.features,
        "limits": {k: dev.limits[k] for k in WEBGPU_LIMITS},
        "adapter_limits": {k: a.limits[k] for k in WEBGPU_LIMITS},
    }
