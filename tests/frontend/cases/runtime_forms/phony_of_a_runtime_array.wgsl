// expect: refused "used without an index"
// tint: refused
// in: ../_a_to_out.wgsl
  _ = out;
