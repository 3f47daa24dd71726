// expect: refused "Out takes (f32, u32), got (f32, f32)"
// tint: refused
struct Acc {
  sum: f32,
  n: u32,
  lo: vec2<f32>,
  tags: array<u32, 3>,
}

struct Out {
  total: f32,
  count: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> outs: array<Out>;

fn add(a: Acc, v: f32) -> Acc {
  var b = a;
  b.sum += v;
  b.n += 1u;
  b.lo = min(b.lo, vec2<f32>(v, -v));
  return b;
}

fn finish(a: Acc) -> Out {
  if (a.n == 0u) {
    return Out();
  }
  return Out(a.sum + a.lo.x - a.lo.y, a.n * 10u + a.tags[1]);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let a = Out(1.0, 2.0);
  outs[gid.x] = Out();
}
