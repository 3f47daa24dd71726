"""The host contract: what a host needs to run a variant, as data (``emitted/index.json``), its
JSON Schema, and the ES module ``emitted/kvdsl.js`` (with ``kvdsl.d.ts``) generated from it."""

from kvdsl.contract.expr import ExprError, evaluate
from kvdsl.contract.index import (
    ContractError,
    buffer_sizes,
    check_requirements,
    entry,
    limits,
    params_bytes,
    workgroups,
)

__all__ = [
    "ContractError",
    "ExprError",
    "buffer_sizes",
    "check_requirements",
    "entry",
    "evaluate",
    "limits",
    "params_bytes",
    "workgroups",
]
