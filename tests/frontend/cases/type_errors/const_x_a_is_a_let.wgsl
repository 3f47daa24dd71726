// expect: type error at 7 "const x: 'a' is a let, not a const (a const is evaluated when the shader compiles: use let)"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let a = 2u;
  const x = a + 1u;
  out[0u] = x;
  out[0u] = 1u;
}
