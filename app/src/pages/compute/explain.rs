//! The matcher's recorded decision (`gantry_core::matching::Decision`) in
//! words: which regions had a matching image, which had room, which had
//! both, how the shuffle chose — or why the task waits or was refused.

use gantry_core::{
    matching::{Decision, Outcome},
    task::TaskState,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// "Why here", "Why pending" or "Why refused".
    pub heading: String,
    /// One sentence: where it went, or the reason.
    pub summary: String,
    /// The sets the decision came from, one sentence each.
    pub details: Vec<String>,
}

fn list(regions: &[String]) -> String {
    if regions.is_empty() {
        "none".to_string()
    } else {
        regions.join(", ")
    }
}

/// Explains `d` for a task now in `state` with `message`. A region can be
/// chosen and the task still wait (the admission there refused, e.g. the
/// group's quota is used up); the task's message says so, and it wins.
pub fn explain(d: &Decision, state: TaskState, message: &str) -> Explanation {
    let sets = vec![
        format!("Regions with a matching image: {}.", list(&d.image_set)),
        format!("Regions with room: {}.", list(&d.resource_set)),
        format!("Both: {}.", list(&d.intersection)),
    ];
    match &d.outcome {
        Outcome::Rejected { reason } => {
            Explanation { heading: "Why refused".into(), summary: capitalise(reason), details: Vec::new() }
        }
        Outcome::Pending { reason } => {
            let mut details = sets;
            details.push(
                "The task is checked again whenever resources free up; the oldest waiting task of a group goes first."
                    .into(),
            );
            Explanation { heading: "Why pending".into(), summary: capitalise(reason), details }
        }
        Outcome::Placed { region, reference, .. } if state == TaskState::Pending => {
            let mut details = sets;
            details.push(format!("Region {region} was chosen (image {reference}); the task waits and is tried again."));
            let summary = if message.is_empty() {
                format!("Region {region} was chosen but could not take the task yet.")
            } else {
                capitalise(message)
            };
            Explanation { heading: "Why pending".into(), summary, details }
        }
        Outcome::Placed { region, reference, .. } => {
            let mut details = sets;
            details.push(format!("Shuffled with seed {}: {}; chose {region}.", d.seed, list(&d.shuffled)));
            Explanation {
                heading: "Why here".into(),
                summary: format!("Runs in region {region}, from image {reference}."),
                details,
            }
        }
    }
}

fn capitalise(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(outcome: Outcome) -> Decision {
        Decision {
            image_set: vec!["eu".into(), "local".into()],
            resource_set: vec!["local".into(), "us".into()],
            intersection: vec!["local".into()],
            shuffled: vec!["local".into()],
            seed: 42,
            outcome,
        }
    }

    #[test]
    fn placed_names_the_sets_and_the_shuffle() {
        let d = decision(Outcome::Placed {
            region: "local".into(),
            region_image_id: 1,
            reference: "gantry/devbox:latest".into(),
        });
        let e = explain(&d, TaskState::Running, "");
        assert_eq!(e.heading, "Why here");
        assert_eq!(e.summary, "Runs in region local, from image gantry/devbox:latest.");
        assert_eq!(
            e.details,
            vec![
                "Regions with a matching image: eu, local.".to_string(),
                "Regions with room: local, us.".to_string(),
                "Both: local.".to_string(),
                "Shuffled with seed 42: local; chose local.".to_string(),
            ]
        );
    }

    #[test]
    fn pending_gives_the_reason_and_refused_only_the_reason() {
        let d = Decision {
            resource_set: vec![],
            intersection: vec![],
            shuffled: vec![],
            ..decision(Outcome::Pending {
                reason: "regions with a matching image: eu, local; none has 4 free GPU(s)".into(),
            })
        };
        let e = explain(&d, TaskState::Pending, "");
        assert_eq!(e.heading, "Why pending");
        assert_eq!(e.summary, "Regions with a matching image: eu, local; none has 4 free GPU(s)");
        assert!(e.details.contains(&"Regions with room: none.".to_string()));

        let d = decision(Outcome::Rejected { reason: "no image matches framework X 1 / interpreter Y 2".into() });
        let e = explain(&d, TaskState::Failed, "no image matches framework X 1 / interpreter Y 2");
        assert_eq!(
            (e.heading.as_str(), e.summary.as_str()),
            ("Why refused", "No image matches framework X 1 / interpreter Y 2")
        );
        assert!(e.details.is_empty());
    }

    #[test]
    fn chosen_but_refused_by_admission_waits_with_the_message() {
        let d = decision(Outcome::Placed { region: "local".into(), region_image_id: 1, reference: "img".into() });
        let e = explain(
            &d,
            TaskState::Pending,
            "region local chosen, but: group default holds 2 of 2 GPUs; this machine asks for 1",
        );
        assert_eq!(e.heading, "Why pending");
        assert_eq!(e.summary, "Region local chosen, but: group default holds 2 of 2 GPUs; this machine asks for 1");
        assert_eq!(
            e.details.last().unwrap(),
            "Region local was chosen (image img); the task waits and is tried again."
        );
    }
}
