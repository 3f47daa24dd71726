// ggml's q8_0: each block of 32 floats becomes an f16 scale and 32 signed bytes, 34 bytes,
// which do not align to words. One invocation takes two blocks (68 bytes, 17 whole words),
// assembles them byte by byte in a function-scope array, and stores every word whole.
struct Params {
  pairs: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> q: array<u32>;
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
  let p = gid.x;
  if (p >= params.pairs) {
    return;
  }
  var words: array<u32, 17>;
  for (var b = 0u; b < 2u; b++) {
    let src = (p * 2u + b) * 32u;
    var amax = 0.0;
    for (var j = 0u; j < 32u; j++) {
      amax = max(amax, abs(x[src + j]));
    }
    let d = amax / 127.0;
    let id = select(0.0, 1.0 / d, d != 0.0);
    let off = b * 34u;
    let half = pack2x16float(vec2<f32>(d, 0.0));
    words[off / 4u] = insertBits(words[off / 4u], half, (off % 4u) * 8u, 16u);
    for (var j = 0u; j < 32u; j += 4u) {
      let codes = vec4<i32>(
        i32(roundf(x[src + j] * id)),
        i32(roundf(x[src + j + 1u] * id)),
        i32(roundf(x[src + j + 2u] * id)),
        i32(roundf(x[src + j + 3u] * id)),
      );
      let packed = pack4xI8(codes);
      for (var k = 0u; k < 4u; k++) {
        let at = off + 2u + j + k;
        words[at / 4u] = insertBits(words[at / 4u], extractBits(packed, k * 8u, 8u), (at % 4u) * 8u, 8u);
      }
    }
  }
  for (var w = 0u; w < 17u; w++) {
    q[p * 17u + w] = words[w];
  }
}
