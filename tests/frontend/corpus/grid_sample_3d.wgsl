// GridSample over a volume (ONNX's GridSample of a 5-D input, N = 1, its C = 4 channels a
// texel's four), as ONNX Runtime's WebGPU execution provider binds an image input: the input a
// texture_3d read through a sampler, mode "nearest", padding_mode "border" (the default
// sampler: the nearest texel, each coordinate clamped to the edge), align_corners 0 (-1 and 1
// the outer edges of the outer texels); the grid (x, y, z per output point) and the output,
// channel-major, in storage buffers, the shape in a uniform named `uniforms`.
struct Uniforms {
  output_size: u32,
  channels: u32,
}

@group(0) @binding(0) var<storage, read> grid: array<f32>;
@group(0) @binding(1) var<storage, read_write> result: array<f32>;
@group(0) @binding(2) var<uniform> uniforms: Uniforms;
@group(0) @binding(3) var input_texture: texture_3d<f32>;
@group(0) @binding(4) var input_sampler: sampler;

// align_corners = 0: the grid's [-1, 1] spans the whole texture, [0, 1] to the sampler.
fn unnormalize(g: vec3<f32>) -> vec3<f32> {
  return (g + 1.0) * 0.5;
}

fn sample_at(t: texture_3d<f32>, s: sampler, g: vec3<f32>) -> vec4<f32> {
  return textureSampleLevel(t, s, unnormalize(g), 0.0);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) global_idx: vec3<u32>) {
  let idx = global_idx.x;
  if (idx >= uniforms.output_size) {
    return;
  }
  let g = vec3<f32>(grid[idx * 3u], grid[idx * 3u + 1u], grid[idx * 3u + 2u]);
  let value = sample_at(input_texture, input_sampler, g);
  for (var c = 0u; c < uniforms.channels; c++) {
    result[c * uniforms.output_size + idx] = value[c];
  }
}
