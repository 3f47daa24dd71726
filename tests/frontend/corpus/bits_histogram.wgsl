// Per-row statistics of packed int8 data: each invocation takes one row of 4x8 words, sums
// their dot products with a fixed weight word (dot4I8Packed), counts set bits, and records the
// highest set bit seen.
struct Params {
  rows: u32,
  words: u32,
  weights: u32,
}

@group(0) @binding(0) var<storage, read> data: array<u32>;
@group(0) @binding(1) var<storage, read_write> stats: array<vec4<u32>>;
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let r = gid.x;
  if (r >= params.rows) {
    return;
  }
  var acc = 0i;
  var ones = 0u;
  var top = 0u;
  var low = 32u;
  for (var k = 0u; k < params.words; k++) {
    let w = data[r * params.words + k];
    acc += dot4I8Packed(w, params.weights);
    ones += countOneBits(w);
    if (w != 0u) {
      top = max(top, firstLeadingBit(w));
      low = min(low, countTrailingZeros(w));
    }
  }
  stats[r] = vec4<u32>(bitcast<u32>(acc), ones, top, low);
}
