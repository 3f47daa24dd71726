"""Typed, validated, frozen kernel configurations and the error they raise.

A config is a point on the axes of :mod:`kvdsl.kernels`: closed choices are enums (:class:`Walk`,
:class:`Element`, :class:`RowLayout`, :class:`Reduction`, :class:`Bits`, the regions), each a
``StrEnum`` (``IntEnum`` for bits) so that JSON, :func:`as_dict`, ``index.json`` and the emitted
headers print their plain values. The fields every mode shares live in :class:`KernelConfig` and
:class:`CacheConfig`, their checks written once; each mode's class adds its own fields and checks
(:meth:`KernelConfig.check_fields`, :meth:`KernelConfig.check_schedule`), through the field specs
here (:func:`positive_int`, :func:`multiple_of`, :func:`one_of`, :func:`unset`, :func:`flag`),
each with one message format.

Strings (``--vars`` JSON, :func:`from_dict`, the legacy bridge) become members as the constructor
stores them (:class:`Slot`); a value that names no member stays as given and the mode's check
rejects it with a :class:`ConfigError` naming the field, the value and what is allowed.

A cache's format is the one open choice: :data:`DenseFormat` names the built-in formats of
:mod:`kvdsl.nodes.formats`, and a ``format`` field (:class:`FormatSlot`) also takes any
:class:`kvdsl.nodes.formats.Format` value, a built-in's equal stored as its member.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import KW_ONLY, dataclass
from enum import Enum, IntEnum, StrEnum
from typing import Any, Callable, ClassVar, Iterable

from kvdsl.ir.types import SCALARS, Scalar
from kvdsl.nodes.formats import FORMATS, Format

MAX_WORKGROUP = 256  # WebGPU's default maxComputeInvocationsPerWorkgroup / SizeX
MAX_FOLD = 65535  # WebGPU's default maxComputeWorkgroupsPerDimension
# One token's K row (kvHeads * headDim words of 4 bytes) must fit WebGPU's default
# maxStorageBufferBindingSize (128 MiB); larger shapes could never be bound.
MAX_HIDDEN = 2**25


class Walk(StrEnum):
    """Which invocation touches which element (see :mod:`kvdsl.nodes.walks`)."""

    PER_ROW = "per_row"
    COOPERATIVE = "cooperative"
    HYBRID = "hybrid"
    FLAT = "flat"


#: The template's walks: their kernels keep the template's dispatch and run the flat walk's
#: program in blocks wherever :class:`kvdsl.kernels.plan.WalkPlan` says it serves them.
TEMPLATE_WALKS = (Walk.PER_ROW, Walk.COOPERATIVE, Walk.HYBRID)
#: The walks of a pass that moves rows as they are (``copy``, ``merge``, ``merge_share``'s
#: retain pass): all but ``hybrid``, the template's walk of a rotary append.
COPY_WALKS = (Walk.COOPERATIVE, Walk.PER_ROW, Walk.FLAT)


class Element(StrEnum):
    """The scalar type a binding stores (its WGSL spelling)."""

    F32 = "f32"
    F16 = "f16"
    I32 = "i32"
    U32 = "u32"

    @property
    def scalar(self) -> Scalar:
        """The IR scalar type."""
        return SCALARS[self.value]


FLOATS = (Element.F32, Element.F16)

#: The binding names of the K/V pairs the modes read and write.
PAST, NEW, PRESENT = ("past_k", "past_v"), ("new_k", "new_v"), ("present_key", "present_value")
#: The rotary tables.
ROTARY_TABLES = ("cos_cache", "sin_cache")
#: The packed bindings (:class:`Bindings`): cos and sin in one table, K and V scales in one.
ROTARY_TABLE, KV_SCALE = "rotary_table", "kv_scale"
#: WebGPU's default ``maxStorageBuffersPerShaderStage``.
MAX_STORAGE_BUFFERS = 8


class Bindings(StrEnum):
    """Which storage bindings a quantising kernel declares.

    ``template``: the legacy template's (``cos_cache`` and ``sin_cache``, ``k_scale`` and
    ``v_scale``), up to 10 with K RMSNorm and rotary; ``packed``: within WebGPU's default 8,
    cos and sin in one ``rotary_table`` (per position ``half`` cos values, then ``half`` sin
    values) and the scales in one ``kv_scale`` of ``vec2<f32>`` entries (K's scale, V's scale).
    """

    TEMPLATE = "template"
    PACKED = "packed"


#: The BSH sources of the modes that read new K/V (``transpose``'s, ``build``'s, the others').
SOURCES = NEW + ("key", "value", "src_k", "src_v")


def window_bindings(mode: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The bindings a cache window cuts, by name: the BNSH cache (bound by whole ``(batch, kv
    head)`` slices) and the BSH sources (bound whole or by whole batches). Every other binding
    (``seqlens_k``, rotary tables, K-norm weight, scales) is bound whole. ``copy``'s
    ``src_k`` / ``src_v`` are a BNSH cache."""
    if mode == "copy":
        return ("src_k", "src_v") + PRESENT, ()
    return PAST + PRESENT, SOURCES


