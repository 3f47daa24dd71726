struct Params {
  n: u32,
}

@group(0) @binding(0) var<storage, read> inp: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<uniform> params: Params;

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
  v2 += v2 / vec2<u32>(select(vec2<i32>(0i, 0i), vec2<i32>(0i, -1i), vb));
  out[gid.x * 8u + 0u] = vu;
  out[gid.x * 8u + 1u] = u32(vi);
  out[gid.x * 8u + 2u] = select(7u, 9u, vb);
  out[gid.x * 8u + 3u] = v2.x ^ ((v2.y << 16u) | (v2.y >> 16u));
  out[gid.x * 8u + 4u] = vec2<u32>(w2).x ^ ((vec2<u32>(w2).y << 16u) | (vec2<u32>(w2).y >> 16u));
}
