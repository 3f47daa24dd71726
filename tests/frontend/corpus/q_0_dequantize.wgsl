// ggml's q8_0 or q4_0 back to floats, BITS (a pipeline constant) the code's width: 8 or 4. One
// invocation per element reads its block's f16 scale and its code out of the words they share
// with their neighbours: q8_0's a signed byte, q4_0's a nibble of the byte it shares with the
// element 16 places away, 8 its zero.
struct Params {
  n: u32,
}

@group(0) @binding(0) var<storage, read> q: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

override BITS: u32 = 8u;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= params.n) {
    return;
  }
  let j = i % 32u;
  let off = i / 32u * (2u + 4u * BITS);
  let d = unpack2x16float(extractBits(q[off / 4u], (off % 4u) * 8u, 16u)).x;
  if (BITS == 8u) {
    let at = off + 2u + j;
    let code = extractBits(bitcast<i32>(q[at / 4u]), (at % 4u) * 8u, 8u);
    y[i] = f32(code) * d;
  } else {
    let at = off + 2u + j % 16u;
    let nibble = extractBits(q[at / 4u], (at % 4u) * 8u + select(0u, 4u, j >= 16u), 4u);
    y[i] = (f32(nibble) - 8.0) * d;
  }
}
