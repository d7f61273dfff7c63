//! The main job: training an MLP classifier on a [`Dataset`], with progress reported through a
//! callback (the CLI draws bars from it) and a summary of the engine's work at the end.

use crate::data::Dataset;
use crate::models::mlp;
use crate::tensor::nn::Module;
use crate::tensor::optim::{Adam, Optimizer};
use crate::{Result, Tensor};
use eddy_vm::{Vm, VmStats};
use std::time::Instant;

/// What to train and how.
///
/// # Examples
///
/// ```
/// use eddy::train::{train, TrainOptions};
/// # let data = eddy::data::Dataset {
/// #     features: (0..40).flat_map(|i| [i as f32 / 39.0, 1.0 - i as f32 / 39.0]).collect(),
/// #     labels: (0..40).map(|i| (i >= 20) as i64).collect(),
/// #     n_features: 2,
/// #     n_classes: 2,
/// # };
/// // `data`: 40 rows of 2 features and 2 classes.
/// let vm = eddy::Vm::builder().build()?;
/// let opts = TrainOptions { epochs: 2, batch_size: 8, hidden: vec![4], ..Default::default() };
/// let report = train(&opts, &data, &vm, |_| {})?;
/// assert_eq!(report.epochs.len(), 2);
/// assert_eq!(report.sizes, (32, 8, 2, 2)); // 20 % held out
/// let no_steps = TrainOptions { batch_size: 0, ..opts };
/// assert!(train(&no_steps, &data, &vm, |_| {}).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct TrainOptions {
    /// Passes over the training rows.
    pub epochs: usize,
    /// Rows per step.
    pub batch_size: usize,
    /// Adam's learning rate.
    pub lr: f64,
    /// Hidden layer widths (`[128]`: one hidden layer).
    pub hidden: Vec<usize>,
    /// Seeds the split, the shuffles and the initial weights: the same seed gives the same
    /// result.
    pub seed: u64,
    /// The fraction of rows held out for testing.
    pub test_fraction: f64,
    /// Where the model and the batches live (`cpu:0` by default); the engine must have it.
    pub device: crate::Device,
    /// Runs the training step as a compiled graph ([`eddy_tensor::graph::Graph`]) after a
    /// first eager step (which makes Adam's state): one instruction per step, the same values.
    pub graph: bool,
    /// Devices of `device`'s kind to train on (`cpu:0 .. cpu:N-1`), as one placement of global
    /// tensors; 1 trains on `device` alone. The engine must have them.
    pub devices: u32,
    /// How the work spreads over `devices`.
    pub parallel: Parallel,
    /// The model trained.
    pub model: ModelKind,
}

/// Which model [`train`] trains.
///
/// # Examples
///
/// ```
/// use eddy::train::ModelKind;
/// assert_eq!(ModelKind::default(), ModelKind::Mlp);
/// assert_eq!("cnn".parse::<ModelKind>(), Ok(ModelKind::Cnn));
/// assert!("rnn".parse::<ModelKind>().is_err());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ModelKind {
    /// A ReLU perceptron with [`TrainOptions::hidden`] widths ([`crate::models::mlp`]).
    #[default]
    Mlp,
    /// A two-convolution network over the rows read as square single-channel images
    /// ([`crate::models::cnn`]); [`TrainOptions::hidden`] is unused.
    Cnn,
    /// The character transformer ([`crate::models::CharTransformer`]), trained on a text by
    /// [`crate::train_text::train_text`], not by [`train`].
    Transformer,
}

impl std::str::FromStr for ModelKind {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<ModelKind, String> {
        match s {
            "mlp" => Ok(ModelKind::Mlp),
            "cnn" => Ok(ModelKind::Cnn),
            "transformer" => Ok(ModelKind::Transformer),
            _ => Err(format!("unknown model `{s}` (mlp, cnn or transformer)")),
        }
    }
}

/// How training spreads over several devices.
///
/// # Examples
///
/// ```
/// assert_eq!(eddy::train::Parallel::default(), eddy::train::Parallel::Data);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Parallel {
    /// Each device takes a slice of each batch (`S(0)`) and holds every parameter (`B`); the
    /// gradients' all-reduce comes from the SBP rules.
    #[default]
    Data,
    /// Each device holds a slice of each layer (the first of each pair split by outputs, the
    /// second by inputs, as Megatron-LM's pairs) and sees the whole batch.
    Tensor,
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions {
            epochs: 20,
            batch_size: 64,
            lr: 1e-2,
            hidden: vec![128],
            seed: 0,
            test_fraction: 0.2,
            device: crate::Device::CPU,
            graph: false,
            devices: 1,
            parallel: Parallel::Data,
            model: ModelKind::Mlp,
        }
    }
}

