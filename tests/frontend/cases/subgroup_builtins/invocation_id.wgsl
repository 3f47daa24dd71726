// expect: taken
// tint: taken
// naga: taken
enable subgroups;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read_write> fo: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(subgroup_invocation_id) s: u32) {
  out[s] = s;
}
