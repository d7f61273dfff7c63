//! Compiled graphs: a closure of tensor ops traced once and replayed as one instruction.
//!
//! [`Graph::new`] wraps a closure from input tensors to output tensors: a forward pass, or a
//! whole training step with `backward` and the optimizer's update. The first
//! [`run`](Graph::run) with inputs of given shapes, dtypes and device traces the closure: its
//! op calls are captured, not run ([`eddy_vm::Vm::capture`]), and compiled into a plan whose
//! temporaries live in one arena laid out by their lifetimes. That run and every later one with
//! the same signature launch the plan as one engine instruction; a run with another signature
//! traces again (each signature compiles once), or is refused with a typed error if the graph
//! was built with [`fixed_signature`](Graph::fixed_signature).
//!
//! Tensors the closure reads but did not make (a model's parameters, an optimizer's state)
//! stay ordinary tensors: every run reads their values at that time, and updates them in place
//! where the closure does, ordered against eager code that reads or writes them. Values are
//! those of eager execution, bit for bit, with these differences the trace makes visible:
//!
//! - A random op (`dropout`, `randn`) draws the same numbers at every run: its seed was drawn
//!   when the trace made it.
//! - Host values the closure reads are fixed at the trace: a learning rate, a branch on a
//!   shape. Changing them needs a new graph. (`Adam` keeps its step counts on the device, so
//!   its bias corrections advance with each run.)
//! - State the closure would make on its first call (a momentum buffer, Adam's moments) must
//!   exist before the graph runs: take one eager step first. A graph that would make such
//!   state is refused.
//!
//! A tensor made inside the closure and kept outside it (a parameter's `grad` after a
//! `backward` inside) is written by every run, and holds the last run's values, as after an
//! eager call.
//!
//! Inside the closure, reading values on the host (`to_vec`, `item`) is refused: the values do
//! not exist while tracing, and a branch on them could not change at a replay. So is a
//! closure whose replay would differ from calling it again in other ways: its ops run on
//! another device than its inputs, it uses a tensor another thread computed during the trace,
//! it keeps a view of an input, or it replaces state it reads (a tensor in an `Rc` that each
//! call swaps for a new one). The refusal is a typed `InvalidArgument`, and tensors the
//! refused trace made that the closure kept carry it as their error: they have no values.
//! A graph run inside another graph's closure is traced through: its ops join the outer plan.
//!
//! # Examples
//!
//! ```
//! use eddy_tensor::{DType, Tensor, graph::Graph};
//! let w = Tensor::from_vec(vec![1f32, 2., 3., 4.], [2, 2])?;
//! let g = Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].matmul(&w)?.relu()?.sum_all()?]));
//! let x = Tensor::from_vec(vec![1f32, -1.], [1, 2])?;
//! let y = g.run(&[&x])?;
//! assert_eq!(y[0].item::<f32>()?, 0.0); // relu([1 - 3, 2 - 4])
//! let eager = x.matmul(&w)?.relu()?.sum_all()?;
//! assert_eq!(y[0].to_vec::<f32>()?, eager.to_vec::<f32>()?);
//! let y2 = g.run(&[&Tensor::from_vec(vec![1f32, 1.], [1, 2])?])?;
//! assert_eq!(y2[0].item::<f32>()?, 10.0);
//! assert_eq!(g.compiled_signatures(), 1);
//! # Ok::<(), eddy_tensor::Error>(())
//! ```

mod builder;

use crate::engine::{Loc, VmRef};
use crate::{Caller, DType, Device, Error, Layout, Result, Tensor};
use builder::Builder;
use eddy_vm::plan::{Actors, MemoryLayout, Plan, PlanSpec, Slot, Step};
use eddy_vm::{Blob, Counted};
use parking_lot::Mutex;
use std::fmt;
use std::sync::Arc;

