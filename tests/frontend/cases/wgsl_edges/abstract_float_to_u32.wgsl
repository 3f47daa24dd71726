// expect: refused "out[0u] = 1000.0f: cannot store f32 into out[0u] of type u32"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[0u] = 1e3;
