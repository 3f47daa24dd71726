"""What the WebGPU implementation hands the driver, and what the driver makes of it: for each
variant, the SPIR-V that naga (wgpu-native) or Tint (Dawn) wrote and, where the Vulkan driver
offers ``VK_KHR_pipeline_executable_properties`` (NVIDIA does; llvmpipe does not), the driver's
statistics of the compute pipeline (registers and the like).

wgpu-py exposes neither, so the Vulkan layer in ``benchmarks/vklayer/`` records them: this builds
it (gcc), runs each variant once on the GPU with the layer on, in a fresh process per
implementation, and prints one table. The SPIR-V is summarised by opcode class (no disassembler
is needed: an instruction is a word count and an opcode).

    python benchmarks/shaderstats.py [--out DIR] [--webgpu wgpu-native|dawn ...] VARIANT ...

The layer also takes two diagnostics, for timing a module with one thing changed (through
``benchmarks/gpu.py`` with the layer's variables set):

- ``KVDSL_BARRIER_SEMANTICS=N``: every ``OpControlBarrier`` of a module gets the module's
  unsigned constant N as its memory semantics (0 drops the barrier's ordering of workgroup
  memory, which WGSL's ``workgroupBarrier`` requires);
- ``KVDSL_VULKAN_MEMORY_MODEL=1``: a GLSL450-memory-model module (naga's) is declared in the
  Vulkan memory model, as Tint's is, and the device gets the ``vulkanMemoryModel`` feature;
- ``KVDSL_DROP_EXECUTION_MODE=N``: a module's ``OpExecutionMode`` of mode N is left out (6023:
  Tint's ``MaximallyReconvergesKHR``).

``KVDSL_LOOP_BOUNDING=0`` (``kvdsl.runtime.device``, not the layer) has naga write no loop
counters, as Tint writes none.

On an NVIDIA H200 this found the register counts behind the K RMSNorm drop-ins' limit under
wgpu-native (``docs/performance.md``): the driver gives naga's SPIR-V of a drop-in fewer
registers than Tint's, and none of the three diagnostics above changes that or the times.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LAYER = HERE / "vklayer"

#: SPIR-V opcodes by class (the SPIR-V 1.6 numbering); the rest count as "other".
CLASSES = {
    "load": {61},
    "store": {62},
    "access": {65, 66},  # OpAccessChain, OpInBoundsAccessChain
    "int": {126, 128, 130, 132, 134, 135, 137, 138, 139} | set(range(194, 202)),
    "float": {127, 129, 131, 133, 136, 140, 141, 142, 148},
    "convert": set(range(109, 125)),
    "select": {169},
    "compare": set(range(164, 192)),
    "composite": {79, 80, 81, 82, 83},
    "extinst": {12},  # GLSL.std.450: min, max, clamp, round, inverseSqrt ...
    "branch": {245, 246, 247, 248, 249, 250, 251},  # phi, merges, labels, branches, switch
    "barrier": {224, 225},
    "group": set(range(333, 366)) | {4348},  # subgroup operations
}
PROBE = (
    "import sys, json, os\n"
    "from kvdsl import catalog\n"
    "from kvdsl.harness import cases_for\n"
    "from kvdsl.runtime import WebGPU, adapter_info, run, use_webgpu\n"
    "use_webgpu(WebGPU.from_environment(os.environ))\n"
    "out = {'adapter': adapter_info(), 'ranges': {}}\n"
    "dump = os.environ['KVDSL_DUMP_DIR']\n"
    "for name in sys.argv[1:]:\n"
    "    cfg = catalog.config(name)\n"
    "    kernel = catalog.build_config(cfg, name)\n"
    "    case = next(iter(cases_for(cfg, 1, seed=1)))\n"
    "    before = set(os.listdir(dump))\n"
    "    run(kernel, dict(case.buffers), case.params)\n"
    "    out['ranges'][name] = sorted(f for f in set(os.listdir(dump)) - before "
    "if f.endswith('.spv'))\n"
    "print(json.dumps(out))\n"
)


def build_layer(layer: Path = LAYER) -> Path:
    """The layer's shared library, built beside its manifest in ``layer``."""
    lib = layer / "libkvdsl_dump_layer.so"
    src = layer / "kvdsl_dump_layer.c"
    stale = not lib.exists() or lib.stat().st_mtime < src.stat().st_mtime
    if stale and (lib.exists() is False or shutil.which("gcc")):  # a GPU host may have no gcc
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(lib), str(src)], check=True)
    return lib


def summary(spv: bytes) -> dict[str, int]:
    """Words and instructions by class of a SPIR-V module, and its memory model (1: GLSL450,
    3: Vulkan)."""
    words = memoryview(spv).cast("I")
    counts: collections.Counter = collections.Counter(words=len(words))
    i = 5  # the header
    while i < len(words):
        op, n = words[i] & 0xFFFF, words[i] >> 16
        if op == 14:  # OpMemoryModel addressing memory
            counts["memory_model"] = words[i + 2]
        kind = next((k for k, ops in CLASSES.items() if op in ops), "other")
        counts[kind] += 1
        counts["instructions"] += 1
        i += max(n, 1)
    return dict(counts)


