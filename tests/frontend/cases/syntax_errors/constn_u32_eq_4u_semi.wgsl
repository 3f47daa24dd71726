// expect: syntax error at 3:1 "unexpected 'constN'; expected one of ';', '@', 'alias', 'const', 'const_assert', 'diagnostic', 'enable', 'fn', 'override', 'requires', 'struct', 'var' or end of input"
// tint: refused
constN: u32 = 4u;
