//! Reverse-mode autograd: every op whose input requires grad records a [`Node`] (its inputs and
//! a backward closure) in its output; [`Tensor::backward`] walks the graph in reverse
//! topological order, iteratively, running the backward closures as ordinary tensor ops (so
//! they are instructions on the engine like the forward pass).

use crate::tensor::{Grads, Node, NodeParts};
use crate::{Error, Result, Tensor};
use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::Ordering;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
    /// The nodes whose records this thread holds for their backward, innermost last: a
    /// backward started inside one of their closures that reaches one of them again fails
    /// instead of waiting for itself.
    static HELD: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// This thread holds a node's record (see `HELD`) until dropped.
struct Holding;

impl Holding {
    fn enter(node: usize) -> Holding {
        HELD.with(|h| h.borrow_mut().push(node));
        Holding
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        HELD.with(|h| h.borrow_mut().pop());
    }
}

/// Whether ops on this thread record autograd nodes.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{is_grad_enabled, no_grad};
/// assert!(is_grad_enabled());
/// {
///     let _g = no_grad();
///     assert!(!is_grad_enabled());
/// }
/// assert!(is_grad_enabled()); // restored when the guard dropped
/// ```
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(|g| g.get())
}

/// Whether an op over `inputs` records a node here: autograd is on and an input requires grad.
/// Ops whose backward needs data they would build only for it ask first.
#[inline]
pub(crate) fn records(inputs: &[&Tensor]) -> bool {
    is_grad_enabled() && inputs.iter().any(|t| t.requires_grad())
}

/// Disables autograd recording on this thread until the guard drops (PyTorch's `no_grad`).
///
/// # Examples
///
/// ```
/// use eddy_tensor::{no_grad, Tensor};
/// let w = Tensor::ones([2], eddy_tensor::DType::F32)?.requires_grad_(true)?;
/// let y = { let _g = no_grad(); w.mul_scalar(2.0)? };
/// assert!(!y.requires_grad());
/// # Ok::<(), eddy_tensor::Error>(())
/// ```
pub fn no_grad() -> NoGradGuard {
    NoGradGuard(
        GRAD_ENABLED.with(|g| g.replace(false)),
        std::marker::PhantomData,
    )
}

/// Restores the previous autograd mode when dropped.
///
/// # Examples
///
/// ```
/// use eddy_tensor::{is_grad_enabled, no_grad};
/// let outer = no_grad();
/// {
///     let _inner = no_grad(); // nested guards restore in turn
/// }
/// assert!(!is_grad_enabled()); // still off: `outer` lives
/// drop(outer);
/// assert!(is_grad_enabled());
/// ```
///
/// The mode is per thread, so the guard is not `Send`: dropped on another thread, it would
/// restore that thread's mode and leave this one's off.
///
/// ```compile_fail
/// let g = eddy_tensor::no_grad();
/// std::thread::spawn(move || drop(g));
/// ```
pub struct NoGradGuard(bool, std::marker::PhantomData<*const ()>);

impl Drop for NoGradGuard {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|g| g.set(self.0));
    }
}

impl Tensor {
    /// Marks a leaf as requiring grad, or not (returns `self` for chaining).
    ///
    /// # Errors
    ///
    /// `UnsupportedDType` for `on` and an integer or bool tensor: as in PyTorch, only
    /// floating-point tensors can require gradients.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType, Error};
    /// let w = Tensor::zeros([3], DType::F32)?.requires_grad_(true)?;
    /// assert!(w.requires_grad() && w.is_leaf());
    /// assert!(!w.requires_grad_(false)?.requires_grad());
    /// let i = Tensor::zeros([3], DType::I64)?;
    /// assert!(matches!(i.requires_grad_(true), Err(Error::UnsupportedDType { .. })));
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn requires_grad_(self, on: bool) -> Result<Tensor> {
        if on && !self.dtype().is_float() {
            return Err(Error::UnsupportedDType {
                at: crate::Caller::here(),
                op: "requires_grad_",
                dtype: self.dtype(),
            });
        }
        self.0.requires_grad.store(on, Ordering::Relaxed);
        Ok(self)
    }

