"""The process's wgpu adapter, its devices (one per feature set) and a pipeline cache.

Devices are created with WebGPU's default limits (8 storage buffers per stage, 65535 workgroups
per dimension, ...), not the adapter's, so a kernel that runs here also runs in a browser: they
are requested explicitly, since wgpu-native gives a device requested with no limits the adapter's
own, where WebGPU (and so a browser) gives the defaults. A kernel that needs more than a default
(:func:`kvdsl.ir.features.limits`, ``index.json``'s ``limits``) runs on a device requested with
exactly that limit raised to its need (:func:`device`'s ``limits``); past the adapter's value it is
a :class:`~kvdsl.runtime.contract.LimitError`. :func:`configure` (an explicit opt-in, for
benchmarks whose buffers pass 128 MiB) raises limits for every device. A
device gets ``shader-f16`` only when a module says ``enable f16;``, ``subgroups`` only when it
says ``enable subgroups;``, the feature of an extension of the vertex and fragment stages
(:data:`STAGE_FEATURES`) only when it enables that extension (WGSL takes the directive, naga and
Tint alike, only on a device with the feature), and ``timestamp-query`` whenever the adapter has it
(it changes nothing a shader can do).

naga (wgpu 0.32) implements the subgroup built-ins but rejects the standard ``enable subgroups;``
directive (gfx-rs/wgpu#5555) that Tint, and so every browser, requires: kvdsl emits the standard
module and :func:`naga_source` takes ``subgroups`` out of its enable directives (in a list, over
lines, around comments) before naga sees it.

The WebGPU implementation, wgpu-native or Dawn, and its settings are a
:class:`~kvdsl.runtime.webgpu.WebGPU` value chosen by :func:`use_webgpu` before the first GPU
work (the default, wgpu-native, otherwise); :func:`wgpu_module` loads its library then, once.
Dawn compiles WGSL with Tint and takes ``enable subgroups;`` as written.
"""

from __future__ import annotations

import functools
import os
import re
import tempfile
from dataclasses import dataclass, replace
from types import ModuleType
from typing import TYPE_CHECKING, Mapping

from kvdsl.ir.tree import Binding
from kvdsl.ir.types import READ_WRITE_FORMATS, SampledTexture, Sampler
from kvdsl.runtime.errors import CompileError, DeviceError, FeatureError, WebGPULoaded
from kvdsl.runtime.external import needs_dawn
from kvdsl.runtime.webgpu import ALWAYS_DISABLED, WebGPU, check_toggles

if TYPE_CHECKING:
    import wgpu

_webgpu: WebGPU | None = None  # use_webgpu's choice; the default where none was made
_wgpu: ModuleType | None = None  # the library loaded for it


def use_webgpu(webgpu: WebGPU) -> None:
    """Make ``webgpu`` this process's WebGPU implementation and settings.

    Call it before the first GPU work; afterwards only :attr:`WebGPU.loop_bounding` may change
    (it is part of each pipeline's cache key), and asking for another implementation or other
    Dawn toggles raises :class:`WebGPULoaded`: the library is loaded once per process.
    """
    global _webgpu
    if _wgpu is not None and replace(webgpu, loop_bounding=True) != replace(
        current_webgpu(), loop_bounding=True
    ):
        loaded = current_webgpu()
        if webgpu.implementation != loaded.implementation:
            raise WebGPULoaded(
                f"this process already runs kernels on {loaded.implementation}; "
                "the implementation is chosen once per process"
            )
        raise WebGPULoaded(
            f"this process already runs kernels on dawn with toggles {loaded.dawn_toggles}; "
            "Dawn's toggles are chosen once per process"
        )
    _webgpu = webgpu


def current_webgpu() -> WebGPU:
    """The process's WebGPU implementation and settings: :func:`use_webgpu`'s, else the
    default (wgpu-native)."""
    return _webgpu if _webgpu is not None else WebGPU()


def wgpu_module() -> ModuleType:
    """The ``wgpu`` module of :func:`current_webgpu`'s implementation (wgpu-py's, or
    wgpudawn's, which then answers ``import wgpu`` in this process too), loaded on first use."""
    global _wgpu, _webgpu
    if _wgpu is None:
        webgpu = _webgpu = current_webgpu()
        if webgpu.implementation == "dawn":
            try:
                import wgpudawn
            except ImportError as e:
                raise DeviceError(
                    "WebGPU implementation 'dawn' needs the wgpudawn package "
                    "(pip install wgpudawn)"
                ) from e
            check_toggles(webgpu.dawn_enable, f"dawn_enable={webgpu.dawn_enable!r}")
            check_toggles(webgpu.dawn_disable, f"dawn_disable={webgpu.dawn_disable!r}")
            wgpudawn.install_as_wgpu()
            from wgpudawn.backends.dawn.extras import set_instance_extras

            set_instance_extras(
                disable_toggles=[*ALWAYS_DISABLED, *webgpu.dawn_disable],
                enable_toggles=list(webgpu.dawn_enable),
            )
        import wgpu  # wgpudawn's under Dawn (install_as_wgpu)

        _wgpu = wgpu
    return _wgpu


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


