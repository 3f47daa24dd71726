// expect: refused "'clamp' is a var here, not the builtin function: it cannot be called"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  var s = 0u;
  {
    var clamp = 2u;
    s = clamp(s, 1u, 3u);
  }
  out[gid.x] = s;
}
