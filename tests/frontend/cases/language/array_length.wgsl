// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  if (gid.x < arrayLength(&out)) {
    out[gid.x] = 2u;
  }
