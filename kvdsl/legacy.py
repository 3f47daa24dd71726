"""The legacy bridge: the legacy template's variables → a kvdsl config.

A host that rendered ``kv_cache.wgsl.jinja`` passes the same variables, with the same names and
nesting (``mode``/``modeSpec``, ``device.adapterInfo.vendor``, ``tunables.COPY_WORKGROUP_SIZE``,
``DISPATCH_FOLD_WIDTH``, ``headDim``, ``kvHeads`` ...), to :func:`config_from_vars` and gets the
config of the kvdsl kernel with the template's interface: binding names and element types,
params field names, workgroup size and dispatch geometry. Everything but
``env.wgsl.resourceDeclarations`` is read; kvdsl declares its bindings itself.

Variables the template never reads, combinations it cannot produce and values that contradict
each other (``kvHidden != kvHeads * headDim``, ``half != headDim / 2`` ...) are rejected with a
:class:`~kvdsl.kernels.config.ConfigError` naming the variable.
"""

from __future__ import annotations

from typing import Any, Callable

from kvdsl.kernels.build import BuildConfig
from kvdsl.kernels.config import (
    ConfigError,
    Element,
    KernelConfig,
    ShareRegion,
    ShiftRegion,
    Walk,
    require,
)
from kvdsl.kernels.copy import CopyConfig
from kvdsl.kernels.merge import MergeConfig
from kvdsl.kernels.merge_share import MergeShareConfig
from kvdsl.kernels.quant import AppendQuantConfig, BuildQuantConfig
from kvdsl.kernels.transpose import TransposeConfig
from kvdsl.kernels.window_shift import WindowShiftConfig

#: Every variable the template reads (``env`` carries only the host's resource declarations).
KNOWN = frozenset(
    {
        "mode", "modeSpec", "device", "tunables", "copyWorkgroupSize", "DISPATCH_FOLD_WIDTH",
        "shareRegion", "shiftRegion", "presentVec4", "hasRotary", "hasKNorm", "bits", "qmin",
        "qmax", "packed", "headDim", "kvHeads", "kvNumHeads", "half", "qkEps", "headDimV4",
        "kvHiddenV4", "kvHidden", "inputScalar", "presentScalar", "presentElement", "zeroScalar",
        "env",
    }
)  # fmt: skip

BRIDGES: dict[str, Callable[["Vars"], KernelConfig]] = {}


class Vars:
    """Read access to template variables that records what was read and checks types."""

    def __init__(self, data: dict[str, Any]) -> None:
        unknown = sorted(set(data) - KNOWN)
        require(not unknown, unknown[0] if unknown else "", data.get(unknown[0]) if unknown else None,
              "a variable the template reads: " + ", ".join(sorted(KNOWN - {"env"})))  # fmt: skip
        self.data = data

    def get(self, path: str, default: Any = None, kind: type | tuple = object) -> Any:
        """The variable at dotted ``path`` (``device.adapterInfo.vendor``) or ``default``."""
        node: Any = self.data
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        if kind is int:
            require(isinstance(node, int) and not isinstance(node, bool), path, node, "an integer")
        elif kind is bool:
            require(node in (True, False, 0, 1), path, node, "true or false")
            node = bool(node)
        elif kind is not object:
            require(isinstance(node, kind), path, node, f"a {getattr(kind, '__name__', kind)}")
        return node

    def need(self, path: str, kind: type | tuple = object) -> Any:
        """A variable the mode cannot be rendered without."""
        value = self.get(path, None, kind)
        require(value is not None, path, None, "a value: the template reads it for this mode")
        return value

    def agree(self, path: str, expected: Any, how: str) -> None:
        """If ``path`` is given, it must equal ``expected`` (derived as ``how`` says)."""
        value = self.get(path)
        if value is not None:
            require(value == expected, path, value, f"{expected!r} ({how})")


def mode_of(v: Vars) -> str:
    """The mode the template renders: ``modeSpec`` wins over ``mode``; the default is transpose."""
    mode = v.get("modeSpec") or v.get("mode") or "transpose"
    require(mode in BRIDGES, "mode", mode, "one of " + ", ".join(sorted(BRIDGES)))
    return mode


def config_from_vars(data: dict[str, Any]) -> KernelConfig:
    """The kvdsl config equivalent to rendering the template with ``data``."""
    v = Vars(data)
    return BRIDGES[mode_of(v)](v)


def _present(v: Vars) -> str:
    return v.get("presentScalar") or v.get("inputScalar") or "f32"


def _bridge(mode: str):
    def register(fn: Callable[[Vars], KernelConfig]) -> Callable[[Vars], KernelConfig]:
        BRIDGES[mode] = fn
        return fn

    return register


