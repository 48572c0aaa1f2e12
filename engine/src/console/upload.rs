//! The `\upload` meta-command of the console protocol: a resource version sent as a tar
//! archive over the console connection itself.
//!
//! On the wire, at a statement start:
//!
//! ```text
//! \upload <resource> <byte count>\n
//! <exactly byte count bytes: a tar archive>
//! ```
//!
//! answered like a statement: output lines (`resource 'r' version N: K file(s)`) then `OK`, or
//! `ERROR 1:1 <message>` — the position is the start of the `UPLOAD RESOURCE` statement the
//! client turned into this upload. `nervix console` sends it for `UPLOAD RESOURCE r FROM
//! '<path>'` when `<path>` is a directory on the client machine; a raw `nc` session that sends
//! the statement itself keeps the node-local meaning (a directory on the node).
//!
//! Once the line carries a well-formed byte count, exactly that many bytes that follow are the
//! archive, whatever the answer: a refusal known from the line alone (not authenticated, a role
//! other than ADMIN or OPERATOR, a name that is no NSPL name, a count over
//! [`MAX_RESOURCE_UPLOAD_BYTES`]) is answered at once and the bytes are skipped unbuffered, so
//! neither a stranger nor a READER makes the node hold an archive, and the connection stays in
//! step. A line without a count (`usage` refusal) announces no bytes. An accepted archive is
//! buffered (at most [`MAX_RESOURCE_UPLOAD_BYTES`], growing as bytes arrive, never reserved
//! up front) and handed over as [`Action::Upload`]; the input ending before the last byte
//! drops it, as it drops a statement without its `;`. The archive's bytes never pass the
//! statement scanner, and never reach a log.

use super::*;
use crate::control::bundle::MAX_RESOURCE_UPLOAD_BYTES;

/// An accepted upload whose bytes are arriving.
pub(super) struct Receiving {
    resource: String,
    remaining: u64,
    archive: Vec<u8>,
}

const UPLOAD_USAGE: &str = "usage: \\upload <resource> <byte count>, then that many bytes of tar";

impl Protocol {
    /// `\upload <resource> <byte count>`: see the module docs.
    pub(super) fn meta_upload(&mut self, rest: &str) -> Option<Action> {
        let words: Vec<&str> = rest.split([' ', '\t']).filter(|w| !w.is_empty()).collect();
        let [resource, count] = words.as_slice() else {
            self.refuse("", 0, UPLOAD_USAGE);
            return None;
        };
        let Ok(count) = count.parse::<u64>() else {
            self.refuse("", 0, UPLOAD_USAGE);
            return None;
        };
        if let Err(message) = self.may_upload(resource, count) {
            self.refuse("", 0, &message);
            if count > 0 {
                self.mode = Mode::SkipUpload(count);
            }
            return None;
        }
        self.mode = Mode::Upload(Receiving {
            resource: (*resource).to_owned(),
            remaining: count,
            archive: Vec::new(),
        });
        self.upload_input()
    }

    /// Everything known about an upload before its bytes arrive.
    fn may_upload(&self, resource: &str, count: u64) -> Result<(), String> {
        let Identity::Authenticated(login) = &self.identity else {
            return Err(NOT_AUTHENTICATED.into());
        };
        let shown: String = resource
            .chars()
            .take(MAX_ECHOED_COMMAND_CHARS)
            .map(|c| if c.is_control() { '?' } else { c })
            .collect();
        let not_a_name = || format!("'{shown}' is not a resource name");
        if !is_identifier(resource) {
            return Err(not_a_name());
        }
        // The same role rule as the statement the upload stands for.
        let statement =
            nervix_nspl::parse_statement(&format!("UPLOAD RESOURCE {resource} FROM 'archive';"))
                .map_err(|_| not_a_name())?;
        authorize(login.role, &statement)?;
        if count > MAX_RESOURCE_UPLOAD_BYTES {
            return Err(format!(
                "an upload holds at most {MAX_RESOURCE_UPLOAD_BYTES} bytes of archive; \
                 this one announces {count}: its bytes are skipped"
            ));
        }
        Ok(())
    }

    /// Takes the pending upload's (or skipped upload's) bytes from the input; the finished
    /// upload's action once its last byte is in.
    pub(super) fn upload_input(&mut self) -> Option<Action> {
        let available = &self.input[self.input_at..];
        match &mut self.mode {
            Mode::SkipUpload(remaining) => {
                let taken = available
                    .len()
                    .min(usize::try_from(*remaining).unwrap_or(usize::MAX));
                self.input_at += taken;
                *remaining -= taken as u64;
                if *remaining == 0 {
                    self.mode = Mode::Statement;
                }
                None
            }
            Mode::Upload(receiving) => {
                let taken = available
                    .len()
                    .min(usize::try_from(receiving.remaining).unwrap_or(usize::MAX));
                receiving.archive.extend_from_slice(&available[..taken]);
                self.input_at += taken;
                receiving.remaining -= taken as u64;
                if receiving.remaining > 0 {
                    return None;
                }
                let Mode::Upload(receiving) = std::mem::replace(&mut self.mode, Mode::Statement)
                else {
                    return None;
                };
                self.awaiting = Some(Awaiting::Upload);
                Some(Action::Upload {
                    resource: receiving.resource,
                    archive: receiving.archive,
                })
            }
            Mode::Statement | Mode::Meta(_) | Mode::MetaOverflow | Mode::DiscardStatement => None,
        }
    }

    /// The backend's answer to [`Action::Upload`].
    pub fn uploaded(&mut self, reply: Reply) {
        if !matches!(self.awaiting.take(), Some(Awaiting::Upload)) {
            return;
        }
        for line in &reply.lines {
            self.output(line);
        }
        match reply.outcome {
            Ok(()) => self.out.push_back("OK".into()),
            Err(refusal) => self.refuse("", 0, &refusal.message),
        }
    }
}
