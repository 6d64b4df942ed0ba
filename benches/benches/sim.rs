//! Placeholder until the benchmark helper writes the real file.
fn main() {}
