"""Verification of catalog variants: random cases per mode, compared across backends.

For each case: the interpreter against the reference (the IR means what the mode means, with no
out-of-bounds access and no race), then the GPU against the interpreter (the emitted WGSL does
what the IR means). ``kvdsl verify`` drives it.

Each case is random (adversarial ``seqlens_k``, partial workgroups, poisoned outputs, masks of
the elements written). Comparison is bit for bit, except where approximate builtins or a
possible ``fma`` allow a stated tolerance. A quantised code may move by one step against the
GPU, since WGSL's f32 division is accurate only to 2.5 ULP; the interpreter divides exactly and
gets no such allowance."""

from kvdsl.harness import modes as _modes  # noqa: F401  (registers the remaining modes' cases)
from kvdsl.harness import dense as _dense  # noqa: F401  (registers the dense modes' cases)
from kvdsl.harness import qkv as _qkv  # noqa: F401  (registers the qkv mode's cases)
from kvdsl.harness import dense_modes as _dense_modes  # noqa: F401  (and the dense cache modes')
from kvdsl.harness import paged as _paged  # noqa: F401  (registers the paged modes' cases)
from kvdsl.harness import qkv_paged as _qkv_paged  # noqa: F401  (and paged_qkv's)
from kvdsl.harness import attend as _attend  # noqa: F401  (and attend's and attend_merge's)
from kvdsl.harness import kivi as _kivi  # noqa: F401  (and kivi_append's and kivi_flush's)
from kvdsl.harness.cases import CASES, Case, cases_for, run_judge
from kvdsl.harness.runner import Result, verify_variant

__all__ = ["CASES", "Case", "Result", "cases_for", "run_judge", "verify_variant"]
