// RMSNorm of each row: one workgroup per row, the sum of squares reduced across each subgroup
// with subgroupAdd, then the subgroups' sums added through workgroup memory.
enable subgroups;

struct Params {
  rows: u32,
  cols: u32,
  eps: f32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> weight: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

const WG: u32 = 64u;
// One sum per subgroup: at most WG / 4 (WGSL's least subgroup size).
var<workgroup> sums: array<f32, 16>;

@compute @workgroup_size(WG)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
  @builtin(subgroup_invocation_id) lane: u32,
  @builtin(subgroup_size) sg: u32,
) {
  let row = wid.x;
  let base = row * params.cols;
  var acc = 0.0;
  for (var c = lid.x; c < params.cols; c += WG) {
    let v = x[base + c];
    acc += v * v;
  }
  let total = subgroupAdd(acc);
  if (lane == 0u) {
    sums[lid.x / sg] = total;
  }
  workgroupBarrier();
  var s = 0.0;
  for (var k = 0u; k < WG / sg; k++) {
    s += sums[k];
  }
  let scale = inverseSqrt(s / f32(params.cols) + params.eps);
  for (var c = lid.x; c < params.cols; c += WG) {
    y[base + c] = x[base + c] * scale * weight[c];
  }
}
