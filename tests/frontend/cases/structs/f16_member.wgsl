// expect: outside "struct H member d: f16 (members of a struct in storage or workgroup memory are u32, i32 or f32"
// tint: taken
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
