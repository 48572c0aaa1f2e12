//! Statement execution on the leader: parse, route by kind, plan against the committed catalog
//! (or the open transaction's candidate), and replicate the changes through Raft.
//!
//! Planning and writing happen under one lock, so every plan sees the changes of every
//! statement answered before it, and two sessions can never both create the same entity.
//! A statement is answered OK only after its command is committed and applied — which is what
//! makes "kill -9 loses no statement that was answered OK" hold.

use std::path::{Path, PathBuf};

use nervix_nspl::ast::catalog::{CatalogStmt, CreateUser, Role, UserOperation};
use nervix_nspl::ast::processor::ProcessorStmt;
use nervix_nspl::ast::session::SessionStmt;
use nervix_nspl::{ObjectKind, Span, Statement};

use super::session::{
    ControlSession, Queued, Transaction, MAX_SESSION_SUBSCRIPTIONS, MAX_TRANSACTION_STATEMENTS,
};
use super::show;
use super::state_machine::{ControlCommand, ControlStateMachine, APPLIED};
use crate::catalog::plan::{plan_statement, session_domain, validate_domain, StatementContext};
use crate::catalog::{Catalog, CatalogError, Change, EntityKey, Resource, ResourceVersion, User};
use crate::console::auth;
use crate::console::backend::Reply;

/// At most this many files in one uploaded resource version.
pub const MAX_RESOURCE_FILES: usize = 1_024;
/// At most this many bytes in one uploaded resource version.
pub const MAX_RESOURCE_BYTES: u64 = 64 << 20;

/// The control plane of one node: the replicated catalog and the statement executor.
pub struct ControlNode {
    raft: nervix_raft::RaftNode<ControlStateMachine>,
    /// Serializes plan-and-write (see the module docs).
    writer: tokio::sync::Mutex<()>,
    /// Where uploaded resource versions are kept: `<dir>/<resource>/<version>/…`.
    resources_dir: PathBuf,
    /// This node's name in SHOW CLUSTER STATUS and SHOW INGESTORS.
    pub node_name: String,
    /// The shards running started domains; absent on a catalog-only node (tests, tools).
    data_plane: std::sync::Mutex<Option<std::sync::Arc<crate::runtime::DataPlane>>>,
}

fn refusal(error: CatalogError) -> Reply {
    Reply::refused(error.span, error.message)
}

impl ControlNode {
    pub fn new(
        raft: nervix_raft::RaftNode<ControlStateMachine>,
        resources_dir: PathBuf,
        node_name: String,
    ) -> ControlNode {
        ControlNode {
            raft,
            writer: tokio::sync::Mutex::new(()),
            resources_dir,
            node_name,
            data_plane: std::sync::Mutex::new(None),
        }
    }

    /// Runs started domains on `data_plane` from now on (and reconciles it with the catalog).
    pub async fn attach_data_plane(&self, data_plane: std::sync::Arc<crate::runtime::DataPlane>) {
        if let Ok(mut slot) = self.data_plane.lock() {
            *slot = Some(data_plane);
        }
        self.reconcile_data_plane().await;
    }

    /// Stops handing changes to the data plane (shutdown).
    pub fn detach_data_plane(&self) {
        if let Ok(mut slot) = self.data_plane.lock() {
            *slot = None;
        }
    }

    pub fn data_plane(&self) -> Option<std::sync::Arc<crate::runtime::DataPlane>> {
        self.data_plane.lock().ok().and_then(|slot| slot.clone())
    }

    /// Brings the data plane in line with the catalog (after every committed change).
    async fn reconcile_data_plane(&self) {
        if let Some(data_plane) = self.data_plane() {
            data_plane
                .reconcile(|prepare| self.read(|catalog| prepare(catalog)))
                .await;
        }
    }

    pub fn raft(&self) -> &nervix_raft::RaftNode<ControlStateMachine> {
        &self.raft
    }

    /// The Raft node, for shutting it down.
    pub fn into_raft(self) -> nervix_raft::RaftNode<ControlStateMachine> {
        self.raft
    }

    /// A read of the committed catalog.
    pub fn read<R>(&self, f: impl FnOnce(&Catalog) -> R) -> R {
        self.raft.with_state(|machine| f(&machine.catalog))
    }

