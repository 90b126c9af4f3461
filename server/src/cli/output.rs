//! How listings are shown: `--json` prints the server's objects as one
//! JSON document (stable: the API's own field names), otherwise a table
//! of the columns a person looks at first.

use super::CliError;
use serde_json::Value;

/// Pretty JSON on stdout.
pub fn json(value: &impl serde::Serialize) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value).map_err(|e| CliError(e.to_string()))?;
    println!("{text}");
    Ok(())
}

/// A table: one column per `(header, field)`, each as wide as its widest
/// cell; nested fields are named `a.b`.
pub fn table(rows: &[Value], columns: &[(&str, &str)]) {
    print!("{}", render(rows, columns));
}

pub fn render(rows: &[Value], columns: &[(&str, &str)]) -> String {
    let cells: Vec<Vec<String>> =
        rows.iter().map(|row| columns.iter().map(|(_, field)| cell(row, field)).collect()).collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, (head, _))| cells.iter().map(|r| r[i].chars().count()).chain([head.len()]).max().unwrap_or(0))
        .collect();
    let line = |items: Vec<&str>| {
        let padded: Vec<String> = items.iter().zip(&widths).map(|(s, w)| format!("{s:<w$}")).collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(columns.iter().map(|(h, _)| *h).collect());
    for row in &cells {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// A field as text: strings bare, null as "-", a line break as a space.
pub fn cell(row: &Value, field: &str) -> String {
    let value = field.split('.').try_fold(row, |v, key| v.get(key));
    match value {
        None | Some(Value::Null) => "-".into(),
        Some(Value::String(s)) => s.replace(['\n', '\r', '\t'], " "),
        Some(other) => other.to_string(),
    }
}

/// Bytes as a person reads them ("1.5 GiB").
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::{bytes, render};
    use serde_json::json;

    #[test]
    fn tables_align_columns_and_show_missing_fields_as_dashes() {
        let rows = [json!({"id": 7, "name": "train", "node": null}), json!({"id": 12, "name": "a\nb"})];
        let text = render(&rows, &[("ID", "id"), ("NAME", "name"), ("NODE", "node")]);
        assert_eq!(text, "ID  NAME   NODE\n7   train  -\n12  a b    -\n");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(3 << 29), "1.5 GiB");
    }
}