thread_local! {
    /// Whether this thread is tracing a graph's closure.
    static TRACING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread is tracing a graph's closure (its op calls are captured, not run).
/// Code that reads values on the host, or keeps host state that changes from call to call,
/// can refuse to be traced.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{DType, Tensor, graph::{Graph, is_tracing}};
/// assert!(!is_tracing());
/// let g = Graph::new(|xs: &[Tensor]| {
///     assert!(is_tracing());
///     Ok(vec![xs[0].neg()?])
/// });
/// g.run(&[&Tensor::ones([1], DType::F32)?])?;
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
pub fn is_tracing() -> bool {
    TRACING.with(|t| t.get())
}

/// What a compiled plan is specialised to: each input's dims, dtype and device, and the engine.
struct Signature {
    inputs: Vec<(Vec<usize>, DType, Device)>,
    engine: eddy_vm::Vm,
}

impl PartialEq for Signature {
    fn eq(&self, other: &Signature) -> bool {
        self.inputs == other.inputs && self.engine.same_engine(&other.engine)
    }
}

/// A closure of tensor ops, compiled per input signature: see the module's docs.
pub struct Graph<F> {
    f: F,
    fixed: bool,
    actors: Option<Actors>,
    compiled: Mutex<Vec<(Signature, Arc<Compiled>)>>,
}

impl<F: Fn(&[Tensor]) -> Result<Vec<Tensor>>> Graph<F> {
    /// A graph of `f`, compiled at its first run with each input signature.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, graph::Graph};
    /// let g = Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].exp()?]));
    /// assert_eq!(g.compiled_signatures(), 0, "compiled at the first run");
    /// ```
    pub fn new(f: F) -> Graph<F> {
        Graph {
            f,
            fixed: false,
            actors: None,
            compiled: Mutex::new(Vec::new()),
        }
    }

    /// This graph, refusing a run whose inputs differ in shape, dtype or device from those of
    /// its first run (`ShapeMismatch`, `DTypeMismatch`, `DeviceMismatch`) instead of compiling
    /// again.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{DType, Error, Tensor, graph::Graph};
    /// let g = Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].exp()?])).fixed_signature();
    /// g.run(&[&Tensor::zeros([2], DType::F32)?])?;
    /// let e = g.run(&[&Tensor::zeros([3], DType::F32)?]).unwrap_err();
    /// assert!(matches!(e, Error::ShapeMismatch { op: "graph", .. }));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn fixed_signature(mut self) -> Graph<F> {
        self.fixed = true;
        self
    }

    /// This graph, its plans run by actors ([`Actors`]): each step an actor on one of
    /// `threads` threads, each intermediate a register of `slots` slots with memory of its
    /// own. Consecutive runs then pipeline (the first steps of a run start while the last
    /// steps of the one before finish, as far as the slots allow), at the cost of `slots`
    /// copies of the intermediates instead of one arena packed by lifetime. Runs go to the
    /// device's lazy-job launcher stream, which the engine must have
    /// (`VmBuilder::lazy_launcher`, `EDDY_VM_LAZY_LAUNCHER=1`); compiling fails with
    /// `InvalidArgument` otherwise, and for a closure that writes one intermediate twice.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{DType, Tensor, graph::Graph, with_engine};
    /// let vm = eddy_vm::Vm::builder().lazy_launcher(true).build()?;
    /// with_engine(&vm, || {
    ///     let g = Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].exp()?.sum_all()?])).actors(2, 2);
    ///     let x = Tensor::zeros([4], DType::F32)?;
    ///     let runs: Vec<Tensor> = (0..4).map(|_| Ok(g.run(&[&x])?.remove(0))).collect::<eddy_tensor::Result<_>>()?;
    ///     for y in runs {
    ///         assert_eq!(y.item::<f32>()?, 4.0);
    ///     }
    ///     Ok::<(), eddy_tensor::Error>(())
    /// })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn actors(mut self, slots: usize, threads: usize) -> Graph<F> {
        self.actors = Some(Actors::new(slots, threads));
        self
    }

    /// Runs the graph on `inputs`: one instruction on their engine (compiling first if no run
    /// had their signature). Returns the outputs, fresh tensors (or views of an input or a
    /// parameter, where the closure returned one), without autograd records.
    ///
    /// # Errors
    ///
    /// The closure's errors while it is traced (those of its ops, and `InvalidArgument` for
    /// a host read inside it); `ShapeMismatch`/`DTypeMismatch`/`DeviceMismatch` for a new
    /// signature of a [`fixed_signature`](Self::fixed_signature) graph; `DeviceMismatch` for
    /// inputs on different engines or devices; `InvalidArgument` for a closure whose ops run
    /// on another device than its inputs', or that a replay could not reproduce (see the
    /// module's docs). An error of a kernel inside the plan surfaces at the next sync of an
    /// output, naming the op and the line in the closure that called it.
    ///
    /// Inside another graph's closure, a run is traced through: this graph's closure is
    /// called, and its ops become part of the outer graph's plan.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, graph::Graph};
    /// let g = Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].add(&xs[1])?, xs[0].mul(&xs[1])?]));
    /// let (a, b) = (Tensor::from_vec(vec![2f32], [1])?, Tensor::from_vec(vec![3f32], [1])?);
    /// let out = g.run(&[&a, &b])?;
    /// assert_eq!((out[0].item::<f32>()?, out[1].item::<f32>()?), (5.0, 6.0));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn run(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let xs = dense_inputs(inputs)?;
        if is_tracing() {
            return self.trace_through(&xs);
        }
        let c = self.compiled_for(&xs)?;
        c.launch(&xs)
    }

    /// A run inside another graph's closure, while it is traced: this closure's calls join
    /// that trace (a plan launched now would run once, not at the outer graph's replays).
    #[track_caller]
    fn trace_through(&self, xs: &[Tensor]) -> Result<Vec<Tensor>> {
        let sig = signature(xs)?;
        if self.fixed
            && let Some((first, _)) = self.compiled.lock().first()
            && *first != sig
        {
            return Err(signature_error(&first.inputs, &sig.inputs));
        }
        let aliases: Vec<Tensor> = xs.iter().map(Tensor::alias_unknown).collect();
        let outs = (self.f)(&aliases)?;
        Ok(outs.iter().map(Tensor::alias_unknown).collect())
    }

    /// The compiled plan for `inputs`' signature, compiling it if there is none.
    ///
    /// # Errors
    ///
    /// As [`run`](Self::run).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{DType, Tensor, graph::Graph};
    /// let g = Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].exp()?.sum_all()?]));
    /// let c = g.compile(&[&Tensor::zeros([4], DType::F32)?])?;
    /// assert_eq!(c.len(), 2); // exp, sum
    /// assert_eq!(c.arena_bytes(), 64); // the [4] intermediate, aligned
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn compile(&self, inputs: &[&Tensor]) -> Result<Arc<Compiled>> {
        self.compiled_for(&dense_inputs(inputs)?)
    }

    /// How many signatures were compiled.
    pub fn compiled_signatures(&self) -> usize {
        self.compiled.lock().len()
    }

    #[track_caller]
    fn compiled_for(&self, xs: &[Tensor]) -> Result<Arc<Compiled>> {
        let sig = signature(xs)?;
        let mut cache = self.compiled.lock();
        if let Some((_, c)) = cache.iter().find(|(s, _)| *s == sig) {
            return Ok(c.clone());
        }
        if self.fixed
            && let Some((first, _)) = cache.first()
        {
            return Err(signature_error(&first.inputs, &sig.inputs));
        }
        let c = Arc::new(Compiled::trace(xs, &self.f, self.actors)?);
        cache.push((sig, c.clone()));
        Ok(c)
    }
}

