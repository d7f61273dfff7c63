//! The global view's rules: a [`Placement`] (a device kind and a grid of ranks), an [`Sbp`]
//! per grid axis, the balanced split, the SBP signatures of ops beside their inference
//! ([`Rule`]) and the cost model that chooses a signature and plans the boxing
//! ([`choose`], [`boxing_bytes`]). The tensor layer holds the components and runs the boxing.

mod placement;
mod rules;
mod sbp;

pub use crate::collective::{Collective, ReduceKind, split_range};
pub use placement::{DeviceKind, Placement};
pub use rules::{Choice, Partials, Rule, Signature, aligned, boxing_bytes, choose, unary_partials};
pub use sbp::{NdSbp, Sbp, check_sbp, component_ranges, nd_sbp_copy, show_sbp};