#: WGSL's extensions of the vertex and fragment stages, which a compute module may enable, each
#: with the device feature WebGPU takes its directive under (the same name in wgpu-native).
STAGE_FEATURES = {
    "clip_distances": "clip-distances",
    "dual_source_blending": "dual-source-blending",
    "primitive_index": "primitive-index",
}


def stage_extensions(wgsl: str) -> tuple[str, ...]:
    """The extensions of :data:`STAGE_FEATURES` the module enables, in that table's order."""
    named = {n for _, _, names in _enables(wgsl) for n in names}
    return tuple(e for e in STAGE_FEATURES if e in named)


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
    return wgsl if current_webgpu().implementation == "dawn" else naga_source(wgsl)


@dataclass
class Pipeline:
    """A compiled compute pipeline and the bind group layout its bindings go through."""

    device: wgpu.GPUDevice
    pipeline: wgpu.GPUComputePipeline
    layout: wgpu.GPUBindGroupLayout


_adapter: wgpu.GPUAdapter | None = None
_devices: dict[tuple, wgpu.GPUDevice] = {}  # device()'s keys
_pipelines: dict[tuple, Pipeline] = {}
_raised_limits: dict[str, int] = {}
_consumed: list[tuple] = []  # the devices made so far, in order


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
    gpu, implementation = wgpu_module().gpu, current_webgpu().implementation
    try:
        a = gpu.request_adapter_sync(power_preference="high-performance")
    except Exception as e:  # wgpu raises plain RuntimeError with its own text
        raise DeviceError(f"no {implementation} adapter: {e}") from e
    if a is None:
        raise DeviceError(f"no {implementation} adapter found")
    if implementation == "wgpu-native" and _opengl(a):
        # A machine with Mesa's GL but no Vulkan driver offers llvmpipe through OpenGL only.
        others = [b for b in gpu.enumerate_adapters_sync() if not _opengl(b)]
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


def limit_name(name: str) -> str:
    """A limit's name as wgpu-py spells it (``max-storage-buffers-per-shader-stage``) from its
    JavaScript name (``maxStorageBuffersPerShaderStage``)."""
    return re.sub(r"[A-Z]", lambda m: "-" + m.group(0).lower(), name)


