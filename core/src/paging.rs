//! Windows over long lists. The portal never renders a whole table: it asks
//! for one page of rows plus the counts, so a page costs the same with 50 or
//! 50,000 rows behind it. The numbers here come from query strings, i.e.
//! from anyone, so every value is clamped rather than trusted.

use serde::{Deserialize, Serialize};

/// Rows on a page when the request does not say.
pub const DEFAULT_PER_PAGE: i64 = 50;
/// The most rows one page may ask for.
pub const MAX_PER_PAGE: i64 = 200;
/// Pages past this are refused (the offset would make SQLite walk too far).
pub const MAX_PAGE: i64 = 100_000;

/// Which page (1-based) and how many rows on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageRequest {
    pub page: i64,
    pub per_page: i64,
}

impl PageRequest {
    /// From raw query values: missing, garbage or out-of-range numbers fall
    /// back to the nearest sensible page rather than an error, as links can
    /// be edited by hand.
    pub fn parse(page: Option<&str>, per_page: Option<&str>) -> PageRequest {
        let num = |s: Option<&str>| s.and_then(|v| v.trim().parse::<i64>().ok());
        PageRequest {
            page: num(page).unwrap_or(1).clamp(1, MAX_PAGE),
            per_page: num(per_page).unwrap_or(DEFAULT_PER_PAGE).clamp(1, MAX_PER_PAGE),
        }
    }

    pub fn offset(self) -> i64 {
        (self.page - 1) * self.per_page
    }
}

impl Default for PageRequest {
    fn default() -> Self {
        PageRequest { page: 1, per_page: DEFAULT_PER_PAGE }
    }
}

/// Pages needed for `total` rows (at least one, so "page 1 of 1" reads
/// right for an empty list).
pub fn page_count(total: i64, per_page: i64) -> i64 {
    if total <= 0 || per_page <= 0 {
        1
    } else {
        (total + per_page - 1) / per_page
    }
}

/// What one page of a list holds, for the pager's "Showing 51–100 of 230".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageSpan {
    /// Rows `first` to `last` (1-based); `0–0` for an empty list.
    Rows { first: i64, last: i64 },
    /// Nothing: the list ends on `last_page`.
    PastEnd { last_page: i64 },
}

/// A page past the last (an old link, or rows deleted since) is not a
/// backwards "101–5": it says where the list ends, so the pager can link
/// there and the page need not claim the list is empty.
pub fn page_span(total: i64, page: i64, per_page: i64) -> PageSpan {
    let last_page = page_count(total, per_page);
    if page > last_page {
        return PageSpan::PastEnd { last_page };
    }
    let first = if total == 0 { 0 } else { (page - 1) * per_page + 1 };
    PageSpan::Rows { first, last: (page * per_page).min(total) }
}

/// A filter value from a query string: empty means "any"; otherwise it must
/// be one of `allowed` (states, kinds) so that a typo is reported instead of
/// silently matching nothing.
pub fn choice<'a>(what: &str, value: Option<&'a str>, allowed: &[&str]) -> Result<Option<&'a str>, String> {
    match value.map(str::trim) {
        None | Some("") => Ok(None),
        Some(v) if allowed.contains(&v) => Ok(Some(v)),
        Some(v) => Err(format!("unknown {what} {v:?}: expected one of {}", allowed.join(", "))),
    }
}

/// A free-text filter (a user or group name): trimmed, empty means "any",
/// bounded so a hostile query cannot make every page do a long compare.
pub fn name_filter(value: Option<&str>) -> Option<String> {
    value.map(str::trim).filter(|v| !v.is_empty()).map(|v| v.chars().take(64).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn missing_or_garbage_numbers_give_the_first_page() {
        assert_eq!(PageRequest::parse(None, None), PageRequest::default());
        assert_eq!(PageRequest::parse(Some("abc"), Some("-5")), PageRequest { page: 1, per_page: 1 });
        assert_eq!(PageRequest::parse(Some("0"), Some("100000")), PageRequest { page: 1, per_page: MAX_PER_PAGE });
        assert_eq!(PageRequest::parse(Some(" 3 "), Some("20")).offset(), 40);
    }

    #[test]
    fn page_count_rounds_up_and_is_never_zero() {
        assert_eq!(page_count(0, 50), 1);
        assert_eq!(page_count(50, 50), 1);
        assert_eq!(page_count(51, 50), 2);
        assert_eq!(page_count(50_000, 50), 1000);
    }

    #[test]
    fn a_page_past_the_end_says_so_instead_of_a_backwards_range() {
        // 5 rows, 50 a page: page 3 would read "Showing 101–5 of 5".
        assert_eq!(page_span(5, 3, 50), PageSpan::PastEnd { last_page: 1 });
        assert_eq!(page_span(120, 4, 50), PageSpan::PastEnd { last_page: 3 });
        assert_eq!(page_span(0, 2, 50), PageSpan::PastEnd { last_page: 1 });
        assert_eq!(page_span(5, 1, 50), PageSpan::Rows { first: 1, last: 5 });
        assert_eq!(page_span(120, 3, 50), PageSpan::Rows { first: 101, last: 120 });
        assert_eq!(page_span(0, 1, 50), PageSpan::Rows { first: 0, last: 0 }, "an empty list is not past its end");
    }

    #[test]
    fn choices_name_the_allowed_values() {
        let states = ["running", "stopped"];
        assert_eq!(choice("state", Some(""), &states), Ok(None));
        assert_eq!(choice("state", Some("running"), &states), Ok(Some("running")));
        let err = choice("state", Some("runing"), &states).unwrap_err();
        assert!(err.contains("unknown state \"runing\"") && err.contains("running, stopped"), "{err}");
    }

    #[test]
    fn name_filters_are_trimmed_and_bounded() {
        assert_eq!(name_filter(Some("  ")), None);
        assert_eq!(name_filter(Some(" alice ")), Some("alice".into()));
        assert_eq!(name_filter(Some(&"x".repeat(500))).unwrap().len(), 64);
    }

    proptest! {
        /// Whatever the query says, the window stays inside the bounds and
        /// consecutive pages never overlap.
        #[test]
        fn windows_are_bounded_and_disjoint(page in any::<i64>(), per in any::<i64>()) {
            let r = PageRequest::parse(Some(&page.to_string()), Some(&per.to_string()));
            prop_assert!((1..=MAX_PAGE).contains(&r.page));
            prop_assert!((1..=MAX_PER_PAGE).contains(&r.per_page));
            prop_assert!(r.offset() >= 0);
            let next = PageRequest { page: r.page + 1, ..r };
            prop_assert_eq!(next.offset() - r.offset(), r.per_page);
        }

        /// A page either shows a forward range inside the list, of at most
        /// one page of rows, or is past the end and names a page that is not.
        #[test]
        fn a_span_is_inside_the_list_or_points_back_into_it(total in 0..1_000_000i64, page in any::<i64>()) {
            let r = PageRequest::parse(Some(&page.to_string()), None);
            match page_span(total, r.page, r.per_page) {
                PageSpan::Rows { first, last } => {
                    prop_assert!(first <= last && last <= total);
                    prop_assert!(total == 0 || (first >= 1 && last - first < r.per_page));
                    prop_assert_eq!(first, if total == 0 { 0 } else { r.offset() + 1 });
                }
                PageSpan::PastEnd { last_page } => {
                    prop_assert!(r.page > last_page);
                    prop_assert_eq!(last_page, page_count(total, r.per_page));
                    let back_inside = matches!(page_span(total, last_page, r.per_page), PageSpan::Rows { .. });
                    prop_assert!(back_inside);
                }
            }
        }
    }
}