/// The inputs, each dense from offset 0 (the layout the trace's kernels were built for): a
/// view that is not is copied; an input sharing storage with an earlier one too.
#[track_caller]
fn dense_inputs(inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
    let mut xs: Vec<Tensor> = Vec::with_capacity(inputs.len());
    for &t in inputs {
        if t.is_global() {
            // A plan replays the components it traced: a global input's would be stale.
            return Err(Error::invalid(
                "Graph::run",
                "global tensors cannot be used in a compiled graph (run its steps eagerly)",
            ));
        }
        let shared = xs.iter().any(|x| x.shares_storage(t));
        let dense = t.is_contiguous() && t.layout().offset == 0;
        xs.push(if dense && !shared {
            t.clone()
        } else {
            t.to_dtype(t.dtype())?
        });
    }
    Ok(xs)
}

#[track_caller]
fn signature(xs: &[Tensor]) -> Result<Signature> {
    let engine = match xs.first() {
        Some(x) => x.engine().clone(),
        None => crate::engine::current("graph")?.vm.clone(),
    };
    for x in xs.iter().skip(1) {
        xs[0].same_device("graph", x)?;
    }
    Ok(Signature {
        inputs: xs
            .iter()
            .map(|x| (x.dims().to_vec(), x.dtype(), x.device()))
            .collect(),
        engine,
    })
}

#[track_caller]
fn signature_error(
    want: &[(Vec<usize>, DType, Device)],
    got: &[(Vec<usize>, DType, Device)],
) -> Error {
    let at = Caller::here();
    for (w, g) in want.iter().zip(got) {
        if w.0 != g.0 {
            return Error::ShapeMismatch {
                at,
                op: "graph",
                lhs: w.0.clone(),
                rhs: g.0.clone(),
            };
        }
        if w.1 != g.1 {
            return Error::DTypeMismatch {
                at,
                op: "graph",
                lhs: w.1,
                rhs: g.1,
            };
        }
        if w.2 != g.2 {
            return Error::DeviceMismatch {
                at,
                op: "graph",
                lhs: w.2.to_string(),
                rhs: g.2.to_string(),
            };
        }
    }
    Error::invalid(
        "graph",
        format!("compiled for {} inputs, given {}", want.len(), got.len()),
    )
}

