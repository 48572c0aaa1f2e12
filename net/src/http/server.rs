//! The listener and the HTTP/1.1 connection loop on one shard.
//!
//! [`Listener::bind`] sets `SO_REUSEPORT` (glommio's `TcpListener::bind` does), so every shard
//! binds the same address and the kernel spreads connections across them. [`serve`] accepts
//! while it holds one of `max_connections` permits, runs each connection as one task (never a
//! task per request) and, once `stop` resolves, stops accepting, lets every connection finish
//! the request it is serving, closes idle ones (WebSockets with 1001), and returns when all are
//! gone.
//!
//! A connection owns one read buffer (grown up to `max_head_bytes` + [`READ_SLACK_BYTES`]), one
//! body buffer and one output buffer, reused for every request. Requests are answered strictly
//! in order; responses to pipelined requests accumulate in the output buffer and are written
//! when the loop would otherwise wait for input, so a burst of pipelined requests costs one
//! write. Framing errors are answered (400/413/431/501/505) with `Connection: close`, followed
//! by a lingering close so the client reads the answer rather than a reset.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::time::Duration;

use futures_lite::future::or;
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};
use glommio::sync::{Semaphore, StaticPermit};

use super::chunked::{ChunkedDecoder, ChunkedError};
use super::head::{leading_empty_lines, parse_head, BodyFraming, HeadFacts, HeadScanner};
use super::response::{write_response, Framing};
use super::{
    websocket, HeadDecision, HttpError, HttpService, Method, RequestHead, Response, ServerLimits,
    TlsAcceptor,
};

/// Initial size of a connection's read buffer; it grows (doubling) only for large heads.
const INITIAL_READ_BYTES: usize = 4096;
/// Read-buffer room beyond `max_head_bytes`, so a head of exactly the limit still fits with
/// the bytes that follow it.
pub const READ_SLACK_BYTES: usize = 4096;
/// Body and output buffers larger than this are released after the request instead of kept
/// for the next one (bounds idle memory per connection).
const RETAIN_BUFFER_BYTES: usize = 64 * 1024;
/// How long a closing connection keeps reading (and discarding) so the client sees the error
/// response instead of a TCP reset.
const LINGER_MS: u64 = 2_000;
/// Most bytes discarded while lingering.
const LINGER_BYTES: usize = 1024 * 1024;
/// Pause after an accept error that is about resources (EMFILE, ENOBUFS…), not the socket.
const ACCEPT_BACKOFF_MS: u64 = 100;
/// Linux errno values meaning the listening socket itself is unusable.
const FATAL_ACCEPT_ERRNOS: [i32; 4] = [
    9,  /*EBADF*/
    22, /*EINVAL*/
    88, /*ENOTSOCK*/
    95, /*EOPNOTSUPP*/
];

/// A listening socket on one shard, bound with `SO_REUSEPORT`.
#[derive(Debug)]
pub struct Listener {
    inner: TcpListener,
}

impl Listener {
    /// Binds `addr` (must be called on the glommio executor that will serve it). Several
    /// executors may bind the same address at once.
    pub fn bind(addr: SocketAddr) -> Result<Listener, HttpError> {
        TcpListener::bind(addr)
            .map(|inner| Listener { inner })
            .map_err(|e| HttpError::Bind {
                addr,
                source: e.into(),
            })
    }

    /// The bound address (the real port when bound to port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr().map_err(Into::into)
    }
}

/// Serves `listener` until `stop` resolves, then drains its connections and returns.
///
/// `tls` makes it the HTTPS/WSS listener. `stop` is any future (a channel receive, a timer, a
/// flag watcher); after it resolves no connection is accepted, in-flight requests complete,
/// idle keep-alive connections close and WebSockets receive close 1001. Returns an error only
/// when the listening socket itself fails.
pub async fn serve<S: HttpService>(
    listener: Listener,
    tls: Option<TlsAcceptor>,
    service: Rc<S>,
    limits: ServerLimits,
    stop: impl Future<Output = ()>,
) -> Result<(), HttpError> {
    let permits = Rc::new(Semaphore::new(limits.max_connections as u64));
    // Dropping the sender closes the channel: every connection's receive resolves.
    let (stop_tx, stop_rx) = async_channel::bounded::<()>(1);
    let limits = Rc::new(limits);
    let mut stop = pin!(stop);
    let result = loop {
        let permit = or(
            async { Some(permits.acquire_static_permit(1).await) },
            async {
                stop.as_mut().await;
                None
            },
        )
        .await;
        let permit = match permit {
            None => break Ok(()),
            Some(Ok(permit)) => permit,
            Some(Err(e)) => break Err(HttpError::Listener(e.into())),
        };
        let accepted = or(async { Some(listener.inner.accept().await) }, async {
            stop.as_mut().await;
            None
        })
        .await;
        match accepted {
            None => break Ok(()),
            Some(Ok(stream)) => {
                let task = connection(
                    stream,
                    tls.clone(),
                    Rc::clone(&service),
                    Rc::clone(&limits),
                    stop_rx.clone(),
                    permit,
                );
                glommio::spawn_local(task).detach();
            }
            Some(Err(e)) => {
                let e: io::Error = e.into();
                if e.raw_os_error()
                    .is_some_and(|n| FATAL_ACCEPT_ERRNOS.contains(&n))
                {
                    break Err(HttpError::Listener(e));
                }
                tracing::warn!(error = %e, "HTTP accept failed; backing off");
                glommio::timer::sleep(Duration::from_millis(ACCEPT_BACKOFF_MS)).await;
            }
        }
    };
    drop(listener);
    drop(stop_tx);
    // Every connection holds a permit until it ends: holding them all means all are gone.
    let _ = permits.acquire(limits.max_connections as u64).await;
    result
}

