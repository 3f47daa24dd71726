// expect: type error "vec2<S>: a vector's element type is bool, f32, f16, i32 or u32"
// tint: refused "vector element type must be"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
struct S { a: u32 }
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  var v: vec2<S>;
}
