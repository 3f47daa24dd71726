// expect: outside at 6:11 "WGSL builtin 'textureSample'"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let c = textureSample(t, s, vec2<f32>(0.0, 0.0));
  out[0u] = 1u;
}
