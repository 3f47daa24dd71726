// expect: type error "attribute @const on helper function g (a helper takes @must_use and @diagnostic)"
// tint: refused "const attribute may not appear in shaders"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@const fn g() -> u32 { return 1u; }
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[0] = g();
}
