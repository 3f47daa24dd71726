// expect: taken
// tint: taken
// naga: taken
// in: _kernel.wgsl
  let v = subgroupAdd(vec2<f32>(1.0, 2.0));
  fo[gid.x] = v.y;
