// expect: refused "atomics in storage are read_write"
// tint: refused
// naga: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> c: array<atomic<u32>>;
@group(0) @binding(2) var<storage, read> r: array<atomic<u32>>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let x = atomicLoad(&r[0]);
  out[0u] = 1u;
}
