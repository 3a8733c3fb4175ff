//! Configuration shapes and rules refused at start.

use serde_json::{Value as Json, json};

use super::*;

#[test]
fn compile_errors_name_the_rule_and_the_reason() {
    let ok = json!({"allow": "true"});
    // (the second rule, what the error must say)
    let cases: [(Json, &str); 11] = [
        // The parser panics on this one; the panic is contained.
        (
            json!({"deny": "tool.name == "}),
            "is not a valid CEL expression: the CEL parser could not read it",
        ),
        (
            json!({"deny": "tool.name.?x == 1"}),
            "is not a valid CEL expression: ERROR: <input>:1:10: unsupported syntax '.?'",
        ),
        (
            json!({"deny": "user.name == \"x\""}),
            "reads `user`, which is not a variable",
        ),
        (
            json!({"ask": "tool.name.frobnicate()"}),
            "calls `frobnicate`",
        ),
        (
            json!({"deny": "timestamp(\"2026-01-01T00:00:00Z\") > 1"}),
            "calls `timestamp`",
        ),
        (
            json!({"deny": "tool.name.startsWith()"}),
            "calls `startsWith` with 1 argument(s)",
        ),
        (
            json!({"deny": "size(args, 1) > 0"}),
            "calls `size` with 2 argument(s)",
        ),
        (
            json!({"deny": "tool.name.matches(\"(\")"}),
            "regular expression that does not compile",
        ),
        (json!({"deny": "Foo{a: 1} == 1"}), "message literal"),
        (json!({"deny": "[1].all(x, y > 0)"}), "reads `y`"),
        (json!({"allow": "caller.x || nobody"}), "reads `nobody`"),
    ];
    for (rule, says) in cases {
        let error = compile_error(json!({"rules": [ok, rule]}));
        let text = rule
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(Json::as_str);
        assert_eq!(error.rule().index, 1, "{rule}");
        assert_eq!(Some(&*error.rule().text), text, "{rule}");
        let message = error.to_string();
        assert!(message.starts_with("rules[1] ("), "{message}");
        assert!(message.contains(says), "{rule}: {message}");
    }
}

#[test]
fn comprehension_variables_and_macros_compile() {
    for expr in [
        r#"args.paths.all(p, p.startsWith("/srv/"))"#,
        r#"args.paths.exists(p, p == "/")"#,
        r#"args.paths.exists_one(p, p == "/")"#,
        r#"args.paths.filter(p, p.endsWith(".key")).size() > 0"#,
        r#"size(args.paths.map(p, p + "/")) > 0"#,
        r#"caller.scopes.exists(s, s.startsWith("files:"))"#,
        r#"has(args.path) && has(caller.claims.tenant)"#,
    ] {
        rules(json!({"rules": [{"deny": expr}]}));
    }
}

#[test]
fn configuration_shape_errors_name_the_rule() {
    let cases = [
        (
            json!({"rules": [{"allow": "true"}, {"allow": "true", "deny": "false"}]}),
            "rules[1]: a rule has exactly one of \"allow\", \"ask\" or \"deny\", and this one has allow and deny",
        ),
        (
            json!({"rules": [{"why": "no effect"}]}),
            "rules[0]: a rule needs one of \"allow\", \"ask\" or \"deny\"",
        ),
        (
            json!({"rules": [{"deny": "true", "when": "x"}]}),
            "unknown field `when`",
        ),
        (
            json!({"rules": [], "default": "maybe"}),
            "unknown variant `maybe`",
        ),
        (
            json!({"rules": [], "fallback": "deny"}),
            "unknown field `fallback`",
        ),
    ];
    for (config, says) in cases {
        let error = serde_json::from_value::<RulesConfig>(config.clone())
            .expect_err("the configuration must not parse")
            .to_string();
        assert!(error.contains(says), "{config}: {error}");
    }
}

#[test]
fn configuration_round_trips() {
    let json = json!({"rules": [
        {"deny": "tool.name == \"a\"", "why": "no a"},
        {"ask": "true"},
        {"allow": "false"},
    ], "default": "deny"});
    let config: RulesConfig = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(serde_json::to_value(&config).unwrap(), json);
    let empty: RulesConfig = serde_json::from_value(json!({})).unwrap();
    assert_eq!((empty.rules.len(), empty.default), (0, Effect::Allow));
}
