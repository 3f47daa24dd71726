// expect: refused "binding 'out' is read-only"
// tint: refused
struct B {
  d: f32,
}
@group(0) @binding(0) var<storage, read> out: array<B>;
@compute @workgroup_size(1)
fn main() {
  out[0].d = 1.0;
}
