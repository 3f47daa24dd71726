// expect: refused "the ratio of indices (the third argument) must be f32"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let r = refract(vec3f(1.0), vec3f(0.0, 1.0, 0.0), vec3f(1.0));
  out[0u] = 1u;
}
