//! Unit tests of the protocol state machine, driven synchronously by a scripted backend.

use nervix_nspl::{NoCatalog, Span};

use super::*;

/// Runs `chunks` through a fresh machine and returns every line it sends, the greeting first.
/// The scripted backend knows `admin`, `ops` and `reader` (password `pw`); it answers a
/// statement with one output line echoing it, and refuses any statement holding `bad` at that
/// word.
fn run(security: Security, chunks: &[&str]) -> Vec<String> {
    let mut protocol = Protocol::new(security);
    let mut lines = vec![protocol.greeting()];
    let mut chunks = chunks.iter();
    loop {
        match protocol.next_action() {
            Action::Send(line) => lines.push(line),
            Action::NeedInput => match chunks.next() {
                Some(chunk) => protocol.feed(chunk.as_bytes()),
                None => protocol.end_of_input(),
            },
            Action::Authenticate { user, password } => {
                let result = match (user.as_str(), password.as_str()) {
                    ("admin", "pw") => Ok(Role::Admin),
                    ("ops", "pw") => Ok(Role::Operator),
                    ("reader", "pw") => Ok(Role::Reader),
                    _ => Err(AuthError::InvalidCredentials),
                };
                protocol.auth_result(result);
            }
            Action::Execute { statement } => {
                let reply = match statement.find("bad") {
                    Some(at) => Reply::refused(Span::new(at, at + 3), "bad word"),
                    None => Reply::ok(vec![format!("ran {}", statement.replace('\n', " "))]),
                };
                protocol.executed(&statement, reply);
            }
            Action::Complete { cursor, text } => {
                protocol.completed(nervix_nspl::complete(&text, cursor, &NoCatalog));
            }
            Action::Upload { resource, archive } => {
                let text = String::from_utf8_lossy(&archive).replace('\n', "|");
                protocol.uploaded(Reply::ok(vec![format!("{resource} <- {text}")]));
            }
            Action::Pending => panic!("the driver answers every request"),
            Action::Close => return lines,
        }
    }
}

const GREETING: &str = "NERVIX 0.1.0 AUTH REQUIRED";
const AUTH_OPS: &str = "\\auth ops pw\n";
const OPS_OK: [&str; 2] = ["  authenticated as ops with role OPERATOR", "OK"];

fn expect<S: AsRef<str>>(security: Security, chunks: &[&str], expected: &[S]) {
    let lines = run(security, chunks);
    assert_eq!(lines[0], Protocol::new(security).greeting());
    let expected: Vec<&str> = expected.iter().map(AsRef::as_ref).collect();
    assert_eq!(lines[1..], expected, "chunks {chunks:?}");
}

fn authed(expected: &[&str]) -> Vec<String> {
    OPS_OK
        .iter()
        .chain(expected)
        .map(|s| s.to_string())
        .collect()
}

#[test]
fn greeting_names_the_version_and_the_security() {
    assert_eq!(
        Protocol::new(Security::Required).greeting(),
        format!("NERVIX {VERSION} AUTH REQUIRED")
    );
    assert!(Protocol::new(Security::Insecure)
        .greeting()
        .starts_with(&format!("NERVIX {VERSION} READY ")));
    assert_eq!(GREETING, format!("NERVIX {VERSION} AUTH REQUIRED"));
}

#[test]
fn statements_split_anywhere_give_the_same_answers() {
    let script =
        "\\auth ops pw\nSHOW DOMAINS; CREATE DOMAIN sales;\n-- done\nDESCRIBE DOMAIN\n  sales;";
    let expected = authed(&[
        "  ran SHOW DOMAINS;",
        "OK",
        "  ran CREATE DOMAIN sales;",
        "OK",
        "  ran DESCRIBE DOMAIN   sales;",
        "OK",
    ]);
    for cut in 0..=script.len() {
        let (a, b) = script.split_at(cut);
        assert_eq!(
            run(Security::Required, &[a, b])[1..],
            expected,
            "cut at {cut}"
        );
    }
    let bytes: Vec<String> = script.chars().map(String::from).collect();
    let chunks: Vec<&str> = bytes.iter().map(String::as_str).collect();
    assert_eq!(run(Security::Required, &chunks)[1..], expected);
}

