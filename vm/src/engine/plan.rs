//! The engine's side of the plans ([`crate::plan`]): the public calls that build a plan on an
//! engine and launch its runs take the engine's handle, and the handle gives the plans what
//! they need of the engine through `plan::Host`, so that the plans never name it.

use super::Vm;
use crate::Counted;
use crate::blob::Blob;
use crate::error::{Caller, Result};
use crate::instruction::Kernel;
use crate::plan::{Host, Plan, PlanRun, PlanSpec, Release, StandIn};
use crate::shared::Shared;
use crate::stream::{Device, StreamId};
use std::sync::Arc;

impl Plan {
    /// Builds the plan: lays out and allocates its temporaries.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for a slot out of range or an unknown stream; `OutOfMemory` if the
    /// arena cannot be allocated, even after the device's caches went back
    /// ([`Vm::empty_cache`]).
    #[track_caller]
    pub fn new(vm: &Vm, spec: PlanSpec) -> Result<Plan> {
        Plan::new_on(vm, spec, Caller::here())
    }

    /// Submits one run on `inputs` and `outputs` (as many as the plan was built for) as one
    /// instruction. Its errors follow the engine's rules: an argument error here; an error of
    /// a step (named by its op and the line of its call) poisons the run's outputs and the
    /// fixed blobs it writes, and surfaces at their next sync.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for a wrong number of blobs; the errors of [`Vm::run`].
    #[track_caller]
    pub fn launch(
        &self,
        vm: &Vm,
        inputs: &[Counted<Blob>],
        outputs: &[Counted<Blob>],
    ) -> Result<()> {
        self.launch_with(vm, inputs, outputs, None)
    }

    /// [`launch`](Self::launch), the run's steps computing with `kernels` (one per step, in
    /// order, each doing what the step's kernel did on operands of the same sizes: the same
    /// op with other parameters) instead of the plan's. The run keeps them for the next run.
    ///
    /// # Errors
    ///
    /// As [`launch`](Self::launch); `InvalidArgument` for a wrong number of kernels, or on a
    /// plan run by actors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::plan::{Plan, PlanSpec, Slot, Step};
    /// use eddy_vm::{StreamId, Vm, testing::AddByte};
    /// let vm = Vm::builder().build()?;
    /// let steps = vec![Step::new(Box::new(AddByte(1)), vec![Slot::Input(0)], vec![Slot::Output(0)])];
    /// let plan = Plan::new(&vm, PlanSpec::new(StreamId::CPU, steps, 1, 1, vec![], vec![]))?;
    /// let (x, y) = (vm.new_blob(1), vm.new_blob(1));
    /// vm.write_blob(&x, |b| b[0] = 40)?;
    /// plan.launch_with(&vm, &[x], &[y.clone()], Some(vec![Box::new(AddByte(2))]))?;
    /// assert_eq!(vm.read_blob(&y, |b| b[0])?, 42);
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    #[track_caller]
    pub fn launch_with(
        &self,
        vm: &Vm,
        inputs: &[Counted<Blob>],
        outputs: &[Counted<Blob>],
        kernels: Option<Vec<Box<dyn Kernel>>>,
    ) -> Result<()> {
        let kernels = kernels.map(|k| {
            k.into_iter()
                .map(|kernel| Some(StandIn { kernel, at: None }))
                .collect()
        });
        self.launch_each(vm, inputs, outputs, kernels, Caller::here())
    }
}

impl Host for Vm {
    fn shared_state(&self) -> &Arc<Shared> {
        &self.inner.shared
    }
    fn new_blob(&self, bytes: usize) -> Counted<Blob> {
        Vm::new_blob(self, bytes)
    }
    fn empty_cache(&self, device: Device) {
        Vm::empty_cache(self, device);
    }
    fn launcher_stream(&self, device: Device) -> Option<StreamId> {
        Vm::launcher_stream(self, device)
    }
    fn capturing_here(&self) -> bool {
        Vm::capturing_here(self)
    }
    fn run_plan(&self, stream: StreamId, run: PlanRun) -> Result<()> {
        self.run(stream, run)
    }
    fn releaser(&self) -> Release {
        let vm = self.clone();
        // An engine that is shut down has freed everything already.
        Box::new(move |b| drop(vm.release_unheld(b)))
    }
}