/// What one epoch reached.
///
/// # Examples
///
/// ```
/// use eddy::train::{train, TrainOptions};
/// # let data = eddy::data::Dataset {
/// #     features: (0..40).flat_map(|i| [i as f32 / 39.0, 1.0 - i as f32 / 39.0]).collect(),
/// #     labels: (0..40).map(|i| (i >= 20) as i64).collect(),
/// #     n_features: 2,
/// #     n_classes: 2,
/// # };
/// let vm = eddy::Vm::builder().build()?;
/// let opts = TrainOptions { epochs: 2, batch_size: 8, hidden: vec![4], ..Default::default() };
/// let e = train(&opts, &data, &vm, |_| {})?.epochs[1];
/// assert_eq!(e.epoch, 2);
/// assert!(e.loss.is_finite() && (0.0..=1.0).contains(&e.test_accuracy));
/// assert!(e.steps_per_s > 0.0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EpochStats {
    /// 1-based.
    pub epoch: usize,
    /// The mean training loss over the epoch's steps.
    pub loss: f64,
    /// Accuracy on the held-out rows after the epoch, in `[0, 1]`.
    pub test_accuracy: f64,
    /// Training steps per second over the epoch.
    pub steps_per_s: f64,
}

/// Progress events, in order: for each epoch, `Step`s then one `Epoch`.
///
/// # Examples
///
/// ```
/// use eddy::train::{train, Progress, TrainOptions};
/// # let data = eddy::data::Dataset {
/// #     features: (0..40).flat_map(|i| [i as f32 / 39.0, 1.0 - i as f32 / 39.0]).collect(),
/// #     labels: (0..40).map(|i| (i >= 20) as i64).collect(),
/// #     n_features: 2,
/// #     n_classes: 2,
/// # };
/// let vm = eddy::Vm::builder().build()?;
/// let opts = TrainOptions { epochs: 2, batch_size: 8, hidden: vec![4], ..Default::default() };
/// let mut events = Vec::new();
/// train(&opts, &data, &vm, |p| events.push(p))?;
/// // 32 training rows in batches of 8: 4 steps, then the epoch, twice.
/// assert_eq!(events.len(), 10);
/// assert!(matches!(events[3], Progress::Step { epoch: 1, step: 4, steps: 4, loss: Some(_) }));
/// assert!(matches!(events[4], Progress::Epoch(e) if e.epoch == 1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub enum Progress {
    /// A step was enqueued. `loss` is the running mean loss of the epoch, read every few steps
    /// (reading it waits for the engine).
    Step {
        /// 1-based epoch.
        epoch: usize,
        /// Steps enqueued so far in the epoch.
        step: usize,
        /// Steps in an epoch.
        steps: usize,
        /// The running mean loss, when it was read at this step.
        loss: Option<f64>,
    },
    /// An epoch finished.
    Epoch(EpochStats),
}

/// The result of [`train`].
///
/// # Examples
///
/// ```
/// use eddy::train::{train, TrainOptions};
/// # let data = eddy::data::Dataset {
/// #     features: (0..40).flat_map(|i| [i as f32 / 39.0, 1.0 - i as f32 / 39.0]).collect(),
/// #     labels: (0..40).map(|i| (i >= 20) as i64).collect(),
/// #     n_features: 2,
/// #     n_classes: 2,
/// # };
/// let vm = eddy::Vm::builder().build()?;
/// let opts = TrainOptions { epochs: 1, batch_size: 16, hidden: vec![4], ..Default::default() };
/// let report = train(&opts, &data, &vm, |_| {})?;
/// assert_eq!(report.test_accuracy, report.epochs[0].test_accuracy);
/// assert_eq!(report.sizes.0 + report.sizes.1, data.len());
/// assert!(report.seconds > 0.0 && report.stats.dispatched > 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct TrainReport {
    /// One entry per epoch.
    pub epochs: Vec<EpochStats>,
    /// The final held-out accuracy.
    pub test_accuracy: f64,
    /// Wall time of the whole run, in seconds.
    pub seconds: f64,
    /// The engine's counters at the end.
    pub stats: VmStats,
    /// Training rows, held-out rows, features and classes.
    pub sizes: (usize, usize, usize, usize),
    /// With [`TrainOptions::graph`], the compiled step of a full batch.
    pub plan: Option<std::sync::Arc<eddy_tensor::graph::Compiled>>,
}

