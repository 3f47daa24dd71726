// expect: syntax error at 6:7 "unexpected '='; expected a name"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let = 3u;
  out[0u] = 1u;
}
