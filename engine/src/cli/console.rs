//! `nervix console`: the console client, for scripts (`-c`, `-f`, or NSPL piped to standard
//! input) and for people (line editing, history, multi-line statements, completion answered
//! by the server).
//!
//! Scripts are split into statements with the NSPL lexer and sent one at a time; each
//! statement's output is printed as it arrives, and the first refusal is printed as
//! `ERROR <line>:<col> <message>` with the server's statement-relative position translated to
//! the script's own (the statement's text is a verbatim slice of the script, so the translation
//! is exact), ending the run with exit code 2. The wire format is read through
//! [`nervix::console::protocol::ServerLine`], the same module that writes it.
//!
//! `UPLOAD RESOURCE r FROM '<path>'` whose `<path>` is a directory on this machine is not sent
//! as text: the directory's regular files are packed into a tar archive (relative paths; a
//! symbolic link or special file in it is refused, naming it) and streamed with the protocol's
//! `\upload <resource> <byte count>` meta-command, answered like the statement would be. A
//! path that exists here but is no directory is refused here; a path that does not exist here
//! is sent as the statement, which names a directory on the node. Refusals of the upload, ours
//! or the node's, point at the statement's start.
//!
//! Passwords come from NERVIX_PASSWORD or a prompt that does not echo, travel only in the
//! `\auth` line, and never reach the history file: lines naming a password are not recorded.

