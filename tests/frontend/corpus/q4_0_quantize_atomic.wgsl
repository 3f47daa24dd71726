// ggml's q4_0 as a runtime writes it with one invocation per block: each block of 32 floats
// becomes an f16 scale (the value of largest magnitude over -8) and 16 bytes of nibbles,
// element j low and j + 16 high: 18 bytes at byte 18 * block, so every other block starts at
// the middle of a word. Words a block covers whole are stored; the word it shares with a
// neighbour gets its own bytes cleared (atomicAnd) and set (atomicOr).
struct Params {
  blocks: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> q: array<atomic<u32>>;
@group(0) @binding(2) var<uniform> params: Params;

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
  let d = peak / -8.0;
  let id = select(0.0, 1.0 / d, d != 0.0);
  let start = b * 18u;
  let first = start / 4u;
  // The block's 18 bytes in words first .. first + 4.
  var bits: array<u32, 5>;
  var mask: array<u32, 5>;
  let half = pack2x16float(vec2<f32>(d, 0.0)) & 0xFFFFu;
  for (var k = 0u; k < 18u; k++) {
    var byte = 0u;
    if (k < 2u) {
      byte = extractBits(half, k * 8u, 8u);
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
  for (var w = 0u; w < 5u; w++) {
    if (mask[w] == 0xFFFFFFFFu) {
      atomicStore(&q[first + w], bits[w]);
    } else {
      atomicAnd(&q[first + w], ~mask[w]);
      atomicOr(&q[first + w], bits[w]);
    }
  }
}
