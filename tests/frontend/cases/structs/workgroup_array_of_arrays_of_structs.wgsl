// expect: taken
// tint: taken
// naga: taken
struct B {
  d: f32,
  qs: array<u32, 8>,
}
@group(0) @binding(0) var<storage, read_write> out: array<B>;
var<workgroup> tile: array<array<B, 2>, 2>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  tile[0][1].d = 1.0;
}