    /// Replicates `changes` as one command and waits until it is applied.
    async fn replicate(&self, changes: Vec<Change>, span: Span) -> Result<(), CatalogError> {
        if changes.is_empty() {
            return Ok(());
        }
        let command = ControlCommand { changes }.encode();
        match self.raft.write(command).await {
            Ok(answer) if answer == APPLIED => {
                self.reconcile_data_plane().await;
                Ok(())
            }
            Ok(answer) => Err(CatalogError::new(
                span,
                String::from_utf8_lossy(&answer).into_owned(),
            )),
            Err(error) => Err(CatalogError::new(
                span,
                format!("the change was not committed: {error}"),
            )),
        }
    }

    /// Creates user `admin` when the catalog holds no user yet (first start).
    pub async fn bootstrap_admin(&self, password: &str) -> Result<bool, CatalogError> {
        let _guard = self.writer.lock().await;
        if self.read(|c| !c.users.is_empty()) {
            return Ok(false);
        }
        let password_hash = auth::hash_password(password)
            .await
            .map_err(|e| CatalogError::new(Span::default(), e.to_string()))?;
        let user = User {
            name: "admin".into(),
            role: Role::Admin,
            password_hash,
        };
        self.replicate(vec![Change::PutUser(user)], Span::default())
            .await?;
        Ok(true)
    }

    /// Runs one statement's text for `session`.
    pub async fn execute(&self, session: &mut ControlSession, text: &str) -> Reply {
        let statement = match nervix_nspl::parse_statement(text) {
            Ok(statement) => statement,
            Err(error) => return Reply::refused(error.span, error.message),
        };
        let span = Span::new(0, text.trim_end().len());
        match self.execute_statement(session, &statement, span).await {
            Ok(lines) => Reply::ok(lines),
            Err(error) => refusal(error),
        }
    }