@_bridge("transpose")
def _transpose(v: Vars) -> TransposeConfig:
    heads = v.need("kvNumHeads", int)
    vec4 = v.get("presentVec4", False, bool)
    head_dim = v.get("headDim", None, int)
    if head_dim is None:
        require(vec4, "headDim", None, "a value: the scalar transpose reads it")
        head_dim = 4 * v.need("headDimV4", int)
    present, source = _present(v), v.get("inputScalar") or "f32"
    if vec4:
        v.agree("headDimV4", head_dim // 4, "headDim / 4")
        v.agree("kvHiddenV4", heads * head_dim // 4, "kvNumHeads * headDim / 4")
        v.agree("presentElement", f"vec4<{present}>", "vec4 of presentScalar")
    else:
        v.agree("kvHidden", heads * head_dim, "kvNumHeads * headDim")
        v.agree("presentElement", present, "presentScalar")
    return TransposeConfig(
        kv_heads=heads,
        head_dim=head_dim,
        vec4=vec4,
        input_type=source,
        present_type=present,
        workgroup_size=v.need("copyWorkgroupSize", int),
        fold=v.need("DISPATCH_FOLD_WIDTH", int),
    )


def walk_for_vendor(v: Vars) -> Walk:
    """The template's walk choice: per-row on Apple GPUs, cooperative everywhere else."""
    vendor = v.get("device.adapterInfo.vendor", "", str)
    return Walk.PER_ROW if vendor == "apple" else Walk.COOPERATIVE


def workgroup_size(v: Vars) -> int:
    return v.need("tunables.COPY_WORKGROUP_SIZE", int)


def _shape(v: Vars) -> dict[str, Any]:
    """Fields every mode but transpose and copy reads the same way."""
    return {
        "kv_heads": v.need("kvHeads", int),
        "head_dim": v.need("headDim", int),
        "workgroup_size": workgroup_size(v),
        "fold": v.need("DISPATCH_FOLD_WIDTH", int),
    }


def _rotary(v: Vars, used: bool = True) -> bool:
    """``hasRotary``, with ``half`` checked against ``headDim / 2`` when the mode declares it."""
    rotary = v.get("hasRotary", False, bool)
    if rotary and used:
        v.agree("half", v.need("headDim", int) // 2, "headDim / 2")
    return rotary


def _k_norm(v: Vars) -> dict[str, Any]:
    k_norm = v.get("hasKNorm", False, bool)
    if not k_norm:
        return {"k_norm": False}
    eps = v.need("qkEps", (int, float))
    require(not isinstance(eps, bool) and eps > 0, "qkEps", eps, "a positive number")
    return {"k_norm": True, "eps": float(eps)}


@_bridge("copy")
def _copy(v: Vars) -> CopyConfig:
    return CopyConfig(
        head_dim=v.need("headDim", int),
        walk=walk_for_vendor(v),
        present_type=_present(v),
        workgroup_size=workgroup_size(v),
        fold=v.need("DISPATCH_FOLD_WIDTH", int),
    )


@_bridge("merge")
def _merge(v: Vars) -> MergeConfig:
    present = _present(v)
    return MergeConfig(
        **_shape(v), walk=walk_for_vendor(v), present_type=present, input_type=present
    )


@_bridge("merge_share")
def _merge_share(v: Vars) -> MergeShareConfig:
    append = v.get("shareRegion") == "append"
    walk = walk_for_vendor(v)
    if append and walk is Walk.PER_ROW:
        # Apple's append pass: cooperative for fewer than WG rows, else per row (one kernel).
        walk = Walk.HYBRID
    present = _present(v)
    return MergeShareConfig(
        **_shape(v),
        region=ShareRegion.APPEND if append else ShareRegion.RETAIN,
        walk=walk,
        rotary=_rotary(v, append) and append,
        present_type=present,
        input_type=present,
    )


@_bridge("window_shift")
def _window_shift(v: Vars) -> WindowShiftConfig:
    region = v.get("shiftRegion") or "all"
    known = [r.value for r in ShiftRegion]
    require(region in known, "shiftRegion", region, "all, shift or append")
    region = ShiftRegion(region)
    rotary = _rotary(v, region == "append")
    if region == "append":
        require(rotary, "hasRotary", rotary, "true for shiftRegion='append': the template "
              "always rotates there and declares HALF only with hasRotary (it does not compile "
              "otherwise); kvdsl's unrotated append is WindowShiftConfig(region='append')")  # fmt: skip
    if region == "all":
        require(not rotary, "hasRotary", rotary, "false for shiftRegion='all': the template "
              "appends K unrotated there although its 'append' region rotates; run "
              "shiftRegion='shift' and then 'append' for a rotary cache")  # fmt: skip
    present = _present(v)
    v.agree("zeroScalar", present, "presentScalar: the cleared rows' element type")
    return WindowShiftConfig(
        **_shape(v),
        region=region,
        rotary=rotary and region == "append",
        present_type=present,
        input_type=present,
    )


@_bridge("build")
def _build(v: Vars) -> BuildConfig:
    return BuildConfig(
        **_shape(v),
        **_k_norm(v),
        rotary=_rotary(v),
        input_type=Element.F32,
        present_type=_present(v),
    )


def _quant_fields(v: Vars) -> dict[str, Any]:
    bits = v.need("bits", int)
    require(bits in (4, 8), "bits", bits, "8 or 4 (the template takes any other value as 4)")
    head_dim = v.need("headDim", int)
    v.agree(
        "packed",
        head_dim if bits == 8 else head_dim // 2,
        "headDim words for 8 bits, headDim / 2 for 4",
    )
    fields: dict[str, Any] = {"bits": bits}
    for name in ("qmin", "qmax"):
        value = v.get(name)
        if value is not None:
            ok = (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and value == int(value)
            )
            require(ok, name, value, "an integer value (the template prints it as an f32 const)")
            fields[name] = int(value)
    return fields


@_bridge("build_quant")
def _build_quant(v: Vars) -> BuildQuantConfig:
    return BuildQuantConfig(**_shape(v), **_k_norm(v), **_quant_fields(v), rotary=_rotary(v))


@_bridge("append_quant")
def _append_quant(v: Vars) -> AppendQuantConfig:
    return AppendQuantConfig(**_shape(v), **_k_norm(v), **_quant_fields(v), rotary=_rotary(v))


__all__ = ["BRIDGES", "ConfigError", "KNOWN", "Vars", "config_from_vars", "mode_of"]