class RowLayout(StrEnum):
    """The order of Q's rows (``qkv`` writes them, ``attend`` reads them) and of attention's
    output: head-major BNSH ``[batch, heads, queries, D]`` or token-major BSH ``[batch, queries,
    heads * D]``."""

    BNSH = "bnsh"
    BSH = "bsh"


class Reduction(StrEnum):
    """How K RMSNorm sums a row on the flat program: through workgroup memory (any device) or
    across the subgroup with shuffles (devices with WGSL's ``subgroups``)."""

    WORKGROUP = "workgroup"
    SUBGROUP = "subgroup"


class Bits(IntEnum):
    """The width of a quantised element."""

    INT8 = 8
    INT4 = 4


class ShareRegion(StrEnum):
    """The rows a ``merge_share`` pass owns."""

    RETAIN = "retain"
    APPEND = "append"


class ShiftRegion(StrEnum):
    """The rows a ``window_shift`` pass owns."""

    ALL = "all"
    SHIFT = "shift"
    APPEND = "append"


class RotaryPosition(StrEnum):
    """Where ``append_quant`` rotates new K: at its cache row, or at ``pastSeq + t``."""

    ROW = "row"
    PAST_SEQ = "past_seq"


class ConfigError(ValueError):
    """A config field holds a value the kernel cannot be built for."""

    def __init__(
        self, field: str, value: Any, allowed: str, spelling: Callable[[Any], str] = repr
    ) -> None:
        super().__init__(f"{field}={spelling(_plain(value))}: expected {allowed}")
        self.field = field
        self.value = value
        self.allowed = allowed


def _plain(value: Any) -> Any:
    """An enum member's plain value (its repr is what a user typed), anything else as it is."""
    return value.value if isinstance(value, Enum) else value


def require(ok: bool, field: str, value: Any, allowed: str) -> None:
    """Raise :class:`ConfigError` unless ``ok``."""
    if not ok:
        raise ConfigError(field, value, allowed)


def positive_int(field: str, value: Any, limit: int | None = None) -> None:
    """``value`` is an int (not a bool) in ``[1, limit]``."""
    ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
    ok = ok and (limit is None or value <= limit)
    require(ok, field, value, "a positive integer" + (f" <= {limit}" if limit else ""))


def multiple_of(field: str, value: int, n: int, rest: str = "") -> None:
    """``value`` a multiple of ``n`` (``rest`` ends the message: where, and why)."""
    require(value % n == 0, field, value, f"a multiple of {n}{rest}")


def query_heads(q_heads: Any, kv_heads: int) -> None:
    """``q_heads`` a positive multiple of ``kv_heads`` (grouped-query attention)."""
    positive_int("q_heads", q_heads)
    what = f"a multiple of kv_heads ({kv_heads}) for grouped-query attention"
    require(q_heads % kv_heads == 0, "q_heads", q_heads, what)


def one_of(field: str, value: Any, allowed: Iterable[Enum]) -> None:
    """``value`` is one of the members ``allowed`` (a string or number the constructor could not
    make a member of, ``8.0`` or ``True`` for ``8``, is not)."""
    allowed = tuple(allowed)
    ok = any(value is a for a in allowed)
    require(ok, field, value, "one of " + ", ".join(repr(a.value) for a in allowed))


def unset(field: str, value: Any, default: Any, when: str) -> None:
    """``value`` the field's ``default`` (``when``: where it must stay unset, and why); the
    message spells the default as a user writes it: ``'inline' (unset)``, ``0 (unset)``,
    ``true (unset)``, ``unset (None)``."""
    ok = value == default if type(default) is int else value is default
    if default is None:
        shown = "unset (None)"
    elif isinstance(default, bool):
        shown = f"{str(default).lower()} (unset)"
    else:
        shown = f"{_plain(default)!r} (unset)"
    require(ok, field, value, f"{shown} {when}")


