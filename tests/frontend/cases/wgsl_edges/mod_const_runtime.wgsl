// expect: refused "undefined name 'D'"
// tint: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
const C: u32 = 3u + D;
const D: u32 = 1u;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0u] = C;
  out[0u] = 1u;
}
