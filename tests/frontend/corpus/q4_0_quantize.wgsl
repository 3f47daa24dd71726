// ggml's q4_0: each block of 32 floats becomes an f16 scale (the value of largest magnitude
// over -8) and 16 bytes of nibbles, element j low and j + 16 high: 18 bytes. One invocation
// takes two blocks (36 bytes, 9 whole words).
struct Params {
  pairs: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> q: array<u32>;
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let p = gid.x;
  if (p >= params.pairs) {
    return;
  }
  var words: array<u32, 9>;
  for (var b = 0u; b < 2u; b++) {
    let src = (p * 2u + b) * 32u;
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
    let off = b * 18u;
    let half = pack2x16float(vec2<f32>(d, 0.0));
    words[off / 4u] = insertBits(words[off / 4u], half, (off % 4u) * 8u, 16u);
    for (var j = 0u; j < 16u; j++) {
      let lo = min(15u, u32(x[src + j] * id + 8.5));
      let hi = min(15u, u32(x[src + j + 16u] * id + 8.5));
      let at = off + 2u + j;
      words[at / 4u] = insertBits(words[at / 4u], lo | (hi << 4u), (at % 4u) * 8u, 8u);
    }
  }
  for (var w = 0u; w < 9u; w++) {
    q[p * 9u + w] = words[w];
  }
}
