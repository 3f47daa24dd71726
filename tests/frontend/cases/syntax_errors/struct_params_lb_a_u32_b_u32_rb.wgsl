// expect: syntax error at 3:24 "unexpected 'b'; expected one of ',', '<' or '}'"
// tint: refused
struct Params { a: u32 b: u32 }
