// expect: refused "vec2<u32>(1u, 2u, 3u): components do not make a vec2<u32>"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let v = vec2<u32>(1u, 2u, 3u);
  out[0u] = v.x;
  out[0u] = 1u;
}
