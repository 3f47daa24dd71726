// expect: refused "'max' is a let here, not the builtin function: it cannot be called"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let max = 5u;
  out[gid.x] = max(max, gid.x);
}
