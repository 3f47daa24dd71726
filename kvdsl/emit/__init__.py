"""WGSL text from IR."""

from kvdsl.emit.wgsl import emit, emit_expr, format_literal, inline

__all__ = ["emit", "emit_expr", "format_literal", "inline"]