use std::cell::RefCell;
use std::io::{self, BufRead, BufReader, IsTerminal, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use clap::Args;
use nervix::console::protocol::{ServerLine, MAX_META_LINE_BYTES};
use nervix::console::DEFAULT_CONSOLE_ADDR;
use nervix::control::bundle::pack_directory;
use nervix_nspl::ast::catalog::CatalogStmt;
use nervix_nspl::lexer::{lex, Punct, TokenKind};
use nervix_nspl::{position, Position, Statement};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::FileHistory;
use rustyline::validate::Validator;
use rustyline::{Config, Editor, Helper};

use super::{input, Status, STDOUT_FAILED};

/// How long connecting (TCP and TLS) and reading the greeting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest line accepted from the server, in bytes.
const MAX_SERVER_LINE_BYTES: u64 = 16 * 1024 * 1024;

/// Entries kept in the history file.
const MAX_HISTORY_ENTRIES: usize = 1000;

/// The history file, under `$HOME`.
const HISTORY_FILE: &str = ".nervix_history";

/// The environment variable holding the password.
const PASSWORD_VARIABLE: &str = "NERVIX_PASSWORD";

const PROMPT: &str = "nervix> ";
const CONTINUATION_PROMPT: &str = "     -> ";

#[derive(Args)]
pub struct ConsoleArguments {
    /// The node's console address.
    #[arg(long, value_name = "HOST:PORT", default_value = DEFAULT_CONSOLE_ADDR)]
    addr: String,
    /// The user to authenticate as; the password comes from NERVIX_PASSWORD or a prompt.
    #[arg(long, value_name = "NAME", default_value = "admin")]
    user: String,
    /// Select this domain (`USE <domain>;`) before anything else.
    #[arg(long, value_name = "D")]
    domain: Option<String>,
    /// Run these NSPL statements, then exit: 0 when all succeeded, 2 at the first refusal.
    #[arg(short = 'c', value_name = "NSPL", conflicts_with = "file")]
    command: Option<String>,
    /// Run the statements of this file (`-` for standard input), then exit as with -c.
    #[arg(short = 'f', value_name = "FILE")]
    file: Option<PathBuf>,
    /// Connect with TLS, trusting the certificate authorities in this PEM file.
    #[arg(long = "tls-ca", value_name = "FILE")]
    tls_ca: Option<PathBuf>,
}

pub fn run(arguments: &ConsoleArguments) -> anyhow::Result<Status> {
    let script = match (&arguments.command, &arguments.file) {
        (Some(command), _) => Some(command.clone()),
        (None, Some(file)) => Some(input::read_script(file)?.text),
        (None, None) if !io::stdin().is_terminal() => {
            Some(input::read_script(Path::new("-"))?.text)
        }
        (None, None) => None,
    };
    let interactive = script.is_none();
    let mut connection = Connection::open(&arguments.addr, arguments.tls_ca.as_deref())?;
    if interactive {
        eprintln!("connected to {} at {}", connection.server, arguments.addr);
    }
    if connection.needs_auth {
        authenticate(&mut connection, &arguments.user)?;
    }
    if let Some(domain) = &arguments.domain {
        use_domain(&mut connection, domain)?;
    }
    let status = match script {
        Some(script) => run_script(&mut connection, &script)?,
        None => return interactive_loop(connection),
    };
    connection.quit();
    Ok(status)
}

fn authenticate(connection: &mut Connection, user: &str) -> anyhow::Result<()> {
    if user.is_empty() || user.contains(char::is_whitespace) {
        bail!("--user must be one word");
    }
    let password = match std::env::var(PASSWORD_VARIABLE) {
        Ok(password) if !password.is_empty() => password,
        _ => rpassword::prompt_password(format!("Password for {user}: ")).with_context(|| {
            format!("no password: set {PASSWORD_VARIABLE} or run from a terminal")
        })?,
    };
    if password.contains(['\n', '\r']) {
        bail!("the password holds a line break, which the console protocol cannot carry");
    }
    connection.send(&format!("\\auth {user} {password}\n"))?;
    drop(password);
    match connection.answer(|_| Ok(()))? {
        Outcome::Ok => Ok(()),
        Outcome::Refused { message, .. } => bail!("{message}"),
    }
}

fn use_domain(connection: &mut Connection, domain: &str) -> anyhow::Result<()> {
    let valid = domain
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && domain
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !valid {
        bail!("--domain {domain:?} is not a name: names are [a-z_][a-z0-9_]*");
    }
    connection.send(&format!("USE {domain};\n"))?;
    match connection.answer(|_| Ok(()))? {
        Outcome::Ok => Ok(()),
        Outcome::Refused { message, .. } => bail!("cannot use domain {domain}: {message}"),
    }
}

/// One statement of a script: its text and where it starts in the script.
#[derive(Debug, PartialEq, Eq)]
struct Piece {
    start: usize,
    text: String,
}

/// Splits `src` into statements (first token to `;`, empty statements skipped), and gives the
/// start of what follows the last `;` when that holds a token.
fn split_statements(src: &str) -> (Vec<Piece>, Option<usize>) {
    let mut pieces = Vec::new();
    let mut start = None;
    for token in lex(src).tokens {
        match token.kind {
            TokenKind::Eof => break,
            TokenKind::Punct(Punct::Semicolon) => {
                if let Some(begin) = start.take() {
                    pieces.push(Piece {
                        start: begin,
                        text: src[begin..token.span.end as usize].to_owned(),
                    });
                }
            }
            _ => {
                start.get_or_insert(token.span.start as usize);
            }
        }
    }
    (pieces, start)
}

/// The statements of a whole script; a last statement without `;` gets one on a line of its
/// own, unless it leaves a string or comment open, which is refused here with its position.
fn script_statements(src: &str) -> Result<Vec<Piece>, (Position, String)> {
    let (mut pieces, rest) = split_statements(src);
    if let Some(start) = rest {
        let text = format!("{}\n;", &src[start..]);
        let tokens = lex(&text).tokens;
        if let Some(open) = tokens.iter().find_map(|t| match &t.kind {
            TokenKind::Error(message) if t.span.end as usize == text.len() => {
                Some((t.span.start, message.clone()))
            }
            _ => None,
        }) {
            let at = translate(src, start, position(&text, open.0));
            return Err((at, open.1));
        }
        pieces.push(Piece { start, text });
    }
    for piece in &pieces {
        if piece.text.starts_with('\\') {
            return Err((
                position(src, piece.start as u32),
                "a script holds NSPL only: meta-commands are for the interactive console".into(),
            ));
        }
    }
    Ok(pieces)
}

/// A position relative to a statement starting at byte `start` of `src`, made absolute.
fn translate(src: &str, start: usize, at: Position) -> Position {
    let base = position(src, start as u32);
    if at.line <= 1 {
        Position {
            line: base.line,
            col: base.col.saturating_add(at.col.saturating_sub(1)),
        }
    } else {
        Position {
            line: base.line.saturating_add(at.line - 1),
            col: at.col,
        }
    }
}

fn run_script(connection: &mut Connection, src: &str) -> anyhow::Result<Status> {
    let pieces = match script_statements(src) {
        Ok(pieces) => pieces,
        Err((at, message)) => {
            eprintln!("ERROR {at} {message}");
            return Ok(Status::Refused);
        }
    };
    let mut stdout = io::stdout().lock();
    for piece in pieces {
        let outcome = submit(connection, &piece.text, |line| {
            writeln!(stdout, "{line}").context(STDOUT_FAILED)?;
            Ok(())
        })?;
        stdout.flush().context(STDOUT_FAILED)?;
        if let Outcome::Refused { at, message } = outcome {
            match at {
                Some(at) => eprintln!("ERROR {} {message}", translate(src, piece.start, at)),
                None => eprintln!("ERROR {message}"),
            }
            return Ok(Status::Refused);
        }
    }
    Ok(Status::Success)
}

fn interactive_loop(connection: Connection) -> anyhow::Result<Status> {
    let connection = Rc::new(RefCell::new(connection));
    let pending = Rc::new(RefCell::new(String::new()));
    let config = Config::builder()
        .max_history_size(MAX_HISTORY_ENTRIES)
        .context("history size")?
        .auto_add_history(false)
        .build();
    let mut editor: Editor<ConsoleHelper, FileHistory> =
        Editor::with_config(config).context("cannot start line editing")?;
    editor.set_helper(Some(ConsoleHelper {
        connection: connection.clone(),
        pending: pending.clone(),
    }));
    let history = std::env::var_os("HOME").map(|home| PathBuf::from(home).join(HISTORY_FILE));
    if let Some(history) = &history {
        // A missing history file is the normal first run.
        let _ = editor.load_history(history);
    }
    let outcome = edit_lines(&mut editor, &connection, &pending);
    if let Some(history) = &history {
        if let Err(error) = editor.save_history(history) {
            eprintln!(
                "warning: cannot save history to {}: {error}",
                history.display()
            );
        }
    }
    connection.borrow_mut().quit();
    outcome
}

fn edit_lines(
    editor: &mut Editor<ConsoleHelper, FileHistory>,
    connection: &Rc<RefCell<Connection>>,
    pending: &Rc<RefCell<String>>,
) -> anyhow::Result<Status> {
    let mut hiding = false;
    loop {
        let blank = split_statements(&pending.borrow()).1.is_none();
        let prompt = if blank { PROMPT } else { CONTINUATION_PROMPT };
        let line = match editor.readline(prompt) {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => {
                pending.borrow_mut().clear();
                continue;
            }
            Err(ReadlineError::Eof) => return Ok(Status::Success),
            Err(error) => return Err(error).context("cannot read the terminal"),
        };
        // A statement that named a password keeps all its later lines out of the history too.
        hiding = (hiding && !blank) || line.to_ascii_lowercase().contains("password");
        if !hiding && keeps_history(&line) {
            let _ = editor.add_history_entry(line.as_str());
        }
        let mut connection = connection.borrow_mut();
        if blank && line.trim_start().starts_with('\\') {
            pending.borrow_mut().clear();
            connection.send(&format!("{}\n", line.trim_start()))?;
            print_answer(&mut connection, None, &line, 0)?;
            if line.trim() == "\\quit" {
                return Ok(Status::Success);
            }
            continue;
        }
        let mut text = pending.borrow_mut();
        text.push_str(&line);
        text.push('\n');
        let (pieces, rest) = split_statements(&text);
        for piece in pieces {
            print_answer(&mut connection, Some(&piece.text), &text, piece.start)?;
        }
        match rest {
            Some(start) => {
                let rest = text[start..].to_owned();
                *text = rest;
            }
            None => text.clear(),
        }
    }
}

/// Whether a line may go to the history file: not blank, no `\auth` line, and nothing that
/// names a password (`CREATE USER … WITH PASSWORD '…'`).
fn keeps_history(line: &str) -> bool {
    let trimmed = line.trim();
    !trimmed.is_empty()
        && !trimmed.starts_with("\\auth")
        && !line.to_ascii_lowercase().contains("password")
}

/// Submits `statement` (when given; otherwise what was sent is answered) and prints its
/// answer: output lines to standard output, a refusal (positioned within `src` for a
/// statement starting at `start`) to standard error.
fn print_answer(
    connection: &mut Connection,
    statement: Option<&str>,
    src: &str,
    start: usize,
) -> anyhow::Result<()> {
    let mut stdout = io::stdout().lock();
    let print = |line: &str| {
        writeln!(stdout, "{line}").context(STDOUT_FAILED)?;
        Ok(())
    };
    let outcome = match statement {
        Some(statement) => submit(connection, statement, print)?,
        None => connection.answer(print)?,
    };
    stdout.flush().context(STDOUT_FAILED)?;
    if let Outcome::Refused { at, message } = outcome {
        match at {
            Some(at) => eprintln!("ERROR {} {message}", translate(src, start, at)),
            None => eprintln!("ERROR {message}"),
        }
    }
    Ok(())
}

/// What to send for one statement.
enum Submission {
    /// The statement's text.
    Text,
    /// `\upload` of a client directory packed into this archive.
    Upload { resource: String, archive: Vec<u8> },
    /// Refused here, before anything was sent.
    Refused(String),
}

/// Whether `statement` is an `UPLOAD RESOURCE` of a directory on this machine (see the
/// module docs).
fn submission(statement: &str) -> Submission {
    let Ok(Statement::Catalog(CatalogStmt::UploadResource { resource, path })) =
        nervix_nspl::parse_statement(statement)
    else {
        return Submission::Text;
    };
    let local = Path::new(&path);
    match std::fs::metadata(local) {
        Err(_) => Submission::Text,
        Ok(meta) if !meta.is_dir() => Submission::Refused(format!(
            "cannot upload '{path}': it is not a directory on this machine"
        )),
        Ok(_) => match pack_directory(local) {
            Ok(archive) => Submission::Upload {
                resource: resource.name,
                archive,
            },
            Err(error) => Submission::Refused(format!("cannot upload '{path}': {error}")),
        },
    }
}

/// Sends one statement — or the `\upload` it stands for — and reads its answer.
fn submit(
    connection: &mut Connection,
    statement: &str,
    output: impl FnMut(&str) -> anyhow::Result<()>,
) -> anyhow::Result<Outcome> {
    match submission(statement) {
        Submission::Text => connection.send(&format!("{statement}\n"))?,
        Submission::Upload { resource, archive } => {
            let header = format!("\\upload {resource} {}\n", archive.len());
            connection.send_bytes(&[header.as_bytes(), &archive].concat())?;
        }
        Submission::Refused(message) => {
            return Ok(Outcome::Refused {
                at: Some(Position { line: 1, col: 1 }),
                message,
            })
        }
    }
    connection.answer(output)
}

/// Completion through `\complete`, over the pending statement and the line being edited.
struct ConsoleHelper {
    connection: Rc<RefCell<Connection>>,
    pending: Rc<RefCell<String>>,
}

impl Completer for ConsoleHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let prefix = one_line_prefix(&self.pending.borrow());
        let text = format!("{prefix}{line}");
        let cursor = prefix.len() + pos;
        if text.len() + 64 > MAX_META_LINE_BYTES || text.contains(['\n', '\r']) {
            return Ok((pos, Vec::new()));
        }
        let Ok(mut connection) = self.connection.try_borrow_mut() else {
            return Ok((pos, Vec::new()));
        };
        let candidates = connection.complete(cursor, &text).unwrap_or_default();
        let usable: Vec<(usize, String)> = candidates
            .into_iter()
            .filter(|(from, _)| (prefix.len()..=cursor).contains(from))
            .collect();
        let Some(from) = usable.iter().map(|(from, _)| *from).min() else {
            return Ok((pos, Vec::new()));
        };
        let pairs = usable
            .into_iter()
            .filter_map(|(at, candidate)| {
                let typed = text.get(from..at)?;
                Some(Pair {
                    display: candidate.clone(),
                    replacement: format!("{typed}{candidate}"),
                })
            })
            .collect();
        Ok((from - prefix.len(), pairs))
    }
}

