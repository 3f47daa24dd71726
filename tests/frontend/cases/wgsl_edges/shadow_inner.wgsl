// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  let x = 1u;
  {
    let x = 2u;
    out[0u] = x;
  }
