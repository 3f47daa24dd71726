// expect: syntax error at 6:26 "unexpected ')'; expected ';'"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  for (var i = 0u; i < 4u) { out[i] = i; }
  out[0u] = 1u;
}
