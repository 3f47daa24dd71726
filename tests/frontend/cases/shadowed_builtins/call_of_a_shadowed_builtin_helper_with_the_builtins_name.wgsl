// expect: refused "min takes 1 arguments, got 2"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[gid.x] = min(gid.x, 3u);
}
fn min(a: u32) -> u32 {
  return a;
}
