// expect: refused "the constant index 4 is out of range (give 0 to 3)"
// tint: refused
@group(0) @binding(0) var<storage, read_write> a: array<array<u32, 4>>;
@compute @workgroup_size(1)
fn main() {
  a[0][4] = 1u;
}
