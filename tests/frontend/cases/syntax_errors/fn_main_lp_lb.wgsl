// expect: syntax error at 3:10 "unexpected '{'; expected one of ')', '@' or a name"
// tint: refused
fn main( {
}
