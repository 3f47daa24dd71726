// A scaled row softmax as TVM and web-llm generate them: a struct of params, helpers beside the
// builtins they resemble (max3 next to max), one helper that takes a builtin's own name (exp,
// through exp2, so every exp(...) of this module calls it), and locals named like builtins.

struct Params {
  rows: u32,
  cols: u32,
  scale: f32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

var<workgroup> red: array<f32, 64>;

fn exp(v: f32) -> f32 {
  return exp2(v * 1.4426950408889634);
}

fn max3(a: f32, b: f32, c: f32) -> f32 {
  return max(a, max(b, c));
}

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(workgroup_id) wid: vec3<u32>) {
  let row = wid.x;
  let base = row * params.cols;
  {
    // This block's max is a var; the builtin is called again after it.
    var max = -3.0e38;
    for (var c = lid.x; c < params.cols; c += 128u) {
      let next = x[base + min(c + 64u, params.cols - 1u)] * params.scale;
      let second = select(-3.0e38, next, c + 64u < params.cols);
      max = max3(max, x[base + c] * params.scale, second);
    }
    red[lid.x] = max;
  }
  workgroupBarrier();
  for (var step = 32u; step > 0u; step >>= 1u) {
    if (lid.x < step) {
      red[lid.x] = max(red[lid.x], red[lid.x + step]);
    }
    workgroupBarrier();
  }
  let peak = red[0];
  workgroupBarrier();
  var sum = 0.0;
  for (var c = lid.x; c < params.cols; c += 64u) {
    sum += exp(x[base + c] * params.scale - peak);
  }
  red[lid.x] = sum;
  workgroupBarrier();
  for (var step = 32u; step > 0u; step >>= 1u) {
    if (lid.x < step) {
      red[lid.x] += red[lid.x + step];
    }
    workgroupBarrier();
  }
  let total = red[0];
  for (var c = lid.x; c < params.cols; c += 64u) {
    let normalize = exp(x[base + c] * params.scale - peak) / total;
    y[base + c] = normalize;
  }
}
