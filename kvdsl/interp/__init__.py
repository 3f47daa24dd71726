"""The numpy interpreter: the executable definition of what kernel IR means.

``run(kernel, buffers, params)`` has the GPU runtime's signature and returns the same thing, the
final contents of every read_write binding, so a test can run one kernel on both and compare. It
differs from the GPU in what it refuses to hide: an out-of-bounds access, two invocations writing
one element, or (with ``strict_init``) a read of an element nothing wrote raise an error that
names the buffer, the index, the invocations and the statement.

The machine runs all invocations at once as numpy arrays over the invocation axis, in chunks of
whole workgroups, with masks for control flow, keeping WGSL's exact integer semantics, workgroup
memory and barriers. On request it also counts each binding's bytes loaded and stored by the
active invocations (``run(..., accesses=)``): what a kernel moves, every access seen. Counted
loops with no state crossing trips are batched over (trip × invocation). A pointer is its access
chain with the indices evaluated when ``&`` ran and, for a ``var``, the declaring frame's own
slot, so every load and store through one goes the checked way. A binding or workgroup array of
structs is held as ``u32`` words in WGSL's layout (as 16-bit halves where it holds an ``f16``,
so each f16 is a unit of its own and a 32-bit member two:
:func:`kvdsl.ir.types.memory_unit`); a member access is a word offset, loaded and stored word by
word (:mod:`~kvdsl.interp.structs`), so bounds, races and uninitialised reads are found per word
(per half).

The rest of this docstring is the semantics, in the order the machine meets them.

Invocations
    A dispatch of ``workgroups = (X, Y, Z)`` with ``@workgroup_size(x, y, z)`` has
    ``N = X*Y*Z * x*y*z`` invocations. They are numbered in WebGPU's order, workgroups with x
    fastest and inside each the local invocation index (``lid.x`` fastest); ``gid = wid * size +
    lid`` and ``nwg = (X, Y, Z)``. All N run *together*: every value is a numpy array over the
    invocation axis, and one statement is one numpy operation for every invocation at once.
    WGSL gives no order among invocations, and between barriers a correct kernel cannot tell;
    the race checks below reject the kernels that could. To keep arrays in
    cache the machine runs the dispatch in *chunks* of whole workgroups (about 2^18 invocations,
    never crossing a row of X workgroups), one after another, each as described here; a kernel
    that reads a read_write binding runs as one chunk (see Storage buffers). Within a chunk a
    builtin component that every invocation shares (``wid.y`` in a folded dispatch) is uniform.
    With several defects, the one met first in this order is reported.

Values
    A scalar is an array ``[L]``, a ``vecN`` an array ``[L, N]``, a ``matCxR`` an array
    ``[L, C, R]`` (``m[:, c]`` is column ``c``), a fixed array a list of element values, where ``L`` is N or 1. ``L == 1`` marks a *uniform* value, the same for every
    invocation (literals, consts, params fields, ``nwg``, and anything computed only from them,
    such as a loop counter running from a constant to a constant); numpy broadcasting mixes the
    two. Values are never changed in place, so ``let a = k;`` copies nothing and aliases nothing.

Operators and builtins
    Every operator and builtin is the numpy implementation in the op table
    (:data:`kvdsl.ir.ops.TABLE`), which carries WGSL's exact semantics: ``u32``/``i32`` wrap
    modulo 2^32; integer ``x / 0 == x`` and ``x % 0 == 0``; ``i32`` ``MIN / -1 == MIN`` (and
    ``MIN % -1 == 0``); division truncates and ``%`` takes the dividend's sign; shift amounts are
    taken modulo 32 and ``>>`` on ``i32`` is arithmetic; ``round`` ties to even;
    ``clamp(e, lo, hi) == min(max(e, lo), hi)``; ``select(f, t, c)`` is ``t`` where ``c``. f32
    arithmetic happens in float32 and f16 in float16, each op rounding to its type; a matrix
    product sums its terms in index order, each product and partial sum so rounded. A scalar
    operand meeting a vector is widened component-wise, as WGSL does. ``&&`` and ``||`` short-
    circuit: the right side runs only for invocations the left side did not decide, so
    ``i < n && buf[i] > 0`` never reads out of bounds. ``inverseSqrt``, ``sqrt``, ``exp``,
    ``log``, ``cos``, ``sin``, ``dot`` and ``fma`` are marked approximate in the table: a GPU
    agrees with them only within WGSL's stated accuracy.

Conversions
    ``T(x)`` between integer types keeps the bits (``i32(0xFFFFFFFFu) == -1``). Integer → float
    and f32 → f16 round to nearest, ties to even (out of f16 range: infinity). ``bool(x)`` is
    ``x != 0`` (so ``bool(NaN)`` is true). Float → integer truncates toward zero and saturates,
    clamping first in the float type to the largest floats inside the target's range, as naga
    and Tint do: ``i32(3e9f) == 2^31 - 128``, ``u32(-1.5f) == 0``, ``u32(5e9f) == 2^32 - 256``,
    ``i32(+inf_h) == 65504``. WGSL leaves NaN → integer indeterminate; it is 0 here.

Control flow: masks
    Each statement runs for a *mask*, the invocations that reach it (``None``: all). ``if``
    splits the mask by its condition and runs each branch for its part (a uniform condition runs
    one branch for the whole mask, and a branch no invocation takes is skipped). ``return``,
    ``break`` and ``continue`` empty the mask for the rest of their block; the rest of the
    enclosing construct continues without those invocations: after an ``if`` the mask is what
    reached the end of either branch, after a loop every invocation that entered except those
    that returned. A loop makes trips while any invocation is still in it, so loops whose bounds
    differ per invocation (the cooperative walk ``for (var e = base + lid.x; e < end; e = e +
    WG)``) run as many trips as the longest. ``continue`` rejoins at the update, or at a
    ``loop``'s ``continuing`` block, which runs in the body's scope for every invocation that
    finished the trip or continued; then a true ``break if`` takes an invocation out. A
    ``switch`` splits the mask by the selector's value among its clauses (the ``default``
    clause takes the values no selector names); a ``break`` in a clause leaves the switch, and
    after it every invocation that entered goes on except those that returned or continued the
    enclosing loop. A helper called as a statement runs for the mask like any call, its value
    dropped. A statement on an empty mask does not run at all.

Batched loops
    A counted loop whose trips cannot see each other runs several trips at once
    (:mod:`kvdsl.interp.batch`): ``for (var i = a; cond; i = u)`` whose header has no indexing
    or calls and evaluates to a uniform value on every trip (so the trip values are known on
    entry), and whose body has no loop, ``break``, ``continue``, ``return`` or barrier, assigns
    no var declared outside it, stores to each storage binding in at most one statement and to
    no workgroup array, reads no binding it stores to and no array value from outside (helpers it
    calls likewise). Its lanes are (trip × invocation) pairs, up to about 2^18 per batch: every
    outside value is repeated per trip, the loop variable differs per trip, and each statement is
    one numpy operation for all of them. Each invocation's trips still happen in order, and only
    a race (an error) could tell the order between invocations'. A batch's store of one element
    by two of its lanes, which in trip order would be a race or a later trip overwriting an
    earlier one, is not decided there: as for any error raised once a loop has run batched, the
    whole dispatch runs again trip by trip, which yields the result, or the error and message,
    of the order described here. Anything else runs trip by trip as above.

Variables
    ``let`` binds a value. ``var`` holds one, zero when uninitialised. Assigning under a mask
    keeps the old value on the other invocations (``numpy.where``), with one exception that
    keeps loop counters uniform: when the mask is the very mask the ``var`` was declared under,
    the invocations outside it can never read the var, so the new value replaces the old one
    outright. ``var`` arrays are lists of per-element values (``k[d]`` with uniform ``d`` is
    one list entry, a whole ``[N]`` column); an element index that differs per invocation
    gathers and scatters. Indexing a var array or a vector outside its size is
    :class:`OutOfBounds`, as it is for bindings (WGSL would clamp or return any value).

Helper functions
    A call inlines the body for the caller's mask, with a fresh scope holding the parameters and
    the module's names (never the caller's locals or builtins). Each invocation's result is the
    value of the ``return`` it reached.

Storage buffers
    A binding is the caller's array viewed as the element type (same-size dtypes are
    reinterpreted bit for bit, as the GPU sees bytes; vec bindings are ``[length, N]``). A
    binding that is one value (``n: atomic<u32>``, ``acc: vec4<f32>``, ``cfg: Config``) is held
    as its scalars or, a struct, as ``u32`` words (halves where it holds an f16), each component
    or word an element of its own (:mod:`kvdsl.interp.structs`). An array of vectors, once an
    access names one component of an element (``out[i].y = v``, ``out[i][j]``), keeps its
    records per component from then on (``Storage.split``), each component an element of its
    own as WGSL's scalar memory locations are; a whole element's access is one of each of its
    components.
    read_write bindings are copied, written in place and handed back with the caller's dtype and
    shape. A read or write checks that every active invocation's index is inside the binding,
    else :class:`OutOfBounds`; only active invocations store. Every access of a read_write
    element records which invocation made it (:mod:`~kvdsl.interp.races`: the writer, and the
    latest two invocations that read it): a second invocation writing it, reading an element
    another invocation wrote, or writing an element another invocation read, in the same
    dispatch, is a :class:`RaceError` naming both invocations and both statements, unless the
    first access is ordered before the second. ``storageBarrier()`` orders the accesses of its
    workgroup before it before those after it; across workgroups an access is ordered before
    another only when its workgroup then passed a ``storageBarrier()`` and made an atomic
    operation (not ``atomicLoad``) on a binding's element, which precedes (in that element's
    order, see Atomics) an atomic operation on it by the second access's workgroup, which then
    passed a ``storageBarrier()`` before the access: the last workgroup to arrive at a counter
    may read what the others wrote. (This is the pattern CUDA's threadfence reduction uses;
    WGSL's barriers are workgroup-scoped, so a GPU that kept storage writes invisible across
    workgroups past them would still be conforming.) The records span chunks; a kernel that
    reads a read_write binding still runs as one chunk, so that a race is reported at the
    statement of the order described here. Of an element many invocations read, only the
    latest two are kept, so a write is checked against the latest read by an invocation other
    than the writer. With ``strict_init=True`` reading a read_write element that nothing in
    this dispatch wrote is :class:`UninitializedRead`. An index set that is a strided pattern (``lo + a*r + b*c + ...``,
    distinct, in bounds) is read and written as a view of the buffer rather than gathered and
    scattered; the result is the same.

Subgroups
    ``subgroup_size`` is ``run``'s ``subgroup_size`` (32 unless given), the same for every
    invocation; ``kvdsl run --subgroup-size N`` gives it, and with ``--backend both`` it is the
    adapter's unless given (``kvdsl.runtime.subgroup_size()``: 8 on llvmpipe), so the two
    backends' subgroups are the same invocations. A workgroup's subgroups are runs of that many consecutive local invocation
    indices; WGSL leaves the mapping to the implementation, and every GPU kvdsl runs on (NVIDIA,
    llvmpipe) lays a one-dimensional workgroup out this way, which kernels that shuffle across a
    row of invocations rely on. ``subgroupShuffleXor(x, mask)`` gives each invocation ``x`` of
    the invocation whose lane is its own xor ``mask`` (a workgroup that is not a whole number of
    subgroups ends in a short one). The mask must be uniform and below the subgroup size, and
    the invocation read must exist and be active at that statement (WGSL leaves each of those
    cases indeterminate): otherwise :class:`InterpError`. A loop whose body shuffles never runs batched.
    ``subgroup_invocation_id`` is the local invocation index modulo the subgroup size,
    ``subgroup_id`` the local invocation index over it, ``num_subgroups`` the workgroup's size
    over it, rounded up. The
    reductions (``subgroupAdd``, ``Mul``, ``Min``, ``Max``, ``And``, ``Or``, ``Xor``) and scans
    (``subgroupInclusiveAdd``, ``ExclusiveAdd``, ``InclusiveMul``, ``ExclusiveMul``) fold the
    subgroup's active invocations one at a time in lane order (a float sum's rounding is that
    sequence's; llvmpipe's matches it, another GPU may add in another order, within the op
    table's ``approximate`` accuracy); ``subgroupBallot`` sets bit ``lane`` of the active
    invocations whose condition holds, ``subgroupAll`` / ``Any`` ask it of the active ones,
    ``subgroupElect`` is true on the first active lane and ``subgroupBroadcastFirst`` reads it.
    ``subgroupBroadcast`` (a constant lane), ``subgroupShuffle`` (any lane) must read an
    active invocation of the subgroup (else :class:`InterpError`); ``subgroupShuffleUp`` /
    ``Down`` past the subgroup's edge, which WGSL leaves indeterminate, give what llvmpipe
    does: down wraps around the subgroup, up gives the invocation its own value.

Atomics
    ``atomic<u32>`` / ``atomic<i32>`` elements (of a read_write binding or a workgroup array,
    or a ``var<workgroup>`` atomic of its own, an array of one to the machine) are read and
    written only by the atomic builtins. Statements run over all invocations at
    once, so one statement's atomics are applied one at a time in invocation order (lane
    order; a kernel with atomics on a binding runs as one chunk, so over the whole dispatch),
    each invocation's result the element's value before its own operation: the values
    ``atomicAdd`` returns, an ``atomicExchange`` chain and the winner of each
    ``atomicCompareExchangeWeak`` are that order's, and exact (a GPU's order may differ; its
    final sums, masks, maxima and minima do not). ``atomicCompareExchangeWeak`` never fails
    spuriously. Two atomics on one element never race; WGSL's types keep every plain access
    off an atomic element, so no plain access can race one. An index outside the array is
    :class:`OutOfBounds`.

Workgroup memory and barriers
    A ``var<workgroup>`` array has one row per workgroup of the chunk (zero at the start, as in
    WGSL); an invocation's ``w[i]`` is element ``i`` of its own workgroup's row, and an index
    outside the array is :class:`OutOfBounds` naming it. Since statements already run in lockstep,
    ``workgroupBarrier()`` only checks that each workgroup has all of its invocations active or
    none (else :class:`InterpError`: WGSL leaves such a barrier undefined) and starts a new race
    interval: between two barriers, two invocations of a workgroup writing one element, one
    reading an element another wrote, or one writing an element another read, is a
    :class:`RaceError`. Of an array of vectors each lane counts as an element of its own, as in
    WGSL: ``w[i][lane] = x`` by four invocations on four lanes is no race, and a load of the
    whole ``w[i]`` reads all four. A ``var<workgroup>`` of one scalar, vector, matrix or struct
    is one element of words per workgroup, its races found per word (``total``, ``acc.y``).
    With ``strict_init`` a read of an element (lane) nothing wrote in the dispatch is
    :class:`UninitializedRead`. A ``var<private>`` is a var of the module scope with a value per
    invocation, set to its initialiser (or zero) at the start of each chunk; it cannot race.
    The uniforms other than params are module-scope values, like consts.
    ``storageBarrier()`` checks the same arrival and orders storage memory within a workgroup:
    an element written (read) before it may be read or overwritten (overwritten) after it by
    another invocation of its workgroup (of another workgroup, it is still a
    :class:`RaceError`, unless atomics order them as Storage buffers says).

Errors name the statement as :func:`kvdsl.ir.show.show` prints it and, given ``source_lines``
(``id(stmt)`` → line, which the WGSL frontend supplies), its source line.

Modules
    :mod:`~kvdsl.interp.machine` runs statements and control flow (:class:`Machine`), built from
    :mod:`~kvdsl.interp.scope` (name lookup), :mod:`~kvdsl.interp.exprs` (expressions),
    :mod:`~kvdsl.interp.memory` (loads, stores, bounds and race checks, barriers; textures
    through :mod:`~kvdsl.interp.textures`),
    :mod:`~kvdsl.interp.structs` (memory held as words) and :mod:`~kvdsl.interp.assign`
    (assignment), with :mod:`~kvdsl.interp.races` (the storage race records and what orders
    accesses); :mod:`~kvdsl.interp.batch` runs batched loops; :mod:`~kvdsl.interp.values` holds
    the values (grid, masks, conversions), :mod:`~kvdsl.interp.buffers` the memory (storage
    buffers, workgroup arrays), :mod:`~kvdsl.interp.indexsets` the strided index sets and
    :mod:`~kvdsl.interp.errors` the errors."""

