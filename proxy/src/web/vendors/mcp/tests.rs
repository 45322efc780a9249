use super::*;

#[test]
fn plain_json_and_event_stream_answers_give_the_first_text() {
    let plain = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":""},{"type":"text","text":"hello"}]}}"#;
    assert_eq!(tool_text(plain).as_deref(), Ok("hello"));
    for sep in ["\n", "\r\n", "\r"] {
        let sse = format!(
            "event: message{sep}data: {{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"from sse\"}}]}}}}{sep}{sep}"
        );
        assert_eq!(
            tool_text(sse.as_bytes()).as_deref(),
            Ok("from sse"),
            "separator {sep:?}"
        );
    }
}

#[test]
fn errors_and_odd_envelopes_are_failures_with_their_wording() {
    let cases: [(&[u8], &str); 5] = [
        (
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"rate limit exceeded"}}"#,
            "rate limit exceeded",
        ),
        (
            br#"{"result":{"isError":true,"content":[{"type":"text","text":"bad query"}]}}"#,
            "bad query",
        ),
        (br#"{"result":{"isError":true}}"#, "MCP tool call failed"),
        (
            br#"{"result":{"content":[{"type":"image","data":"x"}]}}"#,
            "MCP response contained no text content",
        ),
        (
            b"<html>maintenance</html>",
            "Unrecognized MCP response shape",
        ),
    ];
    for (body, want) in cases {
        assert_eq!(
            tool_text(body),
            Err(want.to_string()),
            "{}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn a_session_takes_the_answer_to_its_own_request_id() {
    let stream = concat!(
        "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\r\n\r\n",
        "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":\"2025-06-18\"}}\r\n\r\n",
        "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32602,\"message\":\"Unknown tool: nope\"}}\r\n\r\n",
    );
    assert_eq!(
        response_result(stream.as_bytes(), Some(0)),
        Ok(json!({"protocolVersion": "2025-06-18"}))
    );
    assert_eq!(
        response_result(stream.as_bytes(), Some(1)),
        Err("Unknown tool: nope".to_string())
    );
    assert_eq!(
        response_result(stream.as_bytes(), Some(2)),
        Err("Unrecognized MCP response shape".to_string())
    );
}

#[test]
fn a_stream_holds_the_answer_once_its_line_is_complete() {
    let answer = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}";
    for sep in [&b"\n"[..], b"\r\n", b"\r"] {
        let mut body = answer.to_vec();
        assert!(
            !holds_answer(&body, 0, 1),
            "a line without its end is not complete yet"
        );
        let before = body.len();
        body.extend_from_slice(sep);
        assert!(holds_answer(&body, before, 1), "separator {sep:?}");
        assert!(!holds_answer(&body, before, 2), "another request's answer");
    }
    // The answer's line completed in an earlier chunk is not scanned again, and a line split
    // over chunks is read whole.
    let body = b"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
    for split in 1..body.len() {
        assert!(
            holds_answer(body, split, 1),
            "split at {split} must still find the answer"
        );
    }
    assert!(
        !holds_answer(body, body.len(), 1),
        "no new bytes, no new line"
    );
}

mod session {
    use std::time::Duration;

    use fleetgate_e2e::origin::{self, Reply};

    use super::super::*;
    use crate::web::vendors::Endpoint;

