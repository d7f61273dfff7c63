//! Placements: a device kind and a grid of ranks.

use crate::error::{Error, Result};
use eddy_vm::Device;
use smallvec::SmallVec;
use std::fmt;

/// The kind of device a placement's ranks are.
///
/// # Examples
///
/// ```
/// use eddy_ops::global::DeviceKind;
/// assert_eq!(DeviceKind::Cpu.device(3).to_string(), "cpu:3");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// CPU devices (`cpu:n`).
    Cpu,
    /// CUDA devices (`cuda:n`).
    Cuda,
}

impl DeviceKind {
    /// Local device `n` of this kind.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::global::DeviceKind;
    /// assert_eq!(DeviceKind::Cuda.device(0), eddy_ops::Device::Cuda(0));
    /// ```
    pub fn device(self, n: u32) -> Device {
        match self {
            DeviceKind::Cpu => Device::Cpu(n),
            DeviceKind::Cuda => Device::Cuda(n),
        }
    }

    /// The kind of `device`; `None` for the engine's test device.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::global::DeviceKind;
    /// assert_eq!(DeviceKind::of(eddy_ops::Device::Cpu(1)), Some(DeviceKind::Cpu));
    /// ```
    pub fn of(device: Device) -> Option<DeviceKind> {
        match device {
            Device::Cpu(_) => Some(DeviceKind::Cpu),
            Device::Cuda(_) => Some(DeviceKind::Cuda),
            Device::Test(_) => None,
        }
    }
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceKind::Cpu => "cpu",
            DeviceKind::Cuda => "cuda",
        })
    }
}

/// Where a global tensor lives: a device kind and an n-d grid of *ranks*, row-major. A rank is
/// one device of the job; the grid's axes are the axes an SBP is given for.
///
/// Ranks map to devices the same way in every process: a process that holds
/// `devices_per_process` devices holds ranks `p · devices_per_process ..` of them
/// ([`Placement::local_positions`]); in one process, rank `r` is local device `r` of the kind
/// (`cpu:r`).
///
/// # Examples
///
/// ```
/// use eddy_ops::global::{DeviceKind, Placement};
/// let p = Placement::new(DeviceKind::Cpu, [0, 1, 2])?;
/// assert_eq!(p.to_string(), "cpu:[0, 1, 2]");
/// let g = Placement::grid(DeviceKind::Cpu, [0, 1, 2, 3], [2, 2])?;
/// assert_eq!(g.to_string(), "cpu:[[0, 1], [2, 3]]");
/// assert_eq!(g.coord(3).as_slice(), &[1, 1]);
/// assert!(Placement::new(DeviceKind::Cpu, [0, 0]).is_err()); // a rank twice
/// # Ok::<(), eddy_ops::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Placement {
    kind: DeviceKind,
    ranks: Vec<u32>,
    grid: SmallVec<[usize; 2]>,
}

impl Placement {
    /// A 1-d placement of `ranks`.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for no rank or a rank twice.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::global::{DeviceKind, Placement};
    /// assert_eq!(Placement::new(DeviceKind::Cpu, [0, 1])?.grid_dims(), &[2]);
    /// # Ok::<(), eddy_ops::Error>(())
    /// ```
    #[track_caller]
    pub fn new(kind: DeviceKind, ranks: impl Into<Vec<u32>>) -> Result<Placement> {
        let ranks = ranks.into();
        let n = ranks.len();
        Placement::grid(kind, ranks, [n])
    }