impl Hinter for ConsoleHelper {
    type Hint = String;
}

impl Highlighter for ConsoleHelper {}

impl Validator for ConsoleHelper {}

impl Helper for ConsoleHelper {}

/// The pending lines as one line of the same length: `--` comments blanked (they would swallow
/// what follows once line ends are gone) and line ends turned into spaces, so byte offsets and
/// tokens stay as they were.
fn one_line_prefix(pending: &str) -> String {
    let mut bytes = pending.as_bytes().to_vec();
    for comment in lex(pending).comments {
        let span = comment.span.start as usize..comment.span.end as usize;
        if pending[span.clone()].starts_with("--") {
            bytes[span].fill(b' ');
        }
    }
    for byte in &mut bytes {
        if *byte == b'\n' || *byte == b'\r' {
            *byte = b' ';
        }
    }
    String::from_utf8(bytes).unwrap_or_default()
}

/// How the server answered one statement or meta-command.
enum Outcome {
    Ok,
    Refused {
        at: Option<Position>,
        message: String,
    },
}

/// Plain TCP or TLS.
enum Transport {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Read for Transport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(stream) => stream.read(buf),
            Transport::Tls(stream) => stream.read(buf),
        }
    }
}

impl Write for Transport {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(stream) => stream.write(buf),
            Transport::Tls(stream) => stream.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Transport::Plain(stream) => stream.flush(),
            Transport::Tls(stream) => stream.flush(),
        }
    }
}

