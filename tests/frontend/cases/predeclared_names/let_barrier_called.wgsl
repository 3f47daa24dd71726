// expect: refused "cannot use 'let workgroupBarrier' as call target"
// tint: refused "cannot use 'let workgroupBarrier' as call target"
// in: ../_a_to_out.wgsl
  let workgroupBarrier = 1u;
  workgroupBarrier();
  out[i] = 1u;
