// expect: refused "unexpected '}'; expected one of '@' or a name"
// tint: refused
// in: ../_kernel.wgsl
struct P {
}
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  out[0u] = 1u;
