// expect: taken
// tint: taken
// naga: taken
enable f16;
@group(0) @binding(0) var<storage, read_write> a: array<array<f16, 4>>;
@compute @workgroup_size(1)
fn main() {
  a[0][1] = 1.0h;
}
