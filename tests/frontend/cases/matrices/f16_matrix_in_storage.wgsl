// expect: taken
// tint: taken
// naga: taken
enable f16;
@group(0) @binding(0) var<storage, read> h: array<mat2x2<f16>>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[gid.x] = f32(h[gid.x][1][0]);
}
