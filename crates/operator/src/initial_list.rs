//! How the caches fill: a streaming list (one watch with `sendInitialEvents`, objects decoded one at a time, ended
//! by the `k8s.io/initial-events-end` bookmark) where the API server serves it, else paged lists then a watch.
//!
//! Why streaming: a paged list is decoded a page at a time, managedFields included, before its objects are projected
//! (see [`crate::children::LIST_PAGE`]), and costs a request per page: at start the Microservices' pages were the
//! "0.01 requests per CR" the benchmark printed over the five writes a create costs. A streaming list is one watch
//! per kind whatever N is. Kubernetes serves it since 1.32 (the WatchList gate), except 1.33, where the gate is off
//! by default and such a watch is refused; older servers ignore the parameter and never send the end bookmark. So
//! the operator asks once, cheaply, before its caches start: a streaming watch of the Microservices with a selector
//! nothing matches, which a server that serves it ends at once with the bookmark.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, WatchEvent, WatchParams};
use kube::runtime::watcher;
use tracing::{info, warn};

use crate::children::LIST_PAGE;
use microservice_core::crd::Microservice;

/// A selector no Microservice carries: the probe lists nothing, so it costs the server nothing.
const PROBE_SELECTOR: &str = "platform.example.com/streaming-list-probe=never";
/// How long the server may take to end the probe's empty list (it ends it at once where it serves streaming lists).
const PROBE_TIMEOUT_SECONDS: u32 = 5;
/// Between probes that failed without the server's answer (it is unreachable, or restarting).
const PROBE_RETRY: Duration = Duration::from_secs(2);

/// How every watcher of this process fills its cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitialList {
    Streaming,
    Paged,
}

impl InitialList {
    /// The watcher configuration every cache of the operator starts from.
    pub fn watcher_config(self) -> watcher::Config {
        match self {
            InitialList::Streaming => watcher::Config::default().streaming_lists(),
            InitialList::Paged => watcher::Config::default().page_size(LIST_PAGE),
        }
    }

    fn name(self) -> &'static str {
        match self {
            InitialList::Streaming => "streaming",
            InitialList::Paged => "paged",
        }
    }
}

/// What one probe answered.
#[derive(Debug)]
enum Probe {
    Decided(InitialList),
    /// No answer that decides (the server unreachable): ask again.
    Unanswered(String),
}

/// Asks the server until it answers whether it serves streaming lists. Never gives up: no cache fills without the
/// server anyway, and the caller races this against shutdown.
pub async fn detect(api: &Api<Microservice>) -> InitialList {
    loop {
        match probe(api).await {
            Probe::Decided(strategy) => {
                info!(strategy = strategy.name(), "initial lists");
                return strategy;
            }
            Probe::Unanswered(error) => {
                warn!(%error, "cannot ask the API server whether it serves streaming lists; asking again");
                tokio::time::sleep(PROBE_RETRY).await;
            }
        }
    }
}

async fn probe(api: &Api<Microservice>) -> Probe {
    let params = WatchParams::streaming_lists().labels(PROBE_SELECTOR).timeout(PROBE_TIMEOUT_SECONDS);
    let stream = match api.watch(&params, "0").await {
        Ok(stream) => stream,
        Err(err) => return refused(err),
    };
    let mut stream = std::pin::pin!(stream.into_stream());
    while let Some(event) = stream.next().await {
        match event {
            Ok(WatchEvent::Bookmark(bookmark)) if bookmark.metadata.annotations.contains_key(END_ANNOTATION) => {
                return Probe::Decided(InitialList::Streaming);
            }
            Ok(WatchEvent::Error(status)) => return status_refused(status.code),
            Ok(_) => {}
            Err(err) => return refused(err),
        }
    }
    // The watch ended without marking the end of its initial events: the parameter was ignored.
    Probe::Decided(InitialList::Paged)
}

const END_ANNOTATION: &str = "k8s.io/initial-events-end";

fn refused(err: kube::Error) -> Probe {
    match &err {
        kube::Error::Api(status) => status_refused(status.code),
        _ => Probe::Unanswered(err.to_string()),
    }
}

/// The server answered the streaming watch with an error: it does not serve it (422 where the WatchList gate is off,
/// 500 from an API server whose storage refuses it). As client-go does, any answer but "too many requests" means
/// paged lists: they work on every server, and a wrong guess costs a request per page, while waiting for an answer
/// that never changes would keep the operator from starting.
fn status_refused(code: u16) -> Probe {
    match code {
        429 => Probe::Unanswered("the API server asked to retry later (429)".to_string()),
        _ => Probe::Decided(InitialList::Paged),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_streaming_watch_means_paged_lists() {
        for code in [400, 403, 404, 422, 500, 503] {
            assert!(matches!(status_refused(code), Probe::Decided(InitialList::Paged)), "{code}");
        }
    }

    #[test]
    fn too_many_requests_is_asked_again() {
        assert!(matches!(status_refused(429), Probe::Unanswered(_)));
    }

    #[test]
    fn each_strategy_configures_its_watchers() {
        use kube::runtime::watcher::InitialListStrategy;
        assert_eq!(InitialList::Streaming.watcher_config().initial_list_strategy, InitialListStrategy::StreamingList);
        let paged = InitialList::Paged.watcher_config();
        assert_eq!(paged.initial_list_strategy, InitialListStrategy::ListWatch);
        assert_eq!(paged.page_size, Some(LIST_PAGE));
    }
}
