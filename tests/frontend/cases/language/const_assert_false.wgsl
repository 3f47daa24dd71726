// expect: refused "the assertion is false"
// tint: refused
// naga: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  const_assert 1 > 2;
  out[0u] = 1u;
}
