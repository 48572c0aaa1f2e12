//! Rendering of session and inspection statements.

use super::{quote, Writer};
use crate::ast::session::{DescribeFormat, StartAt};
use crate::ast::{ObjectKind, SessionStmt};

fn kind(k: ObjectKind) -> String {
    k.keywords().join(" ")
}

fn rate(time_rate: &Option<f64>) -> String {
    time_rate
        .map(|r| format!(" TIME RATE {}", super::fmt_float(r)))
        .unwrap_or_default()
}

pub fn render(w: &mut Writer, s: &SessionStmt) {
    let text = match s {
        SessionStmt::Use(domain) => format!("USE {domain}"),
        SessionStmt::Start(StartAt::Default) => "START".into(),
        SessionStmt::Start(StartAt::Now { time_rate }) => {
            format!("START AT NOW{}", rate(time_rate))
        }
        SessionStmt::Start(StartAt::Instant { instant, time_rate }) => {
            format!("START AT {}{}", quote(instant), rate(time_rate))
        }
        SessionStmt::Stop => "STOP".into(),
        SessionStmt::Begin => "BEGIN".into(),
        SessionStmt::Commit => "COMMIT".into(),
        SessionStmt::Revert => "REVERT".into(),
        SessionStmt::ShowAll(k) => format!("SHOW {}", k.plural_keywords().join(" ")),
        SessionStmt::ShowRoles => "SHOW ROLES".into(),
        SessionStmt::ShowCreate { kind: k, name } => format!("SHOW CREATE {} {name}", kind(*k)),
        SessionStmt::Describe {
            kind: k,
            name,
            format,
        } => {
            let json = if *format == DescribeFormat::Json {
                " FORMAT JSON"
            } else {
                ""
            };
            format!("DESCRIBE {} {name}{json}", kind(*k))
        }
        SessionStmt::Drop {
            kind: k,
            if_exists,
            name,
        } => {
            let ie = if *if_exists { " IF EXISTS" } else { "" };
            format!("DROP {}{ie} {name}", kind(*k))
        }
    };
    w.line(0, text);
}
