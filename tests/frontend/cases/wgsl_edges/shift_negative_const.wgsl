// expect: refused "(1u << 4294967295u): a shift by 4294967295: integers have 32 bits (give 0 to 31)"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0u] = 1u << 4294967295u;
  out[0u] = 1u;
}
