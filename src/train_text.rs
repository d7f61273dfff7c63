//! Training the character-level transformer ([`crate::models::CharTransformer`]) on a text:
//! bytes are tokens, the first 90 % of the text trains and the rest tests, each step a batch
//! of windows drawn at random positions (seeded), the target each window shifted by one.

use crate::models::{CharTransformer, TransformerConfig, train_step};
use crate::tensor::nn::Module;
use crate::tensor::optim::Adam;
use crate::train::{EpochStats, Progress, TrainReport};
use crate::{Result, Tensor};
use eddy_vm::Vm;
use std::time::Instant;

/// What to train and how.
///
/// # Examples
///
/// ```
/// let o = eddy::train_text::TextOptions::default();
/// assert_eq!((o.epochs, o.steps_per_epoch, o.batch_size, o.lr), (10, 100, 16, 1e-3));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct TextOptions {
    /// Epochs, each of `steps_per_epoch` steps and a test.
    pub epochs: usize,
    /// Steps per epoch.
    pub steps_per_epoch: usize,
    /// Windows per step.
    pub batch_size: usize,
    /// AdamW's learning rate (weight decay 0.01).
    pub lr: f64,
    /// Seeds the weights and the windows.
    pub seed: u64,
    /// The model's sizes; windows are `config.seq` bytes long.
    pub config: TransformerConfig,
}

impl Default for TextOptions {
    fn default() -> Self {
        TextOptions {
            epochs: 10,
            steps_per_epoch: 100,
            batch_size: 16,
            lr: 1e-3,
            seed: 0,
            config: TransformerConfig::default(),
        }
    }
}

/// Windows of `len + 1` bytes of `text` starting at `starts`: ids `[n, len]` and the next ids
/// flattened, `[n · len]`.
fn windows(text: &[u8], starts: &[usize], len: usize) -> Result<(Tensor, Tensor)> {
    let mut x = Vec::with_capacity(starts.len() * len);
    let mut y = Vec::with_capacity(starts.len() * len);
    for &s in starts {
        x.extend(text[s..s + len].iter().map(|&b| b as i64));
        y.extend(text[s + 1..s + len + 1].iter().map(|&b| b as i64));
    }
    let n = starts.len();
    Ok((
        Tensor::from_vec(x, [n, len])?,
        Tensor::from_vec(y, [n * len])?,
    ))
}

/// Trains a fresh [`CharTransformer`] on `text` with `opts` on `vm`, reporting progress (the
/// loss every 8 steps, each epoch's mean loss and the next-byte accuracy on the held-out
/// tenth). The report's `sizes` are (training bytes, test bytes, window length, vocabulary).
///
/// # Errors
///
/// `InvalidArgument` for zero epochs, steps or batch, a learning rate that is not positive, or
/// a text too short to hold a window in each part; engine errors.
///
/// # Examples
///
/// ```
/// use eddy::models::TransformerConfig;
/// use eddy::train_text::{train_text, TextOptions};
/// let text: Vec<u8> = b"the cat sat on the mat. ".iter().cycle().take(3000).copied().collect();
/// let config = TransformerConfig { vocab: 128, d_model: 16, heads: 2, layers: 1, ffn: 32, seq: 16 };
/// let opts = TextOptions { epochs: 2, steps_per_epoch: 20, batch_size: 8, lr: 1e-2, config, ..Default::default() };
/// let report = train_text(&opts, &text, &eddy::Vm::builder().build()?, |_| {})?;
/// assert!(report.epochs[1].loss < report.epochs[0].loss);
/// assert!(report.test_accuracy > 0.3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn train_text(
    opts: &TextOptions,
    text: &[u8],
    vm: &Vm,
    mut progress: impl FnMut(Progress),
) -> Result<TrainReport> {
    let bad = |m: String| crate::Error::invalid("train_text", m);
    let len = opts.config.seq;
    let cut = text.len() * 9 / 10;
    if opts.epochs == 0 || opts.steps_per_epoch == 0 || opts.batch_size == 0 {
        return Err(bad("epochs, steps and batch size must be positive".into()));
    }
    if !(opts.lr > 0.0 && opts.lr.is_finite()) {
        return Err(bad(format!(
            "the learning rate must be positive, got {}",
            opts.lr
        )));
    }
    if cut <= len + 1 || text.len() - cut <= len + 1 {
        return Err(bad(format!(
            "{} bytes cannot hold a window of {} in both the training and the test part",
            text.len(),
            len + 1
        )));
    }
    if let Some(&b) = text.iter().find(|&&b| b as usize >= opts.config.vocab) {
        return Err(bad(format!(
            "byte {b} is outside the vocabulary of {}",
            opts.config.vocab
        )));
    }
    let (train, test) = text.split_at(cut);
    let start = Instant::now();
    eddy_tensor::with_engine(vm, || {
        eddy_tensor::manual_seed(opts.seed);
        let model = CharTransformer::new(opts.config)?;
        let mut opt = Adam::adamw(model.parameters(), opts.lr, 0.01)?;
        // The test windows: evenly spread over the held-out part, at most 64.
        let room = test.len() - len - 1;
        let n_test = 64.min(room + 1);
        let starts: Vec<usize> = (0..n_test).map(|i| i * room / n_test.max(1)).collect();
        let (tx, ty) = windows(test, &starts, len)?;
        let ty = ty.to_vec::<i64>()?;
        let mut rng = opts.seed ^ 0x7e47_7e47;
        let mut epochs = Vec::with_capacity(opts.epochs);
        for epoch in 1..=opts.epochs {
            let t0 = Instant::now();
            let mut sum: Option<Tensor> = None;
            for step in 0..opts.steps_per_epoch {
                let starts: Vec<usize> = (0..opts.batch_size)
                    .map(|_| {
                        rng = crate::ops::random::splitmix64(rng);
                        (rng % (train.len() - len) as u64) as usize
                    })
                    .collect();
                let (x, y) = windows(train, &starts, len)?;
                let l = train_step(&model, &mut opt, &x, &y)?.detach();
                sum = Some(match sum {
                    None => l,
                    Some(s) => s.add(&l)?,
                });
                let read = (step + 1) % 8 == 0 || step + 1 == opts.steps_per_epoch;
                let loss = match (read, &sum) {
                    (true, Some(s)) => Some(s.to_scalar()? / (step + 1) as f64),
                    _ => None,
                };
                let steps = opts.steps_per_epoch;
                progress(Progress::Step {
                    epoch,
                    step: step + 1,
                    steps,
                    loss,
                });
            }
            let loss = sum.map_or(Ok(f64::NAN), |s| s.to_scalar())? / opts.steps_per_epoch as f64;
            let test_accuracy = crate::models::accuracy(&model, &tx, &ty)?;
            let e = EpochStats {
                epoch,
                loss,
                test_accuracy,
                steps_per_s: opts.steps_per_epoch as f64 / t0.elapsed().as_secs_f64(),
            };
            progress(Progress::Epoch(e));
            epochs.push(e);
        }
        vm.sync()?;
        Ok(TrainReport {
            test_accuracy: epochs.last().map_or(0.0, |e| e.test_accuracy),
            epochs,
            seconds: start.elapsed().as_secs_f64(),
            stats: vm.stats(),
            sizes: (train.len(), test.len(), len, opts.config.vocab),
            plan: None,
        })
    })
}
