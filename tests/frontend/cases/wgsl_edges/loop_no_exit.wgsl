// expect: refused "loop { ... }: the loop never exits: no break or return is reached in it (WGSL's behaviour analysis; Tint refuses it)"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  loop { }
  out[0u] = 1u;