def flag(field: str, value: Any) -> None:
    """``value`` is a real bool (not 0/1, not a string)."""
    require(isinstance(value, bool), field, value, "true or false")


class Slot:
    """A config field that is a descriptor: the constructor stores its value once, converting a
    string (an int for :class:`Bits`) to the member of ``enum`` it names; a value left ``None``
    reads as ``derive(config)``, a default that depends on other fields (the frozen config is
    never written after construction). A field with ``allowed`` members is checked to hold one
    of them (:meth:`check`) before the mode's own checks."""

    def __init__(
        self,
        default: Any = None,
        enum: type[Enum] | None = None,
        derive: Callable[[Any], Any] | None = None,
        allowed: Iterable[Enum] | None = None,
    ) -> None:
        self.default, self.enum, self.derive = default, enum, derive
        self.allowed = None if allowed is None else tuple(allowed)

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = "_" + name

    def __get__(self, cfg: Any, owner: type | None = None) -> Any:
        if cfg is None:
            return self.default  # the dataclass field's default
        value = cfg.__dict__[self.key]
        if value is None and self.derive is not None:
            return self.derive(cfg)
        return value

    def __set__(self, cfg: Any, value: Any) -> None:
        if self.enum is not None and type(value) in (str, int):
            value = next((m for m in self.enum if m.value == value), value)
        cfg.__dict__[self.key] = value

    def check(self, field: str, value: Any) -> None:
        """``value`` one of the ``allowed`` members."""
        one_of(field, value, self.allowed)


def choice(default: Enum, allowed: Iterable[Enum] | None = None) -> Any:
    """A field holding one of ``allowed`` (every member of ``default``'s enum unless given),
    given as the member or its value."""
    return Slot(default, type(default), allowed=type(default) if allowed is None else allowed)


#: How a cache row is stored: the built-in formats by name (:data:`kvdsl.nodes.formats.FORMATS`);
#: a config's ``format`` also takes any :class:`kvdsl.nodes.formats.Format` value.
DenseFormat = StrEnum("DenseFormat", {name.upper(): name for name in FORMATS})


class FormatSlot(Slot):
    """A config's ``format`` field: a member of ``enum`` (given as the member or its name), or
    a :class:`kvdsl.nodes.formats.Format` value; a value equal to the built-in format of its name
    is stored as that member, so that a config is the same however its format was given."""

    def __init__(self, default: Any, enum: type[Enum]) -> None:
        super().__init__(default, enum, allowed=enum)

    def __set__(self, cfg: Any, value: Any) -> None:
        if isinstance(value, Format) and FORMATS.get(value.name) == value:
            value = value.name
        super().__set__(cfg, value)

    def check(self, field: str, value: Any) -> None:
        """A format value or a member of ``enum`` (or None, where that is the default)."""
        if value is not None or self.default is not None:
            one_format(field, value, self.allowed)


def format_choice(default: Any) -> Any:
    """A :class:`FormatSlot` defaulting to ``default`` (a member of its enum)."""
    return FormatSlot(default, type(default))


def one_format(field: str, value: Any, allowed: Any) -> None:
    """``value`` is a :class:`kvdsl.nodes.formats.Format` or one of the members ``allowed``."""
    if not isinstance(value, Format):
        one_of(field, value, allowed)


#: The metadata of a field :func:`as_dict` prints only where it is set (:func:`where_set`).
WHERE_SET = {"published": "where set"}
#: :class:`KernelConfig`'s fields, the schedule of every mode: printed after the mode's own.
SCHEDULE = ("workgroup_size", "fold", "window")


def where_set(default: Any) -> Any:
    """A field :func:`as_dict` prints only where it holds a value other than ``default`` (falsy):
    ``window``, attend's ``kivi_group``, so that a variant publishes the fields it uses."""
    return dataclasses.field(default=default, metadata=WHERE_SET)


class FieldOrder:
    """``KEYS``: a config class's fields in the dataclass's order, :data:`SCHEDULE` last; on a
    config, a :func:`where_set` field only where it is set."""

    def __get__(self, cfg: Any, owner: type) -> Any:
        if not dataclasses.is_dataclass(owner):
            return self  # KernelConfig's own annotation, read as the dataclass is made
        fields = sorted(dataclasses.fields(owner), key=lambda f: f.name in SCHEDULE)
        shown = [
            f for f in fields if cfg is None or f.metadata != WHERE_SET or getattr(cfg, f.name)
        ]
        return tuple(f.name for f in shown)