    /// Whether the tensor was made by an op that recorded a node (not a leaf).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let w = Tensor::ones([2], DType::F32)?.requires_grad_(true)?;
    /// assert!(w.is_leaf());
    /// assert!(!w.exp()?.is_leaf()); // made by a recorded op
    /// assert!(w.exp()?.detach().is_leaf());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn is_leaf(&self) -> bool {
        self.0.node.get().is_none()
    }

    /// The accumulated gradient of a leaf, after [`backward`](Self::backward).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let w = Tensor::from_vec(vec![1f32, 2.], [2])?.requires_grad_(true)?;
    /// assert!(w.grad().is_none()); // before backward
    /// w.mul_scalar(3.0)?.sum_all()?.backward()?;
    /// w.mul_scalar(3.0)?.sum_all()?.backward()?; // gradients accumulate
    /// assert_eq!(w.grad().unwrap().to_vec::<f32>()?, [6., 6.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn grad(&self) -> Option<Tensor> {
        self.0.grad.lock().clone()
    }

    /// Replaces (or clears) the accumulated gradient.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let w = Tensor::from_vec(vec![1f32], [1])?.requires_grad_(true)?;
    /// w.set_grad(Some(Tensor::from_vec(vec![0.5f32], [1])?));
    /// w.sum_all()?.backward()?; // adds 1 to the gradient that is there
    /// assert_eq!(w.grad().unwrap().to_vec::<f32>()?, [1.5]);
    /// w.set_grad(None);
    /// assert!(w.grad().is_none());
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn set_grad(&self, g: Option<Tensor>) {
        *self.0.grad.lock() = g;
    }

    /// A tensor sharing storage with `self` but cut from the autograd graph.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let w = Tensor::from_vec(vec![1f32, 2.], [2])?.requires_grad_(true)?;
    /// let d = w.detach();
    /// assert!(!d.requires_grad() && d.shares_storage(&w));
    /// assert_eq!(d.to_vec::<f32>()?, [1., 2.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn detach(&self) -> Tensor {
        self.with_layout(self.layout().clone())
    }

    /// Records that `self` came from `inputs` through `backward`, if grad mode is on and any
    /// input requires grad. Returns `self`. For a backward that reads no tensor's values (only
    /// shapes and the incoming gradient); see [`record_saving`](Self::record_saving).
    pub(crate) fn record(
        self,
        name: &'static str,
        inputs: &[&Tensor],
        backward: impl Fn(&Tensor, &[Tensor], &Tensor) -> Result<Grads> + Send + Sync + 'static,
    ) -> Tensor {
        self.record_saving(name, inputs, &[], false, backward)
    }

    /// [`record`](Self::record) for a backward that reads the values of `saved` (inputs, or
    /// tensors it captured) and, if `output`, of `self`: their versions are noted, and
    /// backward fails with `Autograd` if any was written in place in between.
    pub(crate) fn record_saving(
        self,
        name: &'static str,
        inputs: &[&Tensor],
        saved: &[&Tensor],
        output: bool,
        backward: impl Fn(&Tensor, &[Tensor], &Tensor) -> Result<Grads> + Send + Sync + 'static,
    ) -> Tensor {
        if !records(inputs) {
            return self;
        }
        self.0.requires_grad.store(true, Ordering::Relaxed);
        let saved = saved
            .iter()
            .map(|t| (t.version_blob().clone(), t.version_blob().version()))
            .collect();
        let out_version = output.then(|| self.version_blob().version());
        let _ = self.0.node.set(Box::new(Node {
            name,
            parts: parking_lot::Mutex::new(Some(NodeParts {
                inputs: inputs.iter().map(|t| (*t).clone()).collect(),
                backward: Box::new(backward),
                saved,
                out_version,
            })),
        }));
        self
    }

    /// How many in-place writes this tensor's storage has had, counted over every handle that
    /// shares it (views, [`detach`](Self::detach)ed copies), as PyTorch's `_version`. Backward
    /// compares it with the version each saved tensor had at the forward.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::{Tensor, DType};
    /// let x = Tensor::zeros([2, 2], DType::F32)?;
    /// assert_eq!(x.version(), 0);
    /// x.narrow(0, 0, 1)?.add_scalar_(1.0)?; // through a view
    /// assert_eq!(x.version(), 1);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    pub fn version(&self) -> u64 {
        self.version_blob().version()
    }

    /// Computes the gradient of this scalar with respect to every leaf that requires grad, and
    /// adds it to the leaf's [`grad`](Self::grad).
    ///
    /// As PyTorch's `backward()`, it frees the graph it goes through: each op's record lets go
    /// of the tensors its gradient read (activations, say), so their memory is free once the
    /// caller drops its own handles, whatever outputs it keeps (the loss). A second backward
    /// through the same ops is then an error; [`backward_retaining_graph`] keeps the graph
    /// for one.
    ///
    /// [`backward_retaining_graph`]: Self::backward_retaining_graph
    ///
    /// # Errors
    ///
    /// `Autograd` if the tensor does not require grad or is not a scalar, or if an earlier
    /// backward freed the graph; any op error.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1f32, 2., 3.], [3])?.requires_grad_(true)?;
    /// x.mul(&x)?.sum_all()?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![2., 4., 6.]);
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn backward(&self) -> Result<()> {
        self.check_scalar()?;
        self.back_propagate(&self.ones_like()?, false)
    }

    /// Back-propagates `grad` (of `self`'s shape) through the graph, freeing it as
    /// [`backward`](Self::backward) does.
    ///
    /// # Errors
    ///
    /// `Autograd` if `self` does not require grad, `grad` has the wrong shape, or an earlier
    /// backward freed the graph.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1f32, 2.], [2])?.requires_grad_(true)?;
    /// let y = x.mul_scalar(3.0)?; // not a scalar: backward needs its gradient
    /// y.backward_with(&Tensor::from_vec(vec![1f32, 10.], [2])?)?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [3., 30.]);
    /// assert!(y.backward_with(&Tensor::from_vec(vec![1f32], [1])?).is_err()); // wrong shape
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn backward_with(&self, grad: &Tensor) -> Result<()> {
        self.back_propagate(grad, false)
    }

    /// [`backward_with`](Self::backward_with) `grad` (of [`backward`](Self::backward), a
    /// scalar's, if `None`) that keeps the graph, so that another backward may go through it
    /// again (PyTorch's `retain_graph=True`): the gradients add up.
    ///
    /// # Errors
    ///
    /// As [`backward_with`](Self::backward_with) and [`backward`](Self::backward).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1f32, 2.], [2])?.requires_grad_(true)?;
    /// let y = x.mul(&x)?.sum_all()?;
    /// y.backward_retaining_graph(None)?;
    /// y.backward()?; // again: the first kept the graph; this one frees it
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [4., 8.]);
    /// assert!(y.backward().is_err(), "freed by the second");
    /// # Ok::<(), eddy_tensor::Error>(())
    /// ```
    #[track_caller]
    pub fn backward_retaining_graph(&self, grad: Option<&Tensor>) -> Result<()> {
        match grad {
            Some(g) => self.back_propagate(g, true),
            None => {
                self.check_scalar()?;
                self.back_propagate(&self.ones_like()?, true)
            }
        }
    }

    /// `Autograd` unless `self` has one element (an implicit gradient is a scalar's).
    #[track_caller]
    fn check_scalar(&self) -> Result<()> {
        if self.numel() != 1 {
            return Err(Error::Autograd {
                at: crate::Caller::here(),
                op: "backward",
                message: format!(
                    "grad can be implicitly created only for scalar outputs, not {:?}",
                    self.dims()
                ),
            });
        }
        Ok(())
    }

    #[track_caller]
    fn back_propagate(&self, grad: &Tensor, retain: bool) -> Result<()> {
        if !self.requires_grad() {
            return Err(Error::Autograd {
                at: crate::Caller::here(),
                op: "backward",
                message: "the tensor does not require grad and has no grad_fn".into(),
            });
        }
        if grad.dims() != self.dims() {
            return Err(Error::ShapeMismatch {
                at: crate::Caller::here(),
                op: "backward",
                lhs: self.dims().to_vec(),
                rhs: grad.dims().to_vec(),
            });
        }
        let _ng = no_grad();
        let mut order = topo_order(self);
        let mut grads: HashMap<u64, Tensor, ById> =
            HashMap::with_capacity_and_hasher(order.len(), ById::default());
        grads.insert(self.id(), grad.clone());
        // Outputs before their inputs; each handle goes at the end of its iteration, so that
        // (with the records of the ops that read it freed before it) an activation's memory
        // comes back as the backward passes it, for the gradients after it to reuse.
        while let Some(t) = order.pop() {
            let t = &t;
            let Some(g) = grads.remove(&t.id()) else {
                continue;
            };
            let Some(node) = t.0.node.get() else {
                accumulate_leaf(t, g)?;
                continue;
            };
            // Held through the node's backward: another thread's backward through this node
            // (of a retained graph) waits for it rather than finding the parts gone. This
            // thread, inside the node's own closure, must not wait for itself.
            let key = &**node as *const Node as usize;
            if HELD.with(|h| h.borrow().contains(&key)) {
                return Err(Error::Autograd {
                    at: crate::Caller::here(),
                    op: node.name,
                    message: "a backward started inside this op's backward went through the op \
                              again"
                        .into(),
                });
            }
            let mut held = node.parts.lock();
            let _holding = Holding::enter(key);
            let Some(p) = held.as_ref() else {
                return Err(Error::Autograd {
                    at: crate::Caller::here(),
                    op: node.name,
                    message: "an earlier backward went through this op and freed what its \
                              gradient needs (call `backward_retaining_graph` for a backward \
                              that keeps the graph)"
                        .into(),
                });
            };
            p.check_saved(node.name, t)?;
            let gs = (p.backward)(&g, &p.inputs, t)?;
            if gs.len() != p.inputs.len() {
                return Err(Error::Autograd {
                    at: crate::Caller::here(),
                    op: node.name,
                    message: format!(
                        "the backward returned {} gradients for {} inputs",
                        gs.len(),
                        p.inputs.len()
                    ),
                });
            }
            for (k, (input, gi)) in p.inputs.iter().zip(gs).enumerate() {
                let Some(gi) = gi else { continue };
                if !input.requires_grad() {
                    continue;
                }
                if gi.dims() != input.dims() {
                    return Err(Error::Autograd {
                        at: crate::Caller::here(),
                        op: node.name,
                        message: format!(
                            "the backward returned a gradient of shape {:?} for input {k} of \
                             shape {:?}",
                            gi.dims(),
                            input.dims()
                        ),
                    });
                }
                let gi = if gi.dtype() != input.dtype() {
                    gi.to_dtype(input.dtype())?
                } else {
                    gi
                };
                match grads.remove(&input.id()) {
                    Some(prev) => grads.insert(input.id(), prev.add(&gi)?),
                    None => grads.insert(input.id(), gi),
                };
            }
            if !retain {
                // Freed, outside the lock (dropping tensors releases their memory).
                let freed = held.take();
                drop(held);
                drop(freed);
            }
        }
        Ok(())
    }
}

