// expect: syntax error at 3:11 "unexpected end of input; expected one of ',' or ';'"
// tint: refused
enable f16