@dataclass(frozen=True)
class KernelConfig:
    """The fields every mode has: the workgroup size, the dispatch's fold width and ``window``.

    ``window`` makes the kernel work on a window of whole ``(batch, kv head)`` slices of the
    cache (:class:`kvdsl.nodes.index.CacheWindow`): its cache bindings hold the window's slices
    only, the params gain ``headBase`` (the first slice of the bound range) and ``batchBase``
    (the first batch of the bound BSH source range), so that a cache past one storage binding
    runs as several dispatches (:mod:`kvdsl.runtime.windows`).

    ``workgroup_size`` left ``None`` reads as the mode's default (:meth:`default_workgroup_size`).
    ``KEYS`` is the order of the fields in :func:`as_dict` (as published in ``index.json``):
    :class:`FieldOrder`'s. A field's declaration states its first check, made before the
    mode's: a :func:`choice` (or :func:`format_choice`) holds one of its members, a field
    whose default is a bool holds a bool.
    """

    mode: ClassVar[str]
    KEYS: ClassVar[FieldOrder] = FieldOrder()
    _: KW_ONLY
    workgroup_size: int = Slot(derive=lambda cfg: cfg.default_workgroup_size())
    fold: int = MAX_FOLD
    window: bool = where_set(False)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # the checks the fields' declarations state
            slot = inspect.getattr_static(type(self), f.name, None)
            if isinstance(slot, Slot) and slot.allowed is not None:
                slot.check(f.name, self.__dict__[slot.key])
            elif type(f.default) is bool:
                flag(f.name, self.__dict__[f.name])
        self.check_fields()
        positive_int("workgroup_size", self.workgroup_size, MAX_WORKGROUP)
        positive_int("fold", self.fold, MAX_FOLD)
        self.check_schedule()

    def check_fields(self) -> None:
        """The mode's own checks of its fields (before the workgroup and fold checks)."""

    def check_schedule(self) -> None:
        """The mode's checks that read the workgroup size (after the workgroup and fold checks)."""

    def refuse_window(self, why: str | None = None) -> None:
        """``window`` false: the mode has no windowed form (``why``, the message's reason)."""
        reason = "" if why is None else f" ({why})"
        require(not self.window, "window", self.window, f"false for {self.mode}{reason}")

    def default_workgroup_size(self) -> int:
        """The workgroup size of a config that leaves it unset."""
        return DEFAULT_WORKGROUP


#: mode → (config class, kernel builder): each builder registers its modes where it is defined
#: (:func:`builds`); :data:`kvdsl.catalog.MODES` is this table.
BUILDERS: dict[str, tuple[type[KernelConfig], Callable[..., Any]]] = {}


