// One step of flash decoding: a query per head against its keys and values, split in chunks of
// 64 keys, one workgroup per (chunk, head): the chunk's scores, their maximum m, the sum l of
// exp(score - m) and the values weighted by those, left for the combine kernel.
struct Params {
  seq: u32,
  chunks: u32,
  scale: f32,
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k_cache: array<f32>;
@group(0) @binding(2) var<storage, read> v_cache: array<f32>;
@group(0) @binding(3) var<storage, read_write> part_o: array<f32>;
@group(0) @binding(4) var<storage, read_write> part_m: array<f32>;
@group(0) @binding(5) var<storage, read_write> part_l: array<f32>;
@group(0) @binding(6) var<uniform> params: Params;

const D: u32 = 64u;
const C: u32 = 64u;
var<workgroup> p: array<f32, 64>;
var<workgroup> red: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let chunk = wid.x;
  let h = wid.y;
  let key = chunk * C + lid.x;
  var score = -3.0e38;
  if (key < params.seq) {
    var qk = 0.0;
    for (var d = 0u; d < D; d++) {
      qk += q[h * D + d] * k_cache[(h * params.seq + key) * D + d];
    }
    score = qk * params.scale;
  }
  red[lid.x] = score;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (lid.x < s) {
      red[lid.x] = max(red[lid.x], red[lid.x + s]);
    }
    workgroupBarrier();
  }
  let m = red[0];
  workgroupBarrier();
  let e = select(0.0, exp(score - m), key < params.seq);
  p[lid.x] = e;
  red[lid.x] = e;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (lid.x < s) {
      red[lid.x] += red[lid.x + s];
    }
    workgroupBarrier();
  }
  let l = red[0];
  let n = min(C, params.seq - chunk * C);
  var o = 0.0;
  for (var j = 0u; j < n; j++) {
    o += p[j] * v_cache[(h * params.seq + chunk * C + j) * D + lid.x];
  }
  let slot = h * params.chunks + chunk;
  part_o[slot * D + lid.x] = o;
  if (lid.x == 0u) {
    part_m[slot] = m;
    part_l[slot] = l;
  }
}
