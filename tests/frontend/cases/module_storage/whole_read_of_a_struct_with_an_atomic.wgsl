// expect: refused "binding 'ctr' of type Counters holds an atomic: it is not read whole"
// tint: refused "cannot be used as the type of a 'let'"
// naga: taken
// in: _counters.wgsl
@group(0) @binding(0) var<storage, read_write> ctr: Counters;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
// {body}
  let c = ctr;
  out[gid.x] = c.total;
