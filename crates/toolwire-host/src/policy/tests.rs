use std::sync::Mutex;

use serde_json::json;

use super::*;
use crate::config::Variables;
use crate::pins::definition_hash;

fn config() -> HostConfig {
    HostConfig::parse(
        r#"{
          "mcpServers": {
            "fs": {"command": "x", "trust": true,
                   "approval": {"allow": ["fs__read_*", "fs__write_*"], "ask": ["fs__read_secrets"]}},
            "web": {"command": "y", "approval": {"allow": ["web__*"]}},
            "untrusted": {"command": "z"}
          },
          "approval": {"deny": ["*__delete_*", "fs__write_etc"]}
        }"#,
        "/etc/mcp.json",
        &Variables::new::<&str, &str>([]),
    )
    .unwrap()
}

fn read_only() -> Value {
    json!({"name": "t", "annotations": {"readOnlyHint": true}})
}

/// An approver that answers from a script and records what it was shown.
struct Scripted {
    answers: Mutex<Vec<Answer>>,
    shown: Mutex<Vec<(String, Value, bool, String)>>,
}

impl Scripted {
    fn new(answers: Vec<Answer>) -> Scripted {
        Scripted {
            answers: Mutex::new(answers),
            shown: Mutex::new(Vec::new()),
        }
    }
}

impl Approver for Scripted {
    fn approve<'a>(
        &'a self,
        request: ApprovalRequest<'a>,
    ) -> Boxed<Box<dyn Future<Output = Answer> + Send + 'a>> {
        self.shown.lock().unwrap().push((
            request.qualified.to_owned(),
            request.arguments.clone(),
            request.annotations_trusted,
            request.reason.to_string(),
        ));
        let answer = self.answers.lock().unwrap().remove(0);
        Box::pin(async move { answer })
    }
}

fn verdict(policy: &Policy, server: &str, qualified: &str, definition: &Value) -> Verdict {
    let pin = PinState::Pinned(definition_hash(definition));
    policy.verdict(&Call {
        server,
        qualified,
        definition,
        pin: &pin,
        arguments: &json!({}),
    })
}

#[test]
fn deny_wins_over_ask_over_allow_and_the_default_is_to_ask() {
    let policy = Policy::new(&config(), MemoryRemembered::new()).unwrap();
    let plain = json!({"name": "t"});
    let rule = |r: &str| Reason::Rule(r.to_owned());
    assert_eq!(
        verdict(&policy, "fs", "fs__read_file", &plain),
        Verdict::Allow(rule("\"fs__read_*\" of server \"fs\""))
    );
    assert_eq!(
        verdict(&policy, "fs", "fs__read_secrets", &plain),
        Verdict::Ask(rule("\"fs__read_secrets\" of server \"fs\""))
    );
    assert_eq!(
        verdict(&policy, "fs", "fs__write_etc", &plain),
        Verdict::Deny(rule("\"fs__write_etc\" of the host"))
    );
    assert_eq!(
        verdict(&policy, "web", "web__delete_page", &plain),
        Verdict::Deny(rule("\"*__delete_*\" of the host"))
    );
    assert_eq!(
        verdict(&policy, "untrusted", "untrusted__run", &plain),
        Verdict::Ask(Reason::Default)
    );
    // A server's rules apply to its own tools only.
    assert_eq!(
        verdict(&policy, "web", "fs__read_file", &plain),
        Verdict::Ask(Reason::Default)
    );
}

#[test]
fn annotations_count_only_on_a_trusted_server() {
    let policy = Policy::new(&config(), MemoryRemembered::new()).unwrap();
    assert_eq!(
        verdict(&policy, "fs", "fs__stat", &read_only()),
        Verdict::Allow(Reason::TrustedReadOnly)
    );
    assert_eq!(
        verdict(&policy, "untrusted", "untrusted__stat", &read_only()),
        Verdict::Ask(Reason::Default)
    );
    // A rule to ask wins over a trusted hint.
    assert!(matches!(
        verdict(&policy, "fs", "fs__read_secrets", &read_only()),
        Verdict::Ask(_)
    ));
}

