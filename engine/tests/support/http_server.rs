//! A scripted HTTP/1.1 server on loopback for egress tests: it speaks the real protocol
//! (keep-alive, Content-Length bodies), records every request, and answers each one from a
//! script the test gives (status, headers, body by path and attempt number).

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Lower-case names.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// 1 for the first request to this path, 2 for the second, …
    pub attempt: usize,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What the script answers: status, extra headers, body.
pub type Reply = (u16, Vec<(String, String)>, Vec<u8>);

type Script = dyn Fn(&Recorded) -> Reply + Send + Sync;

pub struct ScriptedServer {
    pub addr: SocketAddr,
    recorded: Arc<Mutex<Vec<Recorded>>>,
}

impl ScriptedServer {
    pub fn start(script: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> ScriptedServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let recorded = Arc::new(Mutex::new(Vec::new()));
        let attempts = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
        let script: Arc<Script> = Arc::new(script);
        let shared = recorded.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (recorded, attempts, script) =
                    (shared.clone(), attempts.clone(), script.clone());
                std::thread::spawn(move || serve(stream, &recorded, &attempts, &*script));
            }
        });
        ScriptedServer { addr, recorded }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.recorded.lock().expect("recorded").clone()
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

fn serve(
    stream: TcpStream,
    recorded: &Mutex<Vec<Recorded>>,
    attempts: &Mutex<HashMap<String, usize>>,
    script: &Script,
) {
    let mut writer = stream.try_clone().expect("clone");
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
            return;
        };
        let (method, path) = (method.to_string(), path.to_string());
        let mut headers = Vec::new();
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
            }
        }
        let length: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let attempt = {
            let mut attempts = attempts.lock().expect("attempts");
            let count = attempts.entry(path.clone()).or_insert(0);
            *count += 1;
            *count
        };
        let request = Recorded {
            method,
            path,
            headers,
            body,
            attempt,
        };
        let (status, extra, reply) = script(&request);
        recorded.lock().expect("recorded").push(request);
        let mut response = format!(
            "HTTP/1.1 {status} Scripted\r\nContent-Length: {}\r\n",
            reply.len()
        );
        for (name, value) in extra {
            response.push_str(&format!("{name}: {value}\r\n"));
        }
        response.push_str("\r\n");
        let mut bytes = response.into_bytes();
        bytes.extend_from_slice(&reply);
        if writer.write_all(&bytes).is_err() {
            return;
        }
    }
}
