// expect: refused "binding 'a': array<bool, 4> (arrays of u32, i32, f32 or f16 scalars"
// tint: refused
@group(0) @binding(0) var<storage, read_write> a: array<array<bool, 4>>;
@compute @workgroup_size(1)
fn main() {
  a[0][1] = true;
}
