//! Which pre-formatted data-volume image the per-node pool makes next
//! (issue 35 part 4). The pool keeps up to `target` images of each size
//! class, and all of its files together may take at most `budget_bytes` of
//! disk (allocated blocks, what `du` counts: a fresh ext4 image is sparse,
//! so a 10 GB one takes about 70 MB, mostly its journal).

/// One size class as the pool directory shows it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Class {
    pub size_gb: i64,
    /// Ready images of this size in the pool.
    pub ready: usize,
    /// Disk one image of this size took when last made; `None` until one
    /// was (the first is made and measured, then dropped if over budget).
    pub bytes_each: Option<u64>,
}

/// The size to make next, or `None` when every class is full or one more
/// image would pass the budget. The emptiest class (fewest ready against
/// the target) goes first, so a burst on one size does not starve the
/// others; ties go to the smaller size (cheaper to make, quicker ready).
pub fn next_to_make(classes: &[Class], target: usize, used_bytes: u64, budget_bytes: u64) -> Option<i64> {
    classes
        .iter()
        .filter(|c| c.size_gb > 0 && c.ready < target)
        .filter(|c| used_bytes.saturating_add(c.bytes_each.unwrap_or(0)) <= budget_bytes)
        .filter(|c| c.bytes_each.is_some() || used_bytes < budget_bytes)
        .min_by_key(|c| (c.ready, c.size_gb))
        .map(|c| c.size_gb)
}

/// The size classes from a flag's list ("10,20"): positive, deduplicated,
/// in ascending order; an empty list is no class (the pool is off).
pub fn parse_classes(list: &str) -> Result<Vec<i64>, String> {
    let mut sizes = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let size: i64 =
            part.parse().map_err(|_| format!("volume pool size class {part:?} is not a whole number of GB"))?;
        if !(1..=4096).contains(&size) {
            return Err(format!("volume pool size class {size} GB is outside 1 to 4096"));
        }
        sizes.push(size);
    }
    sizes.sort_unstable();
    sizes.dedup();
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn class(size_gb: i64, ready: usize, bytes_each: Option<u64>) -> Class {
        Class { size_gb, ready, bytes_each }
    }

    #[test]
    fn emptiest_class_first_then_full() {
        let classes = [class(10, 2, Some(70)), class(20, 1, Some(140))];
        assert_eq!(next_to_make(&classes, 4, 0, 10_000), Some(20));
        let full = [class(10, 4, Some(70)), class(20, 4, Some(140))];
        assert_eq!(next_to_make(&full, 4, 0, 10_000), None);
        assert_eq!(next_to_make(&classes, 0, 0, 10_000), None, "a target of 0 turns the pool off");
    }

    #[test]
    fn budget_bounds_what_is_made() {
        let classes = [class(10, 0, Some(70))];
        assert_eq!(next_to_make(&classes, 4, 930, 1000), Some(10));
        assert_eq!(next_to_make(&classes, 4, 931, 1000), None);
        // Unmeasured: made only while some budget is left; the maker drops it if it did not fit.
        let new = [class(10, 0, None)];
        assert_eq!(next_to_make(&new, 4, 999, 1000), Some(10));
        assert_eq!(next_to_make(&new, 4, 1000, 1000), None);
        assert_eq!(next_to_make(&new, 4, 0, 0), None, "a budget of 0 turns the pool off");
    }

    #[test]
    fn classes_from_the_flag() {
        assert_eq!(parse_classes("20, 10,10"), Ok(vec![10, 20]));
        assert_eq!(parse_classes(""), Ok(vec![]));
        assert!(parse_classes("0").is_err());
        assert!(parse_classes("ten").is_err());
        assert!(parse_classes("4097").is_err());
    }

    proptest! {
        /// Whatever the state, the choice is a class below its target whose
        /// known size still fits the budget.
        #[test]
        fn choice_is_below_target_and_fits(
            ready in proptest::collection::vec((1i64..64, 0usize..6, proptest::option::of(0u64..500)), 0..5),
            target in 0usize..6, used in 0u64..2000, budget in 0u64..2000,
        ) {
            let classes: Vec<Class> = ready.iter().map(|&(s, r, b)| class(s, r, b)).collect();
            if let Some(size) = next_to_make(&classes, target, used, budget) {
                let c = classes.iter().find(|c| c.size_gb == size && c.ready < target).unwrap();
                prop_assert!(used + c.bytes_each.unwrap_or(0) <= budget);
                prop_assert!(used < budget || c.bytes_each == Some(0));
            }
        }
    }
}
