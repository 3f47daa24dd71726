// expect: refused "workgroupUniformLoad takes a pointer into workgroup memory"
// tint: refused "workgroupUniformLoad"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> s: array<u32>;
var<workgroup> w: array<u32, 64>;
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
  out[1] = workgroupUniformLoad(&s[0]);
  out[0u] = 1u;
}