#[test]
fn semicolons_in_strings_and_comments_do_not_end_statements() {
    expect(
        Security::Required,
        &[
            "\\auth admin pw\n",
            "CREATE USER x WITH PASSWORD 'a;''b' -- c;\n /* ; */ ROLE READER;",
        ],
        &[
            "  authenticated as admin with role ADMIN",
            "OK",
            "  ran CREATE USER x WITH PASSWORD 'a;''b' -- c;  /* ; */ ROLE READER;",
            "OK",
        ],
    );
}

#[test]
fn refusals_are_positioned_within_their_statement() {
    expect(
        Security::Required,
        &[AUTH_OPS, "SHOW DOMAINS;\n  DESCRIBE DOMAIN\n  bad;"],
        &authed(&["  ran SHOW DOMAINS;", "OK", "ERROR 2:3 bad word"]),
    );
    // A parse error is the parser's message at its position in the statement.
    let lines = run(Security::Required, &[AUTH_OPS, "  CREATE\n DOMAN x;"]);
    assert!(lines[3].starts_with("ERROR 2:2 "), "{lines:?}");
}

#[test]
fn unauthenticated_sessions_may_only_authenticate_or_quit() {
    expect(
        Security::Required,
        &["SHOW DOMAINS;\n\\complete 0 SH\n\\auth ops nope\n\\auth ops pw\nSHOW DOMAINS;\n\\quit\n"],
        &[
            "ERROR 1:1 not authenticated: use \\auth <user> <password>",
            "ERROR 1:1 not authenticated: use \\auth <user> <password>",
            "ERROR authentication failed",
            OPS_OK[0],
            OPS_OK[1],
            "  ran SHOW DOMAINS;",
            "OK",
            "OK",
        ],
    );
}

#[test]
fn repeated_failures_close_the_connection() {
    expect(
        Security::Required,
        &["\\auth ops a\n\\auth Nobody b\n\\auth ops c\n\\auth ops pw\n"],
        &[
            "ERROR authentication failed",
            "ERROR authentication failed",
            "ERROR authentication failed: too many failed attempts, closing",
        ],
    );
}

#[test]
fn readers_are_refused_changes() {
    expect(
        Security::Required,
        &[
            "\\auth reader pw\n",
            "SHOW DOMAINS; CREATE DOMAIN x; USE x;",
        ],
        &[
            "  authenticated as reader with role READER",
            "OK",
            "  ran SHOW DOMAINS;",
            "OK",
            "ERROR 1:1 role READER may only run SHOW, DESCRIBE and USE",
            "  ran USE x;",
            "OK",
        ],
    );
}

#[test]
fn meta_commands() {
    expect(
        Security::Required,
        &["\\frob x\n\\\n\\auth\n\\auth ops pw\n\\auth ops pw\n\\complete 99 SH\n\\quit\nSHOW DOMAINS;"],
        &[
            "ERROR unknown meta-command \\frob: use \\auth, \\complete or \\quit",
            "ERROR unknown meta-command \\: use \\auth, \\complete or \\quit",
            "ERROR usage: \\auth <user> <password>",
            OPS_OK[0],
            OPS_OK[1],
            "ERROR already authenticated as ops",
            "ERROR \\complete offset 99 is not a character boundary of the text's 2 bytes",
            "OK",
        ],
    );
    let lines = run(
        Security::Required,
        &[AUTH_OPS, "\\complete 10 CREATE DOM\r\n"],
    );
    assert_eq!(lines[3..], ["  7 DOMAIN", "OK"]);
}

#[test]
fn a_backslash_inside_a_statement_is_not_a_meta_command() {
    let lines = run(Security::Required, &[AUTH_OPS, "SHOW\n\\quit\n;"]);
    assert!(lines[3].starts_with("ERROR 2:1 "), "{lines:?}");
    assert_eq!(lines.len(), 4);
}

#[test]
fn a_last_meta_line_without_its_line_end_runs() {
    expect(Security::Required, &["\\quit"], &["OK"]);
}