    async fn execute_statement(
        &self,
        session: &mut ControlSession,
        statement: &Statement,
        span: Span,
    ) -> Result<Vec<String>, CatalogError> {
        match statement {
            Statement::Session(SessionStmt::Use(domain)) => {
                if let Some(txn) = &session.transaction {
                    if txn.domain != domain.name {
                        return Err(CatalogError::new(
                            domain.span,
                            format!(
                                "a transaction on domain '{}' is open: COMMIT or REVERT before USE",
                                txn.domain
                            ),
                        ));
                    }
                }
                if !self.read(|c| c.domains.contains_key(&domain.name)) {
                    return Err(CatalogError::new(
                        domain.span,
                        format!("domain '{}' does not exist", domain.name),
                    ));
                }
                session.domain = Some(domain.name.clone());
                Ok(Vec::new())
            }
            Statement::Session(SessionStmt::Begin) => self.begin(session, span),
            Statement::Session(SessionStmt::Commit) => self.commit(session, span).await,
            Statement::Session(SessionStmt::Revert) => match session.transaction.take() {
                Some(txn) => Ok(vec![format!(
                    "reverted {} queued statement(s)",
                    txn.queued.len()
                )]),
                None => Err(CatalogError::new(span, "no transaction is open")),
            },
            Statement::Session(
                SessionStmt::ShowAll(_)
                | SessionStmt::ShowRoles
                | SessionStmt::ShowCreate { .. }
                | SessionStmt::Describe { .. },
            )
            | Statement::Catalog(CatalogStmt::ShowClusterStatus) => {
                let transaction_catalog;
                let catalog_view = match &session.transaction {
                    Some(txn) => {
                        transaction_catalog = self.candidate(txn, span)?;
                        Some(&transaction_catalog)
                    }
                    None => None,
                };
                let runtime = match self.data_plane() {
                    Some(data_plane) => {
                        Some(super::runtime_view::RuntimeView::capture(&data_plane).await)
                    }
                    None => None,
                };
                let context = show::ShowContext {
                    node_name: &self.node_name,
                    session,
                    cluster: self.cluster_lines(),
                    runtime: runtime.as_ref(),
                };
                match catalog_view {
                    Some(catalog) => show::show(catalog, &context, statement, span),
                    None => self.read(|catalog| show::show(catalog, &context, statement, span)),
                }
            }
            Statement::Catalog(CatalogStmt::CreateUser(create)) => {
                self.refuse_in_transaction(session, span, "user management")?;
                self.create_user(create).await
            }
            Statement::Catalog(CatalogStmt::AlterUser(alter)) => {
                self.refuse_in_transaction(session, span, "user management")?;
                self.alter_user(&alter.name, &alter.operations).await
            }
            Statement::Session(SessionStmt::Drop {
                kind: ObjectKind::User,
                if_exists,
                name,
            }) => {
                self.refuse_in_transaction(session, span, "user management")?;
                self.drop_user(session, name, *if_exists).await
            }
            Statement::Catalog(CatalogStmt::CreateResource(create)) => {
                self.refuse_in_transaction(session, span, "resource management")?;
                let _guard = self.writer.lock().await;
                if self.read(|c| c.resources.contains_key(&create.name.name)) {
                    return skip_or_refuse(
                        create.if_not_exists,
                        create.name.span,
                        format!("resource '{}' already exists", create.name.name),
                    );
                }
                let mut definition = create.clone();
                definition.if_not_exists = false;
                let resource = Resource {
                    name: create.name.name.clone(),
                    definition: Statement::Catalog(CatalogStmt::CreateResource(definition)),
                    versions: Vec::new(),
                };
                self.replicate(vec![Change::PutResource(resource)], span)
                    .await?;
                Ok(Vec::new())
            }
            Statement::Catalog(CatalogStmt::UploadResource { resource, path }) => {
                self.refuse_in_transaction(session, span, "resource management")?;
                self.upload_resource(resource, path, span).await
            }
            Statement::Catalog(CatalogStmt::RebindResource(rebind)) => {
                self.refuse_in_transaction(session, span, "resource management")?;
                self.rebind_resource(rebind, span).await
            }
            Statement::Session(SessionStmt::Drop {
                kind: ObjectKind::Resource,
                if_exists,
                name,
            }) => {
                self.refuse_in_transaction(session, span, "resource management")?;
                let _guard = self.writer.lock().await;
                if !self.read(|c| c.resources.contains_key(&name.name)) {
                    return skip_or_refuse(
                        *if_exists,
                        name.span,
                        format!("resource '{}' does not exist", name.name),
                    );
                }
                let key = EntityKey::new(ObjectKind::Resource, name.name.as_str());
                let dependents = self.read(|c| crate::catalog::plan::global_dependents(c, &key));
                if let Some(dependent) = dependents.first() {
                    return Err(CatalogError::new(
                        name.span,
                        format!(
                            "cannot drop resource '{}': {dependent} depends on it",
                            name.name
                        ),
                    ));
                }
                self.replicate(vec![Change::DropResource(name.name.clone())], span)
                    .await?;
                Ok(Vec::new())
            }
            Statement::Catalog(CatalogStmt::CreateSubscription(create)) => {
                let domain = self.read(|c| {
                    session_domain(
                        c,
                        StatementContext {
                            domain: session.domain.as_deref(),
                            span,
                            wall_ns: crate::runtime::clock::wall_ns(),
                        },
                    )
                    .map(|d| d.name().to_string())
                })?;
                self.read(|c| {
                    let domain = &c.domains[&domain];
                    crate::catalog::DomainScope::new(c, domain)
                        .relay(&create.relay)
                        .map(|_| ())
                })?;
                if session.subscriptions.contains_key(&create.name.name) {
                    if create.if_not_exists {
                        return Ok(vec![format!(
                            "subscription '{}' already exists, skipped",
                            create.name.name
                        )]);
                    }
                    return Err(CatalogError::new(
                        create.name.span,
                        format!(
                            "subscription '{}' already exists in this session",
                            create.name.name
                        ),
                    ));
                }
                if session.subscriptions.len() >= MAX_SESSION_SUBSCRIPTIONS {
                    return Err(CatalogError::new(
                        span,
                        format!(
                            "a session holds at most {MAX_SESSION_SUBSCRIPTIONS} subscriptions"
                        ),
                    ));
                }
                let relay_fields = self.read(|c| {
                    let domain = &c.domains[&domain];
                    crate::validate::route::relay_fields(
                        &crate::catalog::DomainScope::new(c, domain),
                        &create.relay,
                    )
                    .map(|(_, fields)| fields)
                })?;
                let filter = match &create.filter {
                    Some(expr) => Some(
                        crate::runtime::subscribe::check_filter(&relay_fields, expr)
                            .map_err(|e| CatalogError::new(e.span, e.message))?,
                    ),
                    None => None,
                };
                if let Some(data_plane) = self.data_plane() {
                    let spec = crate::runtime::subscribe::SubscriptionSpec {
                        name: create.name.name.clone(),
                        domain: domain.clone(),
                        relay: create.relay.name.clone(),
                        relay_fields,
                        filter,
                        sample_rate: create.sample_rate.unwrap_or(1.0),
                        sink: session.lines.clone(),
                    };
                    let id = data_plane
                        .subscribe(spec)
                        .await
                        .map_err(|message| CatalogError::new(span, message))?;
                    session
                        .subscription_ids
                        .insert(create.name.name.clone(), id);
                }
                session
                    .subscriptions
                    .insert(create.name.name.clone(), (domain, create.clone()));
                Ok(vec![format!(
                    "subscription '{}' streams rows of relay '{}' as lines '{}: <json>' while its domain runs",
                    create.name.name, create.relay.name, create.name.name
                )])
            }
            Statement::Session(SessionStmt::Drop {
                kind: ObjectKind::Subscription,
                if_exists,
                name,
            }) => match session.subscriptions.remove(&name.name) {
                Some(_) => {
                    if let (Some(id), Some(data_plane)) = (
                        session.subscription_ids.remove(&name.name),
                        self.data_plane(),
                    ) {
                        data_plane.unsubscribe(id);
                    }
                    Ok(Vec::new())
                }
                None if *if_exists => Ok(vec![format!(
                    "subscription '{}' does not exist, skipped",
                    name.name
                )]),
                None => Err(CatalogError::new(
                    name.span,
                    format!(
                        "subscription '{}' does not exist in this session",
                        name.name
                    ),
                )),
            },
            Statement::Catalog(CatalogStmt::Node { node, .. })
            | Statement::Session(SessionStmt::Drop {
                kind: ObjectKind::Node,
                name: node,
                ..
            }) => Err(self.unknown_node_or_single(node)),
            Statement::Catalog(CatalogStmt::Relocate(relocate)) => {
                Err(self.unknown_node_or_single(&relocate.node))
            }
            Statement::Processor(ProcessorStmt::ResetWasm(reset)) => Err(CatalogError::new(
                reset.processor.span,
                format!(
                    "WASM processor '{}' is not running: this node has no data plane yet",
                    reset.processor.name
                ),
            )),
            _ => self.define(session, statement, span).await,
        }
    }

