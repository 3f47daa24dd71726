#!/usr/bin/env bash
# Mutation testing of the oracles (kvdsl/harness, kvdsl/reference, kvdsl/legacy.py) with mutmut,
# over the GPU-free tests pyproject.toml's [tool.mutmut] selects; then the table of
# docs/testing.md (killed / survived per module) and every survivor's diff. Not part of CI.
#
#   pip install mutmut==3.8.1 && bash benchmarks/mutation.sh [CHILDREN]
#
# CHILDREN: parallel test processes (default 2); the run is niced. It starts from scratch
# (mutants/ is removed first), so the table is the current code's. Writes mutants/ (git-ignored)
# and mutants/survivors.txt.
set -eu
cd "$(dirname "$0")/.."
children=${1:-2}
mutmut=${MUTMUT:-mutmut}
python=${PYTHON:-python}
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
rm -rf mutants
start=$(date +%s)
nice -n 10 "$mutmut" run --max-children "$children" >/dev/null
echo "mutmut run: $(( $(date +%s) - start )) s with $children children"
"$python" benchmarks/mutation_table.py
