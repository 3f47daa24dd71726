// expect: refused "pack2x16float(vec4<f32>(1.0f)): pack2x16float expects vec2<f32>, got vec4<f32>"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0u] = pack2x16float(vec4<f32>(1.0));
  out[0u] = 1u;
}
