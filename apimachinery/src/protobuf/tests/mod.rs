mod encoder;
mod errors;
mod fixtures;
mod objects;
