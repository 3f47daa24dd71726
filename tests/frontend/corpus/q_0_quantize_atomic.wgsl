// ggml's q8_0 or q4_0 as a runtime writes it with one invocation per block, BITS (a pipeline
// constant) the code's width: 8 or 4. Each block of 32 floats becomes an f16 scale and its
// codes: q8_0's 32 signed bytes (the scale the largest magnitude over 127; 34 bytes), q4_0's 16
// bytes of nibbles, element j low and j + 16 high (the scale the value of largest magnitude over
// -8; 18 bytes). A block of either starts at the middle of a word every other block. A word a
// block covers whole is stored; a word it shares with its neighbour gets its own bytes cleared
// (atomicAnd) and set (atomicOr), which the neighbour's updates of the other bytes cannot undo.
struct Params {
  blocks: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> q: array<atomic<u32>>;
@group(0) @binding(2) var<uniform> params: Params;

override BITS: u32 = 8u;

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
  var peak = 0.0;
  for (var j = 0u; j < 32u; j++) {
    let v = x[src + j];
    if (abs(v) > amax) {
      amax = abs(v);
      peak = v;
    }
  }
  let d = select(peak / -8.0, amax / 127.0, BITS == 8u);
  let id = select(0.0, 1.0 / d, d != 0.0);
  let size = 2u + 4u * BITS;
  let start = b * size;
  let first = start / 4u;
  // The block's bytes shifted to their place in words first .. first + 8 (q8_0) or first + 4
  // (q4_0): an even block shares its last word with the next, an odd one its first with the
  // one before.
  let span = (size + 5u) / 4u;
  var bits: array<u32, 9>;
  var mask: array<u32, 9>;
  let half = pack2x16float(vec2<f32>(d, 0.0)) & 0xFFFFu;
  for (var k = 0u; k < size; k++) {
    var byte = 0u;
    if (k < 2u) {
      byte = extractBits(half, k * 8u, 8u);
    } else if (BITS == 8u) {
      byte = u32(i32(roundf(x[src + k - 2u] * id))) & 0xFFu;
    } else {
      let j = k - 2u;
      let lo = min(15u, u32(x[src + j] * id + 8.5));
      let hi = min(15u, u32(x[src + j + 16u] * id + 8.5));
      byte = lo | (hi << 4u);
    }
    let at = start + k - first * 4u;
    bits[at / 4u] |= byte << ((at % 4u) * 8u);
    mask[at / 4u] |= 0xFFu << ((at % 4u) * 8u);
  }
  for (var w = 0u; w < span; w++) {
    if (mask[w] == 0xFFFFFFFFu) {
      atomicStore(&q[first + w], bits[w]);
    } else {
      atomicAnd(&q[first + w], ~mask[w]);
      atomicOr(&q[first + w], bits[w]);
    }
  }
}
