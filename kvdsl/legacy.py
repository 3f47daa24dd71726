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

from kvdsl.kernels.config import ConfigError, check
from kvdsl.kernels.copy import CopyConfig
from kvdsl.kernels.transpose import TransposeConfig

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

MODES = ("transpose", "copy")
BRIDGES: dict[str, Callable[["Vars"], Any]] = {}


class Vars:
    """Read access to template variables that records what was read and checks types."""

    def __init__(self, data: dict[str, Any]) -> None:
        unknown = sorted(set(data) - KNOWN)
        check(not unknown, unknown[0] if unknown else "", data.get(unknown[0]) if unknown else None,
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
            check(isinstance(node, int) and not isinstance(node, bool), path, node, "an integer")
        elif kind is bool:
            check(node in (True, False, 0, 1), path, node, "true or false")
            node = bool(node)
        elif kind is not object:
            check(isinstance(node, kind), path, node, f"a {getattr(kind, '__name__', kind)}")
        return node

    def need(self, path: str, kind: type | tuple = object) -> Any:
        """A variable the mode cannot be rendered without."""
        value = self.get(path, None, kind)
        check(value is not None, path, None, "a value: the template reads it for this mode")
        return value

    def agree(self, path: str, expected: Any, how: str) -> None:
        """If ``path`` is given, it must equal ``expected`` (derived as ``how`` says)."""
        value = self.get(path)
        if value is not None:
            check(value == expected, path, value, f"{expected!r} ({how})")


def mode_of(v: Vars) -> str:
    """The mode the template renders: ``modeSpec`` wins over ``mode``; the default is transpose."""
    mode = v.get("modeSpec") or v.get("mode") or "transpose"
    check(mode in BRIDGES, "mode", mode, "one of " + ", ".join(sorted(BRIDGES)))
    return mode


def config_from_vars(data: dict[str, Any]) -> Any:
    """The kvdsl config equivalent to rendering the template with ``data``."""
    v = Vars(data)
    return BRIDGES[mode_of(v)](v)


def _present(v: Vars) -> str:
    return v.get("presentScalar") or v.get("inputScalar") or "f32"


def _bridge(mode: str):
    def register(fn: Callable[[Vars], Any]) -> Callable[[Vars], Any]:
        BRIDGES[mode] = fn
        return fn

    return register


@_bridge("transpose")
def _transpose(v: Vars) -> TransposeConfig:
    heads = v.need("kvNumHeads", int)
    vec4 = v.get("presentVec4", False, bool)
    head_dim = v.get("headDim", None, int)
    if head_dim is None:
        check(vec4, "headDim", None, "a value: the scalar transpose reads it")
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


def walk_for_vendor(v: Vars) -> str:
    """The template's walk choice: per-row on Apple GPUs, cooperative everywhere else."""
    vendor = v.get("device.adapterInfo.vendor", "", str)
    return "per_row" if vendor == "apple" else "cooperative"


def workgroup_size(v: Vars) -> int:
    return v.need("tunables.COPY_WORKGROUP_SIZE", int)


@_bridge("copy")
def _copy(v: Vars) -> CopyConfig:
    return CopyConfig(
        head_dim=v.need("headDim", int),
        walk=walk_for_vendor(v),
        present_type=_present(v),
        workgroup_size=workgroup_size(v),
        fold=v.need("DISPATCH_FOLD_WIDTH", int),
    )


__all__ = ["BRIDGES", "ConfigError", "KNOWN", "Vars", "config_from_vars", "mode_of"]