/// What a transport must offer besides bytes: moving the read deadline (WebSockets have none).
pub(super) trait Transport: AsyncRead + AsyncWrite + Unpin {
    fn set_read_timeout(&self, timeout: Option<Duration>);
}

impl Transport for TcpStream {
    fn set_read_timeout(&self, timeout: Option<Duration>) {
        // Only fails for a zero duration, which `timeout_of` never produces.
        let _ = TcpStream::set_read_timeout(self, timeout);
    }
}

impl Transport for futures_rustls::server::TlsStream<TcpStream> {
    fn set_read_timeout(&self, timeout: Option<Duration>) {
        let _ = self.get_ref().0.set_read_timeout(timeout);
    }
}

fn timeout_of(ms: u64) -> Option<Duration> {
    (ms > 0).then(|| Duration::from_millis(ms))
}

async fn connection<S: HttpService>(
    stream: TcpStream,
    tls: Option<TlsAcceptor>,
    service: Rc<S>,
    limits: Rc<ServerLimits>,
    stop_rx: async_channel::Receiver<()>,
    _permit: StaticPermit,
) {
    let _ = stream.set_nodelay(true);
    let idle = timeout_of(limits.idle_timeout_ms);
    Transport::set_read_timeout(&stream, idle);
    let _ = stream.set_write_timeout(idle);
    let stopped = pin!(stop_rx.recv());
    match tls {
        None => {
            Connection::new(stream, &*service, &limits, false, &stop_rx, stopped)
                .run()
                .await
        }
        Some(acceptor) => match acceptor.acceptor().accept(stream).await {
            Ok(stream) => {
                Connection::new(stream, &*service, &limits, true, &stop_rx, stopped)
                    .run()
                    .await
            }
            Err(e) => tracing::debug!(error = %e, "TLS handshake failed"),
        },
    }
}

/// The connection's read buffer: bytes `start..end` of `data` are read but not consumed.
pub(super) struct ReadBuf {
    data: Vec<u8>,
    start: usize,
    end: usize,
    max: usize,
}

impl ReadBuf {
    fn new(max: usize) -> ReadBuf {
        ReadBuf {
            data: vec![0; INITIAL_READ_BYTES.min(max)],
            start: 0,
            end: 0,
            max,
        }
    }

    pub(super) fn filled(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    pub(super) fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Reads more bytes after the unconsumed ones (compacting or growing when full);
    /// Ok(0) is end of input.
    pub(super) async fn fill<T: AsyncRead + Unpin>(&mut self, io: &mut T) -> io::Result<usize> {
        if self.end == self.data.len() {
            if self.start > 0 {
                self.data.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else if self.data.len() < self.max {
                let grown = (self.data.len() * 2).min(self.max);
                self.data.resize(grown, 0);
            } else {
                // Callers bound what they leave unconsumed below `max`.
                return Err(io::Error::other("read buffer full"));
            }
        }
        let n = io.read(&mut self.data[self.end..]).await?;
        self.end += n;
        Ok(n)
    }
}

/// How a request ended for the connection.
enum Next<R> {
    KeepAlive,
    Close,
    /// Close after an error answer: linger so the client reads it.
    CloseLinger,
    /// The 101 response is written; the connection is a WebSocket on this route now.
    Upgrade(R),
}

pub(super) struct Connection<'a, S: HttpService, T: Transport> {
    pub(super) io: T,
    pub(super) service: &'a S,
    pub(super) limits: &'a ServerLimits,
    tls: bool,
    pub(super) rb: ReadBuf,
    pub(super) out: Vec<u8>,
    body: Vec<u8>,
    pub(super) head: RequestHead,
    scanner: HeadScanner,
    stop_rx: &'a async_channel::Receiver<()>,
    pub(super) stopped: Pin<&'a mut async_channel::Recv<'a, ()>>,
}

impl<'a, S: HttpService, T: Transport> Connection<'a, S, T> {
    fn new(
        io: T,
        service: &'a S,
        limits: &'a ServerLimits,
        tls: bool,
        stop_rx: &'a async_channel::Receiver<()>,
        stopped: Pin<&'a mut async_channel::Recv<'a, ()>>,
    ) -> Self {
        Connection {
            io,
            service,
            limits,
            tls,
            rb: ReadBuf::new(limits.max_head_bytes.saturating_add(READ_SLACK_BYTES)),
            out: Vec::new(),
            body: Vec::new(),
            head: RequestHead::default(),
            scanner: HeadScanner::default(),
            stop_rx,
            stopped,
        }
    }

