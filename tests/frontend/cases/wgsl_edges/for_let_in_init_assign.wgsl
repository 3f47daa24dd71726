// expect: refused "i += 1u: 'i' is a let, not a var"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  for (let i = 0u; i < 2u; i++) { }
  out[0u] = 1u;
  out[0u] = 1u;
}
