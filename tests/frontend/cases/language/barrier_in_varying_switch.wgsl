// expect: refused "workgroupBarrier"
// tint: refused
// naga: taken
// in: ../_kernel.wgsl
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
// {body}
  switch gid.x {
    case 0u {
      workgroupBarrier();
    }
    default {
    }
  }
