// expect: refused "loop { ... }: the loop never exits: no break or return is reached in it (WGSL's behaviour analysis; Tint refuses it)"
// tint: refused
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  loop { }
  out[0u] = 1u;
  out[0u] = 1u;
}
