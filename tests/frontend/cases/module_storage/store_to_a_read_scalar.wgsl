// expect: refused "n = 1u: binding 'n' is read-only"
// tint: refused "cannot store into a read-only type"
// naga: refused
@group(0) @binding(0) var<storage, read> n: u32;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  n = 1u;
  out[gid.x] = n;
}
