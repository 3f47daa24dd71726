// Softmax of each row: one workgroup per row, the row's maximum and then its sum of
// exponentials reduced as trees in workgroup memory.
struct Params {
  rows: u32,
  cols: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

var<workgroup> red: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let base = wid.x * params.cols;
  var m = -3.4e38;
  for (var c = lid.x; c < params.cols; c += 64u) {
    m = max(m, x[base + c]);
  }
  red[lid.x] = m;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (lid.x < s) {
      red[lid.x] = max(red[lid.x], red[lid.x + s]);
    }
    workgroupBarrier();
  }
  let row_max = red[0];
  workgroupBarrier();
  var sum = 0.0;
  for (var c = lid.x; c < params.cols; c += 64u) {
    sum += exp(x[base + c] - row_max);
  }
  red[lid.x] = sum;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (lid.x < s) {
      red[lid.x] += red[lid.x + s];
    }
    workgroupBarrier();
  }
  let inv = 1.0 / red[0];
  for (var c = lid.x; c < params.cols; c += 64u) {
    y[base + c] = exp(x[base + c] - row_max) * inv;
  }
}
