// expect: taken
// tint: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  var v = vec4<u32>(1u);
  v.xy = vec2<u32>(2u);
  out[0u] = v.x;
  out[0u] = 1u;
}
