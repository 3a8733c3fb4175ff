//! Decisions for calls and listings, with every variable a rule reads.

use serde_json::{Value as Json, json};

use super::*;

#[test]
fn the_issues_deny_example() {
    let rules = rules(json!({"rules": [
        {"deny": WRITE_NEEDS_SCOPE, "why": "writing files needs files:write"}
    ]}));
    let reader = caller(Some("ann"), &["files:read"]);
    let writer = caller(Some("bob"), &["files:read", "files:write"]);
    let cases = [
        (&reader, "fs__write_file", (Effect::Deny, Some(0)), false),
        (&writer, "fs__write_file", (Effect::Allow, None), true),
        (&reader, "fs__read_file", (Effect::Allow, None), true),
    ];
    for (who, name, want, listed) in cases {
        let decision = rules.decide(who, &tool(name), &json!({"path": "/tmp/x"}));
        assert_eq!(outcome(&decision), want, "{name} by {:?}", who.principal);
        assert_eq!(rules.lists(who, &tool(name)), listed, "{name} listed");
    }
    let denied = rules.decide(&reader, &tool("fs__write_file"), &json!({}));
    assert_eq!(
        denied.message(),
        format!("denied by rules[0] ({WRITE_NEEDS_SCOPE}): writing files needs files:write")
    );
}

