// expect: refused "workgroup var 'w': array<vec4<f32>, 2048> brings workgroup memory to 32768 bytes, more than 16384"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> w: array<vec4<f32>, 2048>;
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
  w[lid.x] = vec4<f32>(1.0);
  workgroupBarrier();
  out[0u] = u32(w[0].x);
}
