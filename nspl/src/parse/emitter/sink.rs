//! The part of an emitter after `TO`: the head's sink body, MODE, RETRY POLICY and the
//! optional encoding. CREATE and `ALTER … SET TO` share it.

use crate::ast::emitter::{EmitterHead, EmitterMode, Encoding, FileFormat, Sink, SinkBody};
use crate::error::{NameKind, ParseError};
use crate::lexer::Punct;
use crate::parse::{PResult, Parser};
use crate::span::Span;
use crate::ObjectKind;

/// `<sink body> MODE … RETRY POLICY … [ENCODE USING <codec> | WITHOUT BODY]` after `TO`.
pub fn sink(p: &mut Parser, head: EmitterHead) -> PResult<Sink> {
    let body = body(p, head)?;
    let mode = mode(p)?;
    if !p.at_keyword("RETRY") {
        let mut err = p.unexpected();
        err.message = format!(
            "an emitter's MODE is followed by RETRY POLICY BACKOFF <duration> MAX <duration> \
             in every mode; {}",
            err.message
        );
        return Err(err);
    }
    let retry = p.retry_policy()?;
    let encoding = encoding(p, &body)?;
    Ok(Sink {
        body,
        mode,
        retry,
        encoding,
    })
}

fn client(p: &mut Parser, head: EmitterHead) -> PResult<crate::ast::Ident> {
    let [connector, _] = head.keywords();
    p.ident(NameKind::ClientOf(connector))
}

/// `<keyword> '<name>'`, an external name kept exactly.
fn named(p: &mut Parser, keyword: &'static str) -> PResult<String> {
    p.expect_keyword(keyword)?;
    p.string()
}

fn optional_key(p: &mut Parser) -> PResult<Option<crate::ast::Expr>> {
    if p.eat_keyword("KEY") {
        Ok(Some(p.expr()?))
    } else {
        Ok(None)
    }
}

fn body(p: &mut Parser, head: EmitterHead) -> PResult<SinkBody> {
    // Struct fields are evaluated in the order written, which is the order of the clauses.
    Ok(match head {
        EmitterHead::ClientConsumer => {
            p.expect_keyword("SCHEMA")?;
            SinkBody::ClientConsumer {
                schema: p.ident(NameKind::Existing(ObjectKind::Schema))?,
            }
        }
        EmitterHead::KafkaTopic => SinkBody::KafkaTopic {
            client: client(p, head)?,
            topic: named(p, "TOPIC")?,
            key: optional_key(p)?,
        },
        EmitterHead::PulsarTopic => SinkBody::PulsarTopic {
            client: client(p, head)?,
            topic: named(p, "TOPIC")?,
            key: optional_key(p)?,
        },
        EmitterHead::HttpRequest => {
            let client = client(p, head)?;
            p.expect_keyword("METHOD")?;
            let method = p.expr()?;
            p.expect_keyword("PATH")?;
            SinkBody::HttpRequest {
                client,
                method,
                path: p.expr()?,
            }
        }
        EmitterHead::FileAppend => {
            let client = client(p, head)?;
            p.expect_keyword("PATH")?;
            let span = p.span();
            let path = p.string()?;
            check_relative(p, &path, span)?;
            p.expect_keyword("FORMAT")?;
            let format = match p.expect_one_of(&["NDJSON", "ARROW"])? {
                "NDJSON" => FileFormat::Ndjson,
                _ => FileFormat::Arrow,
            };
            SinkBody::FileAppend {
                client,
                path,
                format,
            }
        }
        EmitterHead::MqttTopic => {
            let client = client(p, head)?;
            let topic = named(p, "TOPIC")?;
            let qos = if p.eat_keyword("QOS") {
                let span = p.span();
                match p.integer()? {
                    0 => Some(0),
                    1 => Some(1),
                    _ => return Err(p.error_at(span, "MQTT QOS must be 0 or 1")),
                }
            } else {
                None
            };
            SinkBody::MqttTopic { client, topic, qos }
        }
        EmitterHead::NatsSubject => SinkBody::NatsSubject {
            client: client(p, head)?,
            subject: named(p, "SUBJECT")?,
        },
        EmitterHead::RabbitmqQueue => SinkBody::RabbitmqQueue {
            client: client(p, head)?,
            queue: named(p, "QUEUE")?,
        },
        EmitterHead::RedisPubsub => SinkBody::RedisPubsub {
            client: client(p, head)?,
            channel: named(p, "CHANNEL")?,
        },
        EmitterHead::ZeromqPush => SinkBody::ZeromqPush {
            client: client(p, head)?,
        },
        EmitterHead::SqsQueue => SinkBody::SqsQueue {
            client: client(p, head)?,
            queue: named(p, "QUEUE")?,
        },
        EmitterHead::PostgresTable => {
            let client = client(p, head)?;
            p.expect_keywords(&["INSERT", "TO", "TABLE"])?;
            let table = p.string()?;
            SinkBody::PostgresTable {
                client,
                table,
                values: values(p)?,
            }
        }
    })
}

