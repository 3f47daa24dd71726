// expect: taken
// tint: taken
// naga: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let v = vec2<bool>(true) & vec2<bool>(false);
  out[0u] = select(0u, 1u, v.x);
  out[0u] = 1u;
}
