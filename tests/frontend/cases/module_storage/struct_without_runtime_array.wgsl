// expect: taken
// tint: taken
// naga: taken
struct Config {
  n: u32,
  eps: f32,
  bias: vec3<f32>,
  taps: array<f32, 4>,
}
@group(0) @binding(0) var<storage, read> cfg: Config;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let c = cfg;
  out[gid.x] = c.eps + cfg.bias.z + cfg.taps[gid.x % 4u] + f32(c.n);
}
