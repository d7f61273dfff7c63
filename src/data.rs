//! The digits data set (UCI optical digits, 1,797 8×8 images; CC BY 4.0, E. Alpaydin and
//! C. Kaynak): loading, scaling and a seeded train/test split.

use crate::{Error, Result, Tensor};
use std::io::Read;
use std::path::Path;

/// Images as rows of 64 features scaled to `[0, 1]`, and their labels `0..10`.
#[derive(Clone, Debug)]
pub struct Digits {
    /// `n × 64` features, row-major.
    pub features: Vec<f32>,
    /// `n` labels.
    pub labels: Vec<i64>,
}

/// The copy of the data set shipped in the repository (`data/digits.csv.gz`).
pub fn default_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/digits.csv.gz")
}

impl Digits {
    /// Reads the gzipped CSV (64 pixels 0..16, then the label, per line).
    ///
    /// # Errors
    ///
    /// `InvalidArgument` naming the file and line if it cannot be read or parsed.
    ///
    /// # Examples
    ///
    /// ```
    /// let d = eddy::data::Digits::load(&eddy::data::default_path())?;
    /// assert_eq!(d.len(), 1797);
    /// # Ok::<(), eddy::Error>(())
    /// ```
    pub fn load(path: &Path) -> Result<Digits> {
        let bad = |m: String| Error::invalid("load_digits", format!("{}: {m}", path.display()));
        let f = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
        let mut text = String::new();
        flate2::read::GzDecoder::new(f)
            .read_to_string(&mut text)
            .map_err(|e| bad(e.to_string()))?;
        let (mut features, mut labels) = (Vec::new(), Vec::new());
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let v: Vec<f32> = line
                .split(',')
                .map(|s| s.trim().parse::<f32>())
                .collect::<std::result::Result<_, _>>()
                .map_err(|e| bad(format!("line {}: {e}", i + 1)))?;
            if v.len() != 65 {
                return Err(bad(format!(
                    "line {}: {} fields, expected 65",
                    i + 1,
                    v.len()
                )));
            }
            features.extend(v[..64].iter().map(|p| p / 16.0));
            labels.push(v[64] as i64);
        }
        Ok(Digits { features, labels })
    }

    /// The number of images.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// A seeded shuffle split: `(train, test)` with `test_fraction` of the rows held out.
    pub fn split(&self, test_fraction: f64, seed: u64) -> (Digits, Digits) {
        let mut idx: Vec<usize> = (0..self.len()).collect();
        // Fisher–Yates with a SplitMix64 stream: the same seed gives the same split anywhere.
        let mut s = seed;
        for i in (1..idx.len()).rev() {
            s = eddy_ops::cpu::copy::splitmix64(s);
            idx.swap(i, (s % (i as u64 + 1)) as usize);
        }
        let n_test = (self.len() as f64 * test_fraction).round() as usize;
        let pick = |ids: &[usize]| Digits {
            features: ids
                .iter()
                .flat_map(|&i| self.features[i * 64..i * 64 + 64].iter().copied())
                .collect(),
            labels: ids.iter().map(|&i| self.labels[i]).collect(),
        };
        (pick(&idx[n_test..]), pick(&idx[..n_test]))
    }

    /// Rows `range` as tensors: features `[n, 64]` (f32) and labels `[n]` (i64).
    ///
    /// # Errors
    ///
    /// Engine errors.
    pub fn batch(&self, range: std::ops::Range<usize>) -> Result<(Tensor, Tensor)> {
        let n = range.len();
        let x = Tensor::from_slice(&self.features[range.start * 64..range.end * 64], [n, 64])?;
        let y = Tensor::from_slice(&self.labels[range], [n])?;
        Ok((x, y))
    }
}
