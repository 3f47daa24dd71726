// expect: taken
// tint: taken
struct S { a: u32, b: vec2<f32> }
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
var<workgroup> s: S;
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
  if lid.x == 0u {
    s.b = vec2<f32>(1.0, 2.0);
  }
  workgroupBarrier();
  out[lid.x] = s.b.y + f32(s.a);
}
