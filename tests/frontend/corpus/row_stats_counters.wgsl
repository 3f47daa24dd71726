// Per-row maxima with dispatch-wide statistics in one struct of atomic counters, the job's shape
// in a storage struct holding a struct, as TVM/web-llm and ggml-webgpu pass a job descriptor in a
// storage buffer and count across workgroups with atomics: workgroup r reduces row
// job.rows.start + r to its maximum, each invocation counts its elements above the threshold,
// and the counters gather the count, the largest non-negative maximum (its bits order as the
// floats do) and the rows done.

struct Span {
  start: u32,
  count: u32,
}

struct Job {
  rows: Span,
  cols: u32,
  threshold: f32,
}

struct Stats {
  above: atomic<u32>,
  max_bits: atomic<u32>,
  rows_done: atomic<u32>,
}

@group(0) @binding(0) var<storage, read> job: Job;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> stats: Stats;
@group(0) @binding(3) var<storage, read_write> row_max: array<f32>;

var<workgroup> best: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let row = job.rows.start + wid.x;
  let base = row * job.cols;
  var m = -3.0e38;
  var above = 0u;
  for (var c = lid.x; c < job.cols; c += 64u) {
    let v = x[base + c];
    m = max(m, v);
    above += select(0u, 1u, v > job.threshold);
  }
  best[lid.x] = m;
  atomicAdd(&stats.above, above);
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if lid.x < s {
      best[lid.x] = max(best[lid.x], best[lid.x + s]);
    }
    workgroupBarrier();
  }
  if lid.x == 0u {
    let top = best[0];
    row_max[wid.x] = top;
    if top >= 0.0 {
      atomicMax(&stats.max_bits, bitcast<u32>(top));
    }
    atomicAdd(&stats.rows_done, 1u);
  }
}
