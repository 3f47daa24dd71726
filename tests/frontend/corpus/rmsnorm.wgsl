// RMSNorm of each row: one workgroup per row, the sum of squares reduced as a tree in
// workgroup memory.
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
var<workgroup> partial: array<f32, 64>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let row = wid.x;
  if (row >= params.rows) {
    return;
  }
  let base = row * params.cols;
  var acc = 0.0;
  for (var c = lid.x; c < params.cols; c += WG) {
    let v = x[base + c];
    acc += v * v;
  }
  partial[lid.x] = acc;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid.x < s) {
      partial[lid.x] += partial[lid.x + s];
    }
    workgroupBarrier();
  }
  let scale = inverseSqrt(partial[0] / f32(params.cols) + params.eps);
  for (var c = lid.x; c < params.cols; c += WG) {
    y[base + c] = x[base + c] * scale * weight[c];
  }
}
