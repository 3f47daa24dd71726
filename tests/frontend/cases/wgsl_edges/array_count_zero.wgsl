// expect: type error "array count (0) must be greater than 0"
// tint: refused "array count (0) must be greater than 0"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  var t: array<u32, 0>;
}
