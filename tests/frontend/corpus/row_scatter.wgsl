// A KV cache's slot mapping: each new row goes to the cache row its slot names, four floats
// per invocation, through a helper called as a statement.
struct Params {
  rows: u32,
  dim4: u32,
}

@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> slots: array<u32>;
@group(0) @binding(2) var<storage, read_write> cache: array<vec4<f32>>;
@group(0) @binding(3) var<uniform> params: Params;

fn copy_vec(dst: u32, at: u32) {
  cache[dst] = src[at];
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let c = gid.x;
  let r = gid.y;
  if (c >= params.dim4 || r >= params.rows) {
    return;
  }
  copy_vec(slots[r] * params.dim4 + c, r * params.dim4 + c);
}
