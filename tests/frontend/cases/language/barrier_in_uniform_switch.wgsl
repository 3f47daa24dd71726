// expect: taken
// tint: taken
// naga: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> t: array<u32, 64>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  switch wid.x {
    case 0u {
      t[lid.x] = 1u;
      workgroupBarrier();
      out[lid.x] = t[63u - lid.x];
    }
    default {
    }
  }
}
