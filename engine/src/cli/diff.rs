//! A short, unified-diff-like hint showing where a script departs from its canonical form.
//!
//! It trims the lines both texts share at the start and at the end and shows the block in
//! between: linear in the input, which matters for scripts of up to 64 MiB, at the price of
//! showing one block where a real diff would show several hunks.

/// Lines shown per side; the rest is counted, not printed.
const MAX_HINT_LINES: usize = 20;

/// The hint for `original` against `canonical`, one `@@ … @@` header then `-`/`+` lines, each
/// line ending in a newline.
pub fn hint(original: &str, canonical: &str) -> String {
    let old: Vec<&str> = original.split_inclusive('\n').collect();
    let new: Vec<&str> = canonical.split_inclusive('\n').collect();
    let prefix = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let suffix = old[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let removed = &old[prefix..old.len() - suffix];
    let added = &new[prefix..new.len() - suffix];
    let mut out = format!(
        "@@ -{},{} +{},{} @@\n",
        prefix + 1,
        removed.len(),
        prefix + 1,
        added.len()
    );
    write_side(&mut out, '-', removed);
    write_side(&mut out, '+', added);
    out
}

fn write_side(out: &mut String, sign: char, lines: &[&str]) {
    for line in lines.iter().take(MAX_HINT_LINES) {
        out.push(sign);
        out.push_str(line.trim_end_matches('\n'));
        out.push('\n');
        if !line.ends_with('\n') {
            out.push_str("\\ No newline at end of file\n");
        }
    }
    if lines.len() > MAX_HINT_LINES {
        let hidden = lines.len() - MAX_HINT_LINES;
        out.push_str(&format!("{sign}… {hidden} more lines\n"));
    }
}

#[cfg(test)]
mod tests {
    use super::hint;

    #[test]
    fn shows_only_the_differing_block() {
        let original = "START;\n\nshow  ingestors;\n\nSTOP;\n";
        let canonical = "START;\n\nSHOW INGESTORS;\n\nSTOP;\n";
        assert_eq!(
            hint(original, canonical),
            "@@ -3,1 +3,1 @@\n-show  ingestors;\n+SHOW INGESTORS;\n"
        );
    }

    #[test]
    fn marks_a_missing_final_newline() {
        assert_eq!(
            hint("START;", "START;\n"),
            "@@ -1,1 +1,1 @@\n-START;\n\\ No newline at end of file\n+START;\n"
        );
    }

    #[test]
    fn counts_lines_past_the_limit() {
        let original = "x\n".repeat(25);
        let out = hint(&original, "");
        assert!(out.starts_with("@@ -1,25 +1,0 @@\n"));
        assert!(out.ends_with("-… 5 more lines\n"));
        assert_eq!(out.lines().count(), 1 + 20 + 1);
    }
}