def builds(*configs: type[KernelConfig]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Registers the decorated function as the kernel builder of each config class's mode
    (:data:`BUILDERS`); a mode registered twice is refused."""

    def register(builder: Callable[..., Any]) -> Callable[..., Any]:
        for cls in configs:
            if cls.mode in BUILDERS:
                raise ValueError(f"mode {cls.mode!r} has a builder already")
            BUILDERS[cls.mode] = (cls, builder)
        return builder

    return register


#: The flat walk's workgroup size when a config leaves it unset.
FLAT_WORKGROUP = 256
#: The flat walk's default when K RMSNorm reduces its rows in workgroup memory: each workgroup
#: waits at a barrier, and smaller workgroups keep more of them in flight.
KNORM_WORKGROUP = 128
#: Every other walk's default.
DEFAULT_WORKGROUP = 64


def walk_workgroup(walk: Walk) -> int:
    """The default workgroup size of ``walk``."""
    return FLAT_WORKGROUP if walk is Walk.FLAT else DEFAULT_WORKGROUP


@dataclass(frozen=True)
class CacheConfig(KernelConfig):
    """A config over a KV cache of ``kv_heads`` heads of ``head_dim`` elements per token."""

    kv_heads: int
    head_dim: int

    def __post_init__(self) -> None:
        positive_int("kv_heads", self.kv_heads)
        positive_int("head_dim", self.head_dim)
        hidden = self.kv_heads * self.head_dim
        require(
            hidden <= MAX_HIDDEN,
            "kv_heads*head_dim",
            hidden,
            f"at most {MAX_HIDDEN} (one token's row must fit WebGPU's default "
            "max-storage-buffer-binding-size of 128 MiB)",
        )
        super().__post_init__()

    @property
    def hidden(self) -> int:
        """One token's elements over every kv head."""
        return self.kv_heads * self.head_dim


def require_window(window: bool, walk: Walk) -> None:
    """A windowed kernel (``window=True``) walks the flat walk: its rows are the window's."""
    if window:
        require(
            walk is Walk.FLAT,
            "walk",
            walk,
            "'flat' for window=True (a windowed kernel is a named variant on the flat walk)",
        )


def require_rotary_vectors(rotary: bool, head_dim: int, half: Any = None, mode: str = "") -> None:
    """With ``rotary`` on a walk of ``vec4`` values, a vector in one half of the rotated part:
    ``head_dim`` a multiple of 8 over the whole head, ``half`` (``rotary_half``, checked by
    :func:`require_rotary`) a multiple of 4 for a partial rotary (``mode`` names the mode)."""
    if not rotary:
        return
    if half is None:
        multiple_of("head_dim", head_dim, 8, " with rotary (a vec4 lies in one half of the row)")
        return
    why = "a rotated vec4 lies in one half of the rotated part"
    multiple_of("rotary_half", half, 4, f" for {mode} ({why})")


class RotaryHalf:
    """The derived rotary values of a config with the fields ``head_dim``, ``rotary`` and
    ``rotary_half`` (a mixin of the config classes, which declare the fields)."""

    head_dim: int
    rotary: bool
    rotary_half: int | None

    @property
    def half(self) -> int:
        """Rotary's pairs per row: ``rotary_half``, or half the head where it is unset."""
        return rotary_pairs(self.head_dim, self.rotary_half)

    @property
    def partial(self) -> bool:
        """Whether rotary turns only the first ``2 * half`` elements of a row (the rest pass
        through)."""
        return self.rotary and 2 * self.half < self.head_dim

    @property
    def whole_rotary(self) -> bool:
        """Whether rotary turns the whole head: its pairs then lie half a row apart, where a
        quantiser's paired runs (or a strided Q row's lane) hold both."""
        return self.rotary and not self.partial


def require_rotary(
    rotary: Any, head_dim: int, allowed: bool = True, why: str = "", half: Any = None
) -> None:
    """``rotary`` a bool, on only where ``allowed`` (else ``why`` is what is expected); ``half``
    (the config's ``rotary_half``) unset for rotary over the whole head (then ``head_dim`` is
    even), or a whole number from 1 to ``head_dim / 2``: the first ``2 * half`` elements of a
    row rotate, the rest pass through."""
    flag("rotary", rotary)
    if not rotary:
        unset("rotary_half", half, None, "unless rotary=True")
        return
    require(allowed, "rotary", rotary, why)
    if half is None:
        require(head_dim % 2 == 0, "head_dim", head_dim, "even for rotary")
        return
    ok = isinstance(half, int) and not isinstance(half, bool) and 1 <= half <= head_dim // 2
    require(
        ok,
        "rotary_half",
        half,
        f"a whole number from 1 to head_dim / 2 = {head_dim // 2} (the rotated pairs per row;"
        " unset: head_dim / 2)",
    )


def rotary_pairs(head_dim: int, half: int | None) -> int:
    """The rotated pairs of a row: ``half``, or ``head_dim / 2`` where it is unset."""
    return head_dim // 2 if half is None else half


def as_dict(cfg: KernelConfig) -> dict[str, Any]:
    """The config's fields as a JSON-ready dict: its mode, then ``KEYS``."""
    return {"mode": cfg.mode, **{key: getattr(cfg, key) for key in cfg.KEYS}}


def from_dict(cls: type[KernelConfig], data: dict[str, Any]) -> KernelConfig:
    """Make ``cls`` from a dict, naming unknown and missing fields in the error."""
    what = f"the {getattr(cls, 'mode', cls.__name__)} config"
    require(isinstance(data, dict), "config", data, f"an object of the fields of {what}")
    fields = dataclasses.fields(cls)
    names = {f.name for f in fields}
    for key in data:
        require(key in names, key, data[key], f"a field of {what}: {', '.join(sorted(names))}")
    for f in fields:
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        require(not required or f.name in data, f.name, None, f"a value (required by {what})")
    return cls(**data)
