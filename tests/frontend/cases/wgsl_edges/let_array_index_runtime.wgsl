// expect: taken
// tint: taken
// naga: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let a = array<u32, 4>(1u, 2u, 3u, 4u);
  out[0u] = a[gid.x % 4u];
  out[0u] = 1u;
}
