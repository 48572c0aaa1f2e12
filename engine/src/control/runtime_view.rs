//! What SHOW and DESCRIBE add from the running data plane: each node's status (`running`,
//! `failed`, `stopped`), and figures — rows in and out with their rate, message errors, relay
//! buffer lengths, branch counts and evictions, a client ingestor's admission and producers.
//! A snapshot is taken once per statement from every shard ([`RuntimeView::capture`]).

use std::collections::HashMap;

use nervix_nspl::ObjectKind;

use crate::catalog::{Domain, Entity, RunState};
use crate::runtime::driver::DomainStats;
use crate::runtime::{DataPlane, ShardStats};

/// The data plane as one statement sees it.
#[derive(Debug, Default)]
pub struct RuntimeView {
    pub stats: Vec<ShardStats>,
    /// Started domains that cannot run here, with why.
    pub failures: HashMap<String, String>,
}

impl RuntimeView {
    pub async fn capture(data_plane: &DataPlane) -> RuntimeView {
        RuntimeView {
            stats: data_plane.stats().await,
            failures: data_plane
                .failures
                .lock()
                .map(|f| f.clone())
                .unwrap_or_default(),
        }
    }

    fn domains<'a>(&'a self, domain: &'a str) -> impl Iterator<Item = &'a DomainStats> + 'a {
        self.stats
            .iter()
            .flat_map(|s| &s.domains)
            .filter(move |d| d.domain == domain)
    }

    fn running(&self, domain: &str) -> bool {
        self.domains(domain).next().is_some()
    }
}

/// A node's status: `running` once its domain's graph runs, `failed` when the started domain
/// cannot run here, `pending` while a start is in progress, `stopped` otherwise.
pub fn status(domain: Option<&Domain>, view: Option<&RuntimeView>) -> &'static str {
    let Some(domain) = domain else {
        return "stopped";
    };
    match (&domain.header.run, view) {
        (RunState::Stopped, _) => "stopped",
        (RunState::Started { .. }, None) => "pending",
        (RunState::Started { .. }, Some(view)) => {
            if view.failures.contains_key(domain.name()) {
                "failed"
            } else if view.running(domain.name()) {
                "running"
            } else {
                "pending"
            }
        }
    }
}

/// The spec's SHOW INGESTORS figures of a client ingestor:
/// ` admission=open producers=2 outstanding_batches=3 outstanding_bytes=2412 admitted_batches=2`.
pub fn ingestor_summary(view: Option<&RuntimeView>, domain: &str, name: &str) -> String {
    let Some(view) = view else {
        return String::new();
    };
    for stats in view.domains(domain) {
        if let Some(i) = stats.ingestors.iter().find(|i| i.name == name) {
            return format!(
                " admission={} producers={} outstanding_batches={} outstanding_bytes={} admitted_batches={}",
                if i.admission_open { "open" } else { "suspended" },
                i.producers,
                i.outstanding_batches,
                i.outstanding_bytes,
                i.admitted_batches
            );
        }
    }
    String::new()
}

/// DESCRIBE's runtime lines for `entity` (empty when its domain does not run).
pub fn figures(
    view: Option<&RuntimeView>,
    domain: Option<&Domain>,
    entity: &Entity,
) -> Vec<(String, String)> {
    let (Some(view), Some(domain)) = (view, domain) else {
        return Vec::new();
    };
    let name = &entity.key.name;
    let mut lines = Vec::new();
    if let Some(reason) = view.failures.get(domain.name()) {
        lines.push(("failure".to_string(), reason.clone()));
        return lines;
    }
    for stats in view.domains(domain.name()) {
        match entity.key.kind {
            ObjectKind::Relay => {
                if let Some((_, len, published)) = stats.relays.iter().find(|r| &r.0 == name) {
                    lines.push(("buffer length".into(), format!("{len} frames")));
                    lines.push(("rows published".into(), published.to_string()));
                }
            }
            ObjectKind::Branch => {
                if let Some((_, live, ttl, lru, explicit)) =
                    stats.branches.iter().find(|b| &b.0 == name)
                {
                    lines.push(("instances".into(), live.to_string()));
                    lines.push((
                        "evictions".into(),
                        format!("ttl={ttl} lru={lru} explicit={explicit}"),
                    ));
                }
            }
            _ => {
                if let Some(node) = stats.nodes.iter().find(|n| &n.name == name) {
                    lines.push(("rows in".into(), node.rows_in.to_string()));
                    lines.push(("rows out".into(), node.rows_out.to_string()));
                    lines.push((
                        "rate in".into(),
                        format!("{:.0} rows/s", node.rate_in_per_sec),
                    ));
                    lines.push(("message errors".into(), node.message_errors.to_string()));
                }
                if let Some(i) = stats.ingestors.iter().find(|i| &i.name == name) {
                    let open = if i.admission_open {
                        "open"
                    } else {
                        "suspended"
                    };
                    lines.push(("admission".into(), open.to_string()));
                    lines.push(("producers".into(), i.producers.to_string()));
                    lines.push(("forwarded producers".into(), "0".to_string()));
                    lines.push((
                        "outstanding batches".into(),
                        i.outstanding_batches.to_string(),
                    ));
                    lines.push(("outstanding bytes".into(), i.outstanding_bytes.to_string()));
                    lines.push(("admitted batches".into(), i.admitted_batches.to_string()));
                }
            }
        }
    }
    lines
}
