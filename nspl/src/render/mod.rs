//! The canonical renderer: one deterministic text per tree, which is what `SHOW CREATE` prints
//! and `nervix fmt` writes. Keywords are upper-case, names lower-case, strings single-quoted,
//! durations and sizes in their largest exact unit, clauses one per line indented by two
//! spaces. Rendering then parsing gives back an equal tree, and rendering is idempotent.

pub mod catalog;
pub mod emitter;
pub mod expr;
pub mod ingestor;
pub mod processor;
pub mod route;
pub mod session;

pub use expr::fmt_expr;

use crate::ast::{
    ByteSize, ConfigMap, ConfigValue, Duration, ResourceVersion, Statement, TypeName,
};

/// Lines of one statement under construction.
#[derive(Debug, Default)]
pub struct Writer {
    lines: Vec<String>,
}

impl Writer {
    pub fn new() -> Writer {
        Writer::default()
    }

    /// Starts a new line at `indent` levels of two spaces.
    pub fn line(&mut self, indent: usize, text: impl AsRef<str>) {
        let mut line = "  ".repeat(indent);
        line.push_str(text.as_ref());
        self.lines.push(line);
    }

    /// Appends to the current line.
    pub fn append(&mut self, text: impl AsRef<str>) {
        match self.lines.last_mut() {
            Some(last) => last.push_str(text.as_ref()),
            None => self.lines.push(text.as_ref().to_string()),
        }
    }

    /// `KEYWORD a = x,` / `          b = y` aligned under the first assignment.
    pub fn list_lines(&mut self, indent: usize, keyword: &str, items: &[String]) {
        let pad = " ".repeat(indent * 2 + keyword.len() + 1);
        for (i, item) in items.iter().enumerate() {
            let sep = if i + 1 < items.len() { "," } else { "" };
            if i == 0 {
                self.line(indent, format!("{keyword} {item}{sep}"));
            } else {
                self.lines.push(format!("{pad}{item}{sep}"));
            }
        }
    }

    /// The statement text, terminated by `;`.
    pub fn finish(self) -> String {
        let mut out = self.lines.join("\n");
        out.push(';');
        out
    }
}

/// The canonical text of one statement, ending in `;` (no trailing newline).
pub fn render_statement(statement: &Statement) -> String {
    let mut w = Writer::new();
    match statement {
        Statement::Session(s) => session::render(&mut w, s),
        Statement::Catalog(s) => catalog::render(&mut w, s),
        Statement::Ingestor(s) => ingestor::render(&mut w, s),
        Statement::Processor(s) => processor::render(&mut w, s),
        Statement::Emitter(s) => emitter::render(&mut w, s),
    }
    w.finish()
}

/// A duration in the largest unit that expresses it exactly.
pub fn fmt_duration(d: Duration) -> String {
    const UNITS: [(u64, &str); 7] = [
        (86_400_000_000_000, "d"),
        (3_600_000_000_000, "h"),
        (60_000_000_000, "m"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
        (1, "ns"),
    ];
    for (scale, unit) in UNITS {
        if d.nanos >= scale && d.nanos.is_multiple_of(scale) {
            return format!("{}{unit}", d.nanos / scale);
        }
    }
    "0s".to_string()
}

/// A size in the largest binary unit, else decimal unit, that expresses it exactly.
pub fn fmt_size(s: ByteSize) -> String {
    const UNITS: [(u64, &str); 6] = [
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
        (1_000_000_000, "GB"),
        (1_000_000, "MB"),
        (1_000, "KB"),
    ];
    for (scale, unit) in UNITS {
        if s.bytes >= scale && s.bytes.is_multiple_of(scale) {
            return format!("{}{unit}", s.bytes / scale);
        }
    }
    format!("{}B", s.bytes)
}

/// A single-quoted string literal with embedded quotes doubled.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

pub fn fmt_type(t: &TypeName) -> String {
    match t {
        TypeName::U8 => "U8".into(),
        TypeName::I8 => "I8".into(),
        TypeName::U16 => "U16".into(),
        TypeName::I16 => "I16".into(),
        TypeName::U32 => "U32".into(),
        TypeName::I32 => "I32".into(),
        TypeName::U64 => "U64".into(),
        TypeName::I64 => "I64".into(),
        TypeName::F32 => "F32".into(),
        TypeName::F64 => "F64".into(),
        TypeName::Bool => "BOOL".into(),
        TypeName::String => "STRING".into(),
        TypeName::Datetime => "DATETIME".into(),
        TypeName::Bytes => "BYTES".into(),
        TypeName::Array(element, dims) => {
            let dims: Vec<String> = dims.iter().map(u32::to_string).collect();
            format!("ARRAY<{}, {}>", fmt_type(element), dims.join(", "))
        }
        TypeName::Vec(element) => format!("VEC<{}>", fmt_type(element)),
        TypeName::List(element) => format!("LIST<{}>", fmt_type(element)),
    }
}

/// `VERSION 3` or `VERSION LATEST`.
pub fn fmt_version(v: ResourceVersion) -> String {
    match v {
        ResourceVersion::Number(n) => format!("VERSION {n}"),
        ResourceVersion::Latest => "VERSION LATEST".into(),
    }
}

/// A float that parses back to the same value (`1.0`, `0.25`, `1e20`).
pub fn fmt_float(v: f64) -> String {
    format!("{v:?}")
}

/// `{'key' = value, …}` on one line.
pub fn fmt_config(map: &ConfigMap) -> String {
    let entries: Vec<String> = map
        .entries
        .iter()
        .map(|(k, v)| {
            let v = match v {
                ConfigValue::String(s) => quote(s),
                ConfigValue::Integer(i) => i.to_string(),
                ConfigValue::Decimal(f) => fmt_float(*f),
                ConfigValue::Bool(b) => if *b { "TRUE" } else { "FALSE" }.to_string(),
            };
            format!("{} = {v}", quote(k))
        })
        .collect();
    format!("{{{}}}", entries.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_use_the_largest_exact_unit() {
        let d = |nanos| fmt_duration(Duration { nanos });
        assert_eq!(d(250_000_000), "250ms");
        assert_eq!(d(300_000_000_000), "5m");
        assert_eq!(d(90_000_000_000), "90s");
        assert_eq!(d(100_000), "100us");
        assert_eq!(d(0), "0s");
    }

    #[test]
    fn sizes_prefer_binary_units() {
        let s = |bytes| fmt_size(ByteSize { bytes });
        assert_eq!(s(1 << 20), "1MiB");
        assert_eq!(s(8 << 20), "8MiB");
        assert_eq!(s(1_000_000), "1MB");
        assert_eq!(s(1500), "1500B");
        assert_eq!(s(0), "0B");
    }
}
