// expect: refused "storageBarrier() must be reached in uniform control flow"
// tint: refused "storageBarrier"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x < 4u) { storageBarrier(); }
  out[0u] = 1u;
}
