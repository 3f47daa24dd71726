// expect: taken
// tint: taken
// naga: taken
enable clip_distances, primitive_index;
enable dual_source_blending;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[gid.x] = gid.x;
}
