// expect: refused "v.xyzwx: invalid swizzle 'xyzwx' of vec4<u32>"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let v = vec4<u32>(1u);
  out[0u] = v.xyzwx.x;
  out[0u] = 1u;
}
