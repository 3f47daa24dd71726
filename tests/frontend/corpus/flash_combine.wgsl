// Flash decoding's combine: per (head, dimension), the chunks' partial outputs rescaled to
// their common maximum and divided by the rescaled sum.
struct Params {
  heads: u32,
  chunks: u32,
}

@group(0) @binding(0) var<storage, read> part_o: array<f32>;
@group(0) @binding(1) var<storage, read> part_m: array<f32>;
@group(0) @binding(2) var<storage, read> part_l: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;

const D: u32 = 64u;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= params.heads * D) {
    return;
  }
  let h = i / D;
  let d = i % D;
  var top = -3.0e38;
  var c = 0u;
  loop {
    top = max(top, part_m[h * params.chunks + c]);
    continuing {
      c++;
      break if c >= params.chunks;
    }
  }
  var num = 0.0;
  var den = 0.0;
  for (var k = 0u; k < params.chunks; k++) {
    let slot = h * params.chunks + k;
    let f = exp(part_m[slot] - top);
    num += f * part_o[slot * D + d];
    den += f * part_l[slot];
  }
  out[i] = num / den;
}
