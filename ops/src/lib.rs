//! Op definitions and CPU kernels (built out by the tensor issue).
