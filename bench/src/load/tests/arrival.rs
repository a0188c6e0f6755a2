//! Closed, paced and open loops, and the run's timeline.

use crate::load::run;
use crate::load::stats::{ArrivalModel, Summary};
use std::time::Duration;

/// A keep-alive HTTP server whose every answer takes `delay`.
async fn slow_server(delay: Duration) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    while let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                        got.drain(..end + 4);
                        tokio::time::sleep(delay).await;
                        let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                        if s.write_all(answer).await.is_err() {
                            return;
                        }
                    }
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
            });
        }
    });
    addr
}

async fn get_run(addr: std::net::SocketAddr, extra: &[&str]) -> Summary {
    let url = format!("http://{addr}");
    let mut argv = vec![
        "b",
        "load",
        "--gateway",
        &url,
        "--path-get",
        "/x",
        "--duration",
        "1",
        "--no-history",
        "--quiet",
        "--json",
    ];
    argv.extend_from_slice(extra);
    let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
    let crate::cli::Command::Load(args) = cli.command else {
        panic!("not load")
    };
    run(args).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_loop_keeps_its_rate_when_answers_are_slow() {
    // 40 ms answers at 200/s: about 8 in flight, well under the cap of 64.
    let addr = slow_server(Duration::from_millis(40)).await;
    let s = get_run(addr, &["--rate", "200", "--open-loop", "-c", "64"]).await;
    let a = &s.arrival;
    assert_eq!(a.model, ArrivalModel::Open);
    assert!((a.achieved_per_s / 200.0 - 1.0).abs() < 0.05, "{a:?}");
    assert!(a.max_in_flight < 64, "{a:?}");
    assert!(s.all.p50_ms >= 40.0, "{:?}", s.all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summary_carries_the_runs_timeline_and_plot_draws_it() {
    // 200/s for 1 s, 10 ms answers: every answer is a 200, in buckets over the second.
    let addr = slow_server(Duration::from_millis(10)).await;
    let svg = std::env::temp_dir().join(format!("load-plot-{}.svg", std::process::id()));
    let s = get_run(
        addr,
        &["--rate", "200", "-c", "8", "--plot", svg.to_str().unwrap()],
    )
    .await;
    let t = s.timeline.as_ref().expect("a timeline");
    assert_eq!(t.series.len(), 1);
    let ok = t.get("200").expect("the 200s");
    assert_eq!(ok.points.iter().map(|p| p.count).sum::<u64>(), s.all.count);
    // About 200 answers over 1 s: buckets of 20 answers on average, so 0.1 s (0.2 s when
    // fewer than 200 came back in time).
    assert!(t.bucket_s == 0.1 || t.bucket_s == 0.2, "{}", t.bucket_s);
    assert!(ok.points.len() >= 5, "{}", ok.points.len());
    let busy = ok.points.iter().filter(|p| p.count > 0);
    assert!(busy.clone().all(|p| p.p50_ms.unwrap() >= 10.0));
    // The JSON summary holds it too, for `plot load`.
    let saved: crate::plot::load_chart::SavedRun =
        serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
    let saved = saved.timeline.expect("a saved timeline");
    assert_eq!(saved.bucket_s, t.bucket_s);
    let counts = |t: &crate::load::timeline::Timeline| -> Vec<(f64, u64)> {
        t.series[0]
            .points
            .iter()
            .map(|p| (p.t_s, p.count))
            .collect()
    };
    assert_eq!(counts(&saved), counts(t));
    let text = std::fs::read_to_string(&svg).unwrap();
    std::fs::remove_file(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.contains("200 ok"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paced_or_capped_loop_falls_behind_and_says_so() {
    // 4 workers and 40 ms answers: at most 100/s, against 200/s offered.
    let addr = slow_server(Duration::from_millis(40)).await;
    let paced = get_run(addr, &["--rate", "200", "-c", "4"]).await;
    assert_eq!(paced.arrival.model, ArrivalModel::Paced);
    assert!(
        paced.arrival.achieved_per_s < 0.6 * 200.0,
        "{:?}",
        paced.arrival
    );
    let open = get_run(addr, &["--rate", "200", "--open-loop", "-c", "4"]).await;
    let a = &open.arrival;
    assert_eq!(a.max_in_flight, 4, "{a:?}");
    assert!(a.achieved_per_s < 0.6 * 200.0, "{a:?}");
    // Latency counts from when each request was due: the queue behind the cap shows.
    assert!(open.all.p99_ms > 200.0, "{:?}", open.all);
    let closed = get_run(addr, &["-c", "4"]).await;
    assert_eq!(closed.arrival.model, ArrivalModel::Closed);
    assert_eq!(closed.arrival.offered_per_s, None);
}
