// Softmax of each row: one workgroup per row; the row's maximum and the sum of exponentials
// each reduced across the subgroup (subgroupMax, subgroupAdd) and then across the subgroups
// through workgroup memory.
enable subgroups;

struct Params {
  rows: u32,
  cols: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

const WG: u32 = 64u;
var<workgroup> maxima: array<f32, 16>;
var<workgroup> sums: array<f32, 16>;

@compute @workgroup_size(WG)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
  @builtin(subgroup_invocation_id) lane: u32,
  @builtin(subgroup_size) sg: u32,
) {
  let base = wid.x * params.cols;
  let groups = WG / sg;
  var m = x[base];
  for (var c = lid.x; c < params.cols; c += WG) {
    m = max(m, x[base + c]);
  }
  let sub_max = subgroupMax(m);
  if (lane == 0u) {
    maxima[lid.x / sg] = sub_max;
  }
  workgroupBarrier();
  var row_max = maxima[0];
  for (var k = 1u; k < groups; k++) {
    row_max = max(row_max, maxima[k]);
  }
  var acc = 0.0;
  for (var c = lid.x; c < params.cols; c += WG) {
    acc += exp(x[base + c] - row_max);
  }
  let sub_sum = subgroupAdd(acc);
  if (lane == 0u) {
    sums[lid.x / sg] = sub_sum;
  }
  workgroupBarrier();
  var total = 0.0;
  for (var k = 0u; k < groups; k++) {
    total += sums[k];
  }
  for (var c = lid.x; c < params.cols; c += WG) {
    y[base + c] = exp(x[base + c] - row_max) / total;
  }
}
