// expect: refused "return in a continuing block"
// tint: refused
// naga: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  loop {
    if gid.x > 2u { break; }
    continuing {
      return;
    }
  }
