// expect: refused "is runtime-sized but not the struct's last member"
// tint: refused
struct Rows {
  data: array<vec4<f32>>,
  scale: f32,
}
@group(0) @binding(0) var<storage, read_write> rows: Rows;
@compute @workgroup_size(1)
fn main() {
  rows.scale = 1.0;
}
