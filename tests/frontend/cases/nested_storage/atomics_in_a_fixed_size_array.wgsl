// expect: taken
// tint: taken
@group(0) @binding(0) var<storage, read_write> a: array<array<atomic<u32>, 4>>;
@compute @workgroup_size(1)
fn main() {
  atomicAdd(&a[0][1], 1u);
}
