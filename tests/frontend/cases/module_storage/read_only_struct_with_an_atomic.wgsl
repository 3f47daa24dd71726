// expect: refused "binding 'ctr': struct Counters holds an atomic, and the binding is read"
// tint: refused "must have 'read_write' access mode"
// naga: taken
// in: _counters.wgsl
@group(0) @binding(0) var<storage, read> ctr: Counters;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
// {body}
  out[gid.x] = ctr.total;
