// A gated activation on vec4s (SwiGLU and its relatives): out = act(gate) * up, the activation
// chosen by a switch on a params field.
struct Params {
  n4: u32,
  act: u32,
}

@group(0) @binding(0) var<storage, read> gate: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> up: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= params.n4) {
    return;
  }
  let g = gate[i];
  var a: vec4<f32>;
  switch params.act {
    case 0u: {
      a = g / (vec4<f32>(1.0) + exp(-g));
    }
    case 1u: {
      let inner = 0.7978846 * (g + 0.044715 * g * g * g);
      a = 0.5 * g * (vec4<f32>(1.0) + tanh(inner));
    }
    default: {
      a = max(g, vec4<f32>(0.0));
    }
  }
  out[i] = a * up[i];
}
