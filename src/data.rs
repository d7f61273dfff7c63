//! Classification data from CSV files: the digits data set shipped in the repository (UCI
//! optical digits, 1,797 8×8 images; CC BY 4.0, E. Alpaydin and C. Kaynak), or any file of the
//! same format — one row per example, numeric feature columns, then an integer class label.
//!
//! Files may be gzipped (detected by their magic bytes). A first row with no numeric cell is a
//! header and is skipped. Every problem is reported as one [`LoadError`] line naming the file
//! and the row.

use crate::{Result, Tensor};
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Labels must lie in `0..MAX_CLASSES`.
pub const MAX_CLASSES: usize = 10_000;

/// Features scaled to `[0, 1]` per column (min–max over the file), and labels `0..classes`.
///
/// # Examples
///
/// ```
/// use eddy::data::Dataset;
/// let path = std::env::temp_dir().join(format!("eddy-doc-dataset-{}.csv", std::process::id()));
/// std::fs::write(&path, "a,b,label\n0,10,1\n2,20,0\n4,30,2\n")?;
/// let d = Dataset::load(&path);
/// std::fs::remove_file(&path)?;
/// let d = d?;
/// assert_eq!((d.len(), d.n_features, d.n_classes), (3, 2, 3));
/// assert_eq!(d.features, [0.0, 0.0, 0.5, 0.5, 1.0, 1.0]); // each column scaled to [0, 1]
/// assert_eq!(d.labels, [1, 0, 2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Dataset {
    /// `len × features` values, row-major.
    pub features: Vec<f32>,
    /// One label per row.
    pub labels: Vec<i64>,
    /// Feature columns per row.
    pub n_features: usize,
    /// The number of classes: the largest label plus one.
    pub n_classes: usize,
}

/// The former name of [`Dataset`], kept for the digits examples.
pub type Digits = Dataset;

/// Why a data file could not be used: the file, the 1-based row (if one is to blame), and what
/// is wrong. Displays as one line: `data.csv: row 3: column 5: `x` is not a number`.
///
/// # Examples
///
/// ```
/// use eddy::data::Dataset;
/// let path = std::env::temp_dir().join(format!("eddy-doc-bad-{}.csv", std::process::id()));
/// std::fs::write(&path, "1,2,0\n1,x,1\n")?;
/// let err = Dataset::load(&path).unwrap_err();
/// std::fs::remove_file(&path)?;
/// assert_eq!((err.file.as_path(), err.row), (path.as_path(), Some(2)));
/// assert!(err.to_string().ends_with(".csv: row 2: column 2: `x` is not a finite number"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError {
    /// The file.
    pub file: PathBuf,
    /// The 1-based row, counting every line of the file.
    pub row: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.file.display())?;
        if let Some(r) = self.row {
            write!(f, "row {r}: ")?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for LoadError {}

impl From<LoadError> for crate::Error {
    fn from(e: LoadError) -> Self {
        crate::Error::invalid("load_data", e.to_string())
    }
}

/// The copy of the digits data set shipped in the repository (`data/digits.csv.gz`).
///
/// # Examples
///
/// ```
/// let p = eddy::data::default_path();
/// assert!(p.ends_with("data/digits.csv.gz"));
/// assert!(p.is_file());
/// ```
pub fn default_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/digits.csv.gz")
}

/// The text shipped in the repository for the character model (`data/text.txt.gz`): Lewis
/// Carroll's *Alice's Adventures in Wonderland* then Shakespeare's *As You Like It*, 273,660
/// bytes of ASCII.
///
/// # Examples
///
/// ```
/// let p = eddy::data::default_text_path();
/// assert!(p.ends_with("data/text.txt.gz") && p.is_file());
/// ```
pub fn default_text_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/text.txt.gz")
}

/// Reads a text file (gzipped or not) as bytes: the tokens of the character model.
///
/// # Errors
///
/// A [`LoadError`] if the file is missing, unreadable, not valid gzip, or holds fewer than
/// 1,000 bytes.
///
/// # Examples
///
/// ```
/// let t = eddy::data::load_text(&eddy::data::default_text_path())?;
/// assert_eq!(t.len(), 273_660);
/// assert!(std::str::from_utf8(&t).unwrap().contains("ALICE'S ADVENTURES IN WONDERLAND"));
/// # Ok::<(), eddy::data::LoadError>(())
/// ```
pub fn load_text(path: &Path) -> std::result::Result<Vec<u8>, LoadError> {
    let err = |message: String| LoadError {
        file: path.to_path_buf(),
        row: None,
        message,
    };
    let mut raw = Vec::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut raw))
        .map_err(|e| err(format!("cannot read: {e}")))?;
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut text = Vec::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_end(&mut text)
            .map_err(|e| err(format!("not valid gzip: {e}")))?;
        raw = text;
    }
    if raw.len() < 1000 {
        return Err(err(format!(
            "{} bytes: a character model needs at least 1,000",
            raw.len()
        )));
    }
    Ok(raw)
}