/// Trains an MLP (`features → hidden… → classes`, ReLU, cross-entropy, Adam) on `data` with
/// `vm` as the engine, calling `progress` as it goes.
///
/// # Errors
///
/// `InvalidArgument` for a zero batch size, epochs or hidden width, or a data set too small to
/// hold out a test set; any engine error.
///
/// # Examples
///
/// ```
/// use eddy::{data::Dataset, train::{train, TrainOptions}, Vm};
/// let data = Dataset::load(&eddy::data::default_path())?;
/// let vm = Vm::builder().build()?;
/// let opts = TrainOptions { epochs: 2, ..Default::default() };
/// let report = train(&opts, &data, &vm, |_| {})?;
/// assert!(report.test_accuracy > 0.8);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn train(
    opts: &TrainOptions,
    data: &Dataset,
    vm: &Vm,
    mut progress: impl FnMut(Progress),
) -> Result<TrainReport> {
    let bad = |m: String| crate::Error::invalid("train", m);
    if opts.batch_size == 0 || opts.epochs == 0 || opts.hidden.contains(&0) {
        return Err(bad(format!(
            "batch size, epochs and hidden widths must be positive (got {}, {}, {:?})",
            opts.batch_size, opts.epochs, opts.hidden
        )));
    }
    if !(opts.lr > 0.0 && opts.lr.is_finite()) {
        return Err(bad(format!(
            "the learning rate must be positive, got {}",
            opts.lr
        )));
    }
    if opts.devices == 0 || (opts.devices > 1 && opts.graph) {
        return Err(bad(format!(
            "training on {} devices: at least one, and a compiled step on one only",
            opts.devices
        )));
    }
    if opts.model == ModelKind::Transformer {
        return Err(bad(
            "the transformer trains on a text: use train_text::train_text".into(),
        ));
    }
    let side = (data.n_features as f64).sqrt().round() as usize;
    if opts.model == ModelKind::Cnn && (side * side != data.n_features || opts.devices > 1) {
        return Err(bad(format!(
            "the CNN trains on one device, on square images: got {} features on {} devices",
            data.n_features, opts.devices
        )));
    }
    let (train_set, test_set) = data.split(opts.test_fraction, opts.seed);
    if train_set.is_empty() || test_set.is_empty() {
        return Err(bad(format!(
            "{} rows are too few to hold out {} % for testing",
            data.len(),
            opts.test_fraction * 100.0
        )));
    }
    let start = Instant::now();
    eddy_tensor::with_engine(vm, || {
        eddy_tensor::with_device(opts.device, || {
            eddy_tensor::manual_seed(opts.seed);
            let mut sizes = vec![data.n_features];
            sizes.extend(&opts.hidden);
            sizes.push(data.n_classes.max(2));
            let spread = Spread::new(opts)?;
            let model = match (&spread, opts.model) {
                (_, ModelKind::Cnn) => crate::models::cnn(side, data.n_classes.max(2))?,
                (_, ModelKind::Transformer) => unreachable!("refused above"),
                (Some(s), ModelKind::Mlp) => s.model(&sizes)?,
                (None, ModelKind::Mlp) => mlp(&sizes)?,
            };
            // A model the device cannot hold fails here, naming the op that could not
            // allocate, before a step's worth of work is queued behind it.
            for p in model.parameters() {
                p.sync()?;
            }
            let opt = std::cell::RefCell::new(Adam::new(model.parameters(), opts.lr)?);
            let step_on = |x: &Tensor, y: &Tensor| -> Result<Tensor> {
                let mut opt = opt.borrow_mut();
                opt.zero_grad();
                let loss = model.forward(x)?.cross_entropy(y)?;
                loss.backward()?;
                opt.step()?;
                Ok(loss)
            };
            let graph =
                eddy_tensor::graph::Graph::new(|xs: &[Tensor]| Ok(vec![step_on(&xs[0], &xs[1])?]));
            let mut stepped = false;
            let (tx, _) = test_set.batch(0..test_set.len())?;
            let tx = match &spread {
                Some(s) => s.batch(&tx)?,
                None => tx,
            };
            let steps = train_set.len().div_ceil(opts.batch_size);
            let mut order: Vec<usize> = (0..train_set.len()).collect();
            let mut rng = opts.seed ^ 0x5eed_5eed;
            let mut epochs = Vec::new();
            for epoch in 1..=opts.epochs {
                let t0 = Instant::now();
                // Reshuffle the training rows every epoch (seeded).
                for i in (1..order.len()).rev() {
                    rng = crate::ops::random::splitmix64(rng);
                    order.swap(i, (rng % (i as u64 + 1)) as usize);
                }
                let mut loss_sum: Option<Tensor> = None;
                for step in 0..steps {
                    let rows = &order
                        [step * opts.batch_size..((step + 1) * opts.batch_size).min(order.len())];
                    let (x, y) = gather_rows(&train_set, rows)?;
                    let (x, y) = match &spread {
                        Some(s) => (s.batch(&x)?, s.batch(&y)?),
                        None => (x, y),
                    };
                    // The first step is eager: it makes the optimizer's state, which a
                    // compiled step must find made.
                    let loss = if opts.graph && stepped {
                        graph.run(&[&x, &y])?.remove(0)
                    } else {
                        step_on(&x, &y)?
                    };
                    stepped = true;
                    let l = loss.detach();
                    loss_sum = Some(match loss_sum {
                        None => l,
                        Some(s) => s.add(&l)?,
                    });
                    let read = (step + 1) % 8 == 0 || step + 1 == steps;
                    let mean = if read {
                        Some(
                            loss_sum.as_ref().expect("a step ran").to_scalar()? / (step + 1) as f64,
                        )
                    } else {
                        None
                    };
                    progress(Progress::Step {
                        epoch,
                        step: step + 1,
                        steps,
                        loss: mean,
                    });
                }
                let loss = loss_sum.expect("at least one step").to_scalar()? / steps as f64;
                let test_accuracy = crate::models::accuracy(&model, &tx, &test_set.labels)?;
                let e = EpochStats {
                    epoch,
                    loss,
                    test_accuracy,
                    steps_per_s: steps as f64 / t0.elapsed().as_secs_f64(),
                };
                progress(Progress::Epoch(e));
                epochs.push(e);
            }
            vm.sync()?;
            let plan = match (opts.graph, steps > 1) {
                // The first batch is full: its signature was compiled by the second step.
                (true, true) => {
                    let (x, y) = gather_rows(&train_set, &order[..opts.batch_size])?;
                    Some(graph.compile(&[&x, &y])?)
                }
                _ => None,
            };
            Ok(TrainReport {
                plan,
                test_accuracy: epochs.last().map_or(0.0, |e| e.test_accuracy),
                epochs,
                seconds: start.elapsed().as_secs_f64(),
                stats: vm.stats(),
                sizes: (
                    train_set.len(),
                    test_set.len(),
                    data.n_features,
                    data.n_classes,
                ),
            })
        })
    })
}

