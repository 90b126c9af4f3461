//! A snapshot's origin and state, as the `snapshots` table stores them
//! (migration 0008's CHECK constraints name the same words).

use crate::task::string_enum;

string_enum! {
    /// Who asked for a snapshot.
    SnapshotOrigin, "snapshot origin" {
        /// A person took it (counted against the group's snapshot quota).
        User => "user",
        /// Idle reclaim took it: its machine's restore point, which only the
        /// machine's restore uses.
        Reclaim => "reclaim",
    }
}

string_enum! {
    /// Where a snapshot is in its life.
    SnapshotState, "snapshot state" {
        /// Its container is being committed.
        Creating => "creating",
        /// The image is on its node: machines can be made from it.
        Ready => "ready",
        /// The commit failed (the message says why), or it is being deleted.
        Failed => "failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip() {
        for s in SnapshotState::ALL {
            assert_eq!(s.as_str().parse::<SnapshotState>().unwrap(), *s);
        }
        assert_eq!(SnapshotOrigin::try_from("reclaim".to_string()).unwrap(), SnapshotOrigin::Reclaim);
        assert!("deleted".parse::<SnapshotState>().is_err());
    }
}