impl Dataset {
    /// Reads a CSV file (gzipped or not): feature columns, then the label, per row.
    ///
    /// # Errors
    ///
    /// A [`LoadError`] if the file is missing or unreadable, empty, has a row whose number of
    /// cells differs from the first row's, a cell that is not a finite number, or a label that
    /// is not an integer in `0..MAX_CLASSES`.
    ///
    /// # Examples
    ///
    /// ```
    /// let d = eddy::data::Dataset::load(&eddy::data::default_path())?;
    /// assert_eq!((d.len(), d.n_features, d.n_classes), (1797, 64, 10));
    /// # Ok::<(), eddy::data::LoadError>(())
    /// ```
    pub fn load(path: &Path) -> std::result::Result<Dataset, LoadError> {
        let err = |row: Option<usize>, message: String| LoadError {
            file: path.to_path_buf(),
            row,
            message,
        };
        let mut raw = Vec::new();
        std::fs::File::open(path)
            .and_then(|mut f| f.read_to_end(&mut raw))
            .map_err(|e| err(None, format!("cannot read: {e}")))?;
        if raw.starts_with(&[0x1f, 0x8b]) {
            let mut unzipped = Vec::new();
            flate2::read::GzDecoder::new(&raw[..])
                .read_to_end(&mut unzipped)
                .map_err(|e| err(None, format!("not valid gzip: {e}")))?;
            raw = unzipped;
        }
        let text = String::from_utf8(raw).map_err(|e| err(None, format!("not UTF-8 text: {e}")))?;
        Self::parse(&text).map_err(|(row, m)| err(row, m))
    }

