// expect: refused "3-component"
// tint: refused
// naga: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let c = cross(vec2f(1.0), vec2f(2.0));
  out[0u] = 1u;
}
