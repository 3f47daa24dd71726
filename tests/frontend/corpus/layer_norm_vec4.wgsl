// LayerNorm of each row of vec4s in ONNX Runtime's WebGPU style: one workgroup per row, the
// invocation's builtins gathered in a struct (the local index among them; the workgroup's id a
// parameter of its own, so the row is uniform, as WGSL's analysis sees a struct), the sum
// and the sum of squares accumulated in one vec2 by swizzle, reduced as a tree in workgroup
// memory, the scale and shift applied by halves (xz, then yw). A @must_use helper, constructors
// without an element type and hex-float constants, as generated shaders spell them.
diagnostic(off, derivative_uniformity);

struct Params {
  rows: u32,
  cols4: u32,
  eps: f32,
}

struct Invocation {
  @builtin(global_invocation_id) global_id: vec3<u32>,
  @builtin(local_invocation_index) local_idx: u32,
}

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> gamma: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> beta: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<vec4<f32>>;
@group(0) @binding(4) var<uniform> params: Params;

const WG: u32 = 64u;
var<workgroup> partial: array<vec2<f32>, 64>;

@must_use
fn sum4(v: vec4<f32>) -> f32 {
  return dot(v, vec4(1.0));
}

@compute @workgroup_size(WG)
fn main(inv: Invocation, @builtin(workgroup_id) workgroup_id: vec3<u32>) {
  let row = workgroup_id.x;
  let local_idx = inv.local_idx;
  if (row >= params.rows) {
    return;
  }
  let base = row * params.cols4;
  var acc = vec2(0.0);
  for (var c = local_idx; c < params.cols4; c += WG) {
    let v = x[base + c];
    acc.yx += vec2(dot(v, v), sum4(v));
  }
  partial[local_idx] = acc;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (local_idx < s) {
      partial[local_idx] += partial[local_idx + s];
    }
    workgroupBarrier();
  }
  let n = f32(params.cols4) * 0x1p2;
  let mean = partial[0].x / n;
  let variance = max(partial[0].y / n - mean * mean, 0x0p0);
  let inv_std = inverseSqrt(variance + params.eps);
  for (var c = local_idx; c < params.cols4; c += WG) {
    var o = (x[base + c] - vec4(mean)) * inv_std;
    o.xz = o.xz * gamma[c].xz + beta[c].xz;
    o.wy = fma(o.wy, gamma[c].wy, beta[c].wy);
    y[base + c] = o;
  }
}
