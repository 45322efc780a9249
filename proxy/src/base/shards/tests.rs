use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::Shards;

/// Accept `n` connections and hand each to `shards`: each is served by echoing one line
/// back with the name of the thread that served it, then held open until the client closes.
async fn echo_through(shards: &Shards, n: usize) -> (Vec<TcpStream>, Vec<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let mut clients = Vec::new();
    let mut names = Vec::new();
    for i in 0..n {
        let mut client = TcpStream::connect(addr).await.expect("connect");
        let (server, _) = listener.accept().await.expect("accept");
        let task = shards.spawn(server, |mut s| async move {
            let mut buf = [0u8; 64];
            let Ok(got) = s.read(&mut buf).await else {
                return;
            };
            let name = std::thread::current().name().unwrap_or("?").to_string();
            let mut answer = buf[..got].to_vec();
            answer.extend_from_slice(format!(" {name}\n").as_bytes());
            let _ = s.write_all(&answer).await;
            // Held until the client closes, so the shard counts it as open.
            let _ = s.read(&mut buf).await;
        });
        assert!(task.is_some(), "connection {i} must be handed to a shard");
        client
            .write_all(format!("c{i}").as_bytes())
            .await
            .expect("write");
        let mut answer = vec![0u8; 256];
        let got = tokio::time::timeout(Duration::from_secs(5), client.read(&mut answer))
            .await
            .expect("answered within 5 s")
            .expect("read");
        let text = String::from_utf8_lossy(&answer[..got]).to_string();
        let (echo, name) = text.trim_end().split_once(' ').expect("echo and thread");
        assert_eq!(
            echo,
            format!("c{i}"),
            "the bytes came back over the handed socket"
        );
        names.push(name.to_string());
        clients.push(client);
    }
    (clients, names)
}

#[tokio::test(flavor = "current_thread")]
async fn connections_go_to_the_least_loaded_shard_and_are_served_on_its_thread() {
    std::thread::Builder::new()
        .name("the first shard".into())
        .spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(async {
                let gauge = prometheus::IntGaugeVec::new(
                    prometheus::Opts::new("shard_connections", "per shard"),
                    &["shard"],
                )
                .expect("a gauge");
                let shards = Shards::start_counted(2, &gauge).expect("three shards");
                assert_eq!(shards.open(), [0, 0, 0]);
                let (clients, names) = echo_through(&shards, 6).await;
                // Ties go to the first: 0, 1, 2, 0, 1, 2.
                assert_eq!(
                    names,
                    [
                        "the first shard",
                        "fleetgate-shard-1",
                        "fleetgate-shard-2",
                        "the first shard",
                        "fleetgate-shard-1",
                        "fleetgate-shard-2",
                    ]
                );
                assert_eq!(shards.open(), [2, 2, 2]);
                // Closing two on the second shard sends the next two there.
                let mut clients = clients;
                drop(clients.remove(4));
                drop(clients.remove(1));
                let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
                while shards.open() != [2, 0, 2] {
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "closed connections leave their shard: {:?}",
                        shards.open()
                    );
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                let (_more, names) = echo_through(&shards, 2).await;
                assert_eq!(names, ["fleetgate-shard-1", "fleetgate-shard-1"]);
                assert_eq!(shards.open(), [2, 2, 2]);
                // The counts are the metric's, by shard.
                let metric: Vec<i64> = ["0", "1", "2"]
                    .iter()
                    .map(|s| gauge.with_label_values(&[*s]).get())
                    .collect();
                assert_eq!(metric, [2, 2, 2]);
            });
        })
        .expect("a thread")
        .join()
        .expect("the case passes");
}

#[tokio::test(flavor = "current_thread")]
async fn a_single_shard_serves_everything_on_the_calling_runtime() {
    let shards = Shards::single();
    let here = std::thread::current().name().map(str::to_string);
    let (_clients, names) = echo_through(&shards, 3).await;
    assert_eq!(names.len(), 3);
    for name in names {
        assert_eq!(Some(name), here.clone());
    }
    assert_eq!(shards.open(), [3]);
}

#[test]
fn dropping_the_shards_stops_their_threads_with_connections_still_open() {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let held = rt.block_on(async {
        let shards = Shards::start(1).expect("two shards");
        let (clients, names) = echo_through(&shards, 2).await;
        seen.lock().expect("names").extend(names);
        let started = std::time::SystemTime::now();
        drop(shards);
        (clients, started.elapsed().unwrap_or_default())
    });
    let (_clients, took) = held;
    assert_eq!(seen.lock().expect("names")[1], "fleetgate-shard-1");
    assert!(
        took < Duration::from_secs(2),
        "the second shard's thread stops at once, not when its connection ends ({took:?})"
    );
}
