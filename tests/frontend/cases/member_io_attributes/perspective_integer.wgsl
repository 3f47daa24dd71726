// expect: refused "interpolation type must be 'flat' for integral user-defined IO types"
// tint: refused "interpolation type must be 'flat' for integral user-defined IO types"
// in: ../_a_to_out.wgsl
struct S { @location(0) @interpolate(perspective) a: u32 }
// {body}
  out[i] = a[i];
