// expect: syntax error at 4:1 "unexpected 'fnmain'; expected one of 'fn', 'override' or 'var'"
// tint: refused
@compute @workgroup_size(64)
fnmain() {
}
