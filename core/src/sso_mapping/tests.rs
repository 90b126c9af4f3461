use super::*;
use proptest::prelude::*;

fn m(id: i64, dir: &str, group: &str, role: Role, priority: i64) -> Mapping {
    Mapping { id, directory_group: dir.into(), gantry_group: group.into(), role, priority }
}

fn groups(gs: &[&str]) -> Vec<String> {
    gs.iter().map(|g| g.to_string()).collect()
}

#[test]
fn an_account_in_no_mapped_group_gets_nothing() {
    let maps = [m(1, "cn=ml,ou=groups,dc=example,dc=org", "ml", Role::User, 10)];
    assert_eq!(decide(&maps, &groups(&["cn=hr,ou=groups,dc=example,dc=org"])), None);
    assert_eq!(decide(&maps, &[]), None);
    assert_eq!(decide(&[], &groups(&["anything"])), None);
}

#[test]
fn a_mapped_group_gives_its_group_and_role() {
    let maps = [m(1, "cn=ml,ou=groups,dc=example,dc=org", "ml", Role::User, 10)];
    let d = decide(&maps, &groups(&["CN=ML,OU=Groups,DC=example,DC=org "])).unwrap();
    assert_eq!(d, Decision { group: "ml".into(), role: Role::User, via: "cn=ml,ou=groups,dc=example,dc=org".into() });
}

#[test]
fn the_lowest_priority_number_chooses_the_group_then_the_first_added() {
    let maps = [
        m(1, "vision", "vision", Role::User, 20),
        m(2, "nlp", "nlp", Role::User, 10),
        m(3, "speech", "speech", Role::User, 10),
    ];
    assert_eq!(decide(&maps, &groups(&["vision", "speech", "nlp"])).unwrap().group, "nlp");
    assert_eq!(decide(&maps, &groups(&["vision", "speech"])).unwrap().group, "speech");
    assert_eq!(decide(&maps, &groups(&["vision"])).unwrap().group, "vision");
}

#[test]
fn admin_from_any_matching_mapping() {
    let maps = [m(1, "nlp", "nlp", Role::User, 1), m(2, "gantry-admins", "ops", Role::Admin, 99)];
    let d = decide(&maps, &groups(&["nlp", "gantry-admins"])).unwrap();
    assert_eq!((d.group.as_str(), d.role), ("nlp", Role::Admin));
    let d = decide(&maps, &groups(&["gantry-admins"])).unwrap();
    assert_eq!((d.group.as_str(), d.role), ("ops", Role::Admin));
    assert_eq!(decide(&maps, &groups(&["nlp"])).unwrap().role, Role::User);
}

#[test]
fn directory_group_strings_are_checked() {
    assert_eq!(check_directory_group("  cn=a,dc=b ").unwrap(), "cn=a,dc=b");
    assert!(check_directory_group("   ").is_err());
    assert!(check_directory_group("a\nb").is_err());
    assert!(check_directory_group(&"x".repeat(DIRECTORY_GROUP_MAX + 1)).is_err());
}

proptest! {
    /// Whatever the order of the account's groups or of the mappings, the
    /// decision is the same, comes from a mapping that matches, and is
    /// admin exactly when some matching mapping is.
    #[test]
    fn decision_is_order_free_and_from_a_match(
        specs in prop::collection::vec((0usize..6, 0i64..4, any::<bool>()), 0..8),
        member in prop::collection::vec(0usize..6, 0..6),
        rot in 0usize..8,
    ) {
        let names = ["a", "b", "c", "d", "e", "f"];
        let maps: Vec<Mapping> = specs.iter().enumerate().map(|(i, (g, p, admin))| {
            m(i as i64 + 1, names[*g], &format!("g{i}"), if *admin { Role::Admin } else { Role::User }, *p)
        }).collect();
        let account: Vec<String> = member.iter().map(|g| names[*g].to_uppercase()).collect();
        let d = decide(&maps, &account);
        let mut rotated = maps.clone();
        if !rotated.is_empty() { let k = rot % rotated.len(); rotated.rotate_left(k); }
        let mut reversed = account.clone();
        reversed.reverse();
        prop_assert_eq!(&d, &decide(&rotated, &reversed));
        let matching: Vec<&Mapping> = maps.iter().filter(|x| account.iter().any(|g| same_group(g, &x.directory_group))).collect();
        match d {
            None => prop_assert!(matching.is_empty()),
            Some(d) => {
                prop_assert!(matching.iter().any(|x| x.gantry_group == d.group));
                prop_assert_eq!(d.role.is_admin(), matching.iter().any(|x| x.role.is_admin()));
            }
        }
    }
}
