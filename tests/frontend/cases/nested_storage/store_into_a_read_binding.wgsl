// expect: refused "binding 'a' is read-only"
// tint: refused
@group(0) @binding(0) var<storage, read> a: array<array<u32, 4>>;
@compute @workgroup_size(1)
fn main() {
  a[0][1] = 1u;
}
