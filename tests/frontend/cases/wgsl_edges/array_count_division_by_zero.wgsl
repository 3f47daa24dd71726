// expect: type error "division by zero in a const expression (integer division by zero is invalid)"
// tint: refused "integer division by zero is invalid"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  var t: array<u32, 4 / 0>;
}
