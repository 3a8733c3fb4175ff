//! What servers ask of the person: forms (elicitation), a URL to open, a message for a model
//! (sampling), and the directories they may work in (roots). Each question names the server
//! that asks. With no terminal, forms are answered with `--answer` or declined, URLs and
//! sampling declined. A URL is opened only when it is a web page (`ui::may_open`): anything
//! else is shown, said to be refused and why, and declined without a question.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;
use toolwire_client::protocol::{
    CreateMessageParams, CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitUrlParams,
    ListRootsResult, Root,
};
use toolwire_host::HostOptions;

use super::form;
use crate::terminal::{Json, Layout, json as safe_json, note, visible};
use crate::ui::{Tone, Ui};

/// The answers to servers' questions.
#[derive(Clone)]
pub(crate) struct Questions {
    ui: Arc<Ui>,
    answer: Option<serde_json::Value>,
    roots: Vec<PathBuf>,
    sampling_command: Option<String>,
}

impl Questions {
    pub(crate) fn new(
        ui: Arc<Ui>,
        answer: Option<serde_json::Value>,
        roots: Vec<PathBuf>,
        sampling_command: Option<String>,
    ) -> Questions {
        Questions {
            ui,
            answer,
            roots,
            sampling_command,
        }
    }

    /// `options` with a handler for each kind of question.
    pub(crate) fn install(self, options: HostOptions) -> HostOptions {
        let (forms, urls, samples, roots) = (self.clone(), self.clone(), self.clone(), self);
        options
            .on_elicit(move |server, params| {
                let forms = forms.clone();
                async move { Ok(forms.form(&server, params).await) }
            })
            .on_elicit_url(move |server, params| {
                let urls = urls.clone();
                async move { Ok(urls.url(&server, params).await) }
            })
            .on_sample(move |server, params| {
                let samples = samples.clone();
                async move { samples.sample(&server, params).await }
            })
            .on_roots(move |_server| {
                let roots = roots.roots();
                async move { Ok(roots) }
            })
    }

    async fn form(&self, server: &str, params: ElicitRequestParams) -> ElicitResult {
        let ElicitRequestParams::Form(form) = params else {
            return toolwire_client::declined();
        };
        let asks = format!(
            "toolwire: server {} asks: {}",
            self.ui.paint(Tone::Bold, &visible(server, Layout::Line)),
            visible(&form.message, Layout::Text)
        );
        if let Some(answer) = &self.answer {
            let shown = safe_json(answer, Json::Compact).unwrap_or_default();
            note(&format!("{asks}\n  answering with --answer {shown}"));
            return toolwire_client::accepted(answer).unwrap_or_else(|e| {
                let problem = e.to_string();
                note(&format!(
                    "toolwire: --answer: {}; declining",
                    visible(&problem, Layout::Line)
                ));
                toolwire_client::declined()
            });
        }
        if !self.ui.interactive {
            let schema = serde_json::to_value(&form.requested_schema).unwrap_or_default();
            let template = schema.as_object().map(answer_template).unwrap_or_default();
            note(&format!(
                "{asks}\n  declined: no terminal to answer on; to answer it, pass --answer '{}'",
                visible(&template, Layout::Line)
            ));
            return toolwire_client::declined();
        }
        note(&asks);
        form::fill(&self.ui, &form.requested_schema).await
    }

    async fn url(&self, server: &str, params: ElicitUrlParams) -> ElicitResult {
        // The URL as it would be opened: the parser's reading of it (`ui::may_open` opens
        // the same), else the text as sent.
        let parsed = url::Url::parse(&params.url).ok();
        let shown = parsed
            .as_ref()
            .map_or(params.url.as_str(), url::Url::as_str);
        let domain = parsed
            .as_ref()
            .and_then(url::Url::host_str)
            .unwrap_or("(no domain)");
        note(&format!(
            "toolwire: server {} asks you to open a web page: {}\n  URL     {}\n  domain  {}",
            self.ui.paint(Tone::Bold, &visible(server, Layout::Line)),
            visible(&params.message, Layout::Text),
            visible(shown, Layout::Line),
            self.ui.paint(Tone::Bold, &visible(domain, Layout::Line)),
        ));
        if is_punycode(domain) {
            note(&self.ui.paint(
                Tone::Yellow,
                "  the domain is written in Punycode (xn--): its letters may imitate a familiar one's",
            ));
        }
        let url = match crate::ui::may_open(&params.url) {
            Ok(url) => url,
            Err(refusal) => {
                note(&self.ui.paint(
                    Tone::Red,
                    &format!("  will not be opened: {refusal} ({})", crate::ui::OPENABLE),
                ));
                note("  declined");
                return toolwire_client::declined();
            }
        };
        if !self.ui.interactive {
            note("  declined: no terminal to ask on");
            return toolwire_client::declined();
        }
        let question = format!(
            "{} [y]es / [n]o (decline) / [c]ancel: ",
            self.ui.paint(Tone::Bold, "Open it?")
        );
        match self
            .ui
            .choose(&question, &["yes", "no", "cancel"], None)
            .await
        {
            Some("yes") => {
                crate::ui::open_in_browser(url.as_str());
                accept_without_content()
            }
            Some("no") => toolwire_client::declined(),
            _ => toolwire_client::cancelled(),
        }
    }

