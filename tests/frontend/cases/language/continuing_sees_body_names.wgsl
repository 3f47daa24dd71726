// expect: taken
// tint: taken
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  var n = 0u;
  loop {
    let inc = 3u;
    continuing {
      n += inc;
      break if n >= 9u;
    }
  }
  out[3u] = n;