    /// One line per cluster member, from the Raft metrics.
    fn cluster_lines(&self) -> Vec<String> {
        let metrics = self.raft.metrics();
        let leader = metrics.current_leader;
        let applied = metrics.last_applied.map_or(0, |id| id.index);
        metrics
            .membership_config
            .membership()
            .nodes()
            .map(|(id, node)| {
                let role = if Some(*id) == leader {
                    "leader"
                } else {
                    "follower"
                };
                let name = if *id == self.raft.id() {
                    self.node_name.clone()
                } else {
                    format!("node-{id}")
                };
                format!(
                    "{name} id={id} addr={} role={role} term={} last_applied={applied}",
                    node.addr, metrics.current_term
                )
            })
            .collect()
    }

    /// Cluster commands name other nodes; a one-node cluster has none to move work to.
    fn unknown_node_or_single(&self, node: &nervix_nspl::ast::Ident) -> CatalogError {
        // Names are identifiers (`node_1`); the node prints itself as `node-1`.
        if node.name.replace('_', "-") == self.node_name {
            CatalogError::new(
                node.span,
                format!(
                    "node '{}' is the only member of this cluster: there is no other node to move its work to",
                    node.name
                ),
            )
        } else {
            CatalogError::new(
                node.span,
                format!("node '{}' is not a member of this cluster", node.name),
            )
        }
    }

    fn refuse_in_transaction(
        &self,
        session: &ControlSession,
        span: Span,
        what: &str,
    ) -> Result<(), CatalogError> {
        if session.transaction.is_some() {
            return Err(CatalogError::new(
                span,
                format!("{what} cannot run inside a transaction: COMMIT or REVERT first"),
            ));
        }
        Ok(())
    }

