// expect: refused "member k of In has no @builtin"
// tint: refused
@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
struct In { @builtin(global_invocation_id) gid: vec3<u32>, k: u32 }
@compute @workgroup_size(64)
fn main(i: In) {
  out[0] = i.k;
}
