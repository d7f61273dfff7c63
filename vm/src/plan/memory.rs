//! The memory plan: where each temporary of a plan lives in its arena, packed by lifetime.

/// Where each temporary of a plan lives in its arena, from the temporaries' lifetimes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryLayout {
    /// Each temporary's size in bytes.
    pub sizes: Vec<usize>,
    /// Each temporary's lifetime: the first and last step that touches it (inclusive).
    pub lifetimes: Vec<(usize, usize)>,
    /// Each temporary's offset in the arena.
    pub offsets: Vec<usize>,
    /// The arena's size in bytes.
    pub arena: usize,
}

/// Offsets and sizes in an arena are multiples of this many bytes.
pub const ARENA_ALIGN: usize = 64;

impl MemoryLayout {
    /// Packs temporaries of `sizes` bytes live over `lifetimes` into one arena: the largest
    /// first, each at the lowest aligned offset where it overlaps no placed temporary whose
    /// lifetime overlaps its own. Temporaries whose lifetimes are disjoint may share bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::plan::MemoryLayout;
    /// // Three temporaries: 0 and 2 are never live at once and share memory.
    /// let m = MemoryLayout::pack(vec![100, 64, 100], vec![(0, 1), (1, 2), (2, 3)]);
    /// assert_eq!(m.offsets[0], m.offsets[2]);
    /// assert_eq!(m.arena, 128 + 64);
    /// m.check().unwrap();
    /// ```
    pub fn pack(sizes: Vec<usize>, lifetimes: Vec<(usize, usize)>) -> MemoryLayout {
        let round = |n: usize| n.div_ceil(ARENA_ALIGN) * ARENA_ALIGN;
        let mut order: Vec<usize> = (0..sizes.len()).collect();
        order.sort_by_key(|&k| (std::cmp::Reverse(round(sizes[k])), lifetimes[k].0, k));
        let mut offsets = vec![0usize; sizes.len()];
        // The placed temporaries live at each step, and a mark per temporary (the last
        // temporary whose neighbours it was collected for), so that finding the placed ones
        // live at once costs the steps spanned, not the count placed.
        let steps = lifetimes.iter().map(|l| l.1 + 1).max().unwrap_or(0);
        let mut live_at: Vec<Vec<usize>> = vec![Vec::new(); steps];
        let mut mark = vec![usize::MAX; sizes.len()];
        let mut busy: Vec<(usize, usize)> = Vec::new();
        let mut arena = 0usize;
        for k in order {
            let size = round(sizes[k]);
            if size == 0 {
                continue;
            }
            // The placed ones live at the same time, by offset.
            busy.clear();
            let (first, last) = lifetimes[k];
            for live in &live_at[first..=last] {
                for &j in live {
                    if mark[j] != k {
                        mark[j] = k;
                        busy.push((offsets[j], offsets[j] + round(sizes[j])));
                    }
                }
            }
            busy.sort_unstable();
            let mut at = 0usize;
            for &(lo, hi) in &busy {
                if at + size <= lo {
                    break;
                }
                at = at.max(hi);
            }
            offsets[k] = at;
            arena = arena.max(at + size);
            for live in &mut live_at[first..=last] {
                live.push(k);
            }
        }
        MemoryLayout {
            sizes,
            lifetimes,
            offsets,
            arena,
        }
    }

    /// Checks the layout: every temporary inside the arena and aligned, and no two whose
    /// lifetimes overlap sharing a byte.
    ///
    /// # Errors
    ///
    /// A message naming the first two temporaries that collide, or the one out of place.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::plan::MemoryLayout;
    /// let mut m = MemoryLayout::pack(vec![64, 64], vec![(0, 1), (1, 2)]);
    /// m.check().unwrap();
    /// m.offsets[1] = m.offsets[0]; // both live at step 1
    /// assert!(m.check().is_err());
    /// ```
    pub fn check(&self) -> std::result::Result<(), String> {
        let n = self.sizes.len();
        for i in 0..n {
            let (oi, si) = (self.offsets[i], self.sizes[i]);
            if si > 0 && (oi % ARENA_ALIGN != 0 || oi + si > self.arena) {
                return Err(format!(
                    "temporary {i} ({si} bytes at {oi}) is outside the arena of {} bytes or unaligned",
                    self.arena
                ));
            }
            for j in i + 1..n {
                let (oj, sj) = (self.offsets[j], self.sizes[j]);
                let bytes = si > 0 && sj > 0 && oi < oj + sj && oj < oi + si;
                if bytes && overlap(self.lifetimes[i], self.lifetimes[j]) {
                    return Err(format!(
                        "temporaries {i} ({si} bytes at {oi}, steps {:?}) and {j} ({sj} bytes at \
                         {oj}, steps {:?}) are live at once and share bytes",
                        self.lifetimes[i], self.lifetimes[j]
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Whether two inclusive step ranges share a step.
fn overlap(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 <= b.1 && b.0 <= a.1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_keeps_live_temporaries_apart() {
        // Lifetimes that chain, nest and cross; sizes that are and are not aligned.
        let sizes = vec![10, 200, 64, 65, 1, 0, 128, 300];
        let lifetimes = vec![
            (0, 3),
            (1, 2),
            (2, 6),
            (4, 5),
            (0, 9),
            (3, 3),
            (6, 8),
            (7, 9),
        ];
        let m = MemoryLayout::pack(sizes.clone(), lifetimes.clone());
        m.check().unwrap();
        let total: usize = sizes
            .iter()
            .map(|s| s.div_ceil(ARENA_ALIGN) * ARENA_ALIGN)
            .sum();
        assert!(
            m.arena < total,
            "some bytes are shared: {} < {total}",
            m.arena
        );
    }
}
