"""WGSL text from IR.

``emit(kernel)`` prints deterministic WGSL: two-space indent, minimal parentheses from the op
table, storage bindings numbered in declaration order then the ``params`` uniform.
``enable f16;`` and ``enable subgroups;`` appear only when the kernel uses them. Each WGSL quirk
is written once, with a comment: ``select(f, t, c)`` takes the false value first; a ``>>`` on
the right of ``<`` is parenthesised, since ``a < b >> c`` reads as a template list. An f16
literal is printed by its exact digits, since Tint and naga round a decimal f16 differently.
The host contract (``emitted/index.json`` and the ES module) is generated from the kernel by
:mod:`kvdsl.contract`, so a host in any language needs nothing else."""

from kvdsl.emit.wgsl import emit, emit_expr, format_literal, inline

__all__ = ["emit", "emit_expr", "format_literal", "inline"]
