// Split-K matrix-vector product, as ggml-webgpu and ONNX Runtime's WebGPU kernels split a long
// reduction: workgroup (tile, split) sums its slice of the columns for 64 rows into partials,
// and the workgroup that arrives last at its tile's counter merges the splits in order.

struct Params {
  rows: u32,
  cols: u32,
}

@group(0) @binding(0) var<storage, read> w: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> partial: array<f32>;
@group(0) @binding(3) var<storage, read_write> arrived: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;

var<workgroup> last: array<u32, 1>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
  let row = wid.x * 64u + lid.x;
  let splits = nwg.y;
  // Names WGSL's builtins also take, as generated code often uses them.
  let step = (params.cols + splits - 1u) / splits;
  let length = min(params.cols, (wid.y + 1u) * step);
  var acc = 0.0;
  if (row < params.rows) {
    for (var c = wid.y * step; c < length; c++) {
      acc += w[row * params.cols + c] * x[c];
    }
    partial[wid.y * params.rows + row] = acc;
  }
  // Release this workgroup's partials, then count it in.
  storageBarrier();
  if (lid.x == 0u) {
    last[0] = select(0u, 1u, atomicAdd(&arrived[wid.x], 1u) == splits - 1u);
  }
  if (workgroupUniformLoad(&last[0]) == 1u) {
    // Acquire the other splits' partials.
    storageBarrier();
    if (row < params.rows) {
      var total = 0.0;
      for (var s = 0u; s < splits; s++) {
        total += partial[s * params.rows + row];
      }
      y[row] = total;
    }
  }
}
