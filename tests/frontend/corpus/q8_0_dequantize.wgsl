// ggml's q8_0 back to floats: one invocation per element reads its block's f16 scale and its
// signed byte out of the words they share with their neighbours.
struct Params {
  n: u32,
}

@group(0) @binding(0) var<storage, read> q: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= params.n) {
    return;
  }
  let off = i / 32u * 34u;
  let d = unpack2x16float(extractBits(q[off / 4u], (off % 4u) * 8u, 16u)).x;
  let at = off + 2u + i % 32u;
  let code = extractBits(bitcast<i32>(q[at / 4u]), (at % 4u) * 8u, 8u);
  y[i] = f32(code) * d;
}
