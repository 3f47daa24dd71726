// expect: refused "atomicAdd of an atomic<u32> takes u32 values, got i32"
// tint: refused
// naga: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> c: array<atomic<u32>>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  atomicAdd(&c[0], 1i);
  out[0u] = 1u;
}
