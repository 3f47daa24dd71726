// expect: refused "declares member 'd' twice"
// tint: refused
struct B {
  d: f32,
  d: u32,
}
@group(0) @binding(0) var<storage, read_write> out: array<B>;
var<workgroup> tile: array<B, 4>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0].d = 1.0;
}