    /// An event stream answering request 0 (initialize, speaking `2025-06-18`) and request 1
    /// (the tool call), in one reply the stub gives every request.
    fn both_answers() -> String {
        let init = json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-06-18",
            "capabilities": {}, "serverInfo": {"name": "stub", "version": "1"}}});
        let call = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text",
            "text": "items"}], "structuredContent": {"n": 1}}});
        format!("event: message\r\ndata: {init}\r\n\r\nevent: message\r\ndata: {call}\r\n\r\n")
    }

    fn client(url: &str) -> HttpClient {
        let mut endpoint = Endpoint::new(url::Url::parse(url).expect("the stub URL parses"));
        endpoint.retries = 0;
        HttpClient::new(endpoint)
    }

    /// A session with the stub at `url`, through `http`.
    async fn open<'a>(
        http: &'a HttpClient,
        url: &str,
        headers: &'a [(String, String)],
    ) -> Result<Session<'a>, McpError> {
        Session::open(
            http,
            url::Url::parse(url).expect("the stub URL parses"),
            headers,
        )
        .await
    }

    fn body(request: &fleetgate_e2e::origin::SeenRequest) -> Value {
        serde_json::from_slice(&request.body).unwrap_or(Value::Null)
    }

    #[tokio::test]
    async fn a_session_initializes_calls_with_its_id_and_version_and_ends_with_a_delete() {
        let stub = origin::http1()
            .route(
                "/mcp",
                Reply::new(200, "text/event-stream", both_answers())
                    .header("mcp-session-id", "s-1"),
            )
            .run()
            .await
            .expect("the stub must start");
        let url = stub.url("/mcp?team=a");
        let http = client(&url);
        let headers = vec![("authorization".to_string(), "Bearer t".to_string())];
        let mut session = open(&http, &url, &headers)
            .await
            .expect("the session must open");
        let result = session
            .call_tool("list_items", json!({"folder": "inbox"}))
            .await
            .expect("the call must answer");
        session.close().await;
        assert_eq!(
            result,
            json!({"content": [{"type": "text", "text": "items"}], "structuredContent": {"n": 1}}),
            "the call takes the answer to its own id, not the initialize answer"
        );

        let seen = stub.requests();
        let methods: Vec<(String, Value)> = seen
            .iter()
            .map(|r| (r.method.to_string(), body(r)["method"].clone()))
            .collect();
        assert_eq!(
            methods,
            [
                ("POST".to_string(), json!("initialize")),
                ("POST".to_string(), json!("notifications/initialized")),
                ("POST".to_string(), json!("tools/call")),
                ("DELETE".to_string(), Value::Null),
            ]
        );
        let init = body(&seen[0]);
        assert_eq!(init["id"], 0);
        assert_eq!(init["params"]["protocolVersion"], PROTOCOL_VERSION);
        assert_eq!(init["params"]["clientInfo"]["name"], "fleetgate");
        assert_eq!(body(&seen[1]).get("id"), None, "a notification has no id");
        assert_eq!(
            body(&seen[2]),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "list_items", "arguments": {"folder": "inbox"}}})
        );
        for (i, request) in seen.iter().enumerate() {
            assert_eq!(
                request.uri.query(),
                Some("team=a"),
                "request {i} keeps the query"
            );
            assert_eq!(
                request.header("authorization"),
                Some("Bearer t"),
                "request {i}"
            );
            let (session_id, version) = match i {
                0 => (None, None),
                _ => (Some("s-1"), Some("2025-06-18")),
            };
            assert_eq!(request.header("mcp-session-id"), session_id, "request {i}");
            assert_eq!(
                request.header("mcp-protocol-version"),
                version,
                "request {i} sends the version the server chose"
            );
            if request.method == http::Method::POST {
                assert_eq!(request.header("accept"), Some(ACCEPT), "request {i}");
                assert_eq!(
                    request.header("content-type"),
                    Some("application/json"),
                    "request {i}"
                );
            }
        }
    }

    #[tokio::test]
    async fn a_session_stops_reading_a_stream_the_server_keeps_open_at_its_answer() {
        let stub = origin::http1()
            .route(
                "/mcp",
                Reply::stall_mid_body("text/event-stream", 1 << 20, both_answers())
                    .header("mcp-session-id", "s-2"),
            )
            .run()
            .await
            .expect("the stub must start");
        let url = stub.url("/mcp");
        let http = client(&url);
        let run = async {
            let mut session = open(&http, &url, &[]).await.expect("the session must open");
            let result = session.call_tool("list_items", json!({})).await;
            session.close().await;
            result
        };
        let result = tokio::time::timeout(Duration::from_secs(10), run)
            .await
            .expect("an open stream must not hold the session past its answer");
        assert_eq!(
            result.expect("the call must answer")["structuredContent"]["n"],
            1
        );
    }

    #[tokio::test]
    async fn a_server_without_sessions_gets_no_session_header_and_no_delete() {
        let init = json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-03-26"}});
        let stub = origin::http1()
            .route("/mcp", Reply::json(&init))
            .run()
            .await
            .expect("the stub must start");
        let url = stub.url("/mcp");
        let http = client(&url);
        let session = open(&http, &url, &[]).await.expect("the session must open");
        session.close().await;
        let seen = stub.requests();
        assert_eq!(
            seen.len(),
            2,
            "initialize and the initialized notification only"
        );
        assert!(seen.iter().all(|r| r.header("mcp-session-id").is_none()));
        assert_eq!(seen[1].header("mcp-protocol-version"), Some("2025-03-26"));
    }

    #[tokio::test]
    async fn http_failures_and_error_answers_keep_their_wording() {
        let stub = origin::http1()
            .route(
                "/mcp",
                Reply::text("Bad Request: Missing session ID").status(400),
            )
            .run()
            .await
            .expect("the stub must start");
        let url = stub.url("/mcp");
        let http = client(&url);
        let err = open(&http, &url, &[]).await.expect_err("a 400 must fail");
        assert_eq!(err.detail(), "HTTP 400: Bad Request: Missing session ID");

        let error =
            json!({"jsonrpc": "2.0", "id": 0, "error": {"code": -32600, "message": "unsupported"}});
        stub.set_route("/mcp", Reply::json(&error));
        let err = open(&http, &url, &[])
            .await
            .expect_err("an error answer must fail");
        assert_eq!(err, McpError::Tool("unsupported".into()));
    }
}
