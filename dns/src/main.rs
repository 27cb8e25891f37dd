//! keelson-dns: flags in, library out (the server comes in the next change).

fn main() {}
