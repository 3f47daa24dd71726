// expect: refused "const x: 'gid' is a builtin, not a const (a const is evaluated when the shader compiles: use let)"
// tint: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  const x = gid.x;
  out[0u] = x;
