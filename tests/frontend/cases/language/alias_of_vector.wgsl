// expect: taken
// tint: taken
// naga: taken
alias V = vec4<u32>;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let v = V(1u, 2u, 3u, 4u);
  out[1u] = v.w;
  out[0u] = 1u;
}
