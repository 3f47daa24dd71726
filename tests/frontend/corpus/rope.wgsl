// NeoX rotary embedding in place: one invocation per (token, head, pair), element i rotated
// with element i + dim / 2 by the token's position times theta^(-2i / dim).
struct Params {
  tokens: u32,
  heads: u32,
  dim: u32,
  theta: f32,
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> positions: array<u32>;
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let half = params.dim / 2u;
  let idx = gid.x;
  if (idx >= params.tokens * params.heads * half) {
    return;
  }
  let i = idx % half;
  let th = idx / half;
  let t = th / params.heads;
  let freq = pow(params.theta, -2.0 * f32(i) / f32(params.dim));
  let angle = f32(positions[t]) * freq;
  let c = cos(angle);
  let s = sin(angle);
  let base = th * params.dim;
  let a = x[base + i];
  let b = x[base + i + half];
  x[base + i] = a * c - b * s;
  x[base + i + half] = b * c + a * s;
}
