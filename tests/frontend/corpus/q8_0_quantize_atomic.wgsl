// ggml's q8_0 as a runtime writes it with one invocation per block: each block of 32 floats
// becomes an f16 scale and 32 signed bytes, 34 bytes at byte 34 * block, so a block starts
// at the middle of a word every other block. A word a block covers whole is stored; a word it
// shares with its neighbour gets its own bytes cleared (atomicAnd) and set (atomicOr), which
// the neighbour's updates of the other bytes cannot undo.
struct Params {
  blocks: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> q: array<atomic<u32>>;
@group(0) @binding(2) var<uniform> params: Params;

// C's roundf: halves away from zero.
fn roundf(v: f32) -> f32 {
  let a = abs(v);
  let w = floor(a);
  let r = w + floor((a - w) * 2.0);
  return select(-r, r, v >= 0.0);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = gid.x;
  if (b >= params.blocks) {
    return;
  }
  let src = b * 32u;
  var amax = 0.0;
  for (var j = 0u; j < 32u; j++) {
    amax = max(amax, abs(x[src + j]));
  }
  let d = amax / 127.0;
  let id = select(0.0, 1.0 / d, d != 0.0);
  let start = b * 34u;
  let first = start / 4u;
  // The block's 34 bytes shifted to their place in words first .. first + 8 (an even block
  // shares its last word with the next, an odd one its first with the one before).
  var bits: array<u32, 9>;
  var mask: array<u32, 9>;
  let half = pack2x16float(vec2<f32>(d, 0.0)) & 0xFFFFu;
  for (var k = 0u; k < 34u; k++) {
    var byte = 0u;
    if (k < 2u) {
      byte = extractBits(half, k * 8u, 8u);
    } else {
      byte = u32(i32(roundf(x[src + k - 2u] * id))) & 0xFFu;
    }
    let at = start + k - first * 4u;
    bits[at / 4u] |= byte << ((at % 4u) * 8u);
    mask[at / 4u] |= 0xFFu << ((at % 4u) * 8u);
  }
  for (var w = 0u; w < 9u; w++) {
    if (mask[w] == 0xFFFFFFFFu) {
      atomicStore(&q[first + w], bits[w]);
    } else {
      atomicAnd(&q[first + w], ~mask[w]);
      atomicOr(&q[first + w], bits[w]);
    }
  }
}