    fn begin(&self, session: &mut ControlSession, span: Span) -> Result<Vec<String>, CatalogError> {
        if session.transaction.is_some() {
            return Err(CatalogError::new(span, "a transaction is already open"));
        }
        let domain = self.read(|c| {
            session_domain(
                c,
                StatementContext {
                    domain: session.domain.as_deref(),
                    span,
                    wall_ns: crate::runtime::clock::wall_ns(),
                },
            )
            .map(|d| d.name().to_string())
        })?;
        session.transaction = Some(Transaction {
            domain,
            queued: Vec::new(),
        });
        Ok(Vec::new())
    }

    /// The catalog a transaction sees: the committed one with its queued statements applied.
    fn candidate(&self, txn: &Transaction, span: Span) -> Result<Catalog, CatalogError> {
        let mut candidate = self.read(Catalog::clone);
        apply_queued(&mut candidate, txn, span)?;
        Ok(candidate)
    }

    async fn commit(
        &self,
        session: &mut ControlSession,
        span: Span,
    ) -> Result<Vec<String>, CatalogError> {
        let Some(txn) = session.transaction.take() else {
            return Err(CatalogError::new(span, "no transaction is open"));
        };
        let _guard = self.writer.lock().await;
        let committed = self.read(Catalog::clone);
        let mut candidate = committed.clone();
        let changes = apply_queued(&mut candidate, &txn, span)?;
        if let Some(domain) = candidate.domains.get(&txn.domain) {
            validate_domain(&candidate, domain, span)?;
        }
        self.replicate(changes, span).await?;
        Ok(vec![format!("committed {} statement(s)", txn.queued.len())])
    }

    /// CREATE / ALTER / DROP of catalog entities and domains, START / STOP: planned, then
    /// replicated — or queued when a transaction is open.
    async fn define(
        &self,
        session: &mut ControlSession,
        statement: &Statement,
        span: Span,
    ) -> Result<Vec<String>, CatalogError> {
        if let Some(txn) = &mut session.transaction {
            if matches!(
                statement,
                Statement::Catalog(CatalogStmt::CreateDomain(_))
                    | Statement::Session(SessionStmt::Drop {
                        kind: ObjectKind::Domain,
                        ..
                    })
            ) {
                return Err(CatalogError::new(
                    span,
                    "a transaction changes one domain: create or drop domains outside it",
                ));
            }
            if txn.queued.len() >= MAX_TRANSACTION_STATEMENTS {
                return Err(CatalogError::new(
                    span,
                    format!("a transaction holds at most {MAX_TRANSACTION_STATEMENTS} statements"),
                ));
            }
            // Validate against the transaction's candidate now, so mistakes surface when queued.
            let mut candidate = self.read(Catalog::clone);
            apply_queued(&mut candidate, txn, span)?;
            let context = StatementContext {
                domain: Some(&txn.domain),
                span,
                wall_ns: crate::runtime::clock::wall_ns(),
            };
            let planned = plan_statement(&candidate, context, statement)?;
            txn.queued.push(Queued {
                statement: statement.clone(),
                span,
            });
            let mut lines = planned.output;
            lines.push(format!("queued ({} in transaction)", txn.queued.len()));
            return Ok(lines);
        }
        let _guard = self.writer.lock().await;
        let context = StatementContext {
            domain: session.domain.as_deref(),
            span,
            wall_ns: crate::runtime::clock::wall_ns(),
        };
        let planned = self.read(|catalog| plan_statement(catalog, context, statement))?;
        self.replicate(planned.changes, span).await?;
        Ok(planned.output)
    }

    async fn create_user(&self, create: &CreateUser) -> Result<Vec<String>, CatalogError> {
        let _guard = self.writer.lock().await;
        if self.read(|c| c.users.contains_key(&create.name.name)) {
            return skip_or_refuse(
                create.if_not_exists,
                create.name.span,
                format!("user '{}' already exists", create.name.name),
            );
        }
        let password_hash = auth::hash_password(&create.password)
            .await
            .map_err(|e| CatalogError::new(create.name.span, e.to_string()))?;
        let user = User {
            name: create.name.name.clone(),
            role: create.role,
            password_hash,
        };
        self.replicate(vec![Change::PutUser(user)], create.name.span)
            .await?;
        Ok(Vec::new())
    }

