// ggml's q8_0 or q4_0, BITS (a pipeline constant) the code's width: 8 or 4. Each block of 32
// floats becomes an f16 scale and its codes: q8_0's 32 signed bytes (the scale the largest
// magnitude over 127; 34 bytes), q4_0's 16 bytes of nibbles, element j low and j + 16 high (the
// scale the value of largest magnitude over -8; 18 bytes). Neither aligns to words: one
// invocation takes two blocks (17 or 9 whole words), assembles them byte by byte in a
// function-scope array, and stores every word whole.
struct Params {
  pairs: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> q: array<u32>;
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
  let p = gid.x;
  if (p >= params.pairs) {
    return;
  }
  let size = 2u + 4u * BITS;
  let count = size / 2u;
  var words: array<u32, 17>;
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
    let d = select(peak / -8.0, amax / 127.0, BITS == 8u);
    let id = select(0.0, 1.0 / d, d != 0.0);
    let off = b * size;
    let half = pack2x16float(vec2<f32>(d, 0.0));
    words[off / 4u] = insertBits(words[off / 4u], half, (off % 4u) * 8u, 16u);
    if (BITS == 8u) {
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
    } else {
      for (var j = 0u; j < 16u; j++) {
        let lo = min(15u, u32(x[src + j] * id + 8.5));
        let hi = min(15u, u32(x[src + j + 16u] * id + 8.5));
        let at = off + 2u + j;
        words[at / 4u] = insertBits(words[at / 4u], lo | (hi << 4u), (at % 4u) * 8u, 8u);
      }
    }
  }
  for (var w = 0u; w < count; w++) {
    q[p * count + w] = words[w];
  }
}
