// expect: syntax error at 6:10 "unexpected '='; expected one of 'array', 'vec2', 'vec3', 'vec4', a matrix type or a name"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let x: = 3u;
  out[0u] = 1u;
}
