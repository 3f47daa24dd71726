// expect: refused "gid = vec3<u32>(0u): 'gid' is a builtin, not a var"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  gid = vec3<u32>(0u);
  out[0u] = 1u;
