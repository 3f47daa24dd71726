// expect: refused "n[0i]: cannot index a value of type u32"
// tint: refused "cannot index type 'u32'"
// naga: refused
@group(0) @binding(0) var<storage, read> n: u32;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[gid.x] = n[0];
}
