"""The package's imports follow the table in docs/architecture.md (read from it, so the two
cannot differ), no module imports another's private (``_``) name, no import circle runs (an
import inside a function counts; one under ``TYPE_CHECKING``, for annotations alone, does not),
and nothing installed imports ``tests/`` or ``benchmarks/``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.helpers.paths import ROOT

PACKAGE = ROOT / "kvdsl"
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def layer_table(text: str) -> dict[str, set[str]]:
    """Each part of the package and the parts it may import, from the table under the heading
    ``## Imports`` in ``text`` (docs/architecture.md): a row ``| `a`, `b` | `c`, `d` |`` lets
    ``a`` and ``b`` import ``c`` and ``d``; ``nothing of kvdsl`` is no part."""
    _, _, section = text.partition("\n## Imports\n")
    rows = [line for line in section.split("\n## ")[0].splitlines() if line.startswith("|")]
    table: dict[str, set[str]] = {}
    for row in rows[2:]:  # past the header and its rule
        cells = row.strip("|").split("|")
        if len(cells) != 2:
            raise ValueError(f"{ARCHITECTURE.name}: a row of the import table has 2 cells: {row}")
        parts, allowed = (re.findall(r"`([a-z_]+)`", cell) for cell in cells)
        if not parts or not allowed and cells[1].strip() != "nothing of kvdsl":
            raise ValueError(f"{ARCHITECTURE.name}: a row names no part or no imports: {row}")
        for name in parts:
            table[name] = set(allowed)
    return table


#: Each part of the package and the parts it may import (imports inside functions and under
#: ``TYPE_CHECKING`` included): docs/architecture.md's table.
MAY_IMPORT = layer_table(ARCHITECTURE.read_text())


def imports(path: Path) -> set[str]:
    """The absolute module names ``path`` imports anywhere in its text."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            if node.module == "kvdsl":
                found |= {f"kvdsl.{a.name}" for a in node.names}
    return found


def private_imports(path: Path) -> list[str]:
    """The names starting with one ``_`` that ``path`` imports from a module of kvdsl."""
    return [
        f"{node.module}.{a.name}"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kvdsl")
        for a in node.names
        if a.name.startswith("_") and not a.name.startswith("__")
    ]


def module_name(path: Path) -> str:
    """``kvdsl.a.b`` of ``kvdsl/a/b.py`` (``kvdsl.a`` of ``kvdsl/a/__init__.py``)."""
    words = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(words[:-1] if words[-1] == "__init__" else words)


def run_imports(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that importing ``path`` or calling into it imports: every
    import of its text but those under ``if TYPE_CHECKING:``; ``from a import b`` is module
    ``a.b`` where there is one, else ``a``."""
    tree = ast.parse(path.read_text())
    skipped = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")
        for stmt in node.body
        for inner in ast.walk(stmt)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for a in node.names:
                name = f"{node.module}.{a.name}"
                found.add(name if name in modules else node.module)
    return found & modules


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph`` (module → the modules it imports): each strongly
    connected set of more than one module, sorted."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out = []

    def visit(v: str) -> None:
        order[v] = low[v] = len(order)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            group = []
            while not group or group[-1] != v:
                group.append(stack.pop())
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in order:
            visit(v)
    return out


def part(path: Path) -> str:
    """The part of the package ``path`` belongs to: its folder, or its module's name."""
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def test_every_part_of_the_package_is_placed():
    parts = {part(p) for p in PACKAGE.rglob("*.py")} - {"__init__"}
    assert parts == set(MAY_IMPORT)


def test_imports_point_down_the_layers():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        own = part(path)
        allowed = MAY_IMPORT.get(own, set()) | {own}
        for name in imports(path):
            words = name.split(".")
            if words[0] != "kvdsl" or len(words) == 1:
                continue
            target = words[1]
            if target == "__version__":
                continue
            if target not in allowed:
                upward.append(f"{path.relative_to(ROOT)} imports {name}")
    assert upward == []


def test_no_module_imports_a_private_name_of_another():
    found = [
        f"{p.relative_to(ROOT)} imports {name}"
        for p in sorted(PACKAGE.rglob("*.py"))
        for name in private_imports(p)
    ]
    assert found == []


def test_no_import_circle():
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    graph = {m: run_imports(p, modules) - {m} for m, p in paths.items()}
    assert circles(graph) == []


def test_a_circle_is_found_through_an_import_inside_a_function(tmp_path):
    f = tmp_path / "mod.py"
    f.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from kvdsl.c import C\n"
        "def g():\n    from kvdsl.a import b\n"
    )
    assert run_imports(f, {"kvdsl.a", "kvdsl.a.b", "kvdsl.c"}) == {"kvdsl.a.b"}
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert circles(graph) == [["a", "b", "c"]] and circles(graph | {"c": {"d"}}) == []


def test_nothing_installed_imports_tests_or_benchmarks():
    found = [
        f"{p.relative_to(ROOT)} imports {name}"
        for p in sorted(PACKAGE.rglob("*.py"))
        for name in imports(p)
        if name.split(".")[0] in ("tests", "benchmarks")
    ]
    assert found == []
    text = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py"))
    assert "sys.path" not in text


def test_the_checks_fail_on_an_upward_import(tmp_path):
    # The walk itself is held to a planted case: an import inside a function, one under
    # TYPE_CHECKING, and a from-import of the package root all count.
    f = tmp_path / "mod.py"
    f.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from kvdsl.catalog import Model\n"
        "def g():\n    import kvdsl.cli.run\n"
        "from kvdsl import harness\n"
    )
    assert {"kvdsl.catalog", "kvdsl.cli.run", "kvdsl.harness"} <= imports(f)
    f.write_text("from kvdsl.nodes.index import (\n    flat_index,\n    _wg,\n)\n")
    assert private_imports(f) == ["kvdsl.nodes.index._wg"]


def test_the_table_is_read_from_the_page():
    table = layer_table(
        "# A\n\n## Imports\n\n| part | imports |\n| --- | --- |\n"
        "| `ir`, `reference` | nothing of kvdsl |\n| `emit` | `ir` |\n\n## Next\n\n| `x` | `y` |\n"
    )
    assert table == {"ir": set(), "reference": set(), "emit": {"ir"}}
    assert MAY_IMPORT["cli"] >= {"session", "harness", "frontend"} and MAY_IMPORT["ir"] == set()
