use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use wasm_agent_sandbox::ask::Reply;
use wasm_agent_session::{InMemorySessionStore, SessionStore};

use super::super::super::state_keys::StateKeys;
use super::super::{Continue, Holds, Next, Running};

/// A call that ends with the text sent to `go`, or with "cancelled" once
/// it is.
fn call() -> (Running, oneshot::Sender<&'static str>) {
    let (go, went) = oneshot::channel::<&'static str>();
    let cancelled = CancellationToken::new();
    let cancel = cancelled.clone();
    let task = tokio::spawn(async move {
        let text = tokio::select! {
            text = went => text.unwrap_or("dropped"),
            () = cancel.cancelled() => "cancelled",
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
    });
    let (_stops, questions) = mpsc::channel(1);
    let running = Running {
        task,
        questions,
        place: None,
        _in_flight: None,
        _cancel_on_drop: cancelled.drop_guard(),
    };
    (running, go)
}

fn ended() -> Continue {
    Arc::new(|mut running: Running| {
        Box::pin(async move {
            match running.next().await {
                Next::Ended(answer) => answer.map(Into::into),
                _ => panic!("the test's call asks nothing"),
            }
        })
    })
}

fn text_of(response: CallToolResponse) -> String {
    let CallToolResponse::Complete(result) = response else {
        panic!("not a result");
    };
    result.content[0].as_text().expect("text").text.clone()
}

fn holds(wait: Duration) -> Arc<Holds> {
    Arc::new(Holds::new(
        Arc::new(InMemorySessionStore::default()),
        StateKeys::random(),
        wait,
    ))
}

#[tokio::test]
async fn a_call_let_run_ends_without_a_retry_and_every_retry_reads_it() {
    let holds = holds(Duration::from_secs(1));
    let (running, go) = call();
    let id = holds.let_run("alice", running, ended()).await.ok().unwrap();
    // Before it ends, a retry waits a while, then is told it still runs;
    // one whose request is cancelled stops waiting at once.
    let never = CancellationToken::new();
    let started = tokio::time::Instant::now();
    assert!(holds.collect(&id, &never).await.unwrap().is_none());
    assert!(started.elapsed() >= Duration::from_secs(1));
    let cancelled = CancellationToken::new();
    cancelled.cancel();
    let started = tokio::time::Instant::now();
    assert!(holds.collect(&id, &cancelled).await.unwrap().is_none());
    assert!(started.elapsed() < Duration::from_millis(500));
    // The operator decided; nobody came back, and the call ended anyway
    // (not cancelled: its answer is its own).
    go.send("42").unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let response = holds
        .collect(&id, &never)
        .await
        .unwrap()
        .expect("what it did");
    assert_eq!(text_of(response.unwrap()), "42");
    // Read, not taken: a retry whose response was lost is sent it again.
    let again = holds
        .collect(&id, &never)
        .await
        .unwrap()
        .expect("what it did");
    assert_eq!(text_of(again.unwrap()), "42");
}

#[tokio::test]
async fn a_call_whose_replica_stopped_is_refused_saying_it_may_not_have_finished() {
    let store = Arc::new(InMemorySessionStore::default());
    let keys = StateKeys::random();
    let wait = Duration::from_millis(400);
    let running_here = Arc::new(Holds::new(store.clone(), keys.clone(), wait));
    let (running, _go) = call();
    let id = running_here
        .let_run("alice", running, ended())
        .await
        .ok()
        .unwrap();
    // Another replica sees it run while its replica says so.
    let elsewhere = Holds::new(store, keys, wait);
    let never = CancellationToken::new();
    assert!(elsewhere.collect(&id, &never).await.unwrap().is_none());
    // The replica stops saying so (it stopped): the retry is told.
    let alive = super::alive_address(&id);
    running_here.store.close_mailbox(&alive).await.unwrap();
    let error = elsewhere.collect(&id, &never).await.unwrap_err();
    assert!(
        error.message.contains("the call stopped before it ended"),
        "{error:?}"
    );
    assert!(error.message.contains("may not have finished"), "{error:?}");
    assert!(error.message.contains("call the tool again"), "{error:?}");
}

#[tokio::test]
async fn a_caller_lets_run_at_most_its_share_of_calls_each_counted_once() {
    let holds = holds(Duration::from_secs(5));
    let mut goes = Vec::new();
    for _ in 0..super::super::MAX_HOLDS_PER_CALLER {
        let (running, go) = call();
        holds.let_run("alice", running, ended()).await.ok().unwrap();
        goes.push(go);
    }
    let (running, _go) = call();
    assert!(holds.let_run("alice", running, ended()).await.is_err());
    // A call asking again while let run (or held) keeps its one place.
    let (mut running, _go) = call();
    assert!(running.take_place(&holds, "bob") && running.take_place(&holds, "bob"));
    let mut bobs = Vec::new();
    for _ in 1..super::super::MAX_HOLDS_PER_CALLER {
        let (running, go) = call();
        assert!(holds.let_run("bob", running, ended()).await.is_ok());
        bobs.push(go);
    }
    let (over, _go) = call();
    assert!(holds.let_run("bob", over, ended()).await.is_err());
    drop(running);
    // One ends: alice may again.
    goes.pop().unwrap().send("done").unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (running, _go) = call();
    assert!(holds.let_run("alice", running, ended()).await.is_ok());
}

#[tokio::test]
async fn what_a_store_writer_leaves_for_a_call_is_not_given() {
    let store = Arc::new(InMemorySessionStore::default());
    let holds = Arc::new(Holds::new(
        store.clone(),
        StateKeys::random(),
        Duration::from_secs(1),
    ));
    let (running, _go) = call();
    let id = holds.let_run("alice", running, ended()).await.ok().unwrap();
    // Someone who can write to the store leaves a result of their making.
    let forged = r#"{"complete":{"content":[{"type":"text","text":"forged"}],"isError":false}}"#;
    let address = super::result_address(&id);
    store
        .open_mailbox(&address, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(store.deliver(&address, forged).await.unwrap());
    let never = CancellationToken::new();
    let error = holds
        .collect(&id, &never)
        .await
        .unwrap()
        .expect("mail")
        .unwrap_err();
    assert!(
        error.message.contains("its seal does not open"),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_store_writers_answer_to_a_held_call_denies() {
    let holds = holds(Duration::from_secs(1));
    let address = super::super::answer_address("h1");
    // "once" left in a held call's mailbox by someone who can write to the
    // store: not this deployment's seal, so it denies.
    assert_eq!(holds.reply_in(&address, "once"), Reply::Deny);
    // Sealed for another held call's mailbox: denies too.
    let elsewhere = holds.seal(
        &super::super::answer_address("h2"),
        &"once",
        Duration::from_secs(5),
    );
    assert_eq!(holds.reply_in(&address, &elsewhere), Reply::Deny);
    // Sealed by a replica for this mailbox: it answers.
    let sealed = holds.seal(&address, &"once", Duration::from_secs(5));
    assert_eq!(holds.reply_in(&address, &sealed), Reply::Once);
}
