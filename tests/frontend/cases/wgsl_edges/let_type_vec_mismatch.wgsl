// expect: refused "let v: vec2<u32> is initialised with a vec2<i32>"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let v: vec2<u32> = vec2<i32>(1i);
  out[0u] = v.x;
  out[0u] = 1u;
}
