// expect: taken
// tint: taken
// naga: taken
enable f16;
struct H {
  d: f16,
  x: f16,
}
@group(0) @binding(0) var<storage, read_write> out: array<H>;
@compute @workgroup_size(1)
fn main() {
  out[0].d = 1.0h;
}
