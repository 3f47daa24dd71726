"""WGSL's builtin names the IR knows, as plain tables (re-exported by :mod:`kvdsl.ir.tree`): the
atomic functions and their value arguments, and the compute shader's builtin inputs with their
types and which of them are uniform."""

from __future__ import annotations

from kvdsl.ir.types import Scalar, Vec, u32, vec3u

#: WGSL's atomic builtins: the name after ``atomic`` and how many value arguments follow
#: the pointer.
ATOMIC_FUNCTIONS = {
    "Load": 0,
    "Store": 1,
    "Add": 1,
    "Sub": 1,
    "Max": 1,
    "Min": 1,
    "And": 1,
    "Or": 1,
    "Xor": 1,
    "Exchange": 1,
    "CompareExchangeWeak": 2,
}

BUILTIN_INPUTS = {
    "global_invocation_id": "gid",
    "local_invocation_id": "lid",
    "local_invocation_index": "lidx",
    "workgroup_id": "wid",
    "num_workgroups": "nwg",
    "subgroup_size": "sg",
    "subgroup_invocation_id": "sgid",
    "num_subgroups": "nsg",
    "subgroup_id": "sgix",
}
#: Builtins of WGSL's ``subgroups`` extension (a module using one says ``enable subgroups;``).
SUBGROUP_BUILTINS = frozenset(
    {"subgroup_size", "subgroup_invocation_id", "num_subgroups", "subgroup_id"}
)
#: Builtins whose value is one ``u32`` (the others are ``vec3<u32>``).
SCALAR_BUILTINS = SUBGROUP_BUILTINS | {"local_invocation_index"}
#: Builtins every invocation of a workgroup sees the same value of (WGSL's uniformity analysis
#: agrees: a barrier may stand under a condition on them).
UNIFORM_BUILTINS = frozenset({"subgroup_size", "num_subgroups", "workgroup_id", "num_workgroups"})


def builtin_type(builtin: str) -> Scalar | Vec:
    """The WGSL type of compute builtin ``builtin`` (WGSL's name, e.g. ``subgroup_size``)."""
    return u32 if builtin in SCALAR_BUILTINS else vec3u