    async fn run(mut self) {
        loop {
            let next = match self.request().await {
                Ok(next) => next,
                Err(e) => {
                    tracing::debug!(error = %e, "HTTP connection ended");
                    return;
                }
            };
            if self.body.capacity() > RETAIN_BUFFER_BYTES {
                self.body = Vec::new();
            }
            match next {
                // A client pipelining requests faster than it reads cannot make the output
                // buffer grow without bound.
                Next::KeepAlive if self.out.len() > RETAIN_BUFFER_BYTES => {
                    if self.flush().await.is_err() {
                        return;
                    }
                }
                Next::KeepAlive => {}
                Next::Close => {
                    let _ = self.flush().await;
                    let _ = self.io.close().await;
                    return;
                }
                Next::CloseLinger => {
                    self.close_lingering().await;
                    return;
                }
                Next::Upgrade(route) => {
                    websocket::run(&mut self, route).await;
                    return;
                }
            }
        }
    }

    /// Serves one request (reading its head first).
    async fn request(&mut self) -> io::Result<Next<S::Route>> {
        let facts = match self.read_head().await? {
            Some(Ok(facts)) => facts,
            Some(Err(status)) => return Ok(self.respond_error(status)),
            None => return Ok(Next::Close),
        };
        if let Some(status) = facts.ws_refusal {
            let mut resp = Response::status(status);
            if status == 426 {
                resp = resp.header("sec-websocket-version", "13");
            }
            self.write(&resp, &facts, true);
            return Ok(Next::CloseLinger);
        }
        if let BodyFraming::Length(n) = facts.framing {
            if n > self.limits.max_body_bytes as u64 {
                return Ok(self.respond_error(413));
            }
        }
        let has_body = facts.framing != BodyFraming::None;
        let close = !self.head.keep_alive || self.stop_rx.is_closed();
        match self.service.head(&self.head, self.tls) {
            HeadDecision::Upgrade(route) if self.head.websocket && !has_body => {
                let key = self.head.header("sec-websocket-key").unwrap_or_default();
                let accept = super::ws::accept_key(key);
                self.out.extend_from_slice(
                    b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\
                      connection: Upgrade\r\nsec-websocket-accept: ",
                );
                self.out.extend_from_slice(accept.as_bytes());
                self.out.extend_from_slice(b"\r\n\r\n");
                self.flush().await?;
                Ok(Next::Upgrade(route))
            }
            HeadDecision::Upgrade(_) => {
                let resp = Response::status(if has_body { 400 } else { 426 })
                    .header("upgrade", "websocket");
                self.finish_without_body(resp, &facts, close).await
            }
            HeadDecision::Respond(resp) => self.finish_without_body(resp, &facts, close).await,
            HeadDecision::ReadBody(route) => {
                if facts.expect_continue && has_body {
                    self.out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
                    self.flush().await?;
                }
                if let Err(status) = self.read_body(facts.framing).await? {
                    return Ok(self.respond_error(status));
                }
                let resp = self.service.request(route, &self.head, &self.body).await;
                self.write(&resp, &facts, close);
                Ok(if close { Next::Close } else { Next::KeepAlive })
            }
        }
    }

    /// Answers without handing the body to the service: the body is read and dropped when
    /// the client is sending it anyway, so the connection stays reusable; after an unanswered
    /// `Expect: 100-continue` the client may or may not send it, so the connection closes.
    async fn finish_without_body(
        &mut self,
        resp: Response,
        facts: &HeadFacts,
        mut close: bool,
    ) -> io::Result<Next<S::Route>> {
        if facts.framing != BodyFraming::None {
            if facts.expect_continue {
                close = true;
            } else if let Err(status) = self.read_body(facts.framing).await? {
                return Ok(self.respond_error(status));
            }
            self.body.clear();
        }
        self.write(&resp, facts, close);
        Ok(if close { Next::Close } else { Next::KeepAlive })
    }

