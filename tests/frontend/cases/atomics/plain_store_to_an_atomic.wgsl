// expect: refused "not as a plain value"
// tint: refused
// naga: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> c: array<atomic<u32>>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  c[gid.x] = 1u;
  out[0u] = 1u;
}
