// expect: type error at 6 "const x: 'gid' is a builtin, not a const (a const is evaluated when the shader compiles: use let)"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  const x = gid.x;
  out[0u] = x;
  out[0u] = 1u;
}
