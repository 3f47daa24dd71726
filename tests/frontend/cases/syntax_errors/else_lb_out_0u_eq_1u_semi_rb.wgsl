// expect: syntax error at 6:8 "unexpected '{'; expected one of '++', '--', '.', ';', '=', '[' or a compound assignment"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  else { out[0u] = 1u; }
  out[0u] = 1u;
}
