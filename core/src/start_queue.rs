//! Starts waiting for GPUs ("start when GPUs are free"): first come, first
//! served within each group. Only a group's head is tried, so a small
//! start never overtakes a big one that came first; the head is tried only
//! when the group's quota has room for it (the node's room is the start's
//! own admission, which may still refuse: then the head keeps its place).

use serde::{Deserialize, Serialize};

/// One waiting start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waiting {
    /// The queue entry's id: ties in `queued_at` go to the older entry.
    pub id: i64,
    pub machine_id: i64,
    pub group_id: i64,
    pub queued_at: i64,
    pub gpus: u32,
}

/// `waiting` in serving order: by time queued, then by entry.
pub fn ordered(waiting: &[Waiting]) -> Vec<Waiting> {
    let mut all = waiting.to_vec();
    all.sort_by_key(|w| (w.queued_at, w.id));
    all
}

/// A machine's place in its group's line, 1 for the head.
pub fn place(waiting: &[Waiting], machine_id: i64) -> Option<usize> {
    let me = waiting.iter().find(|w| w.machine_id == machine_id)?;
    let ahead = waiting.iter().filter(|w| w.group_id == me.group_id && (w.queued_at, w.id) < (me.queued_at, me.id));
    Some(ahead.count() + 1)
}

/// The starts to try now: each group's head, if `free_quota(group)` GPUs
/// of its quota cover it. In serving order across groups.
pub fn to_try(waiting: &[Waiting], free_quota: impl Fn(i64) -> i64) -> Vec<Waiting> {
    let mut seen = Vec::new();
    let mut heads = Vec::new();
    for w in ordered(waiting) {
        if seen.contains(&w.group_id) {
            continue;
        }
        seen.push(w.group_id);
        if i64::from(w.gpus) <= free_quota(w.group_id) {
            heads.push(w);
        }
    }
    heads
}

/// 1st, 2nd, 3rd, 4th … 11th, 12th, 13th … 21st.
pub fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// What the machine's page says: "2nd in line in group ml".
pub fn describe(place: usize, group: &str) -> String {
    format!("{} in line in group {group}", ordinal(place))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn w(id: i64, machine_id: i64, group_id: i64, queued_at: i64, gpus: u32) -> Waiting {
        Waiting { id, machine_id, group_id, queued_at, gpus }
    }

    #[test]
    fn places_count_within_the_group_first_come_first() {
        let q = [w(3, 30, 1, 100, 1), w(1, 10, 1, 50, 2), w(2, 20, 2, 60, 1), w(4, 40, 1, 100, 1)];
        assert_eq!(place(&q, 10), Some(1));
        assert_eq!(place(&q, 30), Some(2));
        assert_eq!(place(&q, 40), Some(3));
        assert_eq!(place(&q, 20), Some(1));
        assert_eq!(place(&q, 99), None);
    }

    #[test]
    fn only_each_groups_head_is_tried_and_only_with_quota_for_it() {
        let q = [w(1, 10, 1, 50, 4), w(2, 20, 1, 60, 1), w(3, 30, 2, 70, 1)];
        // Group 1 has 2 GPUs free: its head needs 4, and the 1-GPU start
        // behind it does not overtake it.
        let tried = to_try(&q, |g| if g == 1 { 2 } else { 1 });
        assert_eq!(tried.iter().map(|t| t.machine_id).collect::<Vec<_>>(), vec![30]);
        let tried = to_try(&q, |_| 4);
        assert_eq!(tried.iter().map(|t| t.machine_id).collect::<Vec<_>>(), vec![10, 30]);
    }

    #[test]
    fn ordinals_read_as_english() {
        let got: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111].into_iter().map(ordinal).collect();
        assert_eq!(got, ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th"]);
        assert_eq!(describe(2, "ml"), "2nd in line in group ml");
    }

    proptest! {
        /// Places in a group are 1..=n, each once, in the order served.
        #[test]
        fn places_are_a_line(entries in proptest::collection::vec((0i64..3, 0i64..20, 1u32..4), 0..30)) {
            let q: Vec<Waiting> = entries.iter().enumerate()
                .map(|(i, (g, at, n))| w(i as i64, 100 + i as i64, *g, *at, *n)).collect();
            for g in 0..3 {
                let line: Vec<Waiting> = ordered(&q).into_iter().filter(|x| x.group_id == g).collect();
                for (i, x) in line.iter().enumerate() {
                    prop_assert_eq!(place(&q, x.machine_id), Some(i + 1));
                }
                let heads = to_try(&q, |_| i64::MAX);
                prop_assert_eq!(heads.iter().find(|h| h.group_id == g).map(|h| h.machine_id), line.first().map(|x| x.machine_id));
            }
        }
    }
}