def stats(dump: Path) -> dict[str, dict[str, str]]:
    """The driver's statistics by module file, name → value (the first executable's)."""
    out: dict[str, dict[str, str]] = {}
    path = dump / "stats.txt"
    for line in path.read_text().splitlines() if path.exists() else []:
        module, _, _, name, value = line.split("\t")
        out.setdefault(module, {}).setdefault(name, value)
    return out


def measure(webgpu: str, variants: list[str], dump: Path, layer: Path = LAYER) -> dict:
    """Run ``variants`` once each under ``webgpu`` with the layer in ``layer`` on; per variant
    its module's summary and the driver's statistics."""
    dump.mkdir(parents=True, exist_ok=True)
    for f in dump.iterdir():
        f.unlink()
    env = os.environ | {
        "VK_ADD_LAYER_PATH": str(layer),
        "VK_LAYER_PATH": str(layer),
        "VK_INSTANCE_LAYERS": "VK_LAYER_KVDSL_dump",
        "VK_LOADER_LAYERS_ENABLE": "VK_LAYER_KVDSL_dump",
        "KVDSL_DUMP_DIR": str(dump),
        "KVDSL_WEBGPU": webgpu,
    }
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *variants], env=env, capture_output=True, text=True
    )
    if proc.returncode:
        raise RuntimeError(f"{webgpu}: {proc.stderr.strip().splitlines()[-1:]}")
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    log = dump / "layer.log"
    layer = sorted(set(log.read_text().splitlines())) if log.exists() else ["layer not loaded"]
    driver = stats(dump)
    rows = {}
    for name, files in got["ranges"].items():
        # The variant's module is the largest one its run created (implementations may make
        # small helper modules too, e.g. for clearing buffers).
        best = max(files, key=lambda f: (dump / f).stat().st_size, default=None)
        rows[name] = {
            "module": best,
            "spirv": summary((dump / best).read_bytes()) if best else {},
            "driver": driver.get(best, {}),
        }
    return {"adapter": got["adapter"], "layer": layer, "rows": rows}


class Registers:
    """The driver's register count of each module this process creates, through the layer
    (``KVDSL_DUMP_DIR``): the module a form's first run created is the form's."""

    def __init__(self) -> None:
        self.dump = Path(os.environ["KVDSL_DUMP_DIR"]) if "KVDSL_DUMP_DIR" in os.environ else None
        self.module: dict[str, str] = {}

    @contextlib.contextmanager
    def creating(self, label: str):
        before = set(os.listdir(self.dump)) if self.dump else set()
        yield
        if self.dump:
            new = [f for f in set(os.listdir(self.dump)) - before if f.endswith(".spv")]
            if new:
                self.module[label] = max(new, key=lambda f: (self.dump / f).stat().st_size)

    def of(self, label: str) -> str:
        got = stats(self.dump) if self.dump else {}
        return got.get(self.module.get(label, ""), {}).get("Register Count", "-")


def rerun_with_layer(script: str, argv: list[str], prefix: str) -> int:
    """Run ``script`` again with ``--child`` and ``argv`` in a process with the layer on,
    dumping into a fresh temporary folder named ``prefix``* (:class:`Registers` reads it);
    where the layer cannot be built, without it. Returns the child's exit status."""
    env = dict(os.environ)
    try:
        layer = build_layer()
        dump = Path(tempfile.mkdtemp(prefix=prefix))
        env |= {
            "VK_ADD_LAYER_PATH": str(layer.parent),
            "VK_LAYER_PATH": str(layer.parent),
            "VK_INSTANCE_LAYERS": "VK_LAYER_KVDSL_dump",
            "VK_LOADER_LAYERS_ENABLE": "VK_LAYER_KVDSL_dump",
            "KVDSL_DUMP_DIR": str(dump),
        }
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"no layer ({e}): registers not read", flush=True)
    here = str(Path(script).resolve())
    return subprocess.run([sys.executable, here, "--child", *argv], env=env).returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variants", nargs="+")
    ap.add_argument(
        "--webgpu", action="append", choices=("wgpu-native", "dawn"), help="repeat; default both"
    )
    ap.add_argument("--out", default=str(HERE / "out" / "shaders"))
    args = ap.parse_args(argv)
    build_layer()
    out = Path(args.out)
    result = {}
    for impl in args.webgpu or ["wgpu-native", "dawn"]:
        try:
            result[impl] = measure(impl, args.variants, out / impl)
        except (RuntimeError, json.JSONDecodeError) as e:
            print(f"{impl}: not measured: {e}")
    (out / "shaderstats.json").write_text(json.dumps(result, indent=2) + "\n")
    keys = ["words", "instructions", "load", "store", "access", "int", "float", "convert"]
    keys += ["select", "compare", "extinst", "branch", "barrier", "group"]
    for impl, res in result.items():
        print(f"\n{impl}: {res['adapter'].get('device')}; " + "; ".join(res["layer"]))
        names = sorted({k for r in res["rows"].values() for k in r["driver"]})
        print("variant".ljust(40) + "".join(k[:8].rjust(9) for k in keys))
        for name, r in res["rows"].items():
            print(name[:40].ljust(40) + "".join(str(r["spirv"].get(k, 0)).rjust(9) for k in keys))
        for stat in names:
            print(f"  driver: {stat}: " + ", ".join(
                f"{n}={r['driver'].get(stat, '-')}" for n, r in res["rows"].items()
            ))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
