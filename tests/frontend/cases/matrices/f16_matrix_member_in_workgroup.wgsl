// expect: taken
// tint: taken
// naga: taken
enable f16;
struct Pair {
  m: mat2x2<f16>,
  n: u32,
}
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
var<workgroup> tile: array<Pair, 64>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  tile[lid.x].m = mat2x2<f16>(1.0h, 2.0h, 3.0h, 4.0h);
  workgroupBarrier();
  out[gid.x] = f32(tile[(lid.x + 1u) % 64u].m[1][0]);
}
