//! Statement dispatch: reads the leading keywords and hands the rest to the family parser.

use super::{PResult, Parser};
use crate::ast::session::{DescribeFormat, StartAt};
use crate::ast::{
    emitter::EmitterHead, ingestor::IngestorHead, Attachment, CreatePrefix, ObjectKind,
    SessionStmt, Spanned, Statement,
};
use crate::error::NameKind;
use crate::lexer::{Punct, TokenKind};

/// Processor kinds, in the order CREATE offers them.
const PROCESSOR_KINDS: [ObjectKind; 9] = [
    ObjectKind::Junction,
    ObjectKind::Deduplicator,
    ObjectKind::Reorderer,
    ObjectKind::WindowProcessor,
    ObjectKind::Inferencer,
    ObjectKind::WasmProcessor,
    ObjectKind::Correlator,
    ObjectKind::Reingestor,
    ObjectKind::Generator,
];

impl Parser<'_> {
    /// One statement up to and including its `;`.
    pub fn statement(&mut self) -> PResult<Spanned> {
        let start = self.span();
        let statement = self.statement_body()?;
        self.expect_punct(Punct::Semicolon)?;
        Ok(Spanned {
            statement,
            span: start.to(self.prev_span()),
        })
    }

    fn statement_body(&mut self) -> PResult<Statement> {
        if self.eat_keyword("CREATE") {
            return self.create();
        }
        if self.eat_keyword("ALTER") {
            return self.alter();
        }
        if self.eat_keyword("DROP") {
            return self.drop_statement();
        }
        if self.eat_keyword("SHOW") {
            return self.show();
        }
        if self.eat_keyword("DESCRIBE") {
            let kind = self.object_kind()?;
            let name = self.ident(NameKind::Existing(kind))?;
            let format = if self.eat_keywords(&["FORMAT", "JSON"]) {
                DescribeFormat::Json
            } else {
                DescribeFormat::Text
            };
            return Ok(Statement::Session(SessionStmt::Describe {
                kind,
                name,
                format,
            }));
        }
        if self.eat_keyword("USE") {
            let domain = self.ident(NameKind::Existing(ObjectKind::Domain))?;
            return Ok(Statement::Session(SessionStmt::Use(domain)));
        }
        if self.eat_keyword("START") {
            return self.start();
        }
        for (kw, stmt) in [
            ("STOP", SessionStmt::Stop),
            ("BEGIN", SessionStmt::Begin),
            ("COMMIT", SessionStmt::Commit),
            ("REVERT", SessionStmt::Revert),
        ] {
            if self.eat_keyword(kw) {
                return Ok(Statement::Session(stmt));
            }
        }
        if self.at_keywords(&["RESET", "WASM", "PROCESSOR"]) {
            return super::processor::parse_reset_wasm(self);
        }
        if let Some(statement) = super::catalog::parse_command(self) {
            return statement;
        }
        Err(self.unexpected())
    }

    fn start(&mut self) -> PResult<Statement> {
        if !self.eat_keyword("AT") {
            return Ok(Statement::Session(SessionStmt::Start(StartAt::Default)));
        }
        let now = self.eat_keyword("NOW");
        let instant = if now { None } else { Some(self.string()?) };
        let time_rate = if self.eat_keywords(&["TIME", "RATE"]) {
            let span = self.span();
            let rate = self.number()?;
            if rate <= 0.0 {
                return Err(self.error_at(span, "TIME RATE must be positive"));
            }
            Some(rate)
        } else {
            None
        };
        let at = match instant {
            None => StartAt::Now { time_rate },
            Some(instant) => StartAt::Instant { instant, time_rate },
        };
        Ok(Statement::Session(SessionStmt::Start(at)))
    }

    /// A kind keyword (or two) naming one entity: `SCHEMA`, `WIRE SCHEMA`, `WINDOW PROCESSOR`.
    pub fn object_kind(&mut self) -> PResult<ObjectKind> {
        for kind in ObjectKind::ALL {
            if self.eat_keywords(kind.keywords()) {
                return Ok(kind);
            }
        }
        Err(self.unexpected())
    }

    fn drop_statement(&mut self) -> PResult<Statement> {
        let kind = self.object_kind()?;
        let if_exists = self.eat_keywords(&["IF", "EXISTS"]);
        let name = self.ident(NameKind::Existing(kind))?;
        Ok(Statement::Session(SessionStmt::Drop {
            kind,
            if_exists,
            name,
        }))
    }

    fn show(&mut self) -> PResult<Statement> {
        if self.eat_keyword("CREATE") {
            let kind = self.object_kind()?;
            let name = self.ident(NameKind::Existing(kind))?;
            return Ok(Statement::Session(SessionStmt::ShowCreate { kind, name }));
        }
        if self.eat_keyword("ROLES") {
            return Ok(Statement::Session(SessionStmt::ShowRoles));
        }
        if let Some(statement) = super::catalog::parse_show(self) {
            return statement;
        }
        for kind in ObjectKind::ALL {
            if self.eat_keywords(kind.plural_keywords()) {
                return Ok(Statement::Session(SessionStmt::ShowAll(kind)));
            }
        }
        Err(self.unexpected())
    }

    /// The ingestor head (`KAFKA TOPIC`) when the next words are `<head> <suffix>`.
    fn eat_ingestor_head(&mut self, suffix: &'static str) -> Option<IngestorHead> {
        for head in IngestorHead::ALL {
            let [connector, entity] = head.keywords();
            self.note_phrase(head.phrase_with(suffix));
            if self.is_keyword_at(0, connector)
                && self.is_keyword_at(1, entity)
                && self.is_keyword_at(2, suffix)
            {
                self.advance();
                self.advance();
                self.advance();
                return Some(head);
            }
        }
        None
    }

    fn eat_emitter_head(&mut self) -> Option<EmitterHead> {
        for head in EmitterHead::ALL {
            let [connector, entity] = head.keywords();
            self.note_phrase(head.phrase());
            if self.is_keyword_at(0, connector)
                && self.is_keyword_at(1, entity)
                && self.is_keyword_at(2, "EMITTER")
            {
                self.advance();
                self.advance();
                self.advance();
                return Some(head);
            }
        }
        None
    }

    fn create(&mut self) -> PResult<Statement> {
        let if_not_exists = self.eat_keywords(&["IF", "NOT", "EXISTS"]);
        let attachment = if self.eat_keyword("ATTACHED") {
            Some(Attachment::Attached)
        } else if self.eat_keyword("DETACHED") {
            Some(Attachment::Detached)
        } else {
            None
        };
        let prefix = CreatePrefix {
            if_not_exists,
            attachment,
        };
        if let Some(head) = self.eat_emitter_head() {
            return super::emitter::parse_create(self, prefix, head);
        }
        for kind in PROCESSOR_KINDS {
            if self.eat_keywords(kind.keywords()) {
                return super::processor::parse_create(self, prefix, kind);
            }
        }
        if attachment.is_some() {
            return Err(self.unexpected());
        }
        if let Some(head) = self.eat_ingestor_head("INGESTOR") {
            return super::ingestor::parse_create(self, prefix, head);
        }
        if self.eat_keywords(&["SIGNALING", "PROTOCOL"]) {
            return super::ingestor::parse_create_signaling_protocol(self, prefix);
        }
        super::catalog::parse_create(self, prefix)
    }

    fn alter(&mut self) -> PResult<Statement> {
        if let Some(head) = self.eat_ingestor_head("INGESTOR") {
            return super::ingestor::parse_alter(self, head);
        }
        if let Some(head) = self.eat_emitter_head() {
            return super::emitter::parse_alter(self, head);
        }
        for kind in PROCESSOR_KINDS {
            if self.eat_keywords(kind.keywords()) {
                return super::processor::parse_alter(self, kind);
            }
        }
        super::catalog::parse_alter(self)
    }

    /// Skips to just past the next `;` (or to the end) after an error.
    pub fn recover(&mut self) {
        loop {
            match self.advance().kind {
                TokenKind::Punct(Punct::Semicolon) | TokenKind::Eof => return,
                _ => {}
            }
        }
    }
}
