//! Regions, region images and the master image catalogue: the admin
//! forms' choices and the small pure helpers their pages render with
//! (pages render the platform's catalogue views directly).

/// Architectures a region image or a node may have; the first is the default.
pub const ARCHES: [&str; 2] = ["amd64", "arm64"];

/// A select's value that must be an id from its list.
pub fn parse_choice(what: &str, value: &str) -> Result<i64, String> {
    value.trim().parse::<i64>().map_err(|_| format!("choose {what} from the list"))
}

/// "2 of 3 ready".
pub fn nodes_label(nodes: i64, ready: i64) -> String {
    match nodes {
        0 => "no nodes".to_string(),
        n => format!("{ready} of {n} ready"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_read_as_people_say_them() {
        assert_eq!(nodes_label(0, 0), "no nodes");
        assert_eq!(nodes_label(3, 2), "2 of 3 ready");
    }

    #[test]
    fn choices_parse() {
        assert_eq!(parse_choice("a region image", " 7 "), Ok(7));
        assert_eq!(parse_choice("a region image", "").unwrap_err(), "choose a region image from the list");
        assert_eq!(parse_choice("a region image", "seven").unwrap_err(), "choose a region image from the list");
    }

    #[test]
    fn choices_match_the_rules_the_server_applies() {
        for a in ARCHES {
            assert!(a.parse::<gantry_core::matching::Arch>().is_ok(), "{a}");
        }
        // The image types the form offers are the core's, which the platform checks.
        let kinds: Vec<&str> = gantry_core::matching::ImageKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(kinds, ["training", "inference", "notebook", "other"]);
    }
}