#[tokio::test]
async fn allow_always_is_asked_again_after_a_definition_change() {
    let policy = Policy::new(&config(), MemoryRemembered::new()).unwrap();
    let v1 = json!({"name": "run", "description": "Runs a command."});
    let v2 = json!({"name": "run", "description": "Runs a command as root."});
    let args = json!({"command": "ls -la /"});
    let approver = Scripted::new(vec![
        Answer::AllowAlways,
        Answer::Deny("not as root".into()),
    ]);
    let (pin1, pin2) = (
        PinState::Pinned(definition_hash(&v1)),
        PinState::Pinned(definition_hash(&v2)),
    );
    let call = |definition, pin| Call {
        server: "untrusted",
        qualified: "untrusted__run",
        definition,
        pin,
        arguments: &args,
    };
    assert_eq!(
        policy.authorize(&call(&v1, &pin1), &approver).await,
        Ok(Approved::ByPerson(Answer::AllowAlways))
    );
    // Remembered: no question the second time.
    assert_eq!(
        policy.authorize(&call(&v1, &pin1), &approver).await,
        Ok(Approved::ByPolicy(Reason::Remembered))
    );
    // The definition changed and was re-pinned: asked again, and refused.
    let refused = policy
        .authorize(&call(&v2, &pin2), &approver)
        .await
        .unwrap_err();
    assert!(
        refused.message.contains("not as root"),
        "{}",
        refused.message
    );
    let shown = approver.shown.lock().unwrap();
    assert_eq!(shown.len(), 2);
    assert_eq!(
        shown[0].1,
        json!({"command": "ls -la /"}),
        "the full arguments are shown"
    );
    assert!(!shown[0].2, "the server's annotations are not trusted");
    assert_eq!(shown[0].3, "no rule matches");
}

#[tokio::test]
async fn changed_and_denied_tools_never_reach_the_approver() {
    let policy = Policy::new(&config(), MemoryRemembered::new()).unwrap();
    let approver = Scripted::new(vec![]);
    let definition = json!({"name": "read_file"});
    let changed = PinState::Changed {
        pinned: "a".into(),
        listed: "b".into(),
    };
    let call = Call {
        server: "fs",
        qualified: "fs__read_file",
        definition: &definition,
        pin: &changed,
        arguments: &json!({}),
    };
    let refused = policy.authorize(&call, &approver).await.unwrap_err();
    assert!(
        refused.message.contains("changed since it was approved"),
        "{}",
        refused.message
    );
    let pinned = PinState::Pinned(definition_hash(&definition));
    let denied = Call {
        qualified: "fs__delete_tree",
        pin: &pinned,
        ..call
    };
    let refused = policy.authorize(&denied, &approver).await.unwrap_err();
    assert!(
        refused.message.contains("refused by the host's policy"),
        "{}",
        refused.message
    );
    assert!(approver.shown.lock().unwrap().is_empty());
}

#[test]
fn remembered_answers_survive_in_the_state_directory() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("state");
    FileRemembered::new(&dir)
        .remember("fs", "fs__run", "h1")
        .unwrap();
    let again = FileRemembered::new(&dir);
    assert!(again.allowed("fs", "fs__run", "h1"));
    assert!(!again.allowed("fs", "fs__run", "h2"));
    assert!(!again.allowed("web", "fs__run", "h1"));
    again.remember("fs", "fs__run", "h2").unwrap();
    assert!(
        !FileRemembered::new(&dir).allowed("fs", "fs__run", "h1"),
        "a new hash replaces the old"
    );
    std::fs::write(dir.join("approvals.json"), "{").unwrap();
    assert!(
        !FileRemembered::new(&dir).allowed("fs", "fs__run", "h2"),
        "a damaged file allows nothing"
    );
}

/// "Always" answers are readable by their owner only, in a state directory created private;
/// a file others could read (an older version's) is made private when it is next read.
#[cfg(unix)]
#[test]
fn remembered_answers_are_private() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("remembered");
    let state = dir.join("state");
    FileRemembered::new(&state)
        .remember("fs", "fs__run", "h1")
        .unwrap();
    FileRemembered::new(&state)
        .remember("fs", "fs__run", "h2")
        .unwrap();
    assert_eq!(crate::private::not_private(&dir), []);

    crate::private::set_mode(&state.join("approvals.json"), 0o644);
    assert!(FileRemembered::new(&state).allowed("fs", "fs__run", "h2"));
    assert_eq!(crate::private::not_private(&dir), []);
}
