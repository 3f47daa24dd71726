// expect: refused "unexpected 'enable'; expected one of ';', '@', 'alias', 'const', 'const_assert', 'fn', 'override', 'struct', 'var' or end of input"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
enable f16;
// {body}
  out[0u] = 1u;
