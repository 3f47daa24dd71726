// expect: refused "storage var 'n' of atomic<u32> is read: atomics in storage are read_write"
// tint: refused "must have 'read_write' access mode"
// naga: taken
@group(0) @binding(0) var<storage, read> n: atomic<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[gid.x] = atomicLoad(&n);
}
