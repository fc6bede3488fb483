//! A plain HTTP/1.1 GET on loopback: how the suites and the benchmark read the operator's probes and /metrics
//! (they serve small text answers, so no HTTP client is needed to read them).

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What a GET was answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    /// Lower case; empty when the answer has no Content-Type.
    pub content_type: String,
    pub body: String,
}

/// A GET of `path` on `addr`; None while nothing answers there (or the answer is not HTTP).
pub async fn get(addr: SocketAddr, path: &str) -> Option<Answer> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let content_type = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-type: ").map(str::to_string))
        .unwrap_or_default();
    Some(Answer { status, content_type, body: body.to_string() })
}
