// expect: taken
// tint: taken
// naga: taken
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  var n = 0u;
  loop {
    switch n { case 2u { break; } default { } }
    n++;
    if (n > 4u) { break; }
  }
  out[3u] = n;
  out[0u] = 1u;
}