    /// Parses CSV text as [`load`](Self::load) does; errors are `(row, message)`.
    fn parse(text: &str) -> std::result::Result<Dataset, (Option<usize>, String)> {
        let mut rows = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.trim()))
            .filter(|(_, l)| !l.is_empty())
            .peekable();
        if let Some((_, first)) = rows.peek()
            && first.split(',').all(|c| c.trim().parse::<f64>().is_err())
        {
            rows.next(); // a header
        }
        let mut width = None;
        let (mut cols, mut labels): (Vec<f64>, Vec<i64>) = (Vec::new(), Vec::new());
        for (row, line) in rows {
            let cells: Vec<&str> = line.split(',').map(str::trim).collect();
            let w = *width.get_or_insert(cells.len());
            if cells.len() != w {
                return Err((
                    Some(row),
                    format!("{} cells, but the first row has {w}", cells.len()),
                ));
            }
            if w < 2 {
                return Err((
                    Some(row),
                    "a row needs at least one feature and a label".into(),
                ));
            }
            for (c, cell) in cells.iter().enumerate() {
                let v: f64 = cell.parse().ok().filter(|v: &f64| v.is_finite()).ok_or((
                    Some(row),
                    format!("column {}: `{cell}` is not a finite number", c + 1),
                ))?;
                if c + 1 < w {
                    cols.push(v);
                } else if v.fract() != 0.0 || v < 0.0 || v >= MAX_CLASSES as f64 {
                    return Err((
                        Some(row),
                        format!("label `{cell}` is not an integer in 0..{MAX_CLASSES}"),
                    ));
                } else {
                    labels.push(v as i64);
                }
            }
        }
        let Some(w) = width else {
            return Err((None, "no data rows (the file is empty)".into()));
        };
        let nf = w - 1;
        // Min–max scaling per column; a constant column becomes 0.
        let mut features = vec![0f32; cols.len()];
        for j in 0..nf {
            let col = cols.iter().skip(j).step_by(nf);
            let (lo, hi) = col.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
                (a.min(v), b.max(v))
            });
            let span = if hi > lo { hi - lo } else { 1.0 };
            for (i, v) in cols.iter().enumerate().skip(j).step_by(nf) {
                features[i] = ((v - lo) / span) as f32;
            }
        }
        let n_classes = labels.iter().max().map_or(0, |&m| m as usize + 1);
        Ok(Dataset {
            features,
            labels,
            n_features: nf,
            n_classes,
        })
    }

    /// The number of rows.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::data::Dataset;
    /// let d = Dataset {
    ///     features: vec![0.0, 0.5, 1.0],
    ///     labels: vec![0, 1, 1],
    ///     n_features: 1,
    ///     n_classes: 2,
    /// };
    /// assert_eq!(d.len(), 3);
    /// ```
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are none.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::data::Dataset;
    /// let d = Dataset { features: vec![], labels: vec![], n_features: 4, n_classes: 0 };
    /// assert!(d.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// A seeded shuffle split: `(train, test)` with `test_fraction` of the rows held out. The
    /// same seed gives the same split on any machine.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::data::Dataset;
    /// // Ten one-feature rows whose labels name them.
    /// let d = Dataset {
    ///     features: (0..10).map(|i| i as f32 / 9.0).collect(),
    ///     labels: (0..10).collect(),
    ///     n_features: 1,
    ///     n_classes: 10,
    /// };
    /// let (train, test) = d.split(0.2, 7);
    /// assert_eq!((train.len(), test.len()), (8, 2));
    /// assert_eq!(d.split(0.2, 7).1.labels, test.labels); // the same seed, the same split
    /// let mut all = [train.labels, test.labels].concat();
    /// all.sort();
    /// assert_eq!(all, d.labels); // every row lands on exactly one side
    /// ```
    pub fn split(&self, test_fraction: f64, seed: u64) -> (Dataset, Dataset) {
        let mut idx: Vec<usize> = (0..self.len()).collect();
        // Fisher–Yates with a SplitMix64 stream.
        let mut s = seed;
        for i in (1..idx.len()).rev() {
            s = crate::ops::random::splitmix64(s);
            idx.swap(i, (s % (i as u64 + 1)) as usize);
        }
        let n_test = (self.len() as f64 * test_fraction).round() as usize;
        let nf = self.n_features;
        let pick = |ids: &[usize]| Dataset {
            features: ids
                .iter()
                .flat_map(|&i| self.features[i * nf..(i + 1) * nf].iter().copied())
                .collect(),
            labels: ids.iter().map(|&i| self.labels[i]).collect(),
            n_features: nf,
            n_classes: self.n_classes,
        };
        (pick(&idx[n_test..]), pick(&idx[..n_test]))
    }

    /// Rows `range` as tensors: features `[n, n_features]` (f32) and labels `[n]` (i64).
    ///
    /// # Errors
    ///
    /// Engine errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::data::Dataset;
    /// let d = Dataset {
    ///     features: vec![0.0, 1.0, 0.5, 0.5, 1.0, 0.0],
    ///     labels: vec![0, 1, 2],
    ///     n_features: 2,
    ///     n_classes: 3,
    /// };
    /// let (x, y) = d.batch(1..3)?;
    /// assert_eq!(x.dims(), &[2, 2]);
    /// assert_eq!(x.to_vec::<f32>()?, [0.5, 0.5, 1.0, 0.0]);
    /// assert_eq!(y.to_vec::<i64>()?, [1, 2]);
    /// # Ok::<(), eddy::Error>(())
    /// ```
    pub fn batch(&self, range: std::ops::Range<usize>) -> Result<(Tensor, Tensor)> {
        let (n, nf) = (range.len(), self.n_features);
        let x = Tensor::from_slice(&self.features[range.start * nf..range.end * nf], [n, nf])?;
        let y = Tensor::from_slice(&self.labels[range], [n])?;
        Ok((x, y))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_scales_and_skips_a_header() {
        let d = Dataset::parse("a,b,label\n0,10,1\n2,20,0\n\n4,30,2\n").unwrap();
        assert_eq!((d.len(), d.n_features, d.n_classes), (3, 2, 3));
        assert_eq!(d.features, vec![0.0, 0.0, 0.5, 0.5, 1.0, 1.0]);
        assert_eq!(d.labels, vec![1, 0, 2]);
    }

    #[test]
    fn names_the_row_of_each_problem() {
        let cases = [
            ("1,2,0\n1,2\n", Some(2), "2 cells, but the first row has 3"),
            (
                "1,2,0\n1,x,1\n",
                Some(2),
                "column 2: `x` is not a finite number",
            ),
            (
                "1,2,0\n1,2,nan\n",
                Some(2),
                "column 3: `nan` is not a finite number",
            ),
            ("1,2,0\n1,2,-1\n", Some(2), "label `-1` is not an integer"),
            ("1,2,0.5\n", Some(1), "label `0.5` is not an integer"),
            ("1,2,10000\n", Some(1), "label `10000` is not an integer"),
            ("\n\n", None, "no data rows"),
            ("x,y\n", None, "no data rows"),
            ("3\n", Some(1), "at least one feature"),
        ];
        for (text, row, msg) in cases {
            let (r, m) = Dataset::parse(text).unwrap_err();
            assert_eq!(r, row, "{text:?}: {m}");
            assert!(m.contains(msg), "{text:?}: {m}");
        }
    }
}