    /// Reads until a whole head is buffered and parses it. None: the connection ended (or
    /// shutdown began) between requests; Some(Err(status)): answer that and close.
    async fn read_head(&mut self) -> io::Result<Option<Result<HeadFacts, u16>>> {
        self.scanner.reset();
        let len = loop {
            let skip = leading_empty_lines(self.rb.filled());
            if skip > 0 {
                self.rb.consume(skip);
                self.scanner.reset();
            }
            if let Some(len) = self.scanner.scan(self.rb.filled()) {
                break len;
            }
            if self.rb.filled().len() >= self.limits.max_head_bytes {
                return Ok(Some(Err(431)));
            }
            // About to wait for the client: send what pipelined requests produced.
            self.flush().await?;
            let n = if self.rb.filled().is_empty() {
                if self.stop_rx.is_closed() {
                    return Ok(None);
                }
                let Connection {
                    io, rb, stopped, ..
                } = self;
                let read = or(async { Some(rb.fill(io).await) }, async {
                    let _ = stopped.as_mut().await;
                    None
                });
                match read.await {
                    Some(Ok(n)) => n,
                    // Idle timeout, reset or shutdown between requests: close quietly.
                    Some(Err(_)) | None => return Ok(None),
                }
            } else {
                self.rb.fill(&mut self.io).await?
            };
            if n == 0 {
                return Ok(None);
            }
        };
        let parsed = parse_head(&self.rb.filled()[..len], self.limits, &mut self.head);
        self.rb.consume(len);
        Ok(Some(parsed.map_err(|e| e.status())))
    }

    /// Reads the whole body into `self.body`. Ok(Err(status)): refused (413/400), answer and
    /// close.
    async fn read_body(&mut self, framing: BodyFraming) -> io::Result<Result<(), u16>> {
        self.body.clear();
        match framing {
            BodyFraming::None => {}
            BodyFraming::Length(n) => {
                // Checked against max_body_bytes (a usize) before.
                let n = n as usize;
                let buffered = self.rb.filled().len().min(n);
                self.body.extend_from_slice(&self.rb.filled()[..buffered]);
                self.rb.consume(buffered);
                let mut got = buffered;
                if got < n {
                    // Read the rest straight into the body buffer: no copy through rb.
                    self.body.resize(n, 0);
                    while got < n {
                        let r = self.io.read(&mut self.body[got..]).await?;
                        if r == 0 {
                            return Err(io::ErrorKind::UnexpectedEof.into());
                        }
                        got += r;
                    }
                }
            }
            BodyFraming::Chunked => {
                let mut decoder = ChunkedDecoder::default();
                loop {
                    let used = match decoder.decode(
                        self.rb.filled(),
                        &mut self.body,
                        self.limits.max_body_bytes,
                    ) {
                        Ok(used) => used,
                        Err(ChunkedError::TooLarge) => return Ok(Err(413)),
                        Err(ChunkedError::Invalid(_)) => return Ok(Err(400)),
                    };
                    self.rb.consume(used);
                    if decoder.is_done() {
                        break;
                    }
                    if self.rb.fill(&mut self.io).await? == 0 {
                        return Err(io::ErrorKind::UnexpectedEof.into());
                    }
                }
            }
        }
        Ok(Ok(()))
    }

    /// Queues `resp` for this request.
    fn write(&mut self, resp: &Response, facts: &HeadFacts, close: bool) {
        let framing = Framing {
            close,
            http10: !facts.http11,
            head: self.head.method == Method::Head,
        };
        write_response(&mut self.out, resp, framing);
    }

    /// Queues an error answer that ends the connection.
    fn respond_error(&mut self, status: u16) -> Next<S::Route> {
        let framing = Framing {
            close: true,
            http10: false,
            head: false,
        };
        write_response(&mut self.out, &Response::status(status), framing);
        Next::CloseLinger
    }

    /// Writes everything queued.
    pub(super) async fn flush(&mut self) -> io::Result<()> {
        if !self.out.is_empty() {
            self.io.write_all(&self.out).await?;
            self.io.flush().await?;
            self.out.clear();
            if self.out.capacity() > RETAIN_BUFFER_BYTES {
                self.out = Vec::new();
            }
        }
        Ok(())
    }

    /// Flushes, half-closes, and discards input for a while so the client reads our last
    /// response before the socket goes away (a close with unread input sends a reset).
    pub(super) async fn close_lingering(&mut self) {
        if self.flush().await.is_err() || self.io.close().await.is_err() {
            return;
        }
        self.io
            .set_read_timeout(Some(Duration::from_millis(LINGER_MS)));
        let mut discarded = 0;
        while discarded < LINGER_BYTES {
            self.rb.consume(self.rb.filled().len());
            match self.rb.fill(&mut self.io).await {
                Ok(0) | Err(_) => return,
                Ok(n) => discarded += n,
            }
        }
    }
}
