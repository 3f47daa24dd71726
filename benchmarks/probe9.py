"""Walk design probe 9 (H200): does one invocation per rotary *pair* lift the flat f16 rotary?

Run 6: the flat rotary kernels that move f16 (build from f16 input, merge_share and
window_shift appends) reach 84-88% of the copy while their f32 forms reach ~100%: each
invocation loads its vector and its partner (``x0``, ``x1``, 8 bytes each as ``vec4<f16>``), keeps
one rotated half and stores 8 bytes; the partner invocation loads the same two. The *pair* form
(hand-written here for ``build_rotary_flat_f16_in_llama31_8b``) has one invocation per pair: it
loads ``x0``, ``x1`` and cos/sin once, stores both rotated vectors (``d`` and ``d + HALF``) and
moves both V vectors, over half the invocations. It is first checked on the device to write the
bytes the emitted kernel writes, then timed alternately with it (three rounds, best kept)
beside the two-pair copy.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
sys.path.insert(0, str(Path(__file__).resolve().parent))

import probes  # noqa: E402
from kvdsl import catalog  # noqa: E402
from kvdsl.emit import emit  # noqa: E402
from kvdsl.ir import workgroups  # noqa: E402
from kvdsl.runtime import run_source  # noqa: E402
from plans import Pool, element_sizes, plans, reshape  # noqa: E402

VARIANT = "build_rotary_flat_f16_in_llama31_8b"
EMITTED_BODY = """  if (e >= params.count * HEAD_DIM_V4) {
    return;
  }
  let d4 = e % HEAD_DIM_V4;
  let row = e / HEAD_DIM_V4;"""
PAIR_BODY = """  if (e >= params.count * HALF_V4) {
    return;
  }
  let row = e / HALF_V4;"""
EMITTED_TAIL = """  let dr = d4 % HALF_V4;
  let cs = cos_cache[pos * HALF_V4 + dr];
  let sn = sin_cache[pos * HALF_V4 + dr];
  let x0 = vec4<f32>(src_k[srcBase + dr]);
  let x1 = vec4<f32>(src_k[srcBase + (dr + HALF_V4)]);
  let k = select(x1 * cs + x0 * sn, x0 * cs - x1 * sn, d4 < HALF_V4);
  // The present row is the walk's row: the destination is the flat index.
  present_key[e] = vec4<f16>(k);
  present_value[e] = src_v[srcBase + d4];
}"""
PAIR_TAIL = """  let dr = e % HALF_V4;
  let cs = cos_cache[pos * HALF_V4 + dr];
  let sn = sin_cache[pos * HALF_V4 + dr];
  let x0 = vec4<f32>(src_k[srcBase + dr]);
  let x1 = vec4<f32>(src_k[srcBase + (dr + HALF_V4)]);
  let v0 = src_v[srcBase + dr];
  let v1 = src_v[srcBase + (dr + HALF_V4)];
  let dst = row * HEAD_DIM_V4 + dr;
  present_key[dst] = vec4<f16>(x0 * cs - x1 * sn);
  present_key[dst + HALF_V4] = vec4<f16>(x1 * cs + x0 * sn);
  present_value[dst] = v0;
  present_value[dst + HALF_V4] = v1;
}"""


def pair(text: str) -> str:
    assert EMITTED_BODY in text and EMITTED_TAIL in text, "the emitted kernel changed"
    return text.replace(EMITTED_BODY, PAIR_BODY).replace(EMITTED_TAIL, PAIR_TAIL)


def main() -> None:
    size = probes.sizes(sys.argv)
    pool, race = Pool(), probes.Race()
    cfg = reshape(catalog.config(VARIANT))
    kernel = catalog.build_config(cfg, VARIANT)
    text = emit(kernel)
    if EMITTED_BODY not in text:
        print(f"{VARIANT} is emitted in the pair form now; probe9.txt is this probe's record")
        return
    z = element_sizes(kernel)
    for plan in plans(cfg, size):
        bufs = pool.buffers(kernel.bindings, plan)
        params = plan.params_of(kernel.params)
        wg = workgroups(kernel, params)
        assert wg[1] == wg[2] == 1
        forms = {"vector": (text, wg), "pair": (pair(text), (math.ceil(wg[0] / 2), 1, 1))}
        outs = [
            run_source(t, kernel.bindings, kernel.params, dict(bufs), params, w)
            for t, w in forms.values()
        ]
        for b in outs[0]:
            assert np.array_equal(outs[0][b].view(np.uint16), outs[1][b].view(np.uint16)), b
        race.run(f"{VARIANT} tok={plan.tokens}", kernel, forms, bufs, params, plan.moved(z))


if __name__ == "__main__":
    main()
