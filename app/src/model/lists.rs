//! Long lists travel a window at a time: the rows of one page, the counts
//! per state, and the query that produced them (so links keep filters).

use serde::{Deserialize, Serialize};

/// A list page's query string, as typed or clicked: every value optional
/// and unchecked here (the server checks and clamps).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListQuery {
    pub state: Option<String>,
    pub user: Option<String>,
    pub group: Option<String>,
    pub kind: Option<String>,
    pub page: Option<String>,
}

impl ListQuery {
    /// `base?k=v&…` with this query's filters, `page` replaced by `page`
    /// (`None` drops it) and `state` replaced when `state` is `Some`.
    pub fn href(&self, base: &str, state: Option<Option<&str>>, page: Option<i64>) -> String {
        let state = match state {
            Some(s) => s.map(str::to_string),
            None => self.state.clone(),
        };
        let page = page.filter(|p| *p > 1).map(|p| p.to_string());
        let pairs = [
            ("state", state),
            ("user", self.user.clone()),
            ("group", self.group.clone()),
            ("kind", self.kind.clone()),
            ("page", page),
        ];
        let query: Vec<String> = pairs
            .iter()
            .filter_map(|(k, v)| v.as_deref().filter(|v| !v.is_empty()).map(|v| format!("{k}={}", encode(v))))
            .collect();
        if query.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", query.join("&"))
        }
    }
}

use gantry_core::url::encode;

/// Where a window sits in the whole list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListCounts {
    /// Rows matching every filter.
    pub total: i64,
    pub page: i64,
    pub per_page: i64,
    pub pages: i64,
    /// Rows per state with the other filters applied (for the state links).
    pub by_state: Vec<(String, i64)>,
}

/// One page of a list (rows of a platform view) and where it sits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Listed<T> {
    pub rows: Vec<T>,
    pub counts: ListCounts,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_keep_filters_and_encode_values() {
        let q = ListQuery {
            state: Some("running".into()),
            user: Some("a b&c".into()),
            page: Some("3".into()),
            ..Default::default()
        };
        assert_eq!(q.href("/machines", None, Some(2)), "/machines?state=running&user=a%20b%26c&page=2");
        assert_eq!(q.href("/machines", Some(None), None), "/machines?user=a%20b%26c");
        assert_eq!(ListQuery::default().href("/tasks", Some(Some("failed")), Some(1)), "/tasks?state=failed");
    }
}