    async fn sample(
        &self,
        server: &str,
        params: CreateMessageParams,
    ) -> toolwire_client::Result<CreateMessageResult> {
        let shown = safe_json(&params, Json::Pretty).unwrap_or_default();
        note(&format!(
            "toolwire: server {} asks for a model's answer to:\n{}",
            self.ui.paint(Tone::Bold, &visible(server, Layout::Line)),
            shown
                .lines()
                .map(|l| format!("    {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        ));
        let refuse = |why: &str| Err(toolwire_client::Error::Input(why.to_owned()));
        let Some(command) = &self.sampling_command else {
            note("  declined: no --sampling-command to answer with");
            return refuse(
                "the person's terminal host has no model to sample (no --sampling-command)",
            );
        };
        if !self.ui.interactive && !self.ui.yes {
            note("  declined: no terminal to confirm on (pass --yes)");
            return refuse("sampling was not confirmed");
        }
        if !self.ui.yes {
            let question = format!(
                "Answer it with `{}`? [y]es / [n]o: ",
                visible(command, Layout::Line)
            );
            if self.ui.choose(&question, &["yes", "no"], None).await != Some("yes") {
                return refuse("the person declined the sampling request");
            }
        }
        run_sampler(command, &params).await
    }

    fn roots(&self) -> ListRootsResult {
        ListRootsResult {
            roots: self
                .roots
                .iter()
                .map(|dir| Root {
                    uri: url::Url::from_directory_path(dir)
                        .map(String::from)
                        .unwrap_or_else(|()| format!("file://{}", dir.display())),
                    name: dir.file_name().map(|n| n.to_string_lossy().into_owned()),
                    meta: None,
                })
                .collect(),
            meta: None,
        }
    }
}

/// Whether a domain has a label in Punycode (`xn--`), whose letters once decoded may imitate
/// a familiar domain's (the spec asks clients to warn of it).
fn is_punycode(domain: &str) -> bool {
    domain.split('.').any(|label| {
        label
            .get(..4)
            .is_some_and(|p| p.eq_ignore_ascii_case("xn--"))
    })
}

/// An accepted URL elicitation: consent, no content.
fn accept_without_content() -> ElicitResult {
    ElicitResult {
        action: toolwire_client::protocol::ElicitAction::Accept,
        content: None,
        meta: None,
    }
}

/// Runs the sampling command with the request on stdin; its stdout is the result.
async fn run_sampler(
    command: &str,
    params: &CreateMessageParams,
) -> toolwire_client::Result<CreateMessageResult> {
    use tokio::io::AsyncWriteExt as _;
    let failed = |why: String| toolwire_client::Error::Input(format!("--sampling-command: {why}"));
    let mut child = tokio::process::Command::new("sh")
        .args(["-c", command])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| failed(e.to_string()))?;
    let request = json!(params).to_string();
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(request.as_bytes())
            .await
            .map_err(|e| failed(e.to_string()))?;
    }
    let output = child
        .wait_with_output()
        .await
        .map_err(|e| failed(e.to_string()))?;
    if !output.status.success() {
        return Err(failed(format!("exited with {}", output.status)));
    }
    serde_json::from_slice(&output.stdout)
        .map_err(|e| failed(format!("did not print a sampling result: {e}")))
}

/// An answer of the shape a form asks for, for `--answer`: each field with its default, else
/// its first choice, else a value of its type (`true`, `0`, `"…"`). A gateway's `ask` rule
/// asks `{"approve": true}`.
fn answer_template(schema: &serde_json::Map<String, serde_json::Value>) -> String {
    use serde_json::Value;
    let mut answer = serde_json::Map::new();
    let properties = schema.get("properties").and_then(Value::as_object);
    for (name, field) in properties.into_iter().flatten() {
        let first_choice = field
            .get("enum")
            .and_then(Value::as_array)
            .and_then(|choices| choices.first())
            .or_else(|| {
                field
                    .get("oneOf")
                    .and_then(Value::as_array)
                    .and_then(|choices| choices.first())
                    .and_then(|choice| choice.get("const"))
            });
        let value = match (field.get("default"), first_choice) {
            (Some(default), _) => default.clone(),
            (None, Some(choice)) => choice.clone(),
            (None, None) => match field.get("type").and_then(Value::as_str) {
                Some("boolean") => Value::Bool(true),
                Some("number" | "integer") => Value::from(0),
                Some("array") => Value::Array(Vec::new()),
                _ => Value::String("…".into()),
            },
        };
        answer.insert(name.clone(), value);
    }
    Value::Object(answer).to_string()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn punycode_domains_are_recognised() {
        let cases = [
            ("xn--pple-43d.com", true),
            ("login.XN--80ak6aa92e.com", true),
            ("apple.com", false),
            ("xn-.example", false),
            ("(no domain)", false),
            ("127.0.0.1", false),
            ("ab\u{20ac}d.example", false),
        ];
        for (domain, expected) in cases {
            assert_eq!(is_punycode(domain), expected, "{domain}");
        }
    }

    #[test]
    fn the_answer_template_has_every_field_of_the_form() {
        let approve = json!({"type": "object", "properties": {"approve": {"type": "boolean"}}});
        assert_eq!(
            answer_template(approve.as_object().unwrap()),
            r#"{"approve":true}"#
        );
        let form = json!({"type": "object", "properties": {
            "name": {"type": "string"},
            "colour": {"type": "string", "enum": ["teal", "red"]},
            "count": {"type": "integer", "default": 3},
        }});
        assert_eq!(
            answer_template(form.as_object().unwrap()),
            r#"{"colour":"teal","count":3,"name":"…"}"#
        );
    }
}
