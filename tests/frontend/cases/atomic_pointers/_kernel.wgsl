@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> counts: array<atomic<u32>>;
@group(0) @binding(2) var<storage, read_write> o: array<u32>;
var<workgroup> local: array<atomic<u32>, 8>;
var<workgroup> total: atomic<u32>;
// {head}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
// {body}
  o[gid.x] = atomicLoad(&counts[0]) + atomicLoad(&local[0]) + atomicLoad(&total);
}
