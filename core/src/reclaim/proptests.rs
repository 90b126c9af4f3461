use super::*;
use proptest::prelude::*;

const NOW: i64 = 1_000_000;

fn arb_settings() -> impl Strategy<Value = ReclaimSettings> {
    (0.0f64..50.0, 60i64..20_000, 0i64..5_000, 0u32..4).prop_map(
        |(threshold_pct, window_secs, grace_secs, extensions_allowed)| ReclaimSettings {
            enabled: true,
            threshold_pct,
            window_secs,
            grace_secs,
            extensions_allowed,
            extension_secs: 600,
        },
    )
}

/// Samples anywhere around the window, utilisation anywhere in 0..100.
fn arb_samples() -> impl Strategy<Value = Vec<UtilSample>> {
    prop::collection::vec(
        (NOW - 25_000..=NOW, 0.0f64..100.0).prop_map(|(at, util_pct)| UtilSample { at, util_pct }),
        0..200,
    )
}

fn arb_standing() -> impl Strategy<Value = Standing> {
    (NOW - 30_000..=NOW, prop::option::of(NOW - 10_000..NOW + 10_000), 0u32..5, any::<bool>()).prop_map(
        |(active_since, deadline, extensions_used, exempt)| Standing {
            active_since,
            deadline,
            extensions_used,
            exempt,
        },
    )
}

proptest! {
    /// The promise made to users: any sample above the threshold in the
    /// window means no warning and no reclaim.
    #[test]
    fn never_reclaims_or_warns_with_a_busy_sample(s in arb_settings(), mut samples in arb_samples(), st in arb_standing(), at in 0i64..20_000, extra in 0.001f64..50.0) {
        let at = NOW - at.min(s.window_secs);
        samples.push(UtilSample { at, util_pct: s.threshold_pct + extra });
        let d = decide(&samples, &s, &st, NOW);
        prop_assert!(!matches!(d, Decision::Reclaim { .. } | Decision::Warn { .. }), "{d:?}");
    }

    #[test]
    fn exempt_machines_are_never_reclaimed(s in arb_settings(), samples in arb_samples(), mut st in arb_standing()) {
        st.exempt = true;
        let d = decide(&samples, &s, &st, NOW);
        prop_assert!(matches!(d, Decision::Ok | Decision::Clear { .. }), "{d:?}");
    }

    /// A reclaim happens only to a warned machine whose deadline passed,
    /// with a peak at or under the threshold.
    #[test]
    fn reclaim_needs_a_passed_deadline(s in arb_settings(), samples in arb_samples(), st in arb_standing()) {
        if let Decision::Reclaim { peak_pct } = decide(&samples, &s, &st, NOW) {
            prop_assert!(st.deadline.is_some_and(|d| d <= NOW));
            prop_assert!(peak_pct <= s.threshold_pct);
        }
    }

    /// Warnings always leave the owner the whole grace period.
    #[test]
    fn warnings_give_the_grace_period(s in arb_settings(), samples in arb_samples(), st in arb_standing()) {
        if let Decision::Warn { until, .. } = decide(&samples, &s, &st, NOW) {
            prop_assert_eq!(until, NOW + s.grace_secs);
            prop_assert!(st.deadline.is_none());
        }
    }

    #[test]
    fn extensions_never_exceed_the_limit_and_never_shorten(s in arb_settings(), st in arb_standing()) {
        match extend(&s, &st, NOW) {
            Ok(until) => {
                prop_assert!(st.extensions_used < s.extensions_allowed);
                prop_assert!(until > st.deadline.unwrap() && until > NOW);
            }
            Err(_) => prop_assert!(st.deadline.is_none() || st.extensions_used >= s.extensions_allowed),
        }
    }
}