    async fn alter_user(
        &self,
        name: &nervix_nspl::ast::Ident,
        operations: &[UserOperation],
    ) -> Result<Vec<String>, CatalogError> {
        let _guard = self.writer.lock().await;
        let Some(mut user) = self.read(|c| c.users.get(&name.name).cloned()) else {
            return Err(CatalogError::new(
                name.span,
                format!("user '{}' does not exist", name.name),
            ));
        };
        for operation in operations {
            match operation {
                UserOperation::SetPassword(password) => {
                    user.password_hash = auth::hash_password(password)
                        .await
                        .map_err(|e| CatalogError::new(name.span, e.to_string()))?;
                }
                UserOperation::SetRole(role) => user.role = *role,
            }
        }
        if user.role != Role::Admin && self.is_last_admin(&user.name) {
            return Err(CatalogError::new(
                name.span,
                format!(
                    "user '{}' is the last ADMIN: the cluster would have no administrator",
                    name.name
                ),
            ));
        }
        self.replicate(vec![Change::PutUser(user)], name.span)
            .await?;
        Ok(Vec::new())
    }

    fn is_last_admin(&self, name: &str) -> bool {
        self.read(|c| {
            c.users.get(name).is_some_and(|u| u.role == Role::Admin)
                && c.users.values().filter(|u| u.role == Role::Admin).count() == 1
        })
    }

    async fn drop_user(
        &self,
        session: &ControlSession,
        name: &nervix_nspl::ast::Ident,
        if_exists: bool,
    ) -> Result<Vec<String>, CatalogError> {
        let _guard = self.writer.lock().await;
        if !self.read(|c| c.users.contains_key(&name.name)) {
            return skip_or_refuse(
                if_exists,
                name.span,
                format!("user '{}' does not exist", name.name),
            );
        }
        if name.name == session.user {
            return Err(CatalogError::new(name.span, "a user cannot drop itself"));
        }
        if self.is_last_admin(&name.name) {
            return Err(CatalogError::new(
                name.span,
                format!(
                    "user '{}' is the last ADMIN: the cluster would have no administrator",
                    name.name
                ),
            ));
        }
        self.replicate(vec![Change::DropUser(name.name.clone())], name.span)
            .await?;
        Ok(Vec::new())
    }

    /// UPLOAD RESOURCE r FROM '<dir>': copies a directory on this node into a new version (the
    /// statement as a raw console session sends it; `nervix console` sends a directory on the
    /// client as an archive instead, see [`ControlNode::upload_archive`]).
    async fn upload_resource(
        &self,
        resource: &nervix_nspl::ast::Ident,
        path: &str,
        span: Span,
    ) -> Result<Vec<String>, CatalogError> {
        let source = PathBuf::from(path);
        let shown = path.to_owned();
        self.install_resource_version(&resource.name, resource.span, span, move |target| {
            copy_bundle(&source, target)
                .map_err(|reason| format!("cannot upload '{shown}': {reason}"))
        })
        .await
    }

    /// `\upload <resource> <bytes>` from a console session: unpacks `archive` (a tar, bounded
    /// by [`super::bundle::MAX_RESOURCE_UPLOAD_BYTES`] before it got here) into the next
    /// version of `resource`; refusals point at 1:1, the start of the statement the client
    /// turned into the upload. The console has already checked the session's role.
    pub async fn upload_archive(
        &self,
        session: &ControlSession,
        resource: &str,
        archive: Vec<u8>,
    ) -> Reply {
        let span = Span::new(0, 0);
        if let Err(error) = self.refuse_in_transaction(session, span, "resource management") {
            return refusal(error);
        }
        let shown = resource.to_owned();
        let result = self
            .install_resource_version(resource, span, span, move |target| {
                super::bundle::unpack_archive(&archive, target)
                    .map_err(|reason| format!("cannot upload to resource '{shown}': {reason}"))
            })
            .await;
        match result {
            Ok(lines) => Reply::ok(lines),
            Err(error) => refusal(error),
        }
    }

