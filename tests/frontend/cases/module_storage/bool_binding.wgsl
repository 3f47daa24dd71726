// expect: refused "storage var 'flag' of type bool: bool is not host-shareable"
// tint: refused "non-host-shareable"
// naga: refused
@group(0) @binding(0) var<storage, read_write> flag: bool;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[gid.x] = 1u;
}
