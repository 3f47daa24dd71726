struct B {
  d: f32,
  qs: array<u32, 8>,
}
@group(0) @binding(0) var<storage, read_write> out: array<B>;
@compute @workgroup_size(1)
fn main() {
// {body}
}
