// expect: type error at 4:8 "enable no_such_extension: expected extension (WGSL's are f16, subgroups, clip_distances, dual_source_blending, primitive_index)"
// tint: refused "expected extension"
// naga: refused
enable no_such_extension;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[gid.x] = gid.x;
}
