// ggml's q4_0 back to floats: one invocation per element, its nibble taken from the byte it
// shares with the element 16 places away.
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
  let j = i % 32u;
  let off = i / 32u * 18u;
  let d = unpack2x16float(extractBits(q[off / 4u], (off % 4u) * 8u, 16u)).x;
  let at = off + 2u + j % 16u;
  let nibble = extractBits(q[at / 4u], (at % 4u) * 8u + select(0u, 4u, j >= 16u), 4u);
  y[i] = (f32(nibble) - 8.0) * d;
}
