// A broadcast binary op over rank-4 tensors, y = clip(alpha * a + beta * b), with its uniforms
// packed as ONNX Runtime's WebGPU backend packs them: each shape or stride array a
// vec4<u32> array read by [i / 4][i % 4] (rank 4: one vec4), the scalar attributes a struct of
// their own, and the clip bounds a module const of struct type. A broadcast axis has stride 0.

struct Affine {
  alpha: f32,
  beta: f32,
  clip: u32,
  pad: u32,
}

struct Bounds {
  lo: f32,
  hi: f32,
}

struct Uniforms {
  out_shape: array<vec4<u32>, 1>,
  strides: array<vec4<u32>, 3>,
  affine: Affine,
  size: u32,
}

const CLIP = Bounds(-6.0, 6.0);
const_assert CLIP.lo < CLIP.hi;

@group(0) @binding(0) var<uniform> params: Uniforms;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

// The k-th coordinate of flat output index i (strides[0] are the output's).
fn coord(i: u32, k: u32) -> u32 {
  return i / params.strides[0][k] % params.out_shape[k / 4u][k % 4u];
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if i >= params.size {
    return;
  }
  var ia = 0u;
  var ib = 0u;
  for (var k = 0u; k < 4u; k++) {
    let c = coord(i, k);
    ia += c * params.strides[1][k];
    ib += c * params.strides[2][k];
  }
  let f = params.affine;
  var v = f.alpha * a[ia] + f.beta * b[ib];
  if f.clip != 0u {
    v = clamp(v, CLIP.lo, CLIP.hi);
  }
  y[i] = v;
}
