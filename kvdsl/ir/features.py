"""The WebGPU features a kernel's module needs: :func:`features`, decided once from the IR.

The emitter writes an ``enable`` directive for each (``enable f16;``, ``enable subgroups;``),
``index.json`` lists them for a host, and the runtime requests them of its device; each reads
them here.
"""

from __future__ import annotations

from kvdsl.ir import tree as ir
from kvdsl.ir import ops
from kvdsl.ir.types import Array, Scalar, size_of

SHADER_F16 = "shader-f16"
SUBGROUPS = "subgroups"
#: The WGSL extension (``enable NAME;``) each feature's module enables.
EXTENSION = {SHADER_F16: "f16", SUBGROUPS: "subgroups"}


def features(kernel: ir.Kernel) -> frozenset[str]:
    """The WebGPU features ``kernel``'s module needs: ``shader-f16`` where a declaration or an
    expression of it mentions f16, ``subgroups`` where it takes a subgroup builtin value or
    calls a subgroup builtin function. One walk of the module decides both."""
    f16 = False
    subgroups = any(builtin in ir.SUBGROUP_BUILTINS for _, builtin in kernel.builtins)
    for n in ir.walk(_module(kernel)):
        t = type(n)
        if t is Scalar:
            f16 = f16 or n.name == "f16"
        elif t is ir.Call:
            subgroups = subgroups or n.op in ops.SUBGROUP_OPS
        if f16 and subgroups:
            break
    return frozenset((SHADER_F16,) * f16 + (SUBGROUPS,) * subgroups)


def enables(kernel: ir.Kernel) -> list[str]:
    """The WGSL extensions ``kernel``'s module enables, in the order it states them."""
    need = features(kernel)
    return [EXTENSION[f] for f in (SHADER_F16, SUBGROUPS) if f in need]


def uses_f16(kernel: ir.Kernel) -> bool:
    """Whether the kernel's module needs ``enable f16;`` (:func:`features`)."""
    return SHADER_F16 in features(kernel)


def uses_subgroups(kernel: ir.Kernel) -> bool:
    """Whether the kernel's module needs ``enable subgroups;`` (:func:`features`)."""
    return SUBGROUPS in features(kernel)


def _module(kernel: ir.Kernel) -> tuple:
    """The parts of ``kernel`` its WGSL module holds: not the host's side of the contract
    (``dispatch``, ``extents``, ``requires``), nor a binding's host ``data`` type (f16 data moved
    as ``u32`` words needs no ``enable f16;``)."""
    return (
        tuple(b.elem for b in kernel.bindings),
        kernel.params,
        kernel.consts,
        kernel.functions,
        kernel.workgroup_vars,
        kernel.uniforms,
        kernel.private_vars,
        kernel.body,
    )


#: WebGPU's default limits that a kernel's module can need more of, by their JavaScript names
#: (``GPUSupportedLimits``): what a device requested with no limits has.
DEFAULT_LIMITS = {
    "maxStorageBuffersPerShaderStage": 8,
    "maxComputeWorkgroupStorageSize": 16384,
    "maxComputeInvocationsPerWorkgroup": 256,
    "maxComputeWorkgroupSizeX": 256,
    "maxComputeWorkgroupSizeY": 256,
    "maxComputeWorkgroupSizeZ": 64,
}


def limits(kernel: ir.Kernel) -> dict[str, int]:
    """The WebGPU limits ``kernel``'s module needs beyond :data:`DEFAULT_LIMITS`, by their
    JavaScript names: its storage bindings (one stage), its workgroup memory in bytes (each
    ``var<workgroup>`` rounded up to 16 bytes, as WebGPU counts it), its invocations per
    workgroup and workgroup size per axis. Empty for a kernel that runs at the defaults; a
    binding's size depends on the params and is checked per dispatch."""
    x, y, z = kernel.workgroup_size
    need = {
        "maxStorageBuffersPerShaderStage": len(kernel.bindings),
        "maxComputeWorkgroupStorageSize": sum(
            _workgroup_bytes(v.ty) for v in kernel.workgroup_vars
        ),
        "maxComputeInvocationsPerWorkgroup": x * y * z,
        "maxComputeWorkgroupSizeX": x,
        "maxComputeWorkgroupSizeY": y,
        "maxComputeWorkgroupSizeZ": z,
    }
    return {k: n for k, n in need.items() if n > DEFAULT_LIMITS[k]}


def _workgroup_bytes(ty: Array) -> int:
    """Bytes a ``var<workgroup>`` array takes: WGSL's SizeOf (:func:`kvdsl.ir.types.size_of`,
    its length times its element's stride), rounded up to 16."""
    if not isinstance(ty, Array):
        return 16  # an atomic<u32> / atomic<i32> of its own
    return -(-size_of(ty) // 16) * 16
