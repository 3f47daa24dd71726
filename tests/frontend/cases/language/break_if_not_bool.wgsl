// expect: refused "expected bool"
// tint: refused
// naga: refused
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  var n = 0u;
  loop {
    continuing {
      n++;
      break if n;
    }
  }
