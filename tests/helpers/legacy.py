"""The legacy Jinja template as a test oracle: render it, describe its interface, run it.

The template (``$KVDSL_TEMPLATE``; default ``../shared/seed/kv_cache.wgsl.jinja`` beside the
repository) expects the host to
supply ``env.wgsl.resourceDeclarations``; :func:`render` prints them from the bindings and the
params struct exactly as :mod:`kvdsl.emit.wgsl` does (``enable f16;`` when needed, the struct,
``@group(0) @binding(i)`` storage declarations in order, the uniform ``params`` last).

Template variables, by mode (every name is read as ``{{ name }}`` or in an ``{% if %}``):

``transpose`` (BSH new K/V → BNSH present; one element or one vec4 per invocation)
    ``kvNumHeads`` heads; ``copyWorkgroupSize`` workgroup size; ``DISPATCH_FOLD_WIDTH`` workgroups
    per x before y takes over; ``presentVec4`` selects the vec4 walk, which reads ``headDimV4`` and
    ``kvHiddenV4`` (head dim and hidden size in vec4s) and converts with ``presentElement`` (a
    vec4 type); the scalar walk reads ``headDim``, ``kvHidden`` and converts with
    ``presentScalar`` (defaulted from ``inputScalar``, then ``"f32"``).

every other mode
    ``mode`` (or ``modeSpec``); ``headDim`` (words per row for ``copy``); ``kvHeads`` (all but
    ``copy``); ``tunables.COPY_WORKGROUP_SIZE`` workgroup size; ``DISPATCH_FOLD_WIDTH``;
    ``device.adapterInfo.vendor`` (``"apple"`` selects per-row walks for copy/merge/merge_share
    retain; anything else the cooperative walks); ``hasRotary`` (declares ``HALF`` = ``half``,
    rotates K in ``merge_share`` append, ``build*``, ``append_quant``); ``hasKNorm`` (declares
    ``QK_EPS`` = ``qkEps``, RMSNorms K in ``build*``/``append_quant``).

``merge_share``
    ``shareRegion``: ``"append"`` writes the append window from new K/V; any other value runs
    the retain pass (rows outside the window copied from past).
``window_shift``
    ``shiftRegion``: ``"all"`` (default), ``"shift"`` (retain + clear) or ``"append"`` (new rows,
    always rotated: it needs ``hasRotary``); ``zeroScalar`` the element type of the cleared rows.
``build_quant`` / ``append_quant``
    ``bits`` (8: one i32 per element; anything else: int4 pairs packed in a u32); ``packed``
    words per row (``headDim`` for 8 bits, ``headDim / 2`` for 4); ``qmin``/``qmax`` the clamp
    range (printed as f32 consts).

Params fields (all ``u32``): transpose ``batchSize, kvSeq``; every other mode ``count`` (rows
the dispatch covers) and: merge ``seq`` (present rows per head), ``pastSeq``, ``keySeq``;
merge_share ``seq`` (capacity), ``keySeq``; build ``seq`` (new tokens = present rows),
``pastSeq`` (rotary origin); build_quant adds ``perChannel``; append_quant ``seq`` (new
tokens), ``totalSeq`` (capacity), ``pastSeq``, ``perChannel``; window_shift ``seq`` (capacity),
``keySeq``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import jinja2

from kvdsl.emit import emit
from kvdsl.ir import Binding, Kernel, Struct, u32, vec
from kvdsl.ir.types import SCALARS
from tests.helpers.paths import ROOT

#: Where the template is looked for when ``KVDSL_TEMPLATE`` names none: beside the repository
#: (``../shared/seed``), inside it, or in ``.seed/`` (where the GPU host's checkout keeps a copy).
DEFAULT_TEMPLATES = tuple(
    base / "kv_cache.wgsl.jinja"
    for base in (ROOT.parent / "shared" / "seed", ROOT / "shared" / "seed", ROOT / ".seed")
)
#: The tests that read the template form one group: where it is absent they are skipped with a
#: reason starting with this (tests/conftest.py counts them in one summary line), or fail where
#: ``KVDSL_REQUIRE_TEMPLATE`` is set (CI: ``.ci/run``).
GROUP = "legacy template group"


def _template() -> Path:
    named = os.environ.get("KVDSL_TEMPLATE", "")
    if named:
        return Path(named).expanduser().resolve()
    return next((p for p in DEFAULT_TEMPLATES if p.is_file()), DEFAULT_TEMPLATES[0])


#: The template: ``$KVDSL_TEMPLATE``, else the first of :data:`DEFAULT_TEMPLATES` that exists.
TEMPLATE = _template()
#: ``KVDSL_REQUIRE_TEMPLATE=1``: a missing template fails the group instead of skipping it.
REQUIRED = os.environ.get("KVDSL_REQUIRE_TEMPLATE", "") not in ("", "0")


def template_missing() -> str | None:
    """Why the template cannot be read (``"no template at ..."``), or None where it can."""
    if TEMPLATE.is_file():
        return None
    return f"no template at {TEMPLATE} (set KVDSL_TEMPLATE=/path/to/kv_cache.wgsl.jinja)"


def require_template() -> Path:
    """The template's path, for a test that needs it. Where it is absent the test is skipped as
    one of the :data:`GROUP` (or fails, under ``KVDSL_REQUIRE_TEMPLATE``)."""
    why = template_missing()
    if why is None:
        return TEMPLATE
    import pytest

    if REQUIRED:
        pytest.fail(f"{GROUP}: {why}; KVDSL_REQUIRE_TEMPLATE is set", pytrace=False)
    pytest.skip(f"{GROUP}: {why}")


MODES = (
    "transpose",
    "copy",
    "merge",
    "merge_share",
    "build",
    "build_quant",
    "append_quant",
    "window_shift",
)

PARAM_FIELDS = {
    "transpose": ("batchSize", "kvSeq"),
    "copy": ("count",),
    "merge": ("count", "seq", "pastSeq", "keySeq"),
    "merge_share": ("count", "seq", "keySeq"),
    "build": ("count", "seq", "pastSeq"),
    "build_quant": ("count", "seq", "pastSeq", "perChannel"),
    "append_quant": ("count", "seq", "pastSeq", "totalSeq", "perChannel"),
    "window_shift": ("count", "seq", "keySeq"),
}

_ENV: list[jinja2.Environment] = []


def _environment() -> jinja2.Environment:
    if not _ENV:
        _ENV.append(
            jinja2.Environment(
                loader=jinja2.FileSystemLoader(require_template().parent),
                undefined=jinja2.StrictUndefined,
                keep_trailing_newline=True,
            )
        )
    return _ENV[0]


def resource_declarations(bindings: tuple[Binding, ...], params_struct: Struct | None) -> str:
    """The declarations kvdsl's emitter prints for this interface (everything before consts)."""
    stub = Kernel("decls", tuple(bindings), params_struct, (), (), (1, 1, 1), (), ())
    text = emit(stub)
    return text[: text.index("@compute")].rstrip("\n")


