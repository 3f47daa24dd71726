// expect: refused "the loop never exits"
// tint: refused
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  var n = 0u;
  loop {
    continuing {
      n++;
    }
  }
