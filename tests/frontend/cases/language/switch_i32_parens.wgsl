// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let v = i32(gid.x) - 3;
  switch (v) {
    case -1, 4: { out[2u] = 1u; }
    default: { }
  }