    /// A placement of `ranks` laid out row-major on a grid of `grid` (their product is the
    /// number of ranks).
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for no rank, a rank twice, an empty grid or one of another size.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::global::{DeviceKind, Placement};
    /// assert!(Placement::grid(DeviceKind::Cpu, [0, 1, 2, 3], [2, 2]).is_ok());
    /// assert!(Placement::grid(DeviceKind::Cpu, [0, 1, 2], [2, 2]).is_err());
    /// ```
    #[track_caller]
    pub fn grid(
        kind: DeviceKind,
        ranks: impl Into<Vec<u32>>,
        grid: impl AsRef<[usize]>,
    ) -> Result<Placement> {
        let (ranks, grid) = (ranks.into(), grid.as_ref());
        let bad = |m: String| Err(Error::invalid("placement", m));
        if ranks.is_empty() {
            return bad("a placement needs at least one rank".into());
        }
        let mut sorted = ranks.clone();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return bad(format!("rank {} appears twice in {ranks:?}", w[0]));
        }
        if grid.is_empty() || grid.iter().product::<usize>() != ranks.len() {
            return bad(format!(
                "a grid of {grid:?} does not hold the {} ranks {ranks:?}",
                ranks.len()
            ));
        }
        Ok(Placement {
            kind,
            ranks,
            grid: grid.into(),
        })
    }

    /// The device kind.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::global::{DeviceKind, Placement};
    /// assert_eq!(Placement::new(DeviceKind::Cpu, [0])?.kind(), DeviceKind::Cpu);
    /// # Ok::<(), eddy_ops::Error>(())
    /// ```
    pub fn kind(&self) -> DeviceKind {
        self.kind
    }

    /// The ranks, row-major over the grid.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::global::{DeviceKind, Placement};
    /// assert_eq!(Placement::new(DeviceKind::Cpu, [2, 0])?.ranks(), &[2, 0]);
    /// # Ok::<(), eddy_ops::Error>(())
    /// ```
    pub fn ranks(&self) -> &[u32] {
        &self.ranks
    }

    /// The grid's extent along each axis.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::global::{DeviceKind, Placement};
    /// let g = Placement::grid(DeviceKind::Cpu, [0, 1, 2, 3, 4, 5], [2, 3])?;
    /// assert_eq!(g.grid_dims(), &[2, 3]);
    /// # Ok::<(), eddy_ops::Error>(())
    /// ```
    pub fn grid_dims(&self) -> &[usize] {
        &self.grid
    }

    /// The process-wide copy of this placement: equal placements give the same reference, so
    /// a global tensor holds its placement without a count to change and an op compares its
    /// operands' placements by address. As OneFlow's placement symbols, each distinct
    /// placement is kept for the life of the process (a program names few).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::global::{DeviceKind, Placement};
    /// let a = Placement::new(DeviceKind::Cpu, [0, 1])?.interned();
    /// let b = Placement::new(DeviceKind::Cpu, [0, 1])?.interned();
    /// assert!(std::ptr::eq(a, b));
    /// assert!(!std::ptr::eq(a, Placement::new(DeviceKind::Cpu, [1, 0])?.interned()));
    /// # Ok::<(), eddy_ops::Error>(())
    /// ```
    pub fn interned(&self) -> &'static Placement {
        static TABLE: std::sync::Mutex<Option<std::collections::HashSet<&'static Placement>>> =
            std::sync::Mutex::new(None);
        // A panic while the lock was held left the set whole (an insert is the last step).
        let mut guard = TABLE.lock().unwrap_or_else(|e| e.into_inner());
        let table = guard.get_or_insert_with(Default::default);
        if let Some(p) = table.get(self) {
            return p;
        }
        let p: &'static Placement = Box::leak(Box::new(self.clone()));
        table.insert(p);
        p
    }

    /// The number of ranks.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::global::{DeviceKind, Placement};
    /// assert_eq!(Placement::new(DeviceKind::Cpu, [0, 1, 2])?.len(), 3);
    /// # Ok::<(), eddy_ops::Error>(())
    /// ```
    #[allow(clippy::len_without_is_empty)] // a placement has at least one rank
    pub fn len(&self) -> usize {
        self.ranks.len()
    }

    /// The grid coordinate of position `i` (row-major).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::global::{DeviceKind, Placement};
    /// let g = Placement::grid(DeviceKind::Cpu, [0, 1, 2, 3, 4, 5], [2, 3])?;
    /// assert_eq!(g.coord(4).as_slice(), &[1, 1]);
    /// # Ok::<(), eddy_ops::Error>(())
    /// ```
    pub fn coord(&self, mut i: usize) -> SmallVec<[usize; 2]> {
        let mut c: SmallVec<[usize; 2]> = SmallVec::from_elem(0, self.grid.len());
        for a in (0..self.grid.len()).rev() {
            c[a] = i % self.grid[a];
            i /= self.grid[a];
        }
        c
    }

    /// The device of position `i` in this process (rank `r` is device `r` of the kind).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::global::{DeviceKind, Placement};
    /// let p = Placement::new(DeviceKind::Cpu, [3, 1])?;
    /// assert_eq!(p.device(0).to_string(), "cpu:3");
    /// # Ok::<(), eddy_ops::Error>(())
    /// ```
    pub fn device(&self, i: usize) -> Device {
        self.kind.device(self.ranks[i])
    }

    /// The positions (indices into [`ranks`](Self::ranks)) whose ranks process `process`
    /// holds when each process holds `devices_per_process` consecutive ranks: every process
    /// computes the same table.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::global::{DeviceKind, Placement};
    /// let p = Placement::new(DeviceKind::Cpu, [0, 1, 2, 3])?;
    /// assert_eq!(p.local_positions(1, 2), [2, 3]);
    /// assert_eq!(p.local_positions(0, 4), [0, 1, 2, 3]); // one process holds them all
    /// # Ok::<(), eddy_ops::Error>(())
    /// ```
    pub fn local_positions(&self, process: u32, devices_per_process: u32) -> Vec<usize> {
        let per = devices_per_process.max(1);
        (self.ranks.iter().enumerate())
            .filter(|&(_, &r)| r / per == process)
            .map(|(i, _)| i)
            .collect()
    }

    /// The positions that differ from position `i` only along grid axis `axis`, in order:
    /// the group a collective along that axis runs in.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_ops::global::{DeviceKind, Placement};
    /// let g = Placement::grid(DeviceKind::Cpu, [0, 1, 2, 3], [2, 2])?;
    /// assert_eq!(g.axis_group(1, 0), [1, 3]);
    /// assert_eq!(g.axis_group(2, 1), [2, 3]);
    /// # Ok::<(), eddy_ops::Error>(())
    /// ```
    pub fn axis_group(&self, i: usize, axis: usize) -> Vec<usize> {
        let stride: usize = self.grid[axis + 1..].iter().product();
        let c = self.coord(i)[axis];
        let base = i - c * stride;
        (0..self.grid[axis]).map(|k| base + k * stride).collect()
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn rec(f: &mut fmt::Formatter<'_>, ranks: &[u32], grid: &[usize]) -> fmt::Result {
            f.write_str("[")?;
            let step = ranks.len() / grid[0];
            for (k, part) in ranks.chunks(step).enumerate() {
                if k > 0 {
                    f.write_str(", ")?;
                }
                if grid.len() == 1 {
                    write!(f, "{}", part[0])?;
                } else {
                    rec(f, part, &grid[1..])?;
                }
            }
            f.write_str("]")
        }
        write!(f, "{}:", self.kind)?;
        rec(f, &self.ranks, &self.grid)
    }
}
