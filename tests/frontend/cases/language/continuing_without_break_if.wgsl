// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  var n = 0u;
  loop {
    if (n > 4u) { break; }
    continuing {
      n += 2u;
    }
  }
  out[3u] = n;
