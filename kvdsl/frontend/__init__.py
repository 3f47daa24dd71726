"""WGSL → IR: the lark frontend (``wgsl.lark``, package data)."""

from kvdsl.frontend.errors import FrontendError, UnsupportedError, WgslSyntaxError, WgslTypeError
from kvdsl.frontend.parser import parse, parse_with_lines

__all__ = [
    "FrontendError",
    "UnsupportedError",
    "WgslSyntaxError",
    "WgslTypeError",
    "parse",
    "parse_with_lines",
]
