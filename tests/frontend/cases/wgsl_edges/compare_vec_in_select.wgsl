// expect: refused "select(0u, 1u, (vec2<u32>(1u) == vec2<u32>(1u))): select select condition must be bool, got vec2<bool>"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let v = select(0u, 1u, vec2<u32>(1u) == vec2<u32>(1u));
  out[0u] = v;
  out[0u] = 1u;
}