def render(
    vars: dict[str, Any], bindings: tuple[Binding, ...], params_struct: Struct | None
) -> str:
    """The template rendered with ``vars`` and resource declarations for this interface."""
    jinja = _environment()  # skips (or fails) the test where there is no template
    decls = resource_declarations(declared(vars, bindings), params_struct)
    env = {"wgsl": {"resourceDeclarations": decls}}
    return jinja.get_template(TEMPLATE.name).render(**vars, env=env)


def declared(vars: dict[str, Any], bindings: tuple[Binding, ...]) -> tuple[Binding, ...]:
    """``bindings`` as the template declares them: arrays of the host's scalars, where kvdsl's
    kernels walk vectors of the same bytes (a transpose's ``vec4`` are the template's own)."""
    if vars["mode"] == "transpose":
        return bindings
    return tuple(Binding(b.name, b.host, b.access) for b in bindings)


def host_interface(bindings: tuple[Binding, ...]) -> tuple[tuple[str, str, str], ...]:
    """What a host binds: each binding's name, access and host scalar type, in order (a drop-in
    declares vectors where the template declares scalars; the buffers are the same)."""
    return tuple((b.name, b.access, b.host.name) for b in bindings)


def legacy_vars(
    mode: str,
    *,
    kv_heads: int = 2,
    head_dim: int = 8,
    workgroup_size: int = 64,
    fold: int = 65535,
    vec4: bool = False,
    input_type: str = "f32",
    present_type: str = "f32",
    vendor: str = "nvidia",
    rotary: bool = False,
    k_norm: bool = False,
    eps: float = 1e-6,
    bits: int = 8,
    qmin: int | None = None,
    qmax: int | None = None,
    share_region: str = "retain",
    shift_region: str = "all",
    half: int | None = None,
) -> dict[str, Any]:
    """A consistent set of template variables for ``mode``, derived values filled in (``half``
    unset: ``headDim / 2``, rotary over the whole head).

    ``present_type`` is the cache's element type (for ``copy``: the word type, with
    ``head_dim`` words per row); ``input_type`` the new K/V element type of ``transpose``.
    """
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: expected one of {MODES}")
    v: dict[str, Any] = {"mode": mode, "DISPATCH_FOLD_WIDTH": fold, "headDim": head_dim}
    if mode == "transpose":
        return v | {
            "kvNumHeads": kv_heads,
            "copyWorkgroupSize": workgroup_size,
            "presentVec4": vec4,
            "headDimV4": head_dim // 4,
            "kvHiddenV4": kv_heads * head_dim // 4,
            "kvHidden": kv_heads * head_dim,
            "inputScalar": input_type,
            "presentScalar": present_type,
            "presentElement": f"vec4<{present_type}>" if vec4 else present_type,
        }
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return v | {
        "kvHeads": kv_heads,
        "tunables": {"COPY_WORKGROUP_SIZE": workgroup_size},
        "device": {"adapterInfo": {"vendor": vendor}},
        "hasRotary": rotary,
        "hasKNorm": k_norm,
        "half": head_dim // 2 if half is None else half,
        "qkEps": eps,
        "bits": bits,
        "qmin": lo if qmin is None else qmin,
        "qmax": hi if qmax is None else qmax,
        "packed": head_dim if bits == 8 else head_dim // 2,
        "shareRegion": share_region,
        "shiftRegion": shift_region,
        "presentScalar": present_type,
        "zeroScalar": present_type,
    }


