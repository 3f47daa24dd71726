// A matrix-vector product y = W x, ROWS rows per workgroup (a pipeline constant, 1 to 4): x
// staged in workgroup memory TILE columns at a time (a pipeline constant too) through a pointer to
// each element, each invocation's partial sums kept in one array that a helper adds into through
// a pointer, then each row's 64 sums reduced as a tree in a workgroup array of rows, through a
// pointer to the row. ROWS = 1 is the plain one-row-per-workgroup matvec.
struct Params {
  rows: u32,
  cols: u32,
}

@group(0) @binding(0) var<storage, read> w: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

override TILE: u32 = 128u;
override ROWS: u32 = 4u;
var<workgroup> xs: array<f32, TILE>;
var<workgroup> part: array<array<f32, 64>, ROWS>;

// acc[r] += W[row0 + r, c] * xv for r < ROWS (acc holds the most, 4), a missing row (past the
// last) read as the last.
fn accumulate(acc: ptr<function, array<f32, 4>>, row0: u32, c: u32, xv: f32) {
  for (var r = 0u; r < ROWS; r++) {
    let row = min(row0 + r, params.rows - 1u);
    acc[r] += w[row * params.cols + c] * xv;
  }
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let row0 = wid.x * ROWS;
  var acc = array<f32, 4>();
  for (var t = 0u; t < params.cols; t += TILE) {
    for (var k = lid.x; k < TILE; k += 64u) {
      let c = t + k;
      let dst = &xs[k];
      *dst = select(0.0, x[min(c, params.cols - 1u)], c < params.cols);
    }
    workgroupBarrier();
    for (var k = lid.x; k < TILE && t + k < params.cols; k += 64u) {
      accumulate(&acc, row0, t + k, xs[k]);
    }
    workgroupBarrier();
  }
  for (var r = 0u; r < ROWS; r++) {
    part[r][lid.x] = acc[r];
  }
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (lid.x < s) {
      for (var r = 0u; r < ROWS; r++) {
        let row = &part[r];
        (*row)[lid.x] += row[lid.x + s];
      }
    }
    workgroupBarrier();
  }
  if (lid.x < ROWS && row0 + lid.x < params.rows) {
    y[row0 + lid.x] = part[lid.x][0];
  }
}
