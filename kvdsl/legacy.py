"""The legacy bridge: the legacy template's variables → a kvdsl config.

A host that rendered ``kv_cache.wgsl.jinja`` passes the same variables, with the same names and
nesting (``mode``/``modeSpec``, ``device.adapterInfo.vendor``, ``tunables.COPY_WORKGROUP_SIZE``,
``DISPATCH_FOLD_WIDTH``, ``headDim``, ``kvHeads`` ...), to :func:`config_from_vars` and gets the
config of the kvdsl kernel with the template's interface: binding names and element types,
params field names, workgroup size and dispatch geometry. Everything but
``env.wgsl.resourceDeclarations`` is read; kvdsl declares its bindings itself.

Variables the template never reads, combinations it cannot produce and values that contradict
each other (``kvHidden != kvHeads * headDim``, ``half > headDim / 2`` ...) are rejected with a
:class:`~kvdsl.kernels.config.ConfigError` naming the variable.

The template's quantising kernels with rotary bind 9 or 10 storage buffers, past WebGPU's
default 8 per stage. The template does not read its device's limits, so the host states them:
``max_storage_buffers`` (``kvdsl legacy --max-storage-buffers N``), the device's
``maxStorageBuffersPerShaderStage``. Where the template's bindings fit it, the bridge gives the
drop-in; otherwise the packed kernel of at most 8 (:class:`~kvdsl.kernels.config.Bindings`),
whose bindings differ from the template's, as :func:`binding_note` says.

The template itself is rendered only in tests and benchmarks.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any, Callable

import numpy as np

from kvdsl.kernels.build import BuildConfig
from kvdsl.kernels.config import (
    MAX_HIDDEN,
    MAX_STORAGE_BUFFERS,
    Bindings,
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
from kvdsl.kernels.quant import AppendQuantConfig, BuildQuantConfig, QuantConfig, storage_buffers
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

#: What a stated storage-buffer limit may be, in words.
MAX_STORAGE_BUFFERS_ALLOWED = (
    f"a whole number, {MAX_STORAGE_BUFFERS} or more: the device's "
    f"maxStorageBuffersPerShaderStage (WebGPU guarantees {MAX_STORAGE_BUFFERS})"
)


class Vars:
    """Read access to template variables that records what was read and checks types;
    ``max_storage_buffers`` is the host's device limit (WebGPU's default 8 when not stated)."""

    def __init__(self, data: dict[str, Any], max_storage_buffers: int | None = None) -> None:
        unknown = sorted(set(data) - KNOWN)
        require(not unknown, unknown[0] if unknown else "", data.get(unknown[0]) if unknown else None,
              "a variable the template reads: " + ", ".join(sorted(KNOWN - {"env"})))  # fmt: skip
        self.data = data
        if max_storage_buffers is not None:
            n = max_storage_buffers
            ok = isinstance(n, int) and not isinstance(n, bool) and n >= MAX_STORAGE_BUFFERS
            require(ok, "max_storage_buffers", n, MAX_STORAGE_BUFFERS_ALLOWED)
        self.max_storage_buffers = max_storage_buffers or MAX_STORAGE_BUFFERS

    def get(self, path: str, default: Any = None, kind: type = object) -> Any:
        """The variable at dotted ``path`` (``device.adapterInfo.vendor``) or ``default``; ``kind``
        (``int``, ``bool``, ``str`` or ``object`` for any) is checked, and named in words."""
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
        elif kind is str:
            require(isinstance(node, str), path, node, "text")
        else:
            assert kind is object, kind
        return node

    def need(self, path: str, kind: type = object) -> Any:
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
    require(
        isinstance(mode, str) and mode in BRIDGES,
        "mode",
        mode,
        "one of " + ", ".join(sorted(BRIDGES)),
    )
    return mode


def config_from_vars(data: dict[str, Any], max_storage_buffers: int | None = None) -> KernelConfig:
    """The kvdsl config equivalent to rendering the template with ``data``, for a device that
    allows ``max_storage_buffers`` storage buffers per stage (WebGPU's default 8 if None)."""
    v = Vars(data, max_storage_buffers)
    mode = mode_of(v)
    try:
        return BRIDGES[mode](v)
    except ConfigError as err:  # a config's refusal, in the names of the variables it came from
        name = variable_of(mode, err.field)
        if name == err.field:
            raise
        raise ConfigError(name, err.value, err.allowed) from None


#: A config field → the template variable it is read from (:data:`TRANSPOSE_VARIABLES`:
#: transpose's own names); a field absent is a variable's own name.
VARIABLES = {
    "kv_heads": "kvHeads",
    "head_dim": "headDim",
    "kv_heads*head_dim": "kvHeads * headDim",
    "workgroup_size": "tunables.COPY_WORKGROUP_SIZE",
    "fold": "DISPATCH_FOLD_WIDTH",
    "present_type": "presentScalar",
    "input_type": "presentScalar",
    "rotary": "hasRotary",
    "rotary_half": "half",
    "k_norm": "hasKNorm",
    "eps": "qkEps",
}
TRANSPOSE_VARIABLES = VARIABLES | {
    "kv_heads": "kvNumHeads",
    "kv_heads*head_dim": "kvNumHeads * headDim",
    "workgroup_size": "copyWorkgroupSize",
    "input_type": "inputScalar",
    "vec4": "presentVec4",
}


def variable_of(mode: str, field: str) -> str:
    """The template variable (or product of variables) a config field of ``mode`` is read from
    (``field`` itself where it is a variable's name, or no variable's)."""
    if mode in ("merge_share", "window_shift") and field == "region":
        return "shareRegion" if mode == "merge_share" else "shiftRegion"
    return (TRANSPOSE_VARIABLES if mode == "transpose" else VARIABLES).get(field, field)


def json_words(value: Any) -> str:
    """``value`` as ``kvdsl legacy`` shows a template variable, which it read as JSON: JSON's
    ``null``, ``true`` and ``false`` (inside lists and objects too), anything else as Python
    writes it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(json_words(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json_words(k)}: {json_words(v)}" for k, v in value.items()) + "}"
    return repr(value)


def binding_note(cfg: KernelConfig) -> str | None:
    """Where ``cfg``'s bindings differ from the template's (the packed form of a kernel whose
    template bindings pass 8, or ``window_shift`` 'all' with rotary, which the template has no
    rotating form of), one sentence saying so and how to get the drop-in if there is one; else
    None."""
    if isinstance(cfg, WindowShiftConfig) and cfg.rotary and cfg.region is ShiftRegion.ALL:
        return (
            "bindings differ from the template's: rotary_table (cos then sin per position) is "
            "bound, which the template's 'all' region does not bind, since it appends K "
            "unrotated (docs/legacy.md, defect 2); no drop-in rotates there"
        )
    if not isinstance(cfg, QuantConfig) or cfg.bindings is not Bindings.PACKED:
        return None
    need = storage_buffers(cfg, Bindings.TEMPLATE)
    if need <= MAX_STORAGE_BUFFERS:
        return None
    return (
        f"bindings differ from the template's: rotary_table (cos then sin per position) and "
        f"kv_scale ((k, v) scale pairs) replace cos_cache, sin_cache, k_scale and v_scale, so "
        f"that the kernel binds {storage_buffers(cfg)} storage buffers, within WebGPU's default "
        f"{MAX_STORAGE_BUFFERS}; the template's drop-in binds {need}: for a device that allows "
        f"that many, pass --max-storage-buffers {need} (or more)"
    )


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


def _rotary(v: Vars, used: bool = True) -> dict[str, Any]:
    """``hasRotary`` and ``half`` as the config's ``rotary`` and ``rotary_half`` where the mode
    rotates (``used``): ``half`` unset or ``headDim / 2`` rotates the whole head; a smaller one
    rotates the first ``2 * half`` dimensions and passes the rest through (partial rotary)."""
    rotary = v.get("hasRotary", False, bool)
    if not (rotary and used):
        return {"rotary": False}
    head_dim = v.need("headDim", int)
    half = v.get("half")
    if half is None:
        return {"rotary": True}
    ok = isinstance(half, int) and not isinstance(half, bool) and 1 <= half <= head_dim // 2
    require(ok, "half", half, f"a whole number from 1 to headDim / 2 = {head_dim // 2} (the "
          "rotated pairs of a head: its first 2 * half dimensions rotate, the rest pass through)")  # fmt: skip
    return {"rotary": True, "rotary_half": None if 2 * half == head_dim else half}


def _k_norm(v: Vars) -> dict[str, Any]:
    k_norm = v.get("hasKNorm", False, bool)
    if not k_norm:
        return {"k_norm": False}
    return {"k_norm": True, "eps": qk_eps(v.need("qkEps"))}


#: WGSL's literals that an f32 const may be initialised with: decimal and hexadecimal floats
#: (an ``f`` suffix, or an ``h`` one, refused: f16) and abstract integers (no ``i``/``u`` suffix).
_DEC_FLOAT = re.compile(
    r"((?:[0-9]*\.[0-9]+|[0-9]+\.[0-9]*)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)([fh]?)"
    r"|(0|[1-9][0-9]*)([fh])"
)
_HEX_FLOAT = re.compile(r"0[xX]([0-9a-fA-F]*)\.?([0-9a-fA-F]*)(?:[pP]([+-]?[0-9]+)([fh]?))?")
_HEX_POINT_OR_P = re.compile(
    r"0[xX](?:[0-9a-fA-F]*\.[0-9a-fA-F]+|[0-9a-fA-F]+\.[0-9a-fA-F]*|[0-9a-fA-F]+(?=[pP])).*"
)
_INT = re.compile(r"0|[1-9][0-9]*|0[xX][0-9a-fA-F]+")
#: What ``qkEps`` may be, in words (its refusals say so).
EPS_EXAMPLES = "('1e-6', '1e-6f', '0.01', '1', '0x1p-20')"
EPS_ALLOWED = (
    f"a positive number, or the text of a WGSL literal for one {EPS_EXAMPLES}: the template "
    "pastes it into its f32 const QK_EPS"
)
EPS_POSITIVE = (
    f"a number above 0, given as a number or as the text of a WGSL literal {EPS_EXAMPLES}"
)
#: The normal f32 range the config's ``eps`` takes (:class:`BuildConfig`).
EPS_RANGE = (2.0**-126, 3.4e38)
_F32_MAX = Fraction(float(np.finfo(np.float32).max))


def _f32_nearest(x: Fraction) -> float:
    """``x`` (>= 0) rounded straight to the nearest f32, ties to even, as WGSL rounds an
    ``f``-suffixed literal (not through f64, which could round twice); inf past f32's range."""
    if x >= _F32_MAX + Fraction(2) ** 103:  # half an ulp past the largest f32, or more
        return math.inf
    g = np.float32(float(x))
    with np.errstate(over="ignore"):  # past the largest f32: inf, skipped below
        ups = (np.nextafter(g, np.float32(0)), g, np.nextafter(g, np.float32(np.inf)))
    near = min(
        (c for c in ups if np.isfinite(c)),
        key=lambda c: (abs(Fraction(float(c)) - x), int(c.view(np.uint32)) & 1),
    )
    return float(near)


def _f64_to_f32(x: Fraction) -> float:
    """An abstract float (f64, nearest) converted to f32 (nearest, as Tint and naga convert)."""
    if x >= 2**1024:
        return math.inf
    with np.errstate(over="ignore"):  # past the largest f32 after rounding: inf
        return float(np.float32(float(x)))


def _literal_f32(value: str) -> float:
    """The f32 that ``const QK_EPS: f32 = <value>;`` holds, or the ConfigError saying why WGSL
    (or the norm) does not take ``value``; inf past f32's range."""
    t = value.strip()
    require(not t.startswith("-"), "qkEps", value, EPS_POSITIVE)
    if _INT.fullmatch(t):  # an abstract int: an i64 converted to f32
        n = int(t, 0)
        require(n < 2**63, "qkEps", value, "an integer literal below 2^63 (WGSL's abstract "
                "integers are 64-bit)")  # fmt: skip
        return float(np.float32(n))
    dec = _DEC_FLOAT.fullmatch(t)
    hex_ = None if dec else _HEX_FLOAT.fullmatch(t)
    require(bool(dec or (hex_ and _HEX_POINT_OR_P.fullmatch(t))), "qkEps", value, EPS_ALLOWED)
    if dec:
        body, suffix = (dec.group(1), dec.group(2)) if dec.group(1) else dec.group(3, 4)
        mantissa, _, exp_text = body.lower().partition("e")
        digits = mantissa.replace(".", "")
        num, den, exp = int(digits), 10 ** (len(digits) - len(mantissa.partition(".")[0])), 10
    else:
        whole, frac, exp_text, suffix = hex_.groups()
        num, den, exp = int((whole + frac) or "0", 16), 16 ** len(frac), 2
    require(suffix != "h", "qkEps", value, "an f32 literal, not an f16 one (suffix h): QK_EPS "
            "is an f32 const")  # fmt: skip
    power = int(exp_text or 0)
    # A power far past any f32 is inf (or 0) whatever the digits; it need not be computed.
    if num == 0 or power < -(1100 + 4 * len(t)):
        return 0.0
    if power > 1100 + 4 * len(t):
        return math.inf
    exact = Fraction(num, den) * Fraction(exp) ** power
    return _f32_nearest(exact) if suffix == "f" else _f64_to_f32(exact)


def qk_eps(value: Any) -> float:
    """``qkEps`` as the config's ``eps``: a number or the text of a WGSL literal, taken as the
    f32 that the template's ``const QK_EPS: f32 = {{ qkEps }};`` holds and given as that f32's
    shortest decimal (``1e-06`` for ``1e-06``, ``"1e-6f"`` and ``"0.000001"`` alike), which the
    emitted kernel's f32 const holds again."""
    if isinstance(value, str):
        f32 = _literal_f32(value)
    else:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        require(number and not math.isnan(value), "qkEps", value, EPS_ALLOWED)
        require(value > 0, "qkEps", value, EPS_POSITIVE)
        if isinstance(value, int):  # printed as an abstract int: an i64
            require(value < 2**63, "qkEps", value, "a number below 2^63 (WGSL's abstract "
                    "integers are 64-bit)")  # fmt: skip
        with np.errstate(over="ignore"):  # past the largest f32 after rounding: inf
            f32 = float(np.float32(value)) if value < 2.0**128 else math.inf
    require(f32 > 0, "qkEps", value, "a number above 0: in f32 it is 0")
    low, high = EPS_RANGE
    eps = f32
    if math.isfinite(f32):
        shortest = float(np.format_float_scientific(np.float32(f32), unique=True))
        eps = shortest if float(np.float32(shortest)) == f32 else f32
    require(
        low <= eps <= high,
        "qkEps",
        value,
        f"a number whose f32 is normal ({low:.2g} .. {high:.2g}): in f32 it is {f32!r}",
    )
    return eps


@_bridge("copy")
def _copy(v: Vars) -> CopyConfig:
    head_dim = v.need("headDim", int)
    # Every other mode refuses a row past one binding through kv_heads * head_dim.
    require(
        head_dim <= MAX_HIDDEN,
        "headDim",
        head_dim,
        f"at most {MAX_HIDDEN} (one row must fit WebGPU's default "
        "max-storage-buffer-binding-size of 128 MiB)",
    )
    return CopyConfig(
        head_dim=head_dim,
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
        **_rotary(v, append),
        present_type=present,
        input_type=present,
    )


@_bridge("window_shift")
def _window_shift(v: Vars) -> WindowShiftConfig:
    region = v.get("shiftRegion") or "all"
    known = [r.value for r in ShiftRegion]
    require(region in known, "shiftRegion", region, "all, shift or append")
    region = ShiftRegion(region)
    # Fixed meanings (docs/legacy.md): 'all' with hasRotary rotates appended K at its absolute
    # position as 'append' does (the template appends it unrotated), and 'append' without
    # hasRotary is the unrotated append (the template does not compile there).
    rotary = _rotary(v, region != "shift")
    present = _present(v)
    v.agree("zeroScalar", present, "presentScalar: the cleared rows' element type")
    return WindowShiftConfig(
        **_shape(v),
        region=region,
        **rotary,
        present_type=present,
        input_type=present,
    )


@_bridge("build")
def _build(v: Vars) -> BuildConfig:
    return BuildConfig(
        **_shape(v),
        **_k_norm(v),
        **_rotary(v),
        input_type=Element.F32,
        present_type=_present(v),
    )


def _quant(cls: type[QuantConfig], v: Vars) -> QuantConfig:
    """The template's bindings where the device allows them, else the packed ones."""
    fields = _shape(v) | _k_norm(v) | _quant_fields(v) | _rotary(v)
    cfg = cls(**fields, bindings=Bindings.TEMPLATE)
    fits = storage_buffers(cfg) <= v.max_storage_buffers
    return cfg if fits else cls(**fields, bindings=Bindings.PACKED)


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
                and math.isfinite(value)
                and value == int(value)
            )
            require(ok, name, value, "an integer value (the template prints it as an f32 const)")
            fields[name] = int(value)
    return fields


@_bridge("build_quant")
def _build_quant(v: Vars) -> QuantConfig:
    return _quant(BuildQuantConfig, v)


@_bridge("append_quant")
def _append_quant(v: Vars) -> QuantConfig:
    return _quant(AppendQuantConfig, v)


__all__ = [
    "BRIDGES",
    "ConfigError",
    "KNOWN",
    "Vars",
    "binding_note",
    "config_from_vars",
    "mode_of",
]
