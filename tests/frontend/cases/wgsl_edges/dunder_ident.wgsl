// expect: refused "let __x = 1u: name '__x' starts with __, which WGSL reserves"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let __x = 1u;
  out[0u] = __x;
  out[0u] = 1u;
}
