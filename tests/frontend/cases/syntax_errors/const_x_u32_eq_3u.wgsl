// expect: syntax error at 4:1 "unexpected 'const'; expected one of ';' or an operator"
// tint: refused
const X: u32 = 3u
const Y: u32 = 4u;
