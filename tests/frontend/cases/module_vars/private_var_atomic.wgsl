// expect: type error "var<private> c: type atomic<u32> (a private var holds no atomic)"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<private> c: atomic<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[gid.x] = 1u;
}
