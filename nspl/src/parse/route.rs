//! Clauses shared by ingestors, processors and emitters: inputs, collection, materialized
//! state, branching, routes, delivery and quiesce modes.

use super::{PResult, Parser};
use crate::ast::{
    Assignment, Branching, Collect, DeliveryMode, Flush, GeneralErrorPolicy, Inherit,
    InheritFields, Input, MessageErrorPolicy, OverflowPolicy, QuiesceMode, RetryPolicy, Route,
    RouteBranching, StateDependency, StatePolicy,
};
use crate::error::{NameKind, ParseError};
use crate::lexer::Punct;
use crate::ObjectKind;

/// Whether a clause must appear or must not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    Required,
    Optional,
    Forbidden,
}

/// What a node's routes may hold.
#[derive(Debug, Clone, Copy)]
pub struct RouteRules {
    /// The node's name in messages, e.g. `window processor`.
    pub node: &'static str,
    /// `INHERIT` is refused by set-only routes.
    pub inherit: bool,
    /// Set-only routes need at least one SET assignment.
    pub set_required: bool,
    /// `BRANCHED BY … | UNBRANCHED` per route (ingestors and reingestors).
    pub branching: Presence,
    /// `FLUSH …` (windows and WASM processors take none).
    pub flush: Presence,
}

