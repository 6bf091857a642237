//! The desk's tests: questions through a shared store, as replicas see them.

use super::*;
use wasm_agent_sandbox::ask::Subject;
use wasm_agent_session::InMemorySessionStore;

fn question() -> Question {
    Question {
        tool: "drop_table".into(),
        subject: Subject::Call {
            summary: r#"{"table":"users"}"#.into(),
            version: "sha256:00".into(),
            arguments: "sha256:11".into(),
        },
        offer_session: false,
        running: false,
    }
}

fn desk(store: &Arc<dyn SessionStore>, keys: &StateKeys) -> Desk {
    Desk::new(store.clone(), keys.clone(), Duration::from_secs(30))
}

/// Asks `question()` on `desk` for alice of acme; the first pending one.
async fn asked(desk: &Desk) -> (tokio::task::JoinHandle<Reply>, Pending) {
    let asker = desk
        .asking(Some("alice"), Some("acme"), None)
        .asker()
        .clone();
    let asked = tokio::spawn(async move { asker.ask(&question()).await });
    loop {
        if let Some(first) = desk.waiting().await.unwrap().0.into_iter().next() {
            return (asked, first);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_question_waits_on_the_desk_until_an_operator_answers_it_once() {
    let store: Arc<dyn SessionStore> = Arc::new(InMemorySessionStore::default());
    let keys = StateKeys::random();
    let (desk, other_replica) = (desk(&store, &keys), desk(&store, &keys));
    let (asked, pending) = asked(&desk).await;
    assert_eq!(pending.tool, "drop_table");
    assert_eq!(pending.caller(), "principal alice, tenant acme");
    assert!(pending.text.contains(r#"{"table":"users"}"#));
    assert_eq!(
        other_replica.question(&pending.id).await.unwrap().id,
        pending.id
    );
    assert!(desk.question("unknown").await.is_none());
    let answer = |a: &str| Answer {
        answer: a.into(),
        operator: "olga".into(),
        key: pending.key.clone(),
    };
    assert!(
        other_replica
            .answer(&pending.id, &answer("allow_once"))
            .await
            .unwrap()
    );
    assert!(
        !desk.answer(&pending.id, &answer("deny")).await.unwrap(),
        "the first counts"
    );
    assert_eq!(asked.await.unwrap(), Reply::Once);
    assert!(desk.waiting().await.unwrap().0.is_empty());
}

#[tokio::test]
async fn a_store_writer_can_neither_answer_nor_show_another_question() {
    let store: Arc<dyn SessionStore> = Arc::new(InMemorySessionStore::default());
    let desk = desk(&store, &StateKeys::random());
    let (asked, pending) = asked(&desk).await;
    // Forged details are not listed; a forged answer denies.
    store
        .open_mailbox(
            &format!("{QUESTION_PREFIX}0forged"),
            Duration::from_secs(30),
        )
        .await
        .unwrap();
    let forged = r#"{"id":"0forged","tool":"x","text":"harmless","asked":"","key":""}"#;
    store
        .deliver(&format!("{QUESTION_PREFIX}0forged"), forged)
        .await
        .unwrap();
    assert_eq!(desk.waiting().await.unwrap().0.len(), 1);
    let unsealed = format!(
        r#"{{"answer":"allow_once","operator":"o","key":"{}"}}"#,
        pending.key
    );
    assert!(
        store
            .deliver(&format!("{ANSWER_PREFIX}{}", pending.id), &unsealed)
            .await
            .unwrap()
    );
    assert_eq!(asked.await.unwrap(), Reply::Deny);
}

#[tokio::test]
async fn one_caller_cannot_fill_the_desk() {
    let store: Arc<dyn SessionStore> = Arc::new(InMemorySessionStore::default());
    let desk = desk(&store, &StateKeys::random());
    let asker = desk.asking(Some("mallory"), None, None).asker().clone();
    let waiting: Vec<_> = (0..MAX_PER_CALLER)
        .map(|_| {
            let asker = asker.clone();
            tokio::spawn(async move { asker.ask(&question()).await })
        })
        .collect();
    while desk.waiting().await.unwrap().0.len() < MAX_PER_CALLER {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(asker.ask(&question()).await, Reply::Unavailable);
    let (other, _) = asked(&desk).await;
    other.abort();
    for task in waiting {
        task.abort();
    }
}

/// A person asked with the call's answer (as over the sessionless
/// revision): sent to pages, and bringing `back` what was referred.
#[derive(Default)]
struct Person {
    pages: Mutex<Vec<Referral>>,
    back: Mutex<Option<Referred>>,
    decided: Mutex<Vec<Reply>>,
}

#[async_trait::async_trait]
impl Asker for Person {
    async fn ask(&self, _: &Question) -> Reply {
        Reply::Later
    }
    fn who(&self) -> String {
        "the person".into()
    }
    fn refer_later(&self, referral: &Referral) -> Option<String> {
        self.pages.lock().unwrap().push(referral.clone());
        Some(referral.id.clone())
    }
    fn referred(&self, _: &Question) -> Option<Referred> {
        self.back.lock().unwrap().take()
    }
    fn decided_elsewhere(&self, _: &Question, reply: Reply) {
        self.decided.lock().unwrap().push(reply);
    }
}

#[tokio::test]
async fn a_question_sent_with_the_calls_answer_is_collected_when_the_call_is_made_again() {
    let store: Arc<dyn SessionStore> = Arc::new(InMemorySessionStore::default());
    let mut desk = desk(&store, &StateKeys::random());
    desk.retry_wait = Duration::from_millis(300);
    desk.set_base("http://127.0.0.1:1");
    let person = Arc::new(Person::default());
    let answers = Arc::new(SessionAnswers::new(Duration::from_secs(30), false));
    let asking = Asking::new(person.clone(), answers);
    let asker = desk
        .asking(Some("alice"), Some("acme"), Some(&asking))
        .asker()
        .clone();
    // Sent to the page at once; the question waits on the desk.
    assert_eq!(asker.ask(&question()).await, Reply::Later);
    let page = person.pages.lock().unwrap()[0].clone();
    assert_eq!(
        page.url,
        format!("http://127.0.0.1:1/console/approvals/{}", page.id)
    );
    let pending = desk.waiting().await.unwrap().0;
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id, page.id);
    // Made again before anyone answered: sent to the same page again.
    *person.back.lock().unwrap() = Some(Referred::Waiting(page.id.clone()));
    assert_eq!(asker.ask(&question()).await, Reply::Later);
    assert_eq!(person.pages.lock().unwrap()[1].id, page.id);
    assert_eq!(desk.waiting().await.unwrap().0.len(), 1, "not asked twice");
    // Answered: the call made again gets the operator's answer, once.
    let allow = Answer {
        answer: "allow_once".into(),
        operator: "olga".into(),
        key: pending[0].key.clone(),
    };
    assert!(desk.answer(&page.id, &allow).await.unwrap());
    *person.back.lock().unwrap() = Some(Referred::Waiting(page.id.clone()));
    assert_eq!(asker.ask(&question()).await, Reply::Once);
    // The reply is kept with the call, should it stop again.
    assert_eq!(*person.decided.lock().unwrap(), [Reply::Once]);
    // Brought back decided, it is not asked again.
    *person.back.lock().unwrap() = Some(Referred::Decided(Reply::Once));
    assert_eq!(asker.ask(&question()).await, Reply::Once);
    assert!(desk.waiting().await.unwrap().0.is_empty());
    // The answer was used: a state naming the question again gets none.
    *person.back.lock().unwrap() = Some(Referred::Waiting(page.id.clone()));
    assert_eq!(asker.ask(&question()).await, Reply::NoAnswer);
}

#[test]
fn anything_but_an_allow_of_this_question_denies() {
    let answer = |answer: &str, key: &str| Answer {
        answer: answer.into(),
        operator: "o".into(),
        key: key.into(),
    };
    assert_eq!(reply_of(Some(&answer("allow_once", "k")), "k"), Reply::Once);
    assert_eq!(
        reply_of(Some(&answer("allow_for_session", "k")), "k"),
        Reply::Session
    );
    assert_eq!(
        reply_of(Some(&answer("allow_once", "other")), "k"),
        Reply::Deny
    );
    assert_eq!(reply_of(Some(&answer("yes", "k")), "k"), Reply::Deny);
    assert_eq!(reply_of(None, "k"), Reply::Deny);
}
