// expect: refused "cannot infer the element type"
// tint: refused
// in: ../_a_to_out.wgsl
  let t = array();
