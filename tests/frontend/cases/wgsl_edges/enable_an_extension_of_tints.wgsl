// expect: type error at 4:13 "extension 'subgroup_size_control' is not allowed in the current environment (an extension of Tint's, not WGSL's: Dawn allows it under a device feature or toggle that kvdsl does not ask for)"
// tint: refused "extension 'subgroup_size_control' is not allowed in the current environment"
// naga: refused
enable f16, subgroup_size_control;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[gid.x] = gid.x;
}
