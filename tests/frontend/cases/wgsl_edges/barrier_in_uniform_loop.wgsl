// expect: taken
// tint: taken
// naga: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> w: array<u32, 64>;
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
  for (var i = 0u; i < 2u; i++) { w[lid.x] = i; workgroupBarrier(); }
  out[lid.x] = w[0];
}