/// Where an output of a run comes from.
#[derive(Clone, Debug)]
enum OutSpec {
    /// A view of the run's output blob `k`, made by the plan.
    Made {
        blob: usize,
        dtype: DType,
        layout: Layout,
    },
    /// A view of input `k`.
    Input { input: usize, layout: Layout },
    /// A view of a tensor the closure read but did not make, where it lives.
    Fixed {
        blob: Counted<Blob>,
        dtype: DType,
        layout: Layout,
        loc: Loc,
    },
}

/// A graph compiled for one signature: its plan and how a run's outputs are made.
pub struct Compiled {
    plan: Plan,
    vm: VmRef,
    loc: Loc,
    /// The bytes of each output blob a run makes.
    out_blobs: Vec<usize>,
    outs: Vec<OutSpec>,
    /// The op of each step, with the line of its call (for `Display`).
    names: Vec<String>,
}

impl Compiled {
    /// Traces `f` on `xs` and compiles the trace.
    #[track_caller]
    fn trace<F: Fn(&[Tensor]) -> Result<Vec<Tensor>>>(
        xs: &[Tensor],
        f: &F,
        actors: Option<Actors>,
    ) -> Result<Compiled> {
        let at = Caller::here();
        let place = match xs.first() {
            Some(x) => x.place(),
            None => crate::engine::current("graph")?,
        };
        let (vm, loc) = (place.vm, place.loc);
        if actors.is_some() && vm.launcher_stream(loc.device()).is_none() {
            return Err(Error::InvalidArgument {
                at,
                op: "graph",
                message: format!(
                    "a graph run by actors launches on {}'s lazy-job launcher stream, and its \
                     engine has none (see `VmBuilder::lazy_launcher`)",
                    loc.device()
                ),
            });
        }
        let floor = eddy_vm::unique_id();
        let mut b = Builder::new(xs, floor);
        let aliases: Vec<Tensor> = xs.iter().map(Tensor::alias_unknown).collect();
        let (result, ops) = vm.capture(|| {
            /// Clears the flag on return or unwind.
            struct Traced;
            impl Drop for Traced {
                fn drop(&mut self) {
                    TRACING.with(|t| t.set(false));
                }
            }
            TRACING.with(|t| t.set(true));
            let _traced = Traced;
            f(&aliases)
        })?;
        for op in &ops {
            b.note(op);
        }
        let results = match result {
            Ok(r) => r,
            Err(e) => {
                drop(aliases);
                b.refuse();
                return Err(e);
            }
        };
        let outs: Vec<OutSpec> = results.iter().map(|t| b.output(t)).collect();
        // What the closure made and kept: checked once every handle of the trace is gone.
        drop(results);
        drop(aliases);
        // The plan runs where its inputs live (or the engine's current device).
        let stream = loc.stream();
        if let Err(message) = b.check(&ops, xs, &vm, stream) {
            b.refuse();
            return Err(builder::refused(at, message));
        }
        b.temps_from(&ops);
        let steps: Vec<Step> = ops
            .into_iter()
            .map(|op| {
                let slots = |bs: &[Counted<Blob>]| bs.iter().map(|x| b.slot(x)).collect();
                let (i, o) = (slots(&op.inputs), slots(&op.outputs));
                Step::new(op.kernel, i, o).called_at(op.at)
            })
            .collect();
        let bytes = |s: Slot| match s {
            Slot::Input(k) => xs[k].blob().bytes(),
            Slot::Output(k) => b.out_sizes[k],
            Slot::Temp(k) => b.temp_sizes[k],
            Slot::Fixed(k) => b.fixed[k].bytes(),
        };
        let steps = eddy_ops::fuse::fuse_elementwise(loc.device(), steps, &bytes);
        let names = steps
            .iter()
            .map(|s| match s.caller().location() {
                Some(l) => format!("{} ({}:{})", s.name(), l.file(), l.line()),
                None => s.name().to_string(),
            })
            .collect();
        let spec = PlanSpec::new(
            stream,
            steps,
            xs.len(),
            b.out_sizes.len(),
            b.temp_sizes.clone(),
            b.fixed.clone(),
        );
        let spec = match actors {
            Some(a) => spec.with_actors(a),
            None => spec,
        };
        let plan = Plan::new(&vm, spec).inspect_err(|_| b.refuse())?;
        Ok(Compiled {
            plan,
            vm,
            loc,
            out_blobs: b.out_sizes,
            outs,
            names,
        })
    }