#[test]
fn the_issues_allow_example_with_default_deny() {
    let rules = rules(json!({
        "rules": [{"allow": r#"args.path.startsWith("/srv/public/")"#}],
        "default": "deny"
    }));
    let anyone = Caller::default();
    let read = tool("fs__read_file");
    let cases = [
        (
            json!({"path": "/srv/public/a.txt"}),
            (Effect::Allow, Some(0)),
        ),
        (json!({"path": "/etc/passwd"}), (Effect::Deny, None)),
        (json!({"path": "/srv/public"}), (Effect::Deny, None)),
        (json!({}), (Effect::Deny, None)),
        (json!({"path": 7}), (Effect::Deny, None)),
        (Json::Null, (Effect::Deny, None)),
    ];
    for (args, want) in cases {
        assert_eq!(
            outcome(&rules.decide(&anyone, &read, &args)),
            want,
            "{args}"
        );
    }
    // The rule reads the arguments, so it may allow a call: the tool is listed.
    assert!(rules.lists(&anyone, &read));
}

#[test]
fn deny_over_ask_over_allow_and_the_first_rule_reports() {
    let rules = rules(json!({"rules": [
        {"allow": "args.level >= 0"},
        {"ask": "args.level >= 5"},
        {"deny": "args.level >= 9"},
        {"ask": "args.level >= 3"},
        {"deny": "args.level >= 7"},
    ], "default": "deny"}));
    let cases = [
        (-1, (Effect::Deny, None)),
        (0, (Effect::Allow, Some(0))),
        (3, (Effect::Ask, Some(3))),
        (5, (Effect::Ask, Some(1))),
        (7, (Effect::Deny, Some(4))),
        (9, (Effect::Deny, Some(2))),
    ];
    for (level, want) in cases {
        let decision = rules.decide(&Caller::default(), &tool("x__y"), &json!({"level": level}));
        assert_eq!(outcome(&decision), want, "level {level}");
    }
}

#[test]
fn rules_that_cannot_be_evaluated_fail_closed() {
    let x = tool("x__y");
    let anyone = Caller::default();
    // (rule, default, args, effect, the rule is reported as unevaluated)
    let cases = [
        (
            "deny",
            r#"args.path.startsWith("/etc")"#,
            "allow",
            json!({}),
            Effect::Deny,
            true,
        ),
        (
            "ask",
            r#"args.path.startsWith("/etc")"#,
            "allow",
            json!({}),
            Effect::Ask,
            true,
        ),
        (
            "allow",
            r#"args.path.startsWith("/srv")"#,
            "deny",
            json!({}),
            Effect::Deny,
            false,
        ),
        (
            "allow",
            r#"args.path.startsWith("/srv")"#,
            "ask",
            json!({}),
            Effect::Ask,
            false,
        ),
        // Wrong type: a number has no startsWith.
        (
            "deny",
            r#"args.path.startsWith("/etc")"#,
            "allow",
            json!({"path": 1}),
            Effect::Deny,
            true,
        ),
        // Not a bool: the rule gives a string.
        (
            "deny",
            "args.path",
            "allow",
            json!({"path": "/etc"}),
            Effect::Deny,
            true,
        ),
        (
            "allow",
            "args.path",
            "deny",
            json!({"path": "/etc"}),
            Effect::Deny,
            false,
        ),
        // Strict logic: `!` on a string is an error in CEL, not `false`.
        (
            "deny",
            "!args.dry_run",
            "allow",
            json!({"dry_run": "yes"}),
            Effect::Deny,
            true,
        ),
        (
            "deny",
            "args.force || args.all",
            "allow",
            json!({"force": 1, "all": false}),
            Effect::Deny,
            true,
        ),
        (
            "deny",
            "args.a && true",
            "allow",
            json!({"a": "false"}),
            Effect::Deny,
            true,
        ),
        (
            "deny",
            "args.a ? false : false",
            "allow",
            json!({"a": "x"}),
            Effect::Deny,
            true,
        ),
        // A macro over something that is not a list: an error, not the interpreter's panic.
        (
            "deny",
            r#"args.paths.exists(p, p == "/")"#,
            "allow",
            json!({"paths": "/"}),
            Effect::Deny,
            true,
        ),
        // Division by zero.
        (
            "deny",
            "10 / args.n > 1",
            "allow",
            json!({"n": 0}),
            Effect::Deny,
            true,
        ),
    ];
    for (effect, expr, default, args, want, unevaluated) in cases {
        let rules = rules(json!({"rules": [{effect: expr}], "default": default}));
        let decision = rules.decide(&anyone, &x, &args);
        assert_eq!(decision.effect, want, "{effect} {expr} with {args}");
        match (&decision.because, unevaluated) {
            // Every case is an error the interpreter reports, none a contained panic.
            (Because::Unevaluated(u), true) => {
                assert_eq!(u.rule.index, 0);
                assert_ne!(u.error, EvalError::Panicked, "{expr}");
            }
            (Because::Default { skipped: Some(u) }, false) => assert_eq!(u.rule.index, 0),
            (other, _) => panic!("{effect} {expr} with {args}: {other:?}"),
        }
    }
}

#[test]
fn a_bool_argument_still_works_with_strict_logic() {
    let rules =
        rules(json!({"rules": [{"deny": "!args.dry_run && args.paths.all(p, p != \"/\")"}]}));
    let cases = [
        (json!({"dry_run": false, "paths": ["/a"]}), Effect::Deny),
        (json!({"dry_run": true, "paths": ["/a"]}), Effect::Allow),
        (json!({"dry_run": false, "paths": ["/"]}), Effect::Allow),
    ];
    for (args, want) in cases {
        let decision = rules.decide(&Caller::default(), &tool("x__y"), &args);
        assert_eq!(decision.effect, want, "{args}");
    }
}

#[test]
fn list_time_hiding_for_each_branch() {
    let who = caller(Some("ann"), &["files:read"]);
    let t = tool("fs__write_file");
    // (rules, default, listed)
    let cases: [(Json, &str, bool); 18] = [
        // 1. A deny rule without args that holds hides.
        (json!([{"deny": WRITE_NEEDS_SCOPE}]), "allow", false),
        // A deny rule without args that is false does not.
        (
            json!([{"deny": "tool.upstream == \"shell\""}]),
            "allow",
            true,
        ),
        // 1. A deny rule without args that cannot be evaluated hides (fail closed).
        (
            json!([{"deny": "caller.claims.tenant != \"acme\""}]),
            "allow",
            false,
        ),
        // A deny rule that reads args hides only when it holds whatever the args: one that
        // needs them to be evaluated does not, even if it would hold for every call.
        (json!([{"deny": "size(args) >= 0"}]), "allow", true),
        (
            json!([{"deny": "tool.upstream == \"fs\" || args.force == true"}]),
            "allow",
            false,
        ),
        (
            json!([{"deny": "tool.upstream == \"git\" || args.force == true"}]),
            "allow",
            true,
        ),
        (
            json!([{"deny": "args.path.startsWith(\"/\") || true"}]),
            "deny",
            false,
        ),
        // 2. Default deny: an allow rule without args that holds lists.
        (
            json!([{"allow": "\"files:read\" in caller.scopes"}]),
            "deny",
            true,
        ),
        // 2. ...that is false hides.
        (
            json!([{"allow": "\"files:write\" in caller.scopes"}]),
            "deny",
            false,
        ),
        // 2. ...that cannot be evaluated hides.
        (
            json!([{"allow": "caller.claims.tenant == \"acme\""}]),
            "deny",
            false,
        ),
        // 2. An allow rule that reads args may hold: listed; unless it cannot, whatever the
        // args (a rule for another kind or upstream).
        (
            json!([{"allow": "args.path.startsWith(\"/srv\")"}]),
            "deny",
            true,
        ),
        (
            json!([{"allow": "tool.kind == \"prompt\" && args.who == \"root\""}]),
            "deny",
            false,
        ),
        (
            json!([{"ask": "tool.upstream == \"git\" && args.path.startsWith(\"/\")"}]),
            "deny",
            false,
        ),
        // 2. An ask rule without args that holds lists.
        (json!([{"ask": "tool.upstream == \"fs\""}]), "deny", true),
        (json!([{"ask": "tool.upstream == \"git\""}]), "deny", false),
        // 2. Default deny and no rules hides; default ask and allow list.
        (json!([]), "deny", false),
        (json!([]), "ask", true),
        // Deny over allow at list time too.
        (
            json!([{"allow": "true"}, {"deny": "tool.name == \"fs__write_file\""}]),
            "deny",
            false,
        ),
    ];
    for (list, default, listed) in cases {
        let rules = rules(json!({"rules": list, "default": default}));
        assert_eq!(rules.lists(&who, &t), listed, "{list} default {default}");
        assert_eq!(
            rules.for_caller(&who).lists(&t),
            listed,
            "{list} for_caller"
        );
    }
}

#[test]
fn caller_facts() {
    let mut acme = caller(Some("ann"), &["admin"]);
    acme.claims = json!({"tenant": "acme", "level": 3, "groups": ["ops"]})
        .as_object()
        .cloned()
        .unwrap_or_default();
    acme.client = Some(ClientFacts {
        name: "claude-code".into(),
        version: "2.1".into(),
    });
    let anonymous = caller(None, &[]);
    // (rule allowing with default deny, caller, allowed)
    let cases = [
        (r#"caller.claims.tenant == "acme""#, &acme, true),
        (r#"caller.claims.tenant == "acme""#, &anonymous, false),
        (
            r#""ops" in caller.claims.groups && caller.claims.level > 2"#,
            &acme,
            true,
        ),
        (r#""admin" in caller.scopes"#, &acme, true),
        (r#""admin" in caller.scopes"#, &anonymous, false),
        ("caller.principal == null", &anonymous, true),
        ("caller.principal == null", &acme, false),
        (r#"caller.principal == "ann""#, &acme, true),
        (r#"caller.client.name == "claude-code""#, &acme, true),
        ("caller.client == null", &anonymous, true),
        (r#"caller.client.name == "claude-code""#, &anonymous, false),
    ];
    for (expr, who, allowed) in cases {
        let rules = rules(json!({"rules": [{"allow": expr}], "default": "deny"}));
        let decision = rules.decide(who, &tool("x__y"), &Json::Null);
        assert_eq!(
            decision.effect == Effect::Allow,
            allowed,
            "{expr} for {who:?}"
        );
    }
}

#[test]
fn tool_facts() {
    let mut fs = tool("fs__read_file");
    fs.title = Some("Read a file".into());
    fs.annotations = json!({"readOnlyHint": true})
        .as_object()
        .cloned()
        .unwrap_or_default();
    let bare = tool("git__push");
    let cases = [
        ("tool.annotations.readOnlyHint == true", &fs, true),
        ("tool.annotations.readOnlyHint == true", &bare, false),
        ("has(tool.annotations.readOnlyHint)", &bare, false),
        (r#"tool.upstream == "fs""#, &fs, true),
        (r#"tool.title == "Read a file""#, &fs, true),
        (
            "tool.title == null && tool.description == null",
            &bare,
            true,
        ),
        (r#"tool.name.matches("^git__(push|commit)$")"#, &bare, true),
    ];
    for (expr, t, allowed) in cases {
        let rules = rules(json!({"rules": [{"allow": expr}], "default": "deny"}));
        let decision = rules.decide(&Caller::default(), t, &Json::Null);
        assert_eq!(
            decision.effect == Effect::Allow,
            allowed,
            "{expr} for {}",
            t.name
        );
        // None of these read args, so the listing agrees with the decision.
        assert_eq!(rules.lists(&Caller::default(), t), allowed, "{expr} listed");
    }
}

#[test]
fn argument_values() {
    let cases = [
        (r#"args.mode in ["r", "ro"]"#, json!({"mode": "ro"}), true),
        (r#"args.mode in ["r", "ro"]"#, json!({"mode": "rw"}), false),
        ("args.count > 10", json!({"count": 11}), true),
        ("args.count > 10", json!({"count": 10}), false),
        ("args.count == 3", json!({"count": 3.0}), true),
        ("args.ratio < 0.5", json!({"ratio": 0.25}), true),
        ("args.ratio < 0.5", json!({"ratio": 1}), false),
        (
            "args.big > 9223372036854775807",
            json!({"big": u64::MAX}),
            true,
        ),
        ("args.n < 0", json!({"n": -3}), true),
        ("args.flag == true", json!({"flag": true}), true),
        ("args.opt == null", json!({"opt": null}), true),
        (
            "args.nested.deep.x == 1",
            json!({"nested": {"deep": {"x": 1}}}),
            true,
        ),
        (r#"args["with space"] == 1"#, json!({"with space": 1}), true),
        ("size(args.items) == 2", json!({"items": [1, "a"]}), true),
        (
            r#"args.paths.all(p, p.startsWith("/srv/"))"#,
            json!({"paths": ["/srv/a", "/srv/b"]}),
            true,
        ),
        (
            r#"args.paths.all(p, p.startsWith("/srv/"))"#,
            json!({"paths": ["/srv/a", "/etc"]}),
            false,
        ),
        (
            r#"args.name.matches(args.pattern)"#,
            json!({"name": "abc", "pattern": "^a"}),
            true,
        ),
        (
            r#"args.name.matches(args.pattern)"#,
            json!({"name": "abc", "pattern": "("}),
            false,
        ),
    ];
    for (expr, args, allowed) in cases {
        let rules = rules(json!({"rules": [{"allow": expr}], "default": "deny"}));
        let decision = rules.decide(&Caller::default(), &tool("x__y"), &args);
        assert_eq!(
            decision.effect == Effect::Allow,
            allowed,
            "{expr} with {args}"
        );
    }
}

#[test]
fn messages_say_what_decided() {
    let rules = rules(json!({"rules": [
        {"deny": "args.path.startsWith(\"/etc\")", "why": "system files are off limits"},
        {"ask": "args.force == true"},
        {"allow": "args.path.startsWith(\"/srv\")"},
    ], "default": "deny"}));
    let anyone = Caller::default();
    let t = tool("fs__write_file");
    let cases = [
        (
            json!({"path": "/etc/passwd"}),
            r#"denied by rules[0] (args.path.startsWith("/etc")): system files are off limits"#,
        ),
        (
            json!({"path": "/srv/a", "force": true}),
            "sent for approval by rules[1] (args.force == true)",
        ),
        // A missing optional argument fails the ask rule closed: it asks.
        (
            json!({"path": "/srv/a"}),
            "sent for approval because rules[1] (args.force == true) could not be evaluated: No such key: force",
        ),
        (
            json!({"path": "/srv/a", "force": false}),
            r#"allowed by rules[2] (args.path.startsWith("/srv"))"#,
        ),
        (
            json!({"path": "/home/a", "force": false}),
            "denied by default: no rule allows this call",
        ),
        (
            json!({"path": 3, "force": false}),
            r#"denied because rules[0] (args.path.startsWith("/etc")) could not be evaluated: "#,
        ),
    ];
    for (args, says) in cases {
        let message = rules.decide(&anyone, &t, &args).message();
        assert!(message.starts_with(says), "{args}: {message}");
    }
    let missing = rules
        .decide(&anyone, &t, &json!({"force": false}))
        .message();
    assert!(
        missing.contains("No such key: path") && missing.ends_with("system files are off limits"),
        "{missing}"
    );
    let allow_only =
        super::rules(json!({"rules": [{"allow": "args.path == \"/\""}], "default": "deny"}));
    let skipped = allow_only.decide(&anyone, &t, &json!({})).message();
    assert_eq!(
        skipped,
        r#"denied by default: no rule allows this call (rules[0] (args.path == "/") could not be evaluated: No such key: path)"#
    );
}

#[test]
fn no_rules_decide_by_the_default() {
    for (default, effect, listed) in [
        ("allow", Effect::Allow, true),
        ("ask", Effect::Ask, true),
        ("deny", Effect::Deny, false),
    ] {
        let rules = rules(json!({"rules": [], "default": default}));
        assert!(rules.is_empty());
        let decision = rules.decide(&Caller::default(), &tool("a__b"), &json!({}));
        assert_eq!(outcome(&decision), (effect, None));
        assert_eq!(rules.lists(&Caller::default(), &tool("a__b")), listed);
    }
}

#[test]
fn rules_are_shared_across_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Rules>();
    shared::<Decision>();
    shared::<RuleError>();
}

#[test]
fn logic_is_cels_a_decisive_side_wins_over_an_error() {
    #[derive(Debug, PartialEq)]
    enum Got {
        Held,
        Unevaluated,
        Allowed,
    }
    let cases = [
        ("args.x == 1 && false", json!({}), Got::Allowed),
        ("false && args.x == 1", json!({}), Got::Allowed),
        ("args.x == 1 || true", json!({}), Got::Held),
        ("true || args.x == 1", json!({}), Got::Held),
        ("args.x == 1 && true", json!({}), Got::Unevaluated),
        ("true && args.x == 1", json!({}), Got::Unevaluated),
        ("args.x == 1 || false", json!({}), Got::Unevaluated),
        ("!(args.x == 1)", json!({}), Got::Unevaluated),
        ("args.x == 1 ? true : true", json!({}), Got::Unevaluated),
        (
            "true ? args.flag : true",
            json!({"flag": false}),
            Got::Allowed,
        ),
        (
            "false ? args.flag : tool.name == \"x__y\"",
            json!({}),
            Got::Held,
        ),
        (
            "true ? args.flag : false",
            json!({"flag": "no"}),
            Got::Unevaluated,
        ),
        // Below the outermost logic the interpreter evaluates, still strictly.
        (
            "args.items.exists(i, !i)",
            json!({"items": ["a"]}),
            Got::Unevaluated,
        ),
        (
            "args.items.exists(i, !i)",
            json!({"items": [true]}),
            Got::Allowed,
        ),
        (
            "args.items.exists(i, !i)",
            json!({"items": [true, false]}),
            Got::Held,
        ),
        (
            "[args.a || args.b][0]",
            json!({"a": 0, "b": true}),
            Got::Unevaluated,
        ),
        (
            "[args.a || args.b][0]",
            json!({"a": false, "b": true}),
            Got::Held,
        ),
    ];
    for (expr, args, want) in cases {
        let rules = rules(json!({"rules": [{"deny": expr}]}));
        let decision = rules.decide(&Caller::default(), &tool("x__y"), &args);
        let got = match decision.because {
            Because::Rule(_) => Got::Held,
            Because::Unevaluated(_) => Got::Unevaluated,
            Because::Default { .. } => Got::Allowed,
        };
        assert_eq!(got, want, "{expr} with {args}");
    }
}