impl Transport {
    fn tcp(&self) -> &TcpStream {
        match self {
            Transport::Plain(stream) => stream,
            Transport::Tls(stream) => stream.get_ref(),
        }
    }
}

/// One console connection.
struct Connection {
    stream: BufReader<Transport>,
    /// The greeting's `NERVIX <version>`.
    server: String,
    needs_auth: bool,
}

impl Connection {
    /// Connects, completes TLS, and reads the greeting; every failure reads
    /// `cannot connect to <addr>: <cause>`.
    fn open(addr: &str, tls_ca: Option<&Path>) -> anyhow::Result<Connection> {
        Connection::try_open(addr, tls_ca).with_context(|| format!("cannot connect to {addr}"))
    }

    fn try_open(addr: &str, tls_ca: Option<&Path>) -> anyhow::Result<Connection> {
        let tls = tls_ca.map(|ca| client_tls(addr, ca)).transpose()?;
        let mut last_error = anyhow!("{addr} resolves to no address");
        let mut tcp = None;
        for socket in addr.to_socket_addrs()? {
            match TcpStream::connect_timeout(&socket, CONNECT_TIMEOUT) {
                Ok(stream) => {
                    tcp = Some(stream);
                    break;
                }
                Err(error) => last_error = error.into(),
            }
        }
        let Some(tcp) = tcp else {
            return Err(last_error);
        };
        tcp.set_nodelay(true)?;
        tcp.set_read_timeout(Some(CONNECT_TIMEOUT))?;
        tcp.set_write_timeout(Some(CONNECT_TIMEOUT))?;
        let transport = match tls {
            None => Transport::Plain(tcp),
            Some(client) => {
                let mut stream = StreamOwned::new(client, tcp);
                while stream.conn.is_handshaking() {
                    stream
                        .conn
                        .complete_io(&mut stream.sock)
                        .context("TLS handshake failed")?;
                }
                Transport::Tls(Box::new(stream))
            }
        };
        let mut connection = Connection {
            stream: BufReader::new(transport),
            server: String::new(),
            needs_auth: true,
        };
        let greeting = connection.read_line()?;
        let words: Vec<&str> = greeting.split_whitespace().collect();
        match words.as_slice() {
            ["NERVIX", version, "AUTH", "REQUIRED", ..] => {
                connection.server = format!("Nervix {version}");
            }
            ["NERVIX", version, "READY", ..] => {
                connection.server = format!("Nervix {version}");
                connection.needs_auth = false;
            }
            _ => {
                let shown: String = greeting.chars().take(80).collect();
                bail!("not a Nervix console (it said {shown:?})");
            }
        }
        // Statements may run long: only connecting is bounded in time.
        let tcp = connection.stream.get_ref().tcp();
        tcp.set_read_timeout(None)?;
        tcp.set_write_timeout(None)?;
        Ok(connection)
    }

