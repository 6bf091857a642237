//! Questions of a tool answered by operators go to their desk, never to the
//! person behind the call; without a desk nobody can be asked.

use wasm_agent_sandbox::ask::{OPERATORS, OperatorDesk};

use super::*;
use crate::AnsweredBy;

/// A desk whose operators answer `reply`, noting who each call was for.
struct Desk {
    reply: Reply,
    callers: Mutex<Vec<String>>,
}

struct Operators(Reply);

#[async_trait::async_trait]
impl Asker for Operators {
    async fn ask(&self, _: &Question) -> Reply {
        self.0
    }

    fn who(&self) -> String {
        OPERATORS.into()
    }
}

impl OperatorDesk for Desk {
    fn asking(&self, principal: Option<&str>, _: Option<&str>, person: Option<&Asking>) -> Asking {
        self.callers
            .lock()
            .unwrap()
            .push(principal.unwrap_or_default().to_string());
        let asker = Arc::new(Operators(self.reply));
        match person {
            Some(person) => person.to(asker),
            None => Asking::new(asker, Arc::default()),
        }
    }
}

fn answered_by_operators(echo: &Arc<Echo>) -> Tool {
    tool(
        echo,
        CallSettings {
            approval: Approval::Always,
            answered_by: AnsweredBy::Operators,
            ..CallSettings::default()
        },
    )
}

#[tokio::test]
async fn the_operators_answer_and_the_person_is_never_asked() {
    let echo = Echo::new();
    let person = Arc::new(Person {
        reply: Reply::Once,
        asked: Mutex::default(),
    });
    let context = CallContext::new().user("alice").asking(Asking::new(
        person.clone(),
        Arc::new(SessionAnswers::default()),
    ));
    for (reply, runs) in [(Reply::Deny, 0), (Reply::Once, 1)] {
        let desk = Arc::new(Desk {
            reply,
            callers: Mutex::default(),
        });
        let pipeline = Pipeline::builder().operator_desk(desk.clone()).build();
        let tool = answered_by_operators(&echo);
        let called = pipeline.call(call(&tool, json!({}), &context)).await;
        assert_eq!(echo.runs(), runs);
        assert_eq!(desk.callers.lock().unwrap().as_slice(), ["alice"]);
        let note = called.approval.clone().expect("approval noted");
        assert_eq!(note.by, OPERATORS);
        if reply == Reply::Deny {
            let message = called.result.unwrap_err().message;
            assert!(message.contains("an operator did not approve"), "{message}");
        }
    }
    assert!(
        person.asked.lock().unwrap().is_empty(),
        "the person is never asked"
    );
}

#[tokio::test]
async fn without_a_desk_nobody_answers_in_the_operators_place() {
    let echo = Echo::new();
    let person = Arc::new(Person {
        reply: Reply::Once,
        asked: Mutex::default(),
    });
    let context = CallContext::new().asking(Asking::new(
        person.clone(),
        Arc::new(SessionAnswers::default()),
    ));
    let pipeline = Pipeline::builder().build();
    let called = pipeline
        .call(call(&answered_by_operators(&echo), json!({}), &context))
        .await;
    assert_eq!(echo.runs(), 0);
    assert!(person.asked.lock().unwrap().is_empty());
    let message = called.result.unwrap_err().message;
    assert!(message.contains("nobody could be asked"), "{message}");
}
