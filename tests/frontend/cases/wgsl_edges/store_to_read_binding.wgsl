// expect: refused "inp[0u] = 1u: binding 'inp' is read-only"
// tint: refused
@group(0) @binding(0) var<storage, read> inp: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  inp[0u] = 1u;
  out[0u] = inp[1u];
}
