//! The hooks an op library gives the engine: a way to merge a device's fused units of op calls
//! into one kernel. (Plans' passes are set with the promotion, `Vm::set_plan_pass`.)

use super::Vm;
use crate::merge::UnitMerge;
use crate::stream::Device;

impl Vm {
    /// Gives the streams of `device` a way to merge their fused units of op calls into one
    /// kernel (see [`merge`](crate::merge)). Returns whether some stream took it: `false`
    /// where the engine has no stream on `device`, or each of its streams has one already
    /// (the first given stays).
    ///
    /// # Examples
    ///
    /// See [`UnitMerge`].
    pub fn set_unit_merge(&self, device: Device, merge: UnitMerge) -> bool {
        let mut took = false;
        for st in &self.shared().streams {
            if st.policy.device() == device {
                took |= st.merge.set(merge.clone()).is_ok();
            }
        }
        took
    }
}
