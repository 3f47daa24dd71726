"""WGSL → IR: the lark frontend (``grammar/wgsl.lark``)."""

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
