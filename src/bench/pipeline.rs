//! The actor runtime's pipeline: micro-batches through a plan of four stages run by actors,
//! with registers of one slot and of two.

use super::{check, reps};
use crate::Result;
use crate::vm::instruction::{ComputeCtx, Kernel};
use crate::vm::plan::{Actors, Plan, PlanSpec, Slot, Step};
use crate::vm::{Blob, Counted, StreamId, Vm};
use std::time::{Duration, Instant};

/// Stages in the pipeline.
const STAGES: usize = 4;
/// Micro-batches per repetition.
const BATCHES: usize = 24;
/// How long each stage takes.
const STAGE: Duration = Duration::from_millis(1);

/// A stage: adds one to each byte of its input, then waits [`STAGE`], as a stage on another
/// device (or one waiting for I/O) would: the time is the stage's, not a core's.
struct Stage;

impl Kernel for Stage {
    fn name(&self) -> &str {
        "stage"
    }
    fn compute(
        &mut self,
        ins: &[Counted<Blob>],
        outs: &[Counted<Blob>],
        _: &mut ComputeCtx<'_>,
    ) -> crate::vm::Result<()> {
        // SAFETY: the runtime gives a kernel its input to read and its output to write.
        let (i, o) = unsafe { (ins[0].bytes_ref(), outs[0].bytes_mut()) };
        for (o, i) in o.iter_mut().zip(i) {
            *o = i.wrapping_add(1);
        }
        std::thread::sleep(STAGE);
        Ok(())
    }
}

/// Four 1 ms stages run by actors with registers of `slots` slots, 24 micro-batches launched
/// at once and synced at the end: ms per micro-batch. With one slot a stage waits for the
/// next to finish before it makes the next micro-batch's value, so neighbours alternate
/// (about 2 ms per micro-batch); with two, every stage works at once (about 1 ms).
///
/// # Examples
///
/// ```no_run
/// // 24 micro-batches per repetition: run it from `eddy bench`, not in a doctest.
/// let one = eddy::bench::pipeline(1)?;
/// let two = eddy::bench::pipeline(2)?;
/// assert!(two[0] < one[0]);
/// # Ok::<(), eddy::Error>(())
/// ```
pub fn pipeline(slots: usize) -> Result<Vec<f64>> {
    let vm = Vm::builder().lazy_launcher(true).build()?;
    let steps = (0..STAGES)
        .map(|i| {
            let input = if i == 0 {
                Slot::Input(0)
            } else {
                Slot::Temp(i - 1)
            };
            let output = if i == STAGES - 1 {
                Slot::Output(0)
            } else {
                Slot::Temp(i)
            };
            Step::new(Box::new(Stage), vec![input], vec![output])
        })
        .collect();
    let spec = PlanSpec::new(StreamId::CPU, steps, 1, 1, vec![64; STAGES - 1], vec![])
        .with_actors(Actors::new(slots, STAGES));
    let plan = Plan::new(&vm, spec)?;
    let x = vm.new_blob(64);
    vm.write_blob(&x, |b| b.fill(0))?;
    reps(1, || {
        let t = Instant::now();
        let outs: Vec<Counted<Blob>> = (0..BATCHES)
            .map(|_| {
                let y = vm.new_blob(64);
                plan.launch(&vm, std::slice::from_ref(&x), std::slice::from_ref(&y))?;
                Ok(y)
            })
            .collect::<Result<_>>()?;
        vm.sync()?;
        let ms = t.elapsed().as_secs_f64() * 1e3 / BATCHES as f64;
        for y in &outs {
            check(
                vm.read_blob(y, |b| b[0])? == STAGES as u8,
                "pipeline: a micro-batch went through the wrong number of stages",
            )?;
        }
        Ok(ms)
    })
}