/// Rows `rows` of `d` as a batch.
fn gather_rows(d: &Dataset, rows: &[usize]) -> Result<(Tensor, Tensor)> {
    let nf = d.n_features;
    let mut x = Vec::with_capacity(rows.len() * nf);
    for &r in rows {
        x.extend_from_slice(&d.features[r * nf..(r + 1) * nf]);
    }
    let y: Vec<i64> = rows.iter().map(|&r| d.labels[r]).collect();
    Ok((
        Tensor::from_vec(x, [rows.len(), nf])?,
        Tensor::from_vec(y, [rows.len()])?,
    ))
}

/// The placement a training run spreads over, and how.
struct Spread {
    placement: crate::tensor::global::Placement,
    parallel: Parallel,
}

impl Spread {
    /// `None` for one device.
    fn new(opts: &TrainOptions) -> Result<Option<Spread>> {
        use crate::tensor::global::{DeviceKind, Placement};
        // Under a launcher, each process holds `devices` ranks of the placement.
        let ranks = opts.devices * crate::tensor::global::world()?.size as u32;
        if ranks <= 1 {
            return Ok(None);
        }
        let kind = match opts.device {
            crate::Device::Cuda(_) => DeviceKind::Cuda,
            _ => DeviceKind::Cpu,
        };
        let placement = Placement::new(kind, (0..ranks).collect::<Vec<_>>())?;
        Ok(Some(Spread {
            placement,
            parallel: opts.parallel,
        }))
    }

    /// The MLP of `sizes` laid out for the run.
    fn model(&self, sizes: &[usize]) -> Result<crate::tensor::nn::Sequential> {
        use crate::tensor::global::Sbp::{Broadcast as B, Split as S};
        crate::models::mlp_with(sizes, |i, l| {
            let (weight, bias) = match (self.parallel, i % 2) {
                (Parallel::Data, _) => (B, B),
                (Parallel::Tensor, 0) => (S(0), S(0)),
                (Parallel::Tensor, _) => (S(1), B),
            };
            l.to_global(&self.placement, &[weight], &[bias])
        })
    }

    /// A batch (rows first) laid out for the run: split by rows for data parallelism, whole
    /// on every device for tensor parallelism.
    fn batch(&self, t: &Tensor) -> Result<Tensor> {
        use crate::tensor::global::Sbp;
        let sbp = match self.parallel {
            Parallel::Data => Sbp::Split(0),
            Parallel::Tensor => Sbp::Broadcast,
        };
        t.to_global(&self.placement, &[sbp])
    }
}
