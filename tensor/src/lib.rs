//! The eager tensor API (built out by the tensor issue).
