// expect: type error "bitcast takes one argument, got 2"
// tint: refused "no matching call to 'bitcast<u32>(i32, i32)'"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0] = bitcast<u32>(1i, 2i);
}