/// Adds `g` to the leaf's gradient. A first gradient is stored as is only when no other
/// handle shares its storage (`a + b` hands both leaves one tensor, and the caller's seed may
/// reach a leaf unchanged): else a copy, so that writing one leaf's `.grad` in place changes
/// no other tensor (PyTorch's `AccumulateGrad` does the same).
#[track_caller]
fn accumulate_leaf(t: &Tensor, g: Tensor) -> Result<()> {
    // A global parameter's gradient is laid out as the parameter.
    let g = match (t.global(), g.global()) {
        (Some(tg), Some(gg)) if tg.placement != gg.placement || tg.sbp != gg.sbp => {
            let _g = crate::no_grad();
            g.to_global(tg.placement, &tg.sbp)?
        }
        _ => g,
    };
    let mut slot = t.0.grad.lock();
    *slot = Some(match slot.take() {
        Some(prev) => prev.add(&g)?,
        None if eddy_vm::Counted::count(&g.0) == 1 && g.blob().holders() == 1 => g,
        None => g.to_dtype(g.dtype())?,
    });
    Ok(())
}

/// Hashes tensor ids, unique counters, by one multiplication (Fibonacci hashing) instead of
/// SipHash: no key comes from outside, and a backward hashes each tensor a few times.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type ById = BuildHasherDefault<IdHasher>;

/// The tensors reachable from `root` through nodes, inputs before the tensors made from them
/// (an iterative DFS, so a 100k-long chain uses no stack).
fn topo_order(root: &Tensor) -> Vec<Tensor> {
    // Room for a small model's step without growing.
    let mut order = Vec::with_capacity(64);
    let mut seen: HashSet<u64, ById> = HashSet::with_capacity_and_hasher(64, ById::default());
    let mut stack: Vec<(Tensor, bool)> = Vec::with_capacity(64);
    stack.push((root.clone(), false));
    while let Some((t, expanded)) = stack.pop() {
        if expanded {
            order.push(t);
            continue;
        }
        if !seen.insert(t.id()) {
            continue;
        }
        stack.push((t.clone(), true));
        // A node this thread holds (a backward inside its closure) is walked no further: the
        // backward reaching it fails rather than wait for itself.
        if let Some(node) = t.0.node.get()
            && !HELD.with(|h| h.borrow().contains(&(&**node as *const Node as usize)))
            && let Some(p) = &*node.parts.lock()
        {
            for i in &p.inputs {
                if i.requires_grad() && !seen.contains(&i.id()) {
                    stack.push((i.clone(), false));
                }
            }
        }
    }
    order
}