    /// Launches one run on `xs` (dense, of the compiled signature).
    #[track_caller]
    fn launch(&self, xs: &[Tensor]) -> Result<Vec<Tensor>> {
        let ins: Vec<Counted<Blob>> = xs.iter().map(|x| x.blob().clone()).collect();
        let outs: Vec<Counted<Blob>> = self
            .out_blobs
            .iter()
            .map(|&n| self.vm.new_blob(n))
            .collect();
        // Handles first: each new blob counts one holder, the first tensor made on it.
        let mut fresh = vec![true; outs.len()];
        let made: Vec<Tensor> = self
            .outs
            .iter()
            .map(|o| match o {
                OutSpec::Made {
                    blob,
                    dtype,
                    layout,
                } => {
                    let t = Tensor::on_blob(
                        self.vm.share(),
                        self.loc,
                        outs[*blob].clone(),
                        fresh[*blob],
                        *dtype,
                        layout.clone(),
                    );
                    fresh[*blob] = false;
                    t
                }
                OutSpec::Input { input, layout } => xs[*input].with_layout(layout.clone()),
                OutSpec::Fixed {
                    blob,
                    dtype,
                    layout,
                    loc,
                } => Tensor::on_blob(
                    self.vm.share(),
                    *loc,
                    blob.clone(),
                    false,
                    *dtype,
                    layout.clone(),
                ),
            })
            .collect();
        // An output blob no output views (none: each was made for one) would never be released.
        debug_assert!(fresh.iter().all(|f| !f));
        self.plan.launch(&self.vm, &ins, &outs)?;
        Ok(made)
    }

    /// The number of steps (kernels) in the plan.
    pub fn len(&self) -> usize {
        self.plan.len()
    }

    /// Whether the plan has no steps.
    pub fn is_empty(&self) -> bool {
        self.plan.is_empty()
    }

    /// The bytes of the arena that holds the plan's intermediates.
    pub fn arena_bytes(&self) -> usize {
        self.plan.memory().arena
    }

    /// Where each intermediate lives in the arena, and when.
    pub fn memory(&self) -> &MemoryLayout {
        self.plan.memory()
    }

    /// Each step's op, with the line of the closure that called it.
    pub fn step_names(&self) -> &[String] {
        &self.names
    }
}

/// The plan, a step per line: its op, the line of the closure that called it, and where its
/// operands come from (`in0`, `out1`, `t2@128` for intermediate 2 at arena offset 128, `p0`
/// for the first tensor the closure read but did not make).
///
/// ```
/// use eddy_tensor::{DType, Tensor, graph::Graph};
/// let g = Graph::new(|xs: &[Tensor]| Ok(vec![xs[0].exp()?.sum_all()?]));
/// let c = g.compile(&[&Tensor::zeros([4], DType::F32)?])?;
/// let text = c.to_string();
/// assert!(text.starts_with("plan: 2 steps, 1 intermediate, arena 64 bytes"), "{text}");
/// assert!(text.contains("exp") && text.contains("in0 -> t0@0"), "{text}");
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
impl fmt::Display for Compiled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.plan.memory();
        // Intermediates a merged step keeps in scratch memory have no bytes in the arena.
        let held = m.sizes.iter().filter(|&&n| n > 0).count();
        writeln!(
            f,
            "plan: {} steps, {held} intermediate{}, arena {} bytes",
            self.len(),
            if held == 1 { "" } else { "s" },
            m.arena
        )?;
        let slot = |s: &Slot| match *s {
            Slot::Input(k) => format!("in{k}"),
            Slot::Output(k) => format!("out{k}"),
            Slot::Temp(k) => format!("t{k}@{}", m.offsets[k]),
            Slot::Fixed(k) => format!("p{k}"),
        };
        self.plan.with_steps(|steps| {
            for (i, (s, name)) in steps.iter().zip(&self.names).enumerate() {
                let list = |ss: &[Slot]| ss.iter().map(slot).collect::<Vec<_>>().join(", ");
                writeln!(
                    f,
                    "  {i:3} {name}: {} -> {}",
                    list(s.inputs()),
                    list(s.outputs())
                )?;
            }
            Ok(())
        })
    }
}

impl fmt::Debug for Compiled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
