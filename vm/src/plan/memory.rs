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
    /// Pairs `(a, b)` of temporaries placed at the same offset although both are live at one
    /// step: the step that reads `a` for the last time writes `b` over it, in place (its
    /// kernel says it may: [`Kernel::may_alias`](crate::instruction::Kernel::may_alias)).
    pub shares: Vec<(usize, usize)>,
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
        MemoryLayout::pack_sharing(sizes, lifetimes, Vec::new())
    }

    /// [`pack`](Self::pack), with each pair `(a, b)` of `shares` placed at one offset: `b` is
    /// written, in place, over `a` by the step where `a`'s lifetime ends and `b`'s begins. A
    /// chain of such pairs shares one place. Pairs that do not meet that way are ignored (and
    /// left out of the layout's [`shares`](Self::shares)).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::plan::MemoryLayout;
    /// // t0 → t1 → t2, each step writing its output over its input.
    /// let lifetimes = vec![(0, 1), (1, 2), (2, 3)];
    /// let m = MemoryLayout::pack_sharing(vec![256; 3], lifetimes.clone(), vec![(0, 1), (1, 2)]);
    /// assert_eq!(m.arena, 256, "one place for the three");
    /// m.check().unwrap();
    /// assert_eq!(MemoryLayout::pack(vec![256; 3], lifetimes).arena, 512);
    /// ```
    pub fn pack_sharing(
        sizes: Vec<usize>,
        lifetimes: Vec<(usize, usize)>,
        shares: Vec<(usize, usize)>,
    ) -> MemoryLayout {
        // Each temporary's group: itself, or the place it shares with its chain.
        let n = sizes.len();
        let mut group: Vec<usize> = (0..n).collect();
        let mut kept = Vec::with_capacity(shares.len());
        let (mut taken_in, mut taken_out) = (vec![false; n], vec![false; n]);
        for (a, b) in shares {
            let meets = a < n
                && b < n
                && a != b
                && lifetimes[a].1 == lifetimes[b].0
                && lifetimes[a].0 < lifetimes[b].0
                && sizes[a] == sizes[b]
                && sizes[a] > 0
                && !taken_in[a]
                && !taken_out[b];
            if meets {
                taken_in[a] = true;
                taken_out[b] = true;
                kept.push((a, b));
            }
        }
        // Chains run forward in time: a pair's first member is born before its second.
        let mut by_birth = kept.clone();
        by_birth.sort_by_key(|&(a, _)| lifetimes[a].0);
        for &(a, b) in &by_birth {
            group[b] = group[a];
        }
        let mut group_size = vec![0usize; n];
        let mut group_life: Vec<Option<(usize, usize)>> = vec![None; n];
        for k in 0..n {
            let g = group[k];
            group_size[g] = group_size[g].max(sizes[k]);
            let (f, l) = lifetimes[k];
            group_life[g] = Some(group_life[g].map_or((f, l), |(a, b)| (a.min(f), b.max(l))));
        }
        let placed = pack_disjoint(
            &group_size,
            &(group_life.iter())
                .map(|l| l.unwrap_or((0, 0)))
                .collect::<Vec<_>>(),
        );
        let offsets = (0..n).map(|k| placed.0[group[k]]).collect();
        MemoryLayout {
            sizes,
            lifetimes,
            offsets,
            arena: placed.1,
            shares: kept,
        }
    }
}

/// The offsets and the arena size of temporaries of `sizes` bytes live over `lifetimes`, none
/// sharing a byte with one live at the same step (see [`MemoryLayout::pack`]).
fn pack_disjoint(sizes: &[usize], lifetimes: &[(usize, usize)]) -> (Vec<usize>, usize) {
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
    (offsets, arena)
}

impl MemoryLayout {
    /// Checks the layout: every temporary inside the arena and aligned, and no two whose
    /// lifetimes overlap sharing a byte, except a pair of [`shares`](Self::shares) laid out
    /// as one (the same bytes; lifetimes that meet only at the step writing one over the
    /// other).
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
                if bytes
                    && overlap(self.lifetimes[i], self.lifetimes[j])
                    && !self.written_over(i, j)
                {
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

impl MemoryLayout {
    /// Whether `i` and `j` are a pair of [`shares`](Self::shares) laid out as one: the same
    /// bytes, and lifetimes that meet at the one step that writes the second over the first.
    fn written_over(&self, i: usize, j: usize) -> bool {
        let (a, b) = if self.lifetimes[i].0 <= self.lifetimes[j].0 {
            (i, j)
        } else {
            (j, i)
        };
        self.shares.contains(&(a, b))
            && self.offsets[a] == self.offsets[b]
            && self.sizes[a] == self.sizes[b]
            && self.lifetimes[a].1 == self.lifetimes[b].0
            && self.lifetimes[a].0 < self.lifetimes[b].0
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

    #[test]
    fn a_value_written_over_its_input_shares_its_place_and_nothing_else() {
        // t0 → t1 → t2 in place; t3 lives beside them; (t3, t4) cannot share: t3 lives on
        // after t4 is made; (t1, t5) cannot: t5 is of another size.
        let sizes = vec![128, 128, 128, 64, 64, 256];
        let lifetimes = vec![(0, 1), (1, 2), (2, 4), (0, 4), (2, 3), (2, 3)];
        let shares = vec![(0, 1), (1, 2), (3, 4), (1, 5)];
        let m = MemoryLayout::pack_sharing(sizes.clone(), lifetimes.clone(), shares);
        m.check().unwrap();
        assert_eq!(m.shares, [(0, 1), (1, 2)]);
        assert!(m.offsets[0] == m.offsets[1] && m.offsets[1] == m.offsets[2]);
        assert_eq!(m.arena, 128 + 64 + 64 + 256);
        // Moved apart, or claimed where they are not, the pairs fail the check.
        let mut moved = m.clone();
        moved.offsets[1] += 64;
        assert!(moved.check().is_err());
        let mut claimed = MemoryLayout::pack(sizes, lifetimes);
        claimed.offsets[4] = claimed.offsets[3];
        claimed.shares = vec![(3, 4)];
        assert!(claimed.check().is_err(), "t3 lives on after t4 is made");
    }
}
