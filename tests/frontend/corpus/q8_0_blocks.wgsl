// ggml's q8_0 back to floats, the blocks repacked to whole words as a runtime keeps them in a
// struct: the f16 scale in the low half of d, the 32 signed bytes in qs. One invocation per
// element; the block count is the binding's length.
struct BlockQ8 {
  d: u32,
  qs: array<u32, 8>,
}

@group(0) @binding(0) var<storage, read> blocks: array<BlockQ8>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= arrayLength(&blocks) * 32u) {
    return;
  }
  let b = i / 32u;
  let k = i % 32u;
  let d = unpack2x16float(blocks[b].d).x;
  let code = extractBits(bitcast<i32>(blocks[b].qs[k / 4u]), (k % 4u) * 8u, 8u);
  y[i] = f32(code) * d;
}