def device(
    f16: bool = False,
    subgroups: bool = False,
    limits: Mapping[str, int] | None = None,
    stages: tuple[str, ...] = (),
) -> wgpu.GPUDevice:
    """The device for modules that do or do not enable ``f16`` and ``subgroups``, enable the
    extensions ``stages`` of :data:`STAGE_FEATURES`, and need ``limits`` beyond WebGPU's
    defaults (JavaScript names, :func:`kvdsl.ir.features.limits`): one device per such set,
    requested with each of those limits at exactly its need."""
    need = tuple(sorted((limits or {}).items()))
    key = (f16, subgroups, need) + ((stages,) if stages else ())
    if key not in _devices:
        a = adapter()
        raised = {}
        for name, n in need:
            have = a.limits[limit_name(name)]
            if n > have:
                from kvdsl.runtime.contract import LimitError

                raise LimitError(
                    f"the kernel needs {name} = {n}; adapter '{a.info['device']}' allows {have}"
                )
            raised[limit_name(name)] = n
        features = [f for f in ("timestamp-query",) if f in a.features]
        # wgpu-native 0.32 names the subgroup feature "subgroup"; WebGPU (Dawn) "subgroups".
        sg = "subgroups" if "subgroups" in a.features else "subgroup"
        wanted = [("f16", "shader-f16", f16), ("subgroups", sg, subgroups)]
        wanted += [(e, STAGE_FEATURES[e], True) for e in stages]
        for extension, feature, on in wanted:
            if not on:
                continue
            if feature not in a.features:
                hint = ""
                if (
                    feature == "shader-f16"
                    and current_webgpu().implementation == "dawn"
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
        requested = requested_limits()
        requested |= {k: max(n, requested[k]) for k, n in raised.items()}
        label = "kvdsl" + "".join(f"-{e}" for e, _, on in wanted if on)
        # WebGPU lets an adapter make one device (Dawn enforces it, wgpu-native does not): the
        # first device takes the process's adapter, each later one a fresh adapter.
        source = a if not _consumed else _request_adapter()
        _consumed.append(key)
        _devices[key] = source.request_device_sync(
            label=label, required_features=features, required_limits=requested
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


def _layout_entries(
    bindings: tuple[Binding, ...], has_params: bool | int, textures: tuple = ()
) -> list[dict]:
    wgpu = wgpu_module()
    kinds = {"read": "read-only-storage", "read_write": "storage"}
    entries = [
        {
            "binding": i,
            "visibility": wgpu.ShaderStage.COMPUTE,
            "buffer": {"type": kinds[b.access]},
        }
        for i, b in enumerate(bindings)
    ]
    for k in range(int(has_params)):  # the params uniform, then any others
        entries.append(
            {
                "binding": len(bindings) + k,
                "visibility": wgpu.ShaderStage.COMPUTE,
                "buffer": {"type": "uniform"},
            }
        )
    for k, t in enumerate(textures, len(bindings) + int(has_params)):  # then the textures
        if isinstance(t.ty, Sampler):  # WebGPU's default: nearest, as the textures' sample
            # types (unfilterable-float) need; a sampler_comparison's compares (COMPARE).
            sampler = {"type": "comparison" if t.ty.comparison else "non-filtering"}
            entries.append(
                {"binding": k, "visibility": wgpu.ShaderStage.COMPUTE, "sampler": sampler}
            )
            continue
        if isinstance(t.ty, SampledTexture) and t.ty.external:  # Dawn's (pipeline() checks)
            entries.append(
                {"binding": k, "visibility": wgpu.ShaderStage.COMPUTE, "external_texture": {}}
            )
            continue
        if isinstance(t.ty, SampledTexture):
            sample = t.ty.binding_sample_type
            view = t.ty.view_dimension
            ms = t.ty.multisampled
            texture = {"sample_type": sample, "view_dimension": view, "multisampled": ms}
            entries.append(
                {"binding": k, "visibility": wgpu.ShaderStage.COMPUTE, "texture": texture}
            )
            continue
        if t.ty.access == "read_write" and t.ty.format not in READ_WRITE_FORMATS:
            raise DeviceError(
                f"texture '{t.name}' is {t.ty}: WebGPU binds a storage texture read_write only "
                f"in the formats {', '.join(READ_WRITE_FORMATS)} (the interpreter runs the "
                "kernel: kvdsl run --backend interp)"
            )
        access = {"write": "write-only", "read": "read-only", "read_write": "read-write"}
        entries.append(
            {
                "binding": k,
                "visibility": wgpu.ShaderStage.COMPUTE,
                "storage_texture": {
                    "access": access[t.ty.access],
                    "format": t.ty.format,
                    "view_dimension": t.ty.view_dimension,
                },
            }
        )
    return entries


def pipeline(
    wgsl: str,
    bindings: tuple[Binding, ...] | None,
    has_params: bool | int,
    label: str = "kernel",
    entry_point: str | None = "main",
    limits: Mapping[str, int] | None = None,
    textures: tuple = (),
) -> Pipeline:
    """The compute pipeline for ``wgsl`` (entry point ``main``, or with None the module's one
    compute entry point, whatever its name), compiled once per text, on the device with the
    ``limits`` the module needs beyond the defaults (:func:`device`).

    With ``bindings`` the layout is explicit (storage bindings numbered in order, then the params
    uniform; ``has_params`` may count the uniforms, params and others), so a module whose declarations disagree with the interface fails to compile; with
    None the layout is naga's automatic one.
    """
    implementation = current_webgpu().implementation
    for t in textures:
        if getattr(t.ty, "external", False) and implementation != "dawn":
            raise DeviceError(needs_dawn(t, implementation))
    accesses = None if bindings is None else tuple(b.access for b in bindings)
    wgpu = wgpu_module()
    need = tuple(sorted((limits or {}).items()))
    key = (wgsl, accesses, has_params, entry_point, need, textures, current_webgpu().loop_bounding)
    if key not in _pipelines:
        dev = device(*extensions(wgsl), dict(need), stage_extensions(wgsl))
        try:
            module = shader_module(dev, label, shader_source(wgsl))
            if bindings is None:
                layout = "auto"
            else:
                entries = _layout_entries(bindings, has_params, textures)
                bgl = dev.create_bind_group_layout(entries=entries)
                layout = dev.create_pipeline_layout(bind_group_layouts=[bgl])
            stage = {"module": module} | ({"entry_point": entry_point} if entry_point else {})
            pipe = dev.create_compute_pipeline(label=label, layout=layout, compute=stage)
        except wgpu.GPUError as e:
            raise compile_error(wgsl, str(e)) from None
        bgl = pipe.get_bind_group_layout(0) if bindings is None else bgl
        _pipelines[key] = Pipeline(dev, pipe, bgl)
    return _pipelines[key]


def shader_module(dev: wgpu.GPUDevice, label: str, code: str) -> wgpu.GPUShaderModule:
    """``code``'s module on ``dev``; without :attr:`WebGPU.loop_bounding` (wgpu-native only),
    created trusted: bounds checks kept, loops left unbounded."""
    if current_webgpu().loop_bounding:
        return dev.create_shader_module(label=label, code=code)
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


def compile_wgsl(wgsl: str, limits: Mapping[str, int] | None = None) -> None:
    """Compile ``wgsl`` under naga (shader module and pipeline of its one compute entry point,
    whatever its name, as WebGPU allows) on a device with the ``limits`` it needs beyond the
    defaults (:func:`device`); raise :class:`CompileError`."""
    pipeline(wgsl, None, False, entry_point=None, limits=limits)


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
        "implementation": current_webgpu().implementation,
        "loop_bounding": current_webgpu().loop_bounding,
        "dawn_toggles": current_webgpu().dawn_toggles,  # set beyond the default
        "timestamp_query": "timestamp-query" in a.features,
        "limits": {k: dev.limits[k] for k in WEBGPU_LIMITS},
        "adapter_limits": {k: a.limits[k] for k in WEBGPU_LIMITS},
    }
