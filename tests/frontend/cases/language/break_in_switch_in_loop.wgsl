// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  var n = 0u;
  loop {
    switch n { case 2u { break; } default { } }
    n++;
    if (n > 4u) { break; }
  }
  out[3u] = n;
