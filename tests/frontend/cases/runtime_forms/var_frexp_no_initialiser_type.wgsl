// expect: refused "__frexp_result_f32"
// tint: refused
// in: ../_a_to_out.wgsl
  var r: __frexp_result_f32;
  out[i] = 1u;
