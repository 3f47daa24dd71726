// expect: taken
// tint: taken
// naga: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let v = i32(gid.x) - 3;
  switch (v) {
    case -1, 4: { out[2u] = 1u; }
    default: { }
  }
  out[0u] = 1u;
}