/// A FILE APPEND path is relative to the client's directory and may not leave it.
fn check_relative(p: &Parser, path: &str, span: Span) -> PResult<()> {
    let message = if path.is_empty() {
        "FILE APPEND PATH must not be empty".to_string()
    } else if path.starts_with(['/', '\\']) || path.as_bytes().get(1) == Some(&b':') {
        format!(
            "FILE APPEND PATH must be relative to the client's directory, but '{path}' is absolute"
        )
    } else if path.split(['/', '\\']).any(|segment| segment == "..") {
        format!("FILE APPEND PATH must stay inside the client's directory, but '{path}' uses '..'")
    } else {
        return Ok(());
    };
    Err(p.error_at(span, message))
}

/// `VALUES {"col" = <expr>, …}`: at least one column, each named once.
fn values(p: &mut Parser) -> PResult<Vec<(String, crate::ast::Expr)>> {
    p.expect_keyword("VALUES")?;
    let open = p.expect_punct(Punct::LBrace)?;
    if p.at_punct(Punct::RBrace) {
        return Err(p.error_at(
            open.to(p.span()),
            "VALUES needs at least one column: {\"col\" = <expr>, …}",
        ));
    }
    let mut values: Vec<(String, crate::ast::Expr)> = Vec::new();
    loop {
        let span = p.span();
        if p.at_word() {
            let token = p.peek().clone();
            let word = p.text(&token);
            return Err(p.error_at(
                span,
                format!("VALUES names columns with strings: write \"{word}\" = <expr>"),
            ));
        }
        let column = p.string()?;
        if values.iter().any(|(c, _)| *c == column) {
            return Err(p.error_at(span, format!("column \"{column}\" appears twice in VALUES")));
        }
        p.expect_punct(Punct::Eq)?;
        values.push((column, p.expr()?));
        if !p.eat_punct(Punct::Comma) {
            break;
        }
    }
    p.expect_punct(Punct::RBrace)?;
    Ok(values)
}

/// `MODE NO ACK | MODE ACK SEQUENTIAL ACK TIMEOUT d | MODE ACK PARALLEL MAX n ACK TIMEOUT d`.
fn mode(p: &mut Parser) -> PResult<EmitterMode> {
    p.expect_keyword("MODE")?;
    if p.eat_keywords(&["NO", "ACK"]) {
        if p.is_keyword_at(0, "MAX") {
            return Err(p.error_at(
                p.span(),
                "MODE NO ACK never accepts MAX <n>: only ACK PARALLEL has an in-flight window",
            ));
        }
        return Ok(EmitterMode::NoAck);
    }
    p.expect_keyword("ACK")?;
    if p.expect_one_of(&["SEQUENTIAL", "PARALLEL"])? == "SEQUENTIAL" {
        p.expect_keywords(&["ACK", "TIMEOUT"])?;
        return Ok(EmitterMode::AckSequential {
            ack_timeout: p.duration()?,
        });
    }
    p.expect_keyword("MAX")?;
    let max_span = p.span();
    let max = p.integer()?;
    if max == 0 {
        return Err(p.error_at(max_span, "ACK PARALLEL MAX must be at least 1"));
    }
    if p.is_keyword_at(0, "BATCH") {
        return Err(p.error_at(
            p.span(),
            "an emitter's ACK PARALLEL takes no BATCH TIMEOUT: write ACK PARALLEL MAX <n> \
             ACK TIMEOUT <duration>",
        ));
    }
    p.expect_keywords(&["ACK", "TIMEOUT"])?;
    Ok(EmitterMode::AckParallel {
        max,
        ack_timeout: p.duration()?,
    })
}

/// `[ENCODE USING <codec> | WITHOUT BODY]`, refused where the sink writes no encoded body.
fn encoding(p: &mut Parser, body: &SinkBody) -> PResult<Option<Encoding>> {
    let refusal = |what: &str| -> Option<String> {
        match body {
            SinkBody::ClientConsumer { .. } => Some(format!(
                "CLIENT CONSUMER emitters carry Arrow batches and take no {what}"
            )),
            SinkBody::PostgresTable { .. } => Some(format!(
                "POSTGRES TABLE emitters write the columns VALUES names and take no {what}"
            )),
            SinkBody::FileAppend { .. } if what == "WITHOUT BODY" => {
                Some("FILE APPEND emitters append each row and take no WITHOUT BODY".to_string())
            }
            SinkBody::FileAppend {
                format: FileFormat::Arrow,
                ..
            } => Some(
                "FORMAT ARROW appends Arrow batches and takes no ENCODE USING; \
                 encode with a codec under FORMAT NDJSON"
                    .to_string(),
            ),
            _ => None,
        }
    };
    for (first, second, what) in [
        ("ENCODE", "USING", "ENCODE USING"),
        ("WITHOUT", "BODY", "WITHOUT BODY"),
    ] {
        let Some(message) = refusal(what) else {
            if p.eat_keywords(&[first, second]) {
                return Ok(Some(match first {
                    "ENCODE" => Encoding::Codec(p.ident(NameKind::Existing(ObjectKind::Codec))?),
                    _ => Encoding::WithoutBody,
                }));
            }
            continue;
        };
        if p.is_keyword_at(0, first) {
            let span = p.span().to(p.peek_at(1).span);
            return Err(ParseError::new(span, message));
        }
    }
    Ok(None)
}