def _b(name: str, elem: str, access: str = "read") -> Binding:
    return Binding(name, SCALARS[elem], access)


def legacy_bindings(vars: dict[str, Any]) -> tuple[Binding, ...]:
    """The storage bindings the rendered template uses for ``vars`` (sources, then outputs).

    Data buffers have the cache element type (``presentScalar``; f32 where the template
    computes in f32), ``seqlens_k`` is i32, rotary caches, norm weight and scales f32, int8
    caches i32 and packed int4 caches u32.
    """
    mode = vars["mode"]
    out = vars.get("presentScalar", "f32")
    if mode == "transpose":
        src = SCALARS[vars.get("inputScalar", "f32")]
        dst = SCALARS[out]
        if vars["presentVec4"]:
            src, dst = vec(4, src), vec(4, dst)
        return (
            Binding("key", src, "read"),
            Binding("value", src, "read"),
            Binding("present_key", dst, "read_write"),
            Binding("present_value", dst, "read_write"),
        )
    rotary = ("cos_cache", "sin_cache") if vars["hasRotary"] else ()
    if mode == "copy":
        reads = [(n, out) for n in ("src_k", "src_v")]
    elif mode == "merge":
        reads = [(n, out) for n in ("past_k", "past_v", "new_k", "new_v")]
    elif mode == "merge_share":
        if vars["shareRegion"] == "append":
            reads = [("new_k", out), ("new_v", out), ("seqlens_k", "i32")]
            reads += [(n, "f32") for n in rotary]
        else:
            reads = [("past_k", out), ("past_v", out), ("seqlens_k", "i32")]
    elif mode == "window_shift":
        region = vars.get("shiftRegion", "all")
        reads = [] if region == "append" else [("past_k", out), ("past_v", out)]
        reads += [] if region == "shift" else [("new_k", out), ("new_v", out)]
        reads.append(("seqlens_k", "i32"))
        # The append region reads the rotary caches whether or not hasRotary is set.
        reads += [(n, "f32") for n in ("cos_cache", "sin_cache")] if region == "append" else []
    else:
        reads = [("src_k", "f32"), ("src_v", "f32")]
        reads += [("seqlens_k", "i32")] if mode == "append_quant" else []
        reads += [("k_norm_weight", "f32")] if vars["hasKNorm"] else []
        reads += [(n, "f32") for n in rotary]
        if mode != "build":
            reads += [("k_scale", "f32"), ("v_scale", "f32")]
            out = "i32" if vars["bits"] == 8 else "u32"
    return tuple(_b(n, t) for n, t in reads) + (
        _b("present_key", out, "read_write"),
        _b("present_value", out, "read_write"),
    )


def legacy_params_struct(vars: dict[str, Any]) -> Struct:
    """The params struct (all ``u32`` fields) the template reads for ``vars['mode']``."""
    return Struct("Params", tuple((f, u32) for f in PARAM_FIELDS[vars["mode"]]))


def legacy_workgroups(vars: dict[str, Any], params: dict[str, int]) -> tuple[int, int, int]:
    """The template's dispatch geometry: ``ceil(items / WG)`` workgroups folded into x/y.

    Items are destination elements (vec4s) for transpose, ``params.count`` rows otherwise.
    """
    if vars["mode"] == "transpose":
        width = vars["headDimV4"] if vars["presentVec4"] else vars["headDim"]
        items = params["batchSize"] * vars["kvNumHeads"] * params["kvSeq"] * width
        wg = vars["copyWorkgroupSize"]
    else:
        items, wg = params["count"], vars["tunables"]["COPY_WORKGROUP_SIZE"]
    groups, fold = math.ceil(items / wg), vars["DISPATCH_FOLD_WIDTH"]
    return (groups, 1, 1) if groups <= fold else (fold, math.ceil(groups / fold), 1)


def run_legacy(
    vars: dict[str, Any],
    bindings: tuple[Binding, ...],
    params_struct: Struct | None,
    buffers: dict,
    params: dict[str, int],
    workgroups: tuple[int, int, int] | None = None,
):
    """Render the template and run it on the GPU (``workgroups`` default: the template's), on
    a device that allows its storage bindings (9 or 10 for its quantising rotary kernels)."""
    from kvdsl.runtime import run_source

    wgsl = render(vars, bindings, params_struct)
    if workgroups is None:
        workgroups = legacy_workgroups(vars, params)
    limits = template_limits(bindings)
    return run_source(
        wgsl, declared(vars, bindings), params_struct, buffers, params, workgroups, limits=limits
    )


def template_limits(bindings: tuple[Binding, ...]) -> dict[str, int]:
    """The limits past WebGPU's defaults that a render with ``bindings`` needs of its device."""
    from kvdsl.ir.features import DEFAULT_LIMITS

    key = "maxStorageBuffersPerShaderStage"
    return {key: len(bindings)} if len(bindings) > DEFAULT_LIMITS[key] else {}
