//! How the operator's caches fill: one streaming watch per kind where the server serves it, paged lists where it
//! does not (Kubernetes 1.33, whose WatchList gate is off by default).

use crate::support::harness::*;
use kube::api::PostParams;
use microservice_testkit::ClusterOptions;

const KINDS: [&str; 4] = ["microservices", "deployments", "services", "horizontalpodautoscalers"];

/// Microservices that exist before the operator starts, so its caches have something to fill with.
async fn create_before_start(h: &Harness, names: &[&str]) {
    for name in names {
        h.microservices().create(&PostParams::default(), &microservice(name, IMAGE_V1)).await.expect("create");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caches_fill_from_one_streaming_watch_per_kind_without_a_list() {
    let h = Harness::start(ClusterOptions::default()).await;
    let names = ["stream-a", "stream-b", "stream-c"];
    create_before_start(&h, &names).await;
    let before = h.requests();
    let op = h.operator();
    for name in names {
        h.wait_ready(name).await;
    }
    // Every CR Ready, so every cache filled; none by a list. (Watches are not asserted: the real server's audit log
    // records one when it ends.)
    let counts = h.requests().since(&before);
    for kind in KINDS {
        assert_eq!(counts.count("list", kind), 0, "the operator listed {kind}: {counts:?}");
    }
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_streaming_lists_gets_paged_lists_and_the_same_result() {
    let h = Harness::start(ClusterOptions { without_streaming_lists: true, ..ClusterOptions::default() }).await;
    let names = ["paged-a", "paged-b"];
    create_before_start(&h, &names).await;
    let before = h.requests();
    let op = h.operator();
    for name in names {
        h.wait_ready(name).await;
    }
    let counts = h.requests().since(&before);
    // The probe is refused once, and never asked again; every cache then lists before it watches.
    assert_eq!(counts.code(422), 1, "one refused streaming watch: {counts:?}");
    for kind in KINDS {
        assert!(counts.count("list", kind) >= 1, "the operator never listed {kind}: {counts:?}");
    }
    op.stop().await;
}
