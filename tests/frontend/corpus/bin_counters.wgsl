// Values binned by edges from the uniform and counted across workgroups, as ggml-webgpu and
// TVM/web-llm count with atomics: each workgroup counts its elements per bin in a workgroup
// array of structs of atomics, then adds its counts to a storage counter array
// (array<atomic<u32>, 4>) and its fixed-point sums to an atomic array inside a storage struct.
// The uniform holds a struct of the row range. The workgroup counters are zeroed by the kernel:
// WGSL zeroes workgroup memory for each workgroup, and wgpu-native on llvmpipe does not
// (docs/deviations.md).

struct Range {
  start: u32,
  count: u32,
  pad0: u32,
  pad1: u32,
}

struct Params {
  rows: Range,
  edges: vec4<f32>,
  scale: f32,
}

struct Bin {
  hits: atomic<u32>,
  fixed: atomic<i32>,
}

struct Totals {
  fixed: array<atomic<i32>, 4>,
  groups_done: atomic<u32>,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> counters: array<atomic<u32>, 4>;
@group(0) @binding(3) var<storage, read_write> totals: Totals;

var<workgroup> bins: array<Bin, 4>;

fn bin_of(v: f32) -> u32 {
  let e = params.edges;
  return select(0u, 1u, v >= e.x) + select(0u, 1u, v >= e.y) + select(0u, 1u, v >= e.z);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  if lid.x < 4u {
    atomicStore(&bins[lid.x].hits, 0u);
    atomicStore(&bins[lid.x].fixed, 0i);
  }
  workgroupBarrier();
  let i = gid.x;
  if i < params.rows.count {
    let v = x[params.rows.start + i];
    let k = bin_of(v);
    atomicAdd(&bins[k].hits, 1u);
    atomicAdd(&bins[k].fixed, i32(round(v * params.scale)));
  }
  workgroupBarrier();
  if lid.x < 4u {
    atomicAdd(&counters[lid.x], atomicLoad(&bins[lid.x].hits));
    atomicAdd(&totals.fixed[lid.x], atomicLoad(&bins[lid.x].fixed));
  }
  if lid.x == 0u {
    atomicAdd(&totals.groups_done, 1u);
  }
}