from __future__ import annotations

import math

import numpy as np

from kvdsl.ir.dispatch import workgroups as dispatch_workgroups
from kvdsl.ir.host import split_values
from kvdsl.ir.tree import Kernel
from kvdsl.ir.types import Sampler, StorageTexture
from kvdsl.interp.batch import Fallback
from kvdsl.interp.errors import (
    InterpError,
    OutOfBounds,
    RaceError,
    UninitializedRead,
    WorkBudget,
)
from kvdsl.interp.machine import MAX_STEPS, Machine
from kvdsl.interp.buffers import params_values, storage, texture_memory, uniform_values
from kvdsl.interp.values import Grid

#: The most invocations one dispatch may have in the interpreter: a kernel that reads a
#: read_write binding runs as one chunk, several arrays over every invocation, so past this its
#: memory would be the machine's (WebGPU allows 65,535^3 workgroups of up to 256 invocations).
MAX_INVOCATIONS = 1 << 26


class TooManyInvocations(ValueError):
    """A dispatch with more invocations than :data:`MAX_INVOCATIONS`; refused before anything
    is allocated."""


#: The subgroup sizes WGSL allows (``subgroupMinSize`` .. ``subgroupMaxSize`` lie in 4..128).
SUBGROUP_SIZES = (4, 8, 16, 32, 64, 128)

