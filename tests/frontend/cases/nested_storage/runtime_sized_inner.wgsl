// expect: refused "an array element type cannot contain a runtime-sized array"
// tint: refused
@group(0) @binding(0) var<storage, read_write> a: array<array<f32>>;
@compute @workgroup_size(1)
fn main() {
  a[0][0] = 1.0;
}