    fn send(&mut self, text: &str) -> anyhow::Result<()> {
        self.send_bytes(text.as_bytes())
    }

    fn send_bytes(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        let stream = self.stream.get_mut();
        stream
            .write_all(bytes)
            .and_then(|()| stream.flush())
            .context("cannot send to the console")
    }

    /// One line from the server, without its line end.
    fn read_line(&mut self) -> anyhow::Result<String> {
        let mut bytes = Vec::new();
        (&mut self.stream)
            .take(MAX_SERVER_LINE_BYTES)
            .read_until(b'\n', &mut bytes)
            .context("cannot read from the console")?;
        match bytes.last() {
            Some(b'\n') => {
                bytes.pop();
            }
            Some(_) if bytes.len() as u64 >= MAX_SERVER_LINE_BYTES => {
                bail!("the console sent a line longer than {MAX_SERVER_LINE_BYTES} bytes")
            }
            _ => bail!("the console closed the connection"),
        }
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Reads output lines (handing each to `output`) up to the status line.
    fn answer(
        &mut self,
        mut output: impl FnMut(&str) -> anyhow::Result<()>,
    ) -> anyhow::Result<Outcome> {
        loop {
            let line = self.read_line()?;
            match ServerLine::parse(&line) {
                ServerLine::Output(text) => output(text)?,
                ServerLine::Ok => return Ok(Outcome::Ok),
                ServerLine::Error { at, message } => {
                    return Ok(Outcome::Refused {
                        at,
                        message: message.to_owned(),
                    })
                }
                ServerLine::Other(other) => bail!("unexpected line from the console: {other:?}"),
            }
        }
    }

    /// Candidates for `text` at `cursor`: `(replace from, candidate)`.
    fn complete(&mut self, cursor: usize, text: &str) -> anyhow::Result<Vec<(usize, String)>> {
        self.send(&format!("\\complete {cursor} {text}\n"))?;
        let mut candidates = Vec::new();
        let outcome = self.answer(|line| {
            if let Some((from, candidate)) = line.split_once(' ') {
                if let Ok(from) = from.parse() {
                    candidates.push((from, candidate.to_owned()));
                }
            }
            Ok(())
        })?;
        match outcome {
            Outcome::Ok => Ok(candidates),
            Outcome::Refused { .. } => Ok(Vec::new()),
        }
    }

    /// Says goodbye; the connection may already be gone.
    fn quit(&mut self) {
        if self.send("\\quit\n").is_ok() {
            let _ = self.read_line();
        }
    }
}

/// A TLS client for `addr`'s host name, trusting the PEM certificates in `ca`.
fn client_tls(addr: &str, ca: &Path) -> anyhow::Result<ClientConnection> {
    let mut roots = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(ca)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|error| anyhow!("cannot read {}: {error}", ca.display()))?;
    for cert in certs {
        roots
            .add(cert)
            .with_context(|| format!("{} holds an unusable certificate", ca.display()))?;
    }
    if roots.is_empty() {
        bail!("{} holds no certificate", ca.display());
    }
    let host = match addr.rsplit_once(':') {
        Some((host, _port)) => host.trim_start_matches('[').trim_end_matches(']'),
        None => addr,
    };
    let name = ServerName::try_from(host.to_owned())
        .map_err(|_| anyhow!("{host:?} is neither a host name nor an IP address"))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS configuration")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    ClientConnection::new(Arc::new(config), name).context("TLS configuration")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_split_into_statements_with_their_offsets() {
        let src = "-- setup\nSHOW DOMAINS; ;\n  CREATE DOMAIN 'a;b'\n;SHOW DOMAINS";
        let pieces = script_statements(src).expect("the script splits");
        let texts: Vec<(usize, &str)> = pieces.iter().map(|p| (p.start, p.text.as_str())).collect();
        assert_eq!(
            texts,
            [
                (9, "SHOW DOMAINS;"),
                (27, "CREATE DOMAIN 'a;b'\n;"),
                (48, "SHOW DOMAINS\n;"),
            ]
        );
    }

    #[test]
    fn open_strings_and_meta_commands_are_refused_locally() {
        let (at, message) = script_statements("SHOW DOMAINS;\nSHOW 'x").expect_err("open string");
        assert_eq!((at.line, at.col), (2, 6));
        assert!(message.starts_with("unterminated string"), "{message}");
        let (at, _) = script_statements("\n\\quit").expect_err("meta-command");
        assert_eq!((at.line, at.col), (2, 1));
    }

    #[test]
    fn secrets_stay_out_of_history() {
        assert!(keeps_history("SHOW DOMAINS;"));
        assert!(!keeps_history("  \\auth ops pw"));
        assert!(!keeps_history("ALTER USER ops SET PASSWORD 'x';"));
        assert!(!keeps_history("   "));
    }

    #[test]
    fn only_uploads_of_client_paths_are_turned_into_archives() {
        let dir = std::env::temp_dir().join(format!("nervix-cli-upload-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).expect("dir");
        std::fs::write(dir.join("sub/ca.pem"), b"pem").expect("file");
        let upload = |path: &Path| format!("UPLOAD RESOURCE certs FROM '{}';", path.display());
        assert!(matches!(submission("SHOW RESOURCES;"), Submission::Text));
        assert!(matches!(
            submission(&upload(&dir.join("not-here"))),
            Submission::Text
        ));
        match submission(&upload(&dir.join("sub/ca.pem"))) {
            Submission::Refused(message) => {
                assert!(
                    message.ends_with("it is not a directory on this machine"),
                    "{message}"
                )
            }
            _ => panic!("a file is no directory"),
        }
        match submission(&upload(&dir)) {
            Submission::Upload { resource, archive } => {
                assert_eq!(resource, "certs");
                assert_eq!(archive.len() % 512, 0, "whole tar blocks");
            }
            _ => panic!("a client directory is uploaded"),
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn positions_translate_to_the_script() {
        let src = "SHOW DOMAINS;\n  CREATE\n  DOMAIN x;";
        let start = src.find("CREATE").expect("statement");
        let at = |line, col| translate(src, start, Position { line, col });
        assert_eq!(at(1, 1), Position { line: 2, col: 3 });
        assert_eq!(at(1, 4), Position { line: 2, col: 6 });
        assert_eq!(at(2, 3), Position { line: 3, col: 3 });
    }

    #[test]
    fn the_completion_prefix_keeps_offsets() {
        let pending = "CREATE -- é;\nDOMAIN\n";
        let prefix = one_line_prefix(pending);
        assert_eq!(prefix.len(), pending.len());
        assert_eq!(prefix, format!("CREATE{}DOMAIN ", " ".repeat(8)));
    }
}