__all__ = [
    "MAX_INVOCATIONS",
    "SUBGROUP_SIZES",
    "TooManyInvocations",
    "InterpError",
    "MAX_STEPS",
    "OutOfBounds",
    "RaceError",
    "UninitializedRead",
    "WorkBudget",
    "run",
]


def run(
    kernel: Kernel,
    buffers: dict[str, np.ndarray],
    params: dict | None = None,
    workgroups: tuple[int, int, int] | None = None,
    *,
    strict_init: bool = False,
    source_lines: dict[int, int] | None = None,
    subgroup_size: int = 32,
    accesses: dict[str, list[int]] | None = None,
    max_steps: int = MAX_STEPS,
    loop_trips: dict | None = None,
) -> dict[str, np.ndarray]:
    """Interpret one dispatch of ``kernel``; the final contents of each read_write binding.

    ``buffers`` maps every binding name to an array (read_write ones are not modified; their new
    contents come back with the same dtype and shape); ``params`` gives the params struct's
    fields, and each other uniform's value by its name (:class:`~kvdsl.ir.tree.Uniform`); ``workgroups`` defaults to the kernel's dispatch rule for ``params``;
    ``subgroup_size`` (a power of two in 4..128) is the ``subgroup_size`` builtin and the width
    of the subgroups ``subgroupShuffleXor`` reads across. ``accesses``, when given, is
    filled with each binding's ``[bytes loaded, bytes stored]``: every access of every active
    invocation, one element each (an element of a vector binding is the whole vector).
    ``max_steps`` is the work budget: a chunk of the dispatch that runs more statements than
    that stops with :class:`WorkBudget` at the loop it was in, named by its source line (a
    parsed kernel's) or its header and the kernel's name (a built one's). ``loop_trips``, when
    given, is filled with the loop trips the run made (:meth:`Machine.count_trips
    <kvdsl.interp.machine.Machine.count_trips>`): ``"most"``, and ``"past"``, the loop that
    first took a chunk past ``loop_trips["mark"]`` where the caller gave one.
    """
    if subgroup_size not in SUBGROUP_SIZES:
        raise ValueError(
            f"subgroup_size {subgroup_size!r}: expected a power of two in 4..128 "
            f"({', '.join(map(str, SUBGROUP_SIZES))})"
        )
    given = (*kernel.bindings, *(t for t in kernel.textures if not isinstance(t.ty, Sampler)))
    missing = [b.name for b in given if b.name not in buffers]
    if missing:
        raise KeyError(f"kernel {kernel.name} needs buffers {', '.join(missing)}")
    fields = kernel.params.fields if kernel.params is not None else ()
    given, others = split_values(tuple(n for n, _ in fields), kernel.uniforms, params)
    values = params_values(fields, given)
    uniforms = uniform_values(kernel.uniforms, others)
    if workgroups is None:
        workgroups = dispatch_workgroups(kernel, {k: int(v) for k, v in given.items()})
    size = kernel.workgroup_size
    total = math.prod(int(w) for w in workgroups) * math.prod(size)
    if total > MAX_INVOCATIONS:
        x, y, z = workgroups
        raise TooManyInvocations(
            f"workgroups {x},{y},{z} of {size[0]}x{size[1]}x{size[2]} invocations: {total:,} "
            f"invocations, more than the interpreter runs ({MAX_INVOCATIONS:,})"
        )
    for batching in (True, False):
        stores = {b.name: storage(b, buffers[b.name]) for b in kernel.bindings}
        grid = Grid(workgroups, kernel.workgroup_size, subgroup_size=subgroup_size)
        if loop_trips is not None:
            loop_trips.pop("most", None)  # a batched attempt that falls back counts again
            loop_trips.pop("past", None)
        machine = Machine(
            kernel,
            grid,
            stores,
            values,
            strict_init,
            source_lines,
            batching,
            max_steps,
            loop_trips,
            uniforms,
        )
        machine.textures = {t.name: texture_memory(t, buffers.get(t.name)) for t in kernel.textures}
        if accesses is not None:
            accesses.clear()  # a batched attempt that falls back counts again from the start
            machine.accesses = accesses
        try:
            machine.run()
        except (InterpError, Fallback) as e:
            # A batched loop reports a defect in its own order, or met two trips storing one
            # element: trip by trip from the start gives the error (or result) WGSL's order
            # gives.
            if batching and machine.batched:
                continue
            raise e
        break
    out = {b.name: stores[b.name].flat for b in kernel.bindings if b.access == "read_write"}
    written = [
        t for t in kernel.textures if isinstance(t.ty, StorageTexture) and t.ty.access != "read"
    ]
    return out | {t.name: machine.textures[t.name].data for t in written}
