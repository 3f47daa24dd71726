// expect: refused "builtin 'li' of type i32: @builtin(local_invocation_index) is u32"
// tint: refused
@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) li: i32) {
  out[0] = u32(li);
}
