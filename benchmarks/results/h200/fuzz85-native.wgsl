struct Params {
  n: u32,
}

@group(0) @binding(0) var<storage, read> inp: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<uniform> params: Params;

fn h0(a: u32, b: i32) -> u32 {
  var acc1: u32 = 0u;
  for (var k2: u32 = 0u; k2 < 0u; k2 += 1u) {
    acc1 = 0u;
  }
  if (false) {
    return 0u;
  }
  return 0u;
}

fn h1(p: vec2<u32>, q: bool, r: u32) -> i32 {
  let l3 = 0i;
  let l4 = abs(-1i << r);
  var acc5: i32 = 0i;
  for (var k6: u32 = 0u; k6 < 0u; k6 += 1u) {
    acc5 = l3;
  }
  if (0i < l4) {
    return 0i;
  }
  return l4;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let x = inp[gid.x];
  let y = i32(inp[gid.x + 128u]);
  let z = (x >> 3u) & 1u;
  let zi = i32((x >> 4u) & 1u) - 1i;
  let m = select(y, i32(2147483648u), z == 0u);
  var vu: u32 = x ^ params.n;
  var vi: i32 = y;
  var vb: bool = (x & 1u) == 0u;
  var v2: vec2<u32> = vec2<u32>(x, params.n);
  var w2: vec2<i32> = vec2<i32>(y, m);
  let t7 = 0u;
  vu ^= h0(x, y);
  vi ^= h1(v2, vb, vu);
  out[gid.x * 8u + 0u] = vu;
  out[gid.x * 8u + 1u] = u32(vi);
  out[gid.x * 8u + 2u] = select(7u, 9u, vb);
  out[gid.x * 8u + 3u] = v2.x ^ ((v2.y << 16u) | (v2.y >> 16u));
  out[gid.x * 8u + 4u] = vec2<u32>(w2).x ^ ((vec2<u32>(w2).y << 16u) | (vec2<u32>(w2).y >> 16u));
}
