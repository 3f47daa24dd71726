// A per-head transform of Q in TVM / web-llm's style: each head mixes its channels in blocks of
// four by its own 4x4 matrix (array<mat4x4<f32>>, one per head, column-major), then rotates
// each pair of a block by the token's position times theta^(-2i / dim), the rotation a 2x2
// matrix, and scales the result by a uniform 2x2 per half-block (vec * mat on the way out).
struct Params {
  tokens: u32,
  heads: u32,
  dim: u32,
  theta: f32,
  out_scale: mat2x2<f32>,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> mixing: array<mat4x4<f32>>;
@group(0) @binding(3) var<storage, read> positions: array<u32>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4<f32>>;

fn rotation(angle: f32) -> mat2x2<f32> {
  let c = cos(angle);
  let s = sin(angle);
  return mat2x2<f32>(c, s, -s, c);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let blocks = params.dim / 4u;
  let idx = gid.x;
  if (idx >= params.tokens * params.heads * blocks) {
    return;
  }
  let block = idx % blocks;
  let head = (idx / blocks) % params.heads;
  let token = idx / (blocks * params.heads);
  let x = mixing[head] * q[idx];
  let pos = f32(positions[token]);
  let d = f32(params.dim);
  let lo = rotation(pos * pow(params.theta, -f32(4u * block) / d)) * x.xy;
  let hi = rotation(pos * pow(params.theta, -f32(4u * block + 2u) / d)) * x.zw;
  out[idx] = vec4<f32>(lo * params.out_scale, hi * transpose(params.out_scale));
}
