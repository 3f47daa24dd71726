// LayerNorm of each row, as ONNX Runtime Web writes it: the shape in a uniform named `uniforms`
// (its members padded by @size and @align), epsilon in a uniform of its own, the row's mean and
// inverse standard deviation computed once per workgroup into workgroup scalars (each sum a
// tree that one helper reduces), and the row's first element in a private var that a helper
// reads.
struct Uniforms {
  rows: u32,
  @size(12) cols: u32,
  @align(16) gamma_scale: f32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> gamma: array<f32>;
@group(0) @binding(2) var<storage, read> beta: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> uniforms: Uniforms;
@group(0) @binding(5) var<uniform> epsilon: f32;

const WG: u32 = 64u;
var<workgroup> partial: array<f32, 64>;
var<workgroup> mean: f32;
var<workgroup> inv_std: f32;
var<private> base: u32;

fn load(c: u32) -> f32 {
  return x[base + c];
}

// partial[0] = the sum of partial (one value an invocation), as a tree; every invocation of the
// workgroup calls it.
fn reduce(lid: u32) {
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) {
      partial[lid] += partial[lid + s];
    }
    workgroupBarrier();
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let row = wid.x;
  if (row >= uniforms.rows) {
    return;
  }
  base = row * uniforms.cols;
  var acc = 0.0;
  for (var c = lid.x; c < uniforms.cols; c += WG) {
    acc += load(c);
  }
  partial[lid.x] = acc;
  reduce(lid.x);
  if (lid.x == 0u) {
    mean = partial[0] / f32(uniforms.cols);
  }
  workgroupBarrier();
  let m = mean;
  var sq = 0.0;
  for (var c = lid.x; c < uniforms.cols; c += WG) {
    let d = load(c) - m;
    sq += d * d;
  }
  partial[lid.x] = sq;
  reduce(lid.x);
  if (lid.x == 0u) {
    inv_std = inverseSqrt(partial[0] / f32(uniforms.cols) + epsilon);
  }
  workgroupBarrier();
  for (var c = lid.x; c < uniforms.cols; c += WG) {
    y[base + c] = (load(c) - m) * inv_std * gamma[c] * uniforms.gamma_scale + beta[c];
  }
}
