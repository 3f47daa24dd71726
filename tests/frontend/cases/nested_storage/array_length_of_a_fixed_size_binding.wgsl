// expect: refused "arrayLength takes a runtime-sized array (a is array<array<u32, 4>, 4>, of a fixed size)"
// tint: refused
@group(0) @binding(0) var<storage, read_write> a: array<array<u32, 4>, 4>;
@compute @workgroup_size(1)
fn main() {
  a[0][0] = arrayLength(&a);
}