    /// Makes the next version of `name` from what `fill` writes into a staging directory
    /// ([`super::bundle::install_version`]: the version directory appears only complete), then
    /// replicates it. Versions are integers from 1, each one more than the latest.
    async fn install_resource_version(
        &self,
        name: &str,
        name_span: Span,
        span: Span,
        fill: impl FnOnce(&Path) -> Result<Vec<(String, u64)>, String> + Send + 'static,
    ) -> Result<Vec<String>, CatalogError> {
        let _guard = self.writer.lock().await;
        let Some(mut stored) = self.read(|c| c.resources.get(name).cloned()) else {
            return Err(CatalogError::new(
                name_span,
                format!("resource '{name}' does not exist: CREATE RESOURCE {name} first"),
            ));
        };
        let number = stored.latest().unwrap_or(0) + 1;
        let resource_dir = self.resources_dir.join(name);
        let files = tokio::task::spawn_blocking(move || {
            super::bundle::install_version(&resource_dir, number, |target| {
                fill(target).map_err(InstallError::Fill)
            })
        })
        .await
        .map_err(|e| CatalogError::new(span, format!("upload task failed: {e}")))?
        .map_err(|error| CatalogError::new(span, error.to_string()))?;
        let count = files.len();
        stored.versions.push(ResourceVersion { number, files });
        self.replicate(vec![Change::PutResource(stored)], span)
            .await?;
        Ok(vec![format!(
            "resource '{name}' version {number}: {count} file(s)"
        )])
    }

    /// REBIND RESOURCE r TO VERSION v [FOR VHOST …]: moves virtual hosts to another version.
    async fn rebind_resource(
        &self,
        rebind: &nervix_nspl::ast::catalog::RebindResource,
        span: Span,
    ) -> Result<Vec<String>, CatalogError> {
        let _guard = self.writer.lock().await;
        let changes = self.read(|catalog| crate::catalog::rebind::rebind(catalog, rebind))?;
        let count = changes.len();
        self.replicate(changes, span).await?;
        Ok(vec![format!("rebound {count} vhost(s)")])
    }
}

/// `IF [NOT] EXISTS` turns a refusal into a note: `<message>, skipped`.
fn skip_or_refuse(skip: bool, span: Span, message: String) -> Result<Vec<String>, CatalogError> {
    if skip {
        Ok(vec![format!("{message}, skipped")])
    } else {
        Err(CatalogError::new(span, message))
    }
}

/// Plans every queued statement of `txn` in order against `candidate`, applying each one's
/// changes, and returns all changes.
fn apply_queued(
    candidate: &mut Catalog,
    txn: &Transaction,
    span: Span,
) -> Result<Vec<Change>, CatalogError> {
    let mut changes = Vec::new();
    for queued in &txn.queued {
        // A queued START records the wall time of the COMMIT that runs it.
        let context = StatementContext {
            domain: Some(&txn.domain),
            span: queued.span,
            wall_ns: crate::runtime::clock::wall_ns(),
        };
        let planned = plan_statement(candidate, context, &queued.statement).map_err(|e| {
            CatalogError::new(
                span,
                format!("a queued statement no longer applies: {}", e.message),
            )
        })?;
        for change in planned.changes {
            candidate.apply_change(&change);
            changes.push(change);
        }
    }
    Ok(changes)
}

/// Why a resource version could not be installed: its filling (copy or unpack) failed, or the
/// staging and renaming around it did.
#[derive(Debug, thiserror::Error)]
enum InstallError {
    #[error("{0}")]
    Fill(String),
    #[error("cannot install the version: {0}")]
    Bundle(#[from] super::bundle::BundleError),
}

/// Copies the regular files under `source` to `target`, bounded in count and bytes; returns
/// the relative paths with sizes, sorted.
fn copy_bundle(source: &Path, target: &Path) -> Result<Vec<(String, u64)>, String> {
    let mut files = Vec::new();
    let mut total: u64 = 0;
    let mut pending = vec![source.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| e.to_string())?;
            let path = entry.path();
            let kind = entry.file_type().map_err(|e| e.to_string())?;
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() {
                let size = entry.metadata().map_err(|e| e.to_string())?.len();
                total += size;
                if files.len() >= MAX_RESOURCE_FILES || total > MAX_RESOURCE_BYTES {
                    return Err(format!(
                        "a resource version holds at most {MAX_RESOURCE_FILES} files and {MAX_RESOURCE_BYTES} bytes"
                    ));
                }
                let relative = path
                    .strip_prefix(source)
                    .map_err(|e| e.to_string())?
                    .to_string_lossy()
                    .into_owned();
                files.push((relative, size));
            }
        }
    }
    if files.is_empty() {
        return Err("the directory holds no files".into());
    }
    for (relative, _) in &files {
        let destination = target.join(relative);
        if let Some(parent) = destination.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        std::fs::copy(source.join(relative), &destination)
            .map_err(|e| format!("{relative}: {e}"))?;
    }
    files.sort();
    Ok(files)
}
