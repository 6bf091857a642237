//! The audit trail in PostgreSQL through the real CLI: records go to the
//! `wasm_agent_audit` table, each replica keeping its own chain across
//! runs; `audit verify URL` checks every chain and finds an edited or
//! deleted row, and rows cut from a chain's end against its head; a
//! database that is down refuses calls (failing closed) without showing the
//! URL's password.

use serde_json::{Value, json};

use crate::common::{assert_clean_failure, component, run, stderr, stdout};
use crate::postgres::Postgres;

fn call(url: &str, replica: &str, expression: &str) -> std::process::Output {
    let calculator = component("calculator");
    run(&[
        "call",
        calculator.to_str().unwrap(),
        "calculate",
        &json!({ "expression": expression }).to_string(),
        "--audit",
        url,
        "--audit-replica",
        replica,
    ])
}

fn sql(url: &str, statement: &str) -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let rows = client.query(statement, &[]).await.unwrap();
        rows.iter()
            .filter_map(|row| row.try_get::<_, String>(0).ok())
            .collect()
    })
}

#[test]
fn records_go_to_a_table_with_a_chain_per_replica_and_tampering_is_found() {
    let cluster = Postgres::start();
    // Trust authentication ignores the password; it must never be shown.
    let url = format!(
        "postgres://postgres:pg-s3cret@127.0.0.1:{}/postgres",
        cluster.port()
    );
    for (replica, expression) in [("r1", "1+1"), ("r2", "2+2"), ("r1", "3+3")] {
        let output = call(&url, replica, expression);
        assert!(output.status.success(), "{}", stderr(&output));
        assert!(
            !stderr(&output).contains("pg-s3cret"),
            "{}",
            stderr(&output)
        );
    }
    let records = sql(
        &url,
        "SELECT record FROM wasm_agent_audit WHERE replica = 'r1' ORDER BY seq",
    );
    assert_eq!(records.len(), 4, "{records:#?}");
    let last: Value = serde_json::from_str(&records[3]).unwrap();
    assert_eq!(last["seq"], 3);
    assert_eq!(last["event"], "call");
    assert_eq!(last["tool"], "calculate");
    assert_eq!(last["outcome"], "ok");
    let open: Value = serde_json::from_str(&records[2]).unwrap();
    assert_eq!(open["event"], "open", "the second run continued the chain");

    let output = run(&["audit", "verify", &url, "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let chains: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(chains[0]["replica"], "r1");
    assert_eq!(chains[0]["records"], 4);
    assert_eq!(chains[1]["replica"], "r2");
    assert_eq!(chains[1]["records"], 2);

    sql(
        &url,
        "UPDATE wasm_agent_audit SET record = replace(record, '\"outcome\":\"ok\"', \
         '\"outcome\":\"failed\"') WHERE replica = 'r1' AND seq = 3",
    );
    let output = run(&["audit", "verify", &url]);
    assert_clean_failure(&output, 2, "replica \"r1\"");
    assert!(stderr(&output).contains("line 4"), "{}", stderr(&output));
    assert!(stderr(&output).contains("changed"), "{}", stderr(&output));
    sql(&url, "DELETE FROM wasm_agent_audit WHERE replica = 'r1'");

    sql(
        &url,
        "DELETE FROM wasm_agent_audit WHERE replica = 'r2' AND seq = 0",
    );
    let output = run(&["audit", "verify", &url]);
    assert_clean_failure(&output, 2, "replica \"r2\"");
    assert!(stderr(&output).contains("not 0"), "{}", stderr(&output));

    // Failing closed, no database means no call.
    cluster.stop();
    let output = call(&url, "r3", "4+4");
    assert_clean_failure(&output, 2, "cannot connect");
    assert!(
        !stderr(&output).contains("pg-s3cret"),
        "{}",
        stderr(&output)
    );
    assert!(!stdout(&output).contains('8'), "{}", stdout(&output));
}

#[test]
fn rows_cut_from_a_chains_end_are_found_against_its_head() {
    let cluster = Postgres::start();
    let url = format!("postgres://postgres@127.0.0.1:{}/postgres", cluster.port());
    for expression in ["1+1", "2+2"] {
        assert!(call(&url, "r", expression).status.success());
    }
    let output = run(&["audit", "verify", &url, "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let head = serde_json::from_str::<Value>(stdout(&output).trim()).unwrap()[0]["head"]
        .as_str()
        .unwrap()
        .to_string();
    // The last run's rows deleted: what is left chains, but ends short.
    sql(
        &url,
        "DELETE FROM wasm_agent_audit WHERE replica = 'r' AND seq >= 2",
    );
    assert_clean_failure(
        &call(&url, "r", "3+3"),
        2,
        "the log ends at seq 1, but its head says seq 3 was written",
    );
    assert_clean_failure(&run(&["audit", "verify", &url]), 2, "records were cut");
    // The head row removed too: a head kept elsewhere still finds the cut.
    sql(&url, "DELETE FROM wasm_agent_audit_head");
    assert!(run(&["audit", "verify", &url]).status.success());
    assert_clean_failure(
        &run(&["audit", "verify", &url, "--head", &format!("r={head}")]),
        2,
        "no record has the head",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_down_while_serving_refuses_calls_until_it_is_back_and_loses_nothing() {
    let cluster = Postgres::start();
    let url = cluster.url();
    let calculator = component("calculator");
    let server = crate::mcp::Server::start(&[
        "--tools",
        calculator.to_str().unwrap(),
        "--audit",
        &url,
        "--audit-replica",
        "live",
    ]);
    let session = server.session(None).await;
    let mut id = 10;
    let mut call = || {
        id += 1;
        server.call_tool(&session, id, "calculate", json!({"expression": "6*7"}))
    };
    let answer = call().await;
    assert_eq!(answer["result"]["content"][0]["text"], "42", "{answer}");

    // Down: once the writer finds it so, calls are refused, saying why.
    cluster.stop();
    let mut refused = None;
    for _ in 0..300 {
        let answer = call().await;
        if answer["result"]["isError"] == true {
            refused = Some(answer);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let refused = refused.expect("calls go on while the audit database is down");
    let text = refused["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("audit"), "{refused}");
    assert!(!text.contains("42"), "{refused}");

    // Back: calls run again, and every record reached the table in one chain.
    cluster.resume();
    let mut back = false;
    for _ in 0..300 {
        if call().await["result"]["isError"] == false {
            back = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(back, "calls stay refused after the database is back");
    // Stopped as an operator stops it: its queued records are written first.
    crate::entries::stop(server).await;
    let output = run(&["audit", "verify", &url, "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let chains: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(chains[0]["replica"], "live", "{chains}");
    let outcomes = tokio::task::spawn_blocking(move || {
        sql(
            &url,
            "SELECT record::json->>'outcome' FROM wasm_agent_audit WHERE replica = 'live' \
             AND record::json->>'event' = 'call' ORDER BY seq",
        )
    })
    .await
    .unwrap();
    assert_eq!(
        outcomes.first().map(String::as_str),
        Some("ok"),
        "{outcomes:?}"
    );
    assert!(
        outcomes.len() >= 2,
        "the call before the outage and one after: {outcomes:?}"
    );
}