impl Parser<'_> {
    /// `<relay> [WHERE <expr>], …` after FROM.
    pub fn inputs(&mut self) -> PResult<Vec<crate::ast::Input>> {
        let mut inputs = vec![self.input()?];
        while !self.at_alter_operation_after_comma() && self.eat_punct(Punct::Comma) {
            inputs.push(self.input()?);
        }
        Ok(inputs)
    }

    pub fn input(&mut self) -> PResult<Input> {
        let relay = self.ident(NameKind::Existing(ObjectKind::Relay))?;
        let filter = if self.eat_keyword("WHERE") {
            Some(self.expr()?)
        } else {
            None
        };
        Ok(Input { relay, filter })
    }

    /// `COLLECT FOR <duration> [MAX BATCH SIZE <bytes>]`, when present.
    pub fn collect(&mut self) -> PResult<Option<Collect>> {
        if !self.eat_keywords(&["COLLECT", "FOR"]) {
            return Ok(None);
        }
        self.collect_body().map(Some)
    }

    /// The part of COLLECT after `COLLECT FOR`.
    pub fn collect_body(&mut self) -> PResult<Collect> {
        let interval = self.duration()?;
        let max_batch_size = if self.eat_keywords(&["MAX", "BATCH", "SIZE"]) {
            Some(self.byte_size()?)
        } else {
            None
        };
        Ok(Collect {
            interval,
            max_batch_size,
        })
    }

    /// `BRANCHED BY <branch>` or `UNBRANCHED` as a node-wide contract.
    pub fn node_branching(&mut self) -> PResult<Option<Branching>> {
        if self.eat_keywords(&["BRANCHED", "BY"]) {
            Ok(Some(Branching::BranchedBy(
                self.ident(NameKind::Existing(ObjectKind::Branch))?,
            )))
        } else if self.eat_keyword("UNBRANCHED") {
            Ok(Some(Branching::Unbranched))
        } else {
            Ok(None)
        }
    }

    /// Zero or more `USING MATERIALIZED STATE <relay> <policy>` declarations.
    pub fn state_dependencies(&mut self) -> PResult<Vec<StateDependency>> {
        let mut deps = Vec::new();
        while self.eat_keywords(&["USING", "MATERIALIZED", "STATE"]) {
            let relay = self.ident(NameKind::Existing(ObjectKind::Relay))?;
            deps.push(StateDependency {
                relay,
                policy: self.state_policy()?,
            });
        }
        Ok(deps)
    }

    /// `DEFAULT { field = constant, … } | REQUIRED SKIP | REQUIRED WAIT`.
    pub fn state_policy(&mut self) -> PResult<StatePolicy> {
        if self.eat_keyword("DEFAULT") {
            self.expect_punct(Punct::LBrace)?;
            let fields = self.assignments()?;
            self.expect_punct(Punct::RBrace)?;
            return Ok(StatePolicy::Default(fields));
        }
        self.expect_keyword("REQUIRED")?;
        match self.expect_one_of(&["SKIP", "WAIT"])? {
            "SKIP" => Ok(StatePolicy::RequiredSkip),
            _ => Ok(StatePolicy::RequiredWait),
        }
    }

    /// `field = expr, …`; a comma continues the list only when another `field =` follows.
    pub fn assignments(&mut self) -> PResult<Vec<Assignment>> {
        let mut list = vec![self.assignment()?];
        while self.peek().kind == crate::lexer::TokenKind::Punct(Punct::Comma)
            && self.peek_at(1).kind == crate::lexer::TokenKind::Word
            && self.peek_at(2).kind == crate::lexer::TokenKind::Punct(Punct::Eq)
        {
            self.advance();
            list.push(self.assignment()?);
        }
        Ok(list)
    }

    fn assignment(&mut self) -> PResult<Assignment> {
        let target = self.ident(NameKind::Field)?;
        self.expect_punct(Punct::Eq)?;
        Ok(Assignment {
            target,
            value: self.expr()?,
        })
    }

    /// Consecutive `TO <relay> <route body>` routes (at least one).
    pub fn routes(&mut self, rules: RouteRules) -> PResult<Vec<Route>> {
        let mut routes = Vec::new();
        self.expect_keyword("TO")?;
        loop {
            routes.push(self.route_body(rules)?);
            if !self.eat_keyword("TO") {
                return Ok(routes);
            }
        }
    }

    /// A route after its `TO`: `<relay>` and its clauses.
    pub fn route_body(&mut self, rules: RouteRules) -> PResult<Route> {
        let target = self.ident(NameKind::Existing(ObjectKind::Relay))?;
        let mut route = Route {
            target,
            inherit: None,
            set: Vec::new(),
            filter: None,
            branching: None,
            flush: None,
            on_error: MessageErrorPolicy::Log,
        };
        let mut seen_set = false;
        loop {
            let clause_span = self.span();
            let duplicate = |what: &str| {
                ParseError::new(
                    clause_span,
                    format!("a route takes one {what} clause; this route already has one"),
                )
            };
            if rules.inherit && self.eat_keyword("INHERIT") {
                if route.inherit.is_some() {
                    return Err(duplicate("INHERIT"));
                }
                route.inherit = Some(self.inherit()?);
            } else if !rules.inherit && self.is_keyword_at(0, "INHERIT") {
                return Err(ParseError::new(
                    clause_span,
                    format!(
                        "{} routes are set-only and do not accept INHERIT",
                        rules.node
                    ),
                ));
            } else if self.eat_keyword("SET") {
                if seen_set {
                    return Err(duplicate("SET"));
                }
                seen_set = true;
                route.set = self.assignments()?;
            } else if self.eat_keyword("WHERE") {
                if route.filter.is_some() {
                    return Err(duplicate("WHERE"));
                }
                route.filter = Some(self.expr()?);
            } else if rules.branching != Presence::Forbidden
                && (self.at_keywords(&["BRANCHED", "BY"]) || self.at_keyword("UNBRANCHED"))
            {
                if route.branching.is_some() {
                    return Err(duplicate("branch"));
                }
                route.branching = Some(self.route_branching()?);
            } else if rules.branching == Presence::Forbidden
                && (self.is_keyword_at(0, "BRANCHED") || self.is_keyword_at(0, "UNBRANCHED"))
            {
                return Err(ParseError::new(
                    clause_span,
                    format!(
                        "{} routes do not construct branches: declare BRANCHED BY or UNBRANCHED once for the whole node",
                        rules.node
                    ),
                ));
            } else {
                break;
            }
        }
        if rules.set_required && route.set.is_empty() {
            self.note(crate::error::Expected::Keyword("SET"));
            let mut err = self.unexpected();
            err.message = format!(
                "{} routes are set-only and need a SET clause; {}",
                rules.node, err.message
            );
            return Err(err);
        }
        if rules.branching == Presence::Required && route.branching.is_none() {
            self.note(crate::error::Expected::Keyword("BRANCHED"));
            self.note(crate::error::Expected::Keyword("UNBRANCHED"));
            let mut err = self.unexpected();
            err.message = format!(
                "route to `{}` needs BRANCHED BY <branch> or UNBRANCHED; {}",
                route.target, err.message
            );
            return Err(err);
        }
        match rules.flush {
            Presence::Forbidden => {
                if self.is_keyword_at(0, "FLUSH") {
                    return Err(ParseError::new(
                        self.span(),
                        format!("{} routes take no FLUSH", rules.node),
                    ));
                }
            }
            Presence::Required => route.flush = Some(self.flush()?),
            Presence::Optional => {
                if self.at_keyword("FLUSH") {
                    route.flush = Some(self.flush()?);
                }
            }
        }
        route.on_error = self.message_error_policy()?;
        Ok(route)
    }

    fn inherit(&mut self) -> PResult<Inherit> {
        let fields = if self.eat_keyword("ALL") {
            let except = if self.eat_keyword("EXCEPT") {
                self.ident_list(NameKind::Field)?
            } else {
                Vec::new()
            };
            InheritFields::All { except }
        } else {
            InheritFields::Only(self.ident_list(NameKind::Field)?)
        };
        let leak_sensitive = self.eat_keywords(&["LEAK", "SENSITIVE"]);
        Ok(Inherit {
            fields,
            leak_sensitive,
        })
    }

    fn route_branching(&mut self) -> PResult<RouteBranching> {
        if self.eat_keyword("UNBRANCHED") {
            return Ok(RouteBranching::Unbranched);
        }
        self.expect_keywords(&["BRANCHED", "BY"])?;
        let branch = self.ident(NameKind::Existing(ObjectKind::Branch))?;
        let set = if self.eat_keyword("SET") {
            self.assignments()?
        } else {
            Vec::new()
        };
        Ok(RouteBranching::BranchedBy { branch, set })
    }

    /// `FLUSH EACH <duration> MAX BATCH SIZE <bytes> | FLUSH IMMEDIATE`.
    pub fn flush(&mut self) -> PResult<Flush> {
        self.expect_keyword("FLUSH")?;
        if self.eat_keyword("IMMEDIATE") {
            return Ok(Flush::Immediate);
        }
        self.expect_keyword("EACH")?;
        let interval = self.duration()?;
        self.expect_keywords(&["MAX", "BATCH", "SIZE"])?;
        Ok(Flush::Each {
            interval,
            max_batch_size: self.byte_size()?,
        })
    }

    /// `ON MESSAGE ERROR IGNORE | LOG | SEND TO <relay> [SET …]`.
    pub fn message_error_policy(&mut self) -> PResult<MessageErrorPolicy> {
        self.expect_keywords(&["ON", "MESSAGE", "ERROR"])?;
        if self.eat_keyword("IGNORE") {
            return Ok(MessageErrorPolicy::Ignore);
        }
        if self.eat_keyword("LOG") {
            return Ok(MessageErrorPolicy::Log);
        }
        self.expect_keywords(&["SEND", "TO"])?;
        let relay = self.ident(NameKind::Existing(ObjectKind::Relay))?;
        let set = if self.eat_keyword("SET") {
            self.assignments()?
        } else {
            Vec::new()
        };
        Ok(MessageErrorPolicy::SendTo { relay, set })
    }

    /// `IGNORE | LOG` after `ON GENERAL ERROR` (or `ON GLOBAL ERROR`).
    pub fn general_error_policy(&mut self) -> PResult<GeneralErrorPolicy> {
        match self.expect_one_of(&["IGNORE", "LOG"])? {
            "IGNORE" => Ok(GeneralErrorPolicy::Ignore),
            _ => Ok(GeneralErrorPolicy::Log),
        }
    }

    /// `MODE NO ACK | MODE ACK SEQUENTIAL … | MODE ACK PARALLEL MAX n …`, each ACK mode with its
    /// `ACK TIMEOUT` and `RETRY POLICY`. `batch_timeout` says whether ACK PARALLEL takes
    /// `BATCH TIMEOUT <duration>` (transport sources) or not (client producers).
    pub fn delivery_mode(&mut self, batch_timeout: Presence) -> PResult<DeliveryMode> {
        self.expect_keyword("MODE")?;
        if self.eat_keywords(&["NO", "ACK"]) {
            if self.is_keyword_at(0, "MAX") {
                return Err(ParseError::new(
                    self.span(),
                    "MODE NO ACK never accepts MAX <n>: only ACK PARALLEL has an in-flight window",
                ));
            }
            return Ok(DeliveryMode::NoAck);
        }
        self.expect_keyword("ACK")?;
        if self.eat_keyword("SEQUENTIAL") {
            self.expect_keywords(&["ACK", "TIMEOUT"])?;
            let ack_timeout = self.duration()?;
            return Ok(DeliveryMode::AckSequential {
                ack_timeout,
                retry: self.retry_policy()?,
            });
        }
        self.expect_keyword("PARALLEL")?;
        self.expect_keyword("MAX")?;
        let max_span = self.span();
        let max = self.integer()?;
        if max == 0 {
            return Err(ParseError::new(
                max_span,
                "ACK PARALLEL MAX must be at least 1",
            ));
        }
        let batch_timeout = match batch_timeout {
            Presence::Required => {
                self.expect_keywords(&["BATCH", "TIMEOUT"])?;
                Some(self.duration()?)
            }
            Presence::Optional => {
                if self.eat_keywords(&["BATCH", "TIMEOUT"]) {
                    Some(self.duration()?)
                } else {
                    None
                }
            }
            Presence::Forbidden => {
                if self.is_keyword_at(0, "BATCH") {
                    return Err(ParseError::new(
                        self.span(),
                        "this ACK PARALLEL mode takes no BATCH TIMEOUT",
                    ));
                }
                None
            }
        };
        self.expect_keywords(&["ACK", "TIMEOUT"])?;
        let ack_timeout = self.duration()?;
        Ok(DeliveryMode::AckParallel {
            max,
            batch_timeout,
            ack_timeout,
            retry: self.retry_policy()?,
        })
    }

    /// `RETRY POLICY BACKOFF <duration> MAX <duration>`; MAX must not be below BACKOFF.
    pub fn retry_policy(&mut self) -> PResult<RetryPolicy> {
        self.expect_keywords(&["RETRY", "POLICY", "BACKOFF"])?;
        let backoff = self.duration()?;
        self.expect_keyword("MAX")?;
        let max_span = self.span();
        let max = self.duration()?;
        if max < backoff {
            return Err(ParseError::new(
                max_span,
                "RETRY POLICY MAX must not be shorter than BACKOFF",
            ));
        }
        Ok(RetryPolicy { backoff, max })
    }

    /// The body after `ON QUIESCE`: every form parses; which ones a source honours is the
    /// caller's (or validation's) decision.
    pub fn quiesce_body(&mut self) -> PResult<QuiesceMode> {
        if self.eat_keyword("SUSPEND") {
            return Ok(QuiesceMode::Suspend);
        }
        if self.eat_keyword("DROP") {
            return Ok(QuiesceMode::Drop);
        }
        if self.eat_keyword("REJECT") {
            self.expect_keywords(&["RETRY", "AFTER"])?;
            return Ok(QuiesceMode::RejectRetryAfter(self.duration()?));
        }
        self.expect_keywords(&["BUFFER", "MAX", "SIZE"])?;
        let size_span = self.span();
        let max_size = self.byte_size()?;
        if max_size.bytes == 0 {
            return Err(ParseError::new(
                size_span,
                "BUFFER MAX SIZE must be positive",
            ));
        }
        let overflow = if self.eat_keywords(&["ON", "OVERFLOW"]) {
            self.expect_keyword("DROP")?;
            Some(match self.expect_one_of(&["OLDEST", "NEWEST"])? {
                "OLDEST" => OverflowPolicy::DropOldest,
                _ => OverflowPolicy::DropNewest,
            })
        } else {
            None
        };
        Ok(QuiesceMode::Buffer { max_size, overflow })
    }
}
