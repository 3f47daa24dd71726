"""The host contract: what a host needs to run a variant, as data (``emitted/index.json``), its
JSON Schema, and the ES module ``emitted/kvdsl.js`` (with ``kvdsl.d.ts``) generated from it.

:mod:`~kvdsl.contract.index` turns a kernel and its config into a variant's ``index.json``
entry (docs/host.md): bindings with their element counts, the params struct's offsets (the
runtime's ``params_layout``), the dispatch rule as data, features and limits, and a dense
variant's ``bytes_per_token_head`` (``kvdsl.kernels.dense.contract_fields``); and states the
rules a host applies to it (``buffer_sizes``, ``params_bytes``, ``workgroups``,
``check_requirements``) over the entry alone; the kernel's requirements become the entry's
``requires``. What the IR does not know is written once per mode, in one
:class:`~kvdsl.contract.record.Contract` in its family's module
(:mod:`~kvdsl.contract.cache`, :mod:`~kvdsl.contract.attend`, :mod:`~kvdsl.contract.kivi`;
:data:`kvdsl.contract.modes.CONTRACTS` gathers them): the shape variables, each binding's
size as rows × host values per row, each params field's meaning and its value as a formula of
the shape variables (held to the kernel's extents by ``tests/contract/test_values.py``), and a
sentence per requirement; :mod:`~kvdsl.contract.modes` adds a window's.
:mod:`~kvdsl.contract.expr` is the expression language the sizes and the dispatch's items are
written in, which ``kvdsl.js`` evaluates too; :mod:`~kvdsl.contract.module` writes
``kvdsl.js`` and ``kvdsl.d.ts``; :mod:`~kvdsl.contract.schema` ships ``index.schema.json`` and
validates against it with ``jsonschema`` (the schema checked against its metaschema first).
``tests/contract/`` holds every variant's answers to the runtime's (Python) and to Python's (``kvdsl.js`` under Node.js) on random
verification cases."""

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
