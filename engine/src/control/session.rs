//! One console connection's state: who it is, which domain it uses, its open transaction and
//! its subscriptions. Sessions live on the leader only and are never replicated.

use std::collections::BTreeMap;

use nervix_nspl::ast::catalog::{CreateSubscription, Role};
use nervix_nspl::{Span, Statement};

/// A statement queued inside BEGIN … COMMIT, kept as its tree and text so COMMIT can plan it
/// again against the catalog as it is then.
#[derive(Debug, Clone)]
pub struct Queued {
    pub statement: Statement,
    pub span: Span,
}

/// BEGIN … COMMIT over one domain.
#[derive(Debug, Clone)]
pub struct Transaction {
    pub domain: String,
    pub queued: Vec<Queued>,
}

/// The bound on statements one transaction may queue.
pub const MAX_TRANSACTION_STATEMENTS: usize = 10_000;

/// The bound on subscriptions one session may hold.
pub const MAX_SESSION_SUBSCRIPTIONS: usize = 64;

pub struct ControlSession {
    pub user: String,
    pub role: Role,
    pub domain: Option<String>,
    pub transaction: Option<Transaction>,
    /// Console subscriptions by name (session-scoped, never persisted), with the data plane's
    /// id for each once registered there.
    pub subscriptions: BTreeMap<String, (String, CreateSubscription)>,
    pub subscription_ids: BTreeMap<String, u64>,
    /// Where the data plane sends subscription lines, and where the console reads them.
    pub lines: tokio::sync::mpsc::Sender<String>,
    pub incoming: tokio::sync::mpsc::Receiver<String>,
}

/// Subscription lines a session may have unread before rows are skipped.
pub const SUBSCRIPTION_QUEUE_LINES: usize = 4_096;

impl ControlSession {
    pub fn new(user: &str, role: Role) -> ControlSession {
        let (lines, incoming) = tokio::sync::mpsc::channel(SUBSCRIPTION_QUEUE_LINES);
        ControlSession {
            user: user.to_string(),
            role,
            domain: None,
            transaction: None,
            subscriptions: BTreeMap::new(),
            subscription_ids: BTreeMap::new(),
            lines,
            incoming,
        }
    }
}