#[test]
fn insecure_consoles_act_as_admin() {
    expect(
        Security::Insecure,
        &["CREATE USER u WITH PASSWORD 'p' ROLE READER;\n\\auth admin pw\n"],
        &[
            "  ran CREATE USER u WITH PASSWORD 'p' ROLE READER;",
            "OK",
            "ERROR authentication is off: this node runs with --insecure-console",
        ],
    );
    assert_eq!(
        Protocol::new(Security::Insecure).initial_login(),
        Some(Login {
            user: INSECURE_USER.into(),
            role: Role::Admin
        })
    );
    assert_eq!(Protocol::new(Security::Required).initial_login(), None);
}

#[test]
fn empty_statements_are_ignored_and_partial_ones_dropped_at_the_end() {
    expect(
        Security::Insecure,
        &[";; -- x\n ; SHOW DOMAINS;; SHOW"],
        &["  ran SHOW DOMAINS;", "OK"],
    );
}

#[test]
fn oversize_statements_are_refused_once_and_skipped_to_their_end() {
    let mut protocol = Protocol::new(Security::Insecure);
    protocol.feed(b"SHOW DOMAINS '");
    let chunk = vec![b'x'; 1024 * 1024];
    let mut lines = Vec::new();
    let mut fed = 0;
    loop {
        match protocol.next_action() {
            Action::Send(line) => lines.push(line),
            Action::NeedInput if fed < 10 => {
                protocol.feed(&chunk);
                fed += 1;
            }
            Action::NeedInput if fed == 10 => {
                protocol.feed(b" ; still the string' ; SHOW DOMAINS;");
                fed += 1;
            }
            Action::NeedInput => protocol.end_of_input(),
            Action::Execute { statement } => {
                lines.push(format!("ran {statement}"));
                protocol.executed(&statement, Reply::ok(Vec::new()));
            }
            Action::Close => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        lines,
        [
            format!(
                "ERROR 1:1 statement longer than {MAX_STATEMENT_BYTES} bytes without its `;`: \
                 discarded up to its `;`"
            ),
            "ran SHOW DOMAINS;".to_string(),
            "OK".to_string(),
        ]
    );
}

#[test]
fn oversize_meta_lines_are_refused() {
    let long = format!("\\complete 0 {}\n\\quit\n", "x".repeat(MAX_META_LINE_BYTES));
    expect(
        Security::Insecure,
        &[&long],
        &[
            &format!("ERROR meta-command line longer than {MAX_META_LINE_BYTES} bytes: discarded"),
            "OK",
        ],
    );
}

#[test]
fn invalid_utf8_is_refused_with_its_position() {
    let mut protocol = Protocol::new(Security::Insecure);
    protocol.feed(b"SHOW\n ab\xff;\n\\x\xff\n");
    protocol.end_of_input();
    let mut lines = Vec::new();
    while let Action::Send(line) = protocol.next_action() {
        lines.push(line);
    }
    assert_eq!(
        lines,
        [
            "ERROR 2:4 statement is not valid UTF-8",
            "ERROR meta-command is not valid UTF-8"
        ]
    );
}

#[test]
fn output_lines_are_split_and_messages_kept_on_one_line() {
    let mut protocol = Protocol::new(Security::Insecure);
    protocol.feed(b"SHOW DOMAINS;");
    let Action::Execute { statement } = protocol.next_action() else {
        panic!("expected an execution");
    };
    protocol.executed(
        &statement,
        Reply {
            lines: vec!["a\r\nb".into()],
            outcome: Err(super::super::backend::Refusal {
                span: Span::new(5, 6),
                message: "two\nlines".into(),
            }),
        },
    );
    let mut lines = Vec::new();
    while let Action::Send(line) = protocol.next_action() {
        lines.push(line);
    }
    assert_eq!(lines, ["  a", "  b", "ERROR 1:6 two lines"]);
}

#[test]
fn nothing_is_consumed_while_a_request_is_outstanding() {
    let mut protocol = Protocol::new(Security::Insecure);
    protocol.feed(b"SHOW DOMAINS; SHOW DOMAINS;");
    assert!(matches!(protocol.next_action(), Action::Execute { .. }));
    assert!(matches!(protocol.next_action(), Action::Pending));
    protocol.executed("SHOW DOMAINS;", Reply::ok(Vec::new()));
    assert!(matches!(protocol.next_action(), Action::Send(line) if line == "OK"));
    assert!(matches!(protocol.next_action(), Action::Execute { .. }));
}

#[test]
fn passwords_stay_out_of_debug_output() {
    let action = Action::Authenticate {
        user: "ops".into(),
        password: "hunter2".into(),
    };
    assert!(!format!("{action:?}").contains("hunter2"));
}

#[test]
fn server_lines_parse() {
    assert_eq!(ServerLine::parse("  x y"), ServerLine::Output("x y"));
    assert_eq!(ServerLine::parse("OK"), ServerLine::Ok);
    assert_eq!(
        ServerLine::parse("ERROR 3:14 no such domain"),
        ServerLine::Error {
            at: Some(Position { line: 3, col: 14 }),
            message: "no such domain"
        }
    );
    assert_eq!(
        ServerLine::parse("ERROR authentication failed"),
        ServerLine::Error {
            at: None,
            message: "authentication failed"
        }
    );
    assert_eq!(ServerLine::parse(GREETING), ServerLine::Other(GREETING));
}

#[test]
fn uploads_take_exactly_their_bytes_unscanned() {
    let ran = ["  ran SHOW DOMAINS;", "OK"];
    // Split anywhere, holding what would end a statement or start a meta-command.
    expect(
        Security::Required,
        &[
            AUTH_OPS,
            "\\upload certs 9\n\\x;",
            "\n'; -",
            "-SHOW DOMAINS;",
        ],
        &authed(&["  certs <- \\x;|'; --", "OK"][..])
            .iter()
            .map(String::as_str)
            .chain(ran)
            .collect::<Vec<_>>(),
    );
    // An empty archive is complete at once (the backend refuses it; here it echoes).
    expect(
        Security::Insecure,
        &["\\upload certs 0\nSHOW DOMAINS;"],
        &["  certs <- ", "OK", ran[0], ran[1]],
    );
    // The input ending inside the archive drops it unanswered.
    expect(
        Security::Insecure,
        &["\\upload certs 10\nabc"],
        &[] as &[&str],
    );
}

#[test]
fn refused_uploads_skip_their_bytes_and_stay_in_step() {
    let not_authenticated = "ERROR 1:1 not authenticated: use \\auth <user> <password>";
    expect(
        Security::Required,
        &["\\upload certs 4\n;;;;SHOW DOMAINS;"],
        &[not_authenticated, not_authenticated],
    );
    expect(
        Security::Required,
        &[
            "\\auth reader pw\n",
            "\\upload certs 3\nab",
            "cSHOW DOMAINS;",
        ],
        &[
            "  authenticated as reader with role READER",
            "OK",
            "ERROR 1:1 role READER may only run SHOW, DESCRIBE and USE",
            "  ran SHOW DOMAINS;",
            "OK",
        ],
    );
    let usage = "ERROR 1:1 usage: \\upload <resource> <byte count>, then that many bytes of tar";
    expect(
        Security::Insecure,
        &["\\upload certs\n\\upload certs -1\n\\upload Certs 2\nxySHOW DOMAINS;"],
        &[
            usage,
            usage,
            "ERROR 1:1 'Certs' is not a resource name",
            "  ran SHOW DOMAINS;",
            "OK",
        ],
    );
    expect(
        Security::Insecure,
        &["\\upload certs 33554433\n", "SHOW DOMAINS;"],
        &[
            "ERROR 1:1 an upload holds at most 33554432 bytes of archive; this one announces \
           33554433: its bytes are skipped",
        ],
    );
}

#[test]
fn upload_actions_keep_archives_out_of_debug_output() {
    let action = Action::Upload {
        resource: "certs".into(),
        archive: b"secret key".to_vec(),
    };
    let shown = format!("{action:?}");
    assert!(
        shown.contains("archive_bytes: 10") && !shown.contains("secret"),
        "{shown}"
    );
}
