"""The dispatch line of a WGSL file (:data:`kvdsl.catalog_files.DISPATCH_LINE`), read by
``kvdsl run FILE.wgsl``: the workgroups for the params without ``--workgroups``."""

from __future__ import annotations

from typing import Any, Mapping

from kvdsl.cli.inputs import UsageError, read_wgsl


def file_dispatch(path: str) -> dict[str, Any]:
    """The dispatch rule the WGSL file ``path`` states in its dispatch line (index.json's
    ``dispatch``); a :class:`UsageError` where it has none, or one that states no rule."""
    from kvdsl.catalog_files import DISPATCH_LINE, DispatchLineError, stated_dispatch

    try:
        rule = stated_dispatch(path, read_wgsl(path))
    except DispatchLineError as err:
        raise UsageError(str(err)) from None
    if rule is None:
        raise UsageError(
            f"{path}: the file states no dispatch rule (kvdsl's files do, in a line "
            f"'{DISPATCH_LINE.strip()} {{...}}'): give --workgroups"
        )
    return rule


def rule_workgroups(
    path: str, rule: Mapping[str, Any], params: Mapping[str, Any]
) -> tuple[int, int, int]:
    """The workgroups ``rule`` (:func:`file_dispatch`'s) gives for ``params`` (checked
    already): :func:`kvdsl.contract.workgroups`, the rule ``kvdsl.js`` implements too."""
    from kvdsl.contract import ContractError, workgroups

    try:
        return workgroups({"dispatch": rule}, params)
    except ContractError as err:
        raise UsageError(f"{path}: the dispatch line's rule: {err}") from None
