// A matrix-vector product y = W x: one workgroup per row, x staged in workgroup memory a tile
// at a time, each invocation's partial dot product reduced as a tree.
struct Params {
  rows: u32,
  cols: u32,
}

@group(0) @binding(0) var<storage, read> w: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

const TILE: u32 = 256u;
var<workgroup> xs: array<f32, 256>;
var<workgroup> part: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let row = wid.x;
  var acc = 0.0;
  for (var t = 0u; t < params.cols; t += TILE) {
    for (var k = lid.x; k < TILE; k += 64u) {
      let c = t + k;
      xs[k] = select(0.0, x[min(c, params.cols - 1u)], c < params.cols);
    }
    workgroupBarrier();
    for (var k = lid.x; k < TILE && t + k < params.cols; k += 64u) {
      acc += w[row * params.cols + t + k] * xs[k];
    }
    workgroupBarrier();
  }
  part[lid.x] = acc;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (lid.x < s) {
      part[lid.x] += part[lid.x + s];
    }
    workgroupBarrier();
  }
  if (lid.x == 0u) {
    y[row] = part[0];
  }
}
