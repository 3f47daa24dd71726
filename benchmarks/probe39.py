"""Probe 39 (H200): the K RMSNorm drop-ins with every runtime check of naga off.

Probe 38 took naga's loop counters out (``KVDSL_LOOP_BOUNDING=0``): the workgroup K RMSNorm
drop-ins at 2,048 tokens moved by under 3 points (the int8 build 81 → 78% of the copy beside
it), where Tint's modules of the same WGSL reach 87.5-95.5% (run 43). The other check naga writes
and Tint writes differently is the bounds check of every storage access (naga clamps each
index, or relies on the driver's robust buffer access; Tint clamps in its robustness
transform). This creates the modules through ``wgpuDeviceCreateShaderModuleTrusted`` with no
runtime checks at all (:func:`kvdsl.runtime.device.trusted_module` with flags 0), a form no
WebGPU host may use for untrusted code, to learn whether the checks are where the two
compilers part. Each form is checked on the device to write the same bytes, then timed
alternately with the copy, three rounds, after 20 s of copies, at batch 4
(:func:`probes.race_settings`).

Result (eighth stop, ``results/h200/probe39.txt``, NOTE's *naga's runtime checks*): at 2,048
tokens the int8 build 77 → 80% of the copy beside it, the int4 append 87 → 76%, the rest within
3 points; decode appends as without the loop counters alone. Nor are the checks the difference.

    python benchmarks/probe39.py [--small]
"""

from __future__ import annotations

import sys

import probe38
from kvdsl.runtime import device


def unchecked(dev, label: str, code: str):  # noqa: ANN001, ANN201 (device.shader_module's)
    """``code``'s module with no runtime checks: no loop counters, no bounds checks."""
    return device.trusted_module(dev, label, code, 0)


FORMS = {
    "checked": {"LOOP_BOUNDING": True},
    # A falsy value of its own keeps the pipeline cache's key apart from probe 38's form.
    "unchecked": {"LOOP_BOUNDING": None, "shader_module": unchecked},
}


if __name__ == "__main__":
    probe38.main(sys.argv[1:], FORMS)
