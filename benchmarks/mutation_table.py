"""The mutation run's table (docs/testing.md) from mutmut's results in ``mutants/``.

    python benchmarks/mutation_table.py [--survivors FILE]

Prints, per mutated module: mutants, killed, survived, timeout, no tests, % killed (killed and
timed out over all mutants), then per layer; writes every survivor's diff to FILE (default
``mutants/survivors.txt``). Run from the repository root after ``mutmut run``.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

LAYERS = {"kvdsl/harness": "harness", "kvdsl/reference": "reference", "kvdsl/legacy.py": "legacy"}
COLUMNS = ("killed", "survived", "timeout", "no tests")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--survivors", type=Path, default=Path("mutants/survivors.txt"))
    args = parser.parse_args()
    sys.argv = ["mutmut"]  # mutmut's module reads its configuration on import
    import mutmut.__main__ as mm
    from mutmut.stats import status_by_exit_code

    per_file: dict[str, collections.Counter] = {}
    diffs = []
    for path in mm.walk_mutatable_files():
        data = mm.SourceFileMutationData(path=path)
        data.load()
        if not data.exit_code_by_key:
            continue
        counts = collections.Counter()
        for name, code in data.exit_code_by_key.items():
            status = status_by_exit_code[code]
            counts[status] += 1
            if status != "killed":
                diffs.append(f"## {name}: {status}\n{mm.get_diff_for_mutant(name, path=path)}\n")
        per_file[str(path)] = counts

    def row(label: str, c: collections.Counter) -> str:
        total = sum(c.values())
        score = 100 * (c["killed"] + c["timeout"]) / total if total else 0.0
        cells = [label, str(total)] + [str(c[k]) for k in COLUMNS] + [f"{score:.1f}"]
        return "| " + " | ".join(cells) + " |"

    print("| module | mutants | killed | survived | timeout | no tests | % killed |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    layers: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for path in sorted(per_file):
        print(row(f"`{path}`", per_file[path]))
        layer = next(v for k, v in LAYERS.items() if path.startswith(k))
        layers[layer] += per_file[path]
    for layer in LAYERS.values():
        if layer in layers:
            print(row(f"**{layer}**", layers[layer]))
    print(row("**all**", sum(layers.values(), collections.Counter())))
    args.survivors.write_text("".join(diffs))
    print(f"\n{len(diffs)} survivors' diffs in {args.survivors}")


if __name__ == "__main__":
    main()
