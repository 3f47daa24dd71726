// expect: taken
// tint: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  var a = 1i;
  a--;
  let c = 1i--1i + a--2 - a---a;
  for (var i = 0; i < 2; i--) { break; }
  out[0u] = u32(c);
}
