// expect: refused "workgroupBarrier() must be reached in uniform control flow, but it depends on `if (lid.x > 3u)`, which some invocations may leave by return, which depends on 'lid' (local_invocation_id, which differs between invocations) (WGSL's uniformity analysis)"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> w: array<u32, 64>;
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
  if (lid.x > 3u) { return; }
  workgroupBarrier();
  out[lid.x] = w[0];
}
