"""Cache sessions: a model's KV cache kept on a host over many chained kernels, beside a numpy
oracle of the same session (:mod:`kvdsl.session.session`), the hosts that run kernels through
their contract alone (:mod:`kvdsl.session.host`) and the formats' operations
(:mod:`kvdsl.session.formats`); the same over a paged cache (:mod:`kvdsl.session.paged`), with
its page allocator (:mod:`kvdsl.session.pages`) and its spec and rows
(:mod:`kvdsl.session.paged_rows`). What the two kinds of session share is
:mod:`kvdsl.session.run`.

:mod:`~kvdsl.session.host` is a host that keeps buffers between dispatches and runs each kernel
through its contract entry alone (bindings, sizes, params bytes, workgroups), on wgpu or on the
interpreter by one code path, and checks every runtime input before a dispatch;
:mod:`~kvdsl.session.formats` says, per cache format, which kernels each operation dispatches (a
new layout or mode is one more class there); :mod:`~kvdsl.session.session` runs operations on
every layer and keeps a numpy oracle built on :mod:`kvdsl.reference`, compared after every step,
with poisoned canaries around each cache. :mod:`~kvdsl.session.paged` does the same over a paged
cache, with the host's page allocator (a free list, counts per page, copy-on-write); it checks
the paged inputs it passes with the runtime's ``check_pages``, as ``kvdsl run`` does.
:mod:`~kvdsl.session.attention` is the attention step both run after each decode where asked
(``q_heads``): ``attend`` over every layer's cache against float64 attention over the oracle's
rows. docs/host.md, "Sessions", is the host's view.
"""

from kvdsl.session.formats import FORMATS, CacheFormat, SessionError, cache_format
from kvdsl.session.host import Bound, Buffer, GpuHost, Host, InterpHost, Program, check_dispatch
from kvdsl.session.paged import PagedSession
from kvdsl.session.paged_rows import PagedSpec, check_pages
from kvdsl.session.run import SessionMismatch, Step
from kvdsl.session.session import Session, Spec

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
