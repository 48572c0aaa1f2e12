//! The node as its console sees it: [`ConsoleBackend`] over the control plane.

use nervix_nspl::ast::catalog::Role;
use nervix_nspl::Completion;

use super::execute::ControlNode;
use super::session::ControlSession;
use crate::console::auth::{self, AuthError};
use crate::console::backend::{ConsoleBackend, Reply};

impl ConsoleBackend for ControlNode {
    type Session = ControlSession;

    async fn authenticate(&self, user: &str, password: &str) -> Result<Role, AuthError> {
        let stored = self.read(|c| c.users.get(user).map(|u| (u.password_hash.clone(), u.role)));
        let hash = stored.as_ref().map(|(hash, _)| hash.as_str());
        match (auth::verify_password(password, hash).await?, stored) {
            (true, Some((_, role))) => Ok(role),
            _ => Err(AuthError::InvalidCredentials),
        }
    }

    fn open_session(&self, user: &str, role: Role) -> ControlSession {
        ControlSession::new(user, role)
    }

    async fn execute(&self, session: &mut ControlSession, statement: &str) -> Reply {
        ControlNode::execute(self, session, statement).await
    }

    async fn upload(
        &self,
        session: &mut ControlSession,
        resource: &str,
        archive: Vec<u8>,
    ) -> Reply {
        self.upload_archive(session, resource, archive).await
    }

    fn complete(&self, session: &ControlSession, text: &str, cursor: usize) -> Vec<Completion> {
        self.read(|catalog| {
            let names = super::complete::CatalogNames {
                catalog,
                domain: session.domain.as_deref(),
            };
            nervix_nspl::complete(text, cursor, &names)
        })
    }

    fn close_session(&self, session: ControlSession) {
        if let Some(data_plane) = self.data_plane() {
            for id in session.subscription_ids.values() {
                data_plane.unsubscribe(*id);
            }
        }
    }

    fn stream<'s>(
        &self,
        session: &'s mut ControlSession,
    ) -> Option<&'s mut tokio::sync::mpsc::Receiver<String>> {
        (!session.subscription_ids.is_empty()).then_some(&mut session.incoming)
    }
}
