"""Cache sessions: a model's KV cache kept on a host over many chained kernels, beside a numpy
oracle of the same session (:mod:`kvdsl.session.session`), the hosts that run kernels through
their contract alone (:mod:`kvdsl.session.host`) and the formats' operations
(:mod:`kvdsl.session.formats`); the same over a paged cache, with its page allocator
(:mod:`kvdsl.session.paged`)."""

from kvdsl.session.formats import FORMATS, CacheFormat, SessionError, cache_format
from kvdsl.session.host import Bound, Buffer, GpuHost, Host, InterpHost, Program, check_dispatch
from kvdsl.session.session import Session, SessionMismatch, Spec, Step
from kvdsl.session.paged import PagedSession, PagedSpec, check_pages

__all__ = [
    "FORMATS",
    "Bound",
    "Buffer",
    "CacheFormat",
    "GpuHost",
    "Host",
    "InterpHost",
    "Program",
    "PagedSession",
    "PagedSpec",
    "Session",
    "SessionError",
    "SessionMismatch",
    "Spec",
    "Step",
    "cache_format",
    "check_dispatch",
    "check_pages",
]
