// expect: refused "arrayLength takes a runtime-sized array (rows.data)"
// tint: refused
struct Rows {
  n: u32,
  data: array<vec4<f32>>,
}
@group(0) @binding(0) var<storage, read_write> rows: Rows;
@compute @workgroup_size(1)
fn main() {
  rows.n = arrayLength(&rows.n);
}
