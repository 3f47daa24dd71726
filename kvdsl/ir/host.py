"""How a host names the values of a kernel's uniforms in the one dict it gives (``params`` of
:func:`kvdsl.interp.run` and :func:`kvdsl.runtime.run`, ``--params`` of ``kvdsl run``): a
field of the params struct by its name or as ``params.NAME``, each other uniform by its name,
as the WGSL text reads them (``params.n``, ``n``). Where a uniform is named like a field, the
bare name is the uniform's and the field is given only as ``params.NAME``."""

from __future__ import annotations

from typing import Mapping

PREFIX = "params."


def split_values(
    fields: tuple[str, ...], uniforms: tuple, values: Mapping[str, object] | None
) -> tuple[dict, dict]:
    """``values`` parted into the params fields' (by field name; ``fields`` the params struct's
    field names, empty without one) and the other uniforms' (by each
    :class:`~kvdsl.ir.tree.Uniform`'s name). A uniform named like a field whose value is given
    by the bare name while the field's is not given as ``params.NAME`` raises KeyError naming
    both."""
    names = {u.name for u in uniforms}
    values = values or {}
    params: dict = {}
    others: dict = {}
    for k, v in values.items():
        if k.startswith(PREFIX):
            params[k[len(PREFIX) :]] = v
        elif k in names:
            others[k] = v
        else:
            params[k] = v
    for n in sorted(names & set(fields)):
        if n not in params:
            raise KeyError(
                f"params field '{n}' and uniform '{n}' share the name '{n}': give the field as "
                f"'{PREFIX}{n}' and the uniform as '{n}'"
            )
    return params, others
