"""A faster ``__init__`` for the IR's frozen slots dataclasses (:mod:`kvdsl.ir.tree`'s
expressions and statements): building nodes is most of the builder's time."""

from __future__ import annotations

from dataclasses import MISSING, fields


def slot_init(cls: type) -> type:
    """Give a frozen slots dataclass an ``__init__`` that stores each field through its slot
    descriptor: the same signature and result as the generated one, which goes through
    ``object.__setattr__`` per field and made node construction most of the builder's time."""
    ns: dict[str, object] = {}
    params, body = [], []
    for f in fields(cls):
        if f.default_factory is not MISSING:
            return cls  # keep the generated __init__: it builds the default
        if f.default is MISSING:
            params.append(f.name)
        else:
            ns[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
        ns[f"_s_{f.name}"] = cls.__dict__[f.name].__set__
        body.append(f"    _s_{f.name}(self, {f.name})\n")
    if not body:
        return cls
    exec(f"def __init__(self, {', '.join(params)}):\n{''.join(body)}", ns)
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"  # type: ignore[attr-defined]
    cls.__init__ = init  # type: ignore[misc]
    return cls
