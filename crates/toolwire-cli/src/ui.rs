//! The person at the terminal: whether there is one to ask, colours only for a terminal that
//! wants them (`NO_COLOR`, `TERM=dumb`), questions answered one line at a time (one question at
//! a time, whoever asks), and a progress bar that steps aside while a question is asked.

use std::io::{BufRead as _, IsTerminal as _};
use std::sync::{Arc, Mutex};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::terminal::note;

/// A colour or weight for text on stderr.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Tone {
    /// Headings and names.
    Bold,
    /// Secondary text.
    Dim,
    /// Errors and refusals.
    Red,
    /// Warnings and untrusted claims.
    Yellow,
    /// Success.
    Green,
}

impl Tone {
    fn code(self) -> &'static str {
        match self {
            Tone::Bold => "1",
            Tone::Dim => "2",
            Tone::Red => "31",
            Tone::Yellow => "33",
            Tone::Green => "32",
        }
    }
}

/// How this command meets the person.
#[derive(Debug)]
pub(crate) struct Ui {
    /// A terminal on stdin to read answers from (and on stderr to ask on).
    pub(crate) interactive: bool,
    /// `--yes`: calls that policy does not allow are made without asking.
    pub(crate) yes: bool,
    /// stderr is a terminal: progress is a bar there, lines elsewhere.
    bar_on_stderr: bool,
    colour_err: bool,
    colour_out: bool,
    /// One question at a time.
    asking: tokio::sync::Mutex<()>,
    bar: Mutex<Option<ProgressBar>>,
    /// Set when the call ended: progress that arrives late draws nothing.
    ended: std::sync::atomic::AtomicBool,
}

/// Whether a stream that is a terminal should get colours.
fn wants_colour(is_terminal: bool) -> bool {
    is_terminal
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var("TERM").map_or(true, |t| t != "dumb")
}

/// What `--yes` says about calls (and project files) no rule allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Consent {
    /// The person is asked at a terminal; without one, the answer is no.
    Ask,
    /// `--yes`: yes without asking.
    Given,
}

impl Consent {
    /// [`Consent::Given`] when `--yes` was.
    pub(crate) fn from_flag(yes: bool) -> Consent {
        if yes { Consent::Given } else { Consent::Ask }
    }
}

impl Ui {
    /// The terminal this process has, and what `--yes` said.
    pub(crate) fn new(consent: Consent) -> Arc<Ui> {
        Arc::new(Ui {
            interactive: std::io::stdin().is_terminal() && std::io::stderr().is_terminal(),
            yes: consent == Consent::Given,
            bar_on_stderr: std::io::stderr().is_terminal(),
            colour_err: wants_colour(std::io::stderr().is_terminal()),
            colour_out: wants_colour(std::io::stdout().is_terminal()),
            asking: tokio::sync::Mutex::new(()),
            bar: Mutex::new(None),
            ended: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// `text` in `tone`, for stderr.
    pub(crate) fn paint(&self, tone: Tone, text: &str) -> String {
        paint(self.colour_err, tone, text)
    }

    /// `text` in `tone`, for stdout.
    pub(crate) fn paint_out(&self, tone: Tone, text: &str) -> String {
        paint(self.colour_out, tone, text)
    }

    /// Asks `question` and reads one line (without its newline); `None` at the end of input.
    /// The progress bar, if any, is hidden meanwhile.
    pub(crate) async fn ask(&self, question: &str) -> Option<String> {
        let _one_at_a_time = self.asking.lock().await;
        self.hide_bar();
        let question = question.to_owned();
        let answer = tokio::task::spawn_blocking(move || {
            use std::io::Write as _;
            let mut stderr = std::io::stderr().lock();
            let _ = stderr.write_all(question.as_bytes());
            let _ = stderr.flush();
            drop(stderr);
            let mut line = String::new();
            match std::io::stdin().lock().read_line(&mut line) {
                Ok(0) | Err(_) => None,
                Ok(_) => Some(line.trim_end_matches(['\n', '\r']).to_owned()),
            }
        })
        .await
        .ok()
        .flatten();
        self.show_bar();
        answer
    }

    /// Asks until the answer is one of `choices` (matched on its first letter or in full,
    /// ignoring case); an empty answer is `default`. `None` at the end of input.
    pub(crate) async fn choose(
        &self,
        question: &str,
        choices: &[&'static str],
        default: Option<&'static str>,
    ) -> Option<&'static str> {
        loop {
            let answer = self.ask(question).await?.trim().to_lowercase();
            if answer.is_empty() {
                if let Some(default) = default {
                    return Some(default);
                }
            }
            let found = choices
                .iter()
                .find(|c| !answer.is_empty() && (c.starts_with(&answer) || **c == answer));
            match found {
                Some(choice) => return Some(choice),
                None => note(&format!("  answer {}", choices.join(", "))),
            }
        }
    }

    /// Shows progress: a bar on a terminal, else a line per notification.
    pub(crate) fn progress(&self, progress: f64, total: Option<f64>, message: &str) {
        if self.ended.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        if !self.bar_on_stderr {
            let total = total.map(|t| format!("/{t}")).unwrap_or_default();
            note(&format!("toolwire: progress {progress}{total} {message}"));
            return;
        }
        let mut bar = self.bar.lock().unwrap_or_else(|e| e.into_inner());
        let bar = bar.get_or_insert_with(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{bar:30}] {wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            bar
        });
        // Progress values may be fractional; the bar counts in hundredths.
        if let Some(total) = total {
            bar.set_length((total * 100.0) as u64);
        }
        bar.set_position((progress * 100.0) as u64);
        let of = total.map(|t| format!("/{t}")).unwrap_or_default();
        bar.set_message(format!("{progress}{of} {message}"));
    }

    /// Removes the progress bar (the call ended); later progress is not shown.
    pub(crate) fn end_progress(&self) {
        self.ended.store(true, std::sync::atomic::Ordering::Release);
        if let Some(bar) = self.bar.lock().unwrap_or_else(|e| e.into_inner()).take() {
            bar.finish_and_clear();
        }
    }

    fn hide_bar(&self) {
        if let Some(bar) = &*self.bar.lock().unwrap_or_else(|e| e.into_inner()) {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
    }

    fn show_bar(&self) {
        if let Some(bar) = &*self.bar.lock().unwrap_or_else(|e| e.into_inner()) {
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }
}

fn paint(on: bool, tone: Tone, text: &str) -> String {
    if on {
        format!("\x1b[{}m{text}\x1b[0m", tone.code())
    } else {
        text.to_owned()
    }
}

/// What may be opened in a browser, said to the person when a URL is refused.
pub(crate) const OPENABLE: &str = "only https: pages, and http: pages on this computer, are opened";

/// Why a URL is not opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// It does not read as an absolute URL.
    NotAUrl,
    /// Its scheme is not a web page's: `file:` (a local file), `javascript:`, `ssh:`, a
    /// desktop application's own scheme.
    Scheme(String),
    /// Plain `http:` to another computer: anyone on the way can read and change the page.
    PlainHttp,
    /// A user name or password before the host (`https://bank.example@evil.example/`), which
    /// disguises where the URL leads.
    Credentials,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NotAUrl => f.write_str("it is not a URL"),
            // A parsed scheme is ASCII letters, digits, `+`, `-` and `.` only.
            Refusal::Scheme(scheme) => write!(f, "it is a {scheme}: address, not a web page"),
            Refusal::PlainHttp => f.write_str(
                "it is plain http: to another computer, so anyone on the way could read or change the page",
            ),
            Refusal::Credentials => f.write_str(
                "it carries a user name or password before its host, which disguises where it leads",
            ),
        }
    }
}

impl std::error::Error for Refusal {}

/// Whether `url` may be opened in a browser: `https:`, or `http:` to this computer
/// (127.0.0.0/8, ::1, `localhost`), with no user name or password. On success, the URL as it
/// will be opened (parsed and written out again, so what was checked is what is opened).
pub(crate) fn may_open(url: &str) -> Result<url::Url, Refusal> {
    let parsed = url::Url::parse(url).map_err(|_| Refusal::NotAUrl)?;
    match parsed.scheme() {
        "https" => {}
        "http" if is_loopback(&parsed) => {}
        "http" => return Err(Refusal::PlainHttp),
        other => return Err(Refusal::Scheme(other.to_owned())),
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(Refusal::Credentials);
    }
    Ok(parsed)
}

/// Whether `url`'s host is this computer.
fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// Opens `url` in a browser: `$BROWSER` (a command, given the URL) if set, else the desktop's
/// opener (`open` on macOS, `xdg-open` elsewhere). Says to open it by hand when neither starts.
/// Whoever asks, only what [`may_open`] allows is opened: anything else is refused with a
/// line saying why.
pub(crate) fn open_in_browser(url: &str) {
    let url = match may_open(url) {
        Ok(url) => url,
        Err(refusal) => {
            note(&format!("  not opened: {refusal} ({OPENABLE})"));
            return;
        }
    };
    let quiet = |mut command: std::process::Command| {
        command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
    };
    let opened = match std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty())
    {
        Some(browser) => {
            let mut command = std::process::Command::new("sh");
            command
                .args(["-c", &format!("{browser} \"$1\""), "browser"])
                .arg(url.as_str());
            quiet(command)
        }
        None => {
            let mut command = std::process::Command::new(if cfg!(target_os = "macos") {
                "open"
            } else {
                "xdg-open"
            });
            command.arg(url.as_str());
            quiet(command)
        }
    };
    if opened.is_err() {
        note("  no browser opener here: open the address yourself");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_web_pages_may_be_opened() {
        let opened = |url: &str| may_open(url).map(String::from);
        let cases: [(&str, Result<&str, Refusal>); 22] = [
            (
                "https://auth.example/login?session=1",
                Ok("https://auth.example/login?session=1"),
            ),
            ("HTTPS://Auth.Example", Ok("https://auth.example/")),
            ("http://127.0.0.1:8080/cb", Ok("http://127.0.0.1:8080/cb")),
            ("http://127.9.9.9/", Ok("http://127.9.9.9/")),
            ("http://[::1]:3000/", Ok("http://[::1]:3000/")),
            ("http://LocalHost/x", Ok("http://localhost/x")),
            // What is checked is what is opened: the parser's reading, not the raw text.
            ("  https://a.example/\tpath\n", Ok("https://a.example/path")),
            ("file:///etc/shadow", Err(Refusal::Scheme("file".into()))),
            ("FILE:///etc/passwd", Err(Refusal::Scheme("file".into()))),
            (
                "javascript:alert(1)",
                Err(Refusal::Scheme("javascript".into())),
            ),
            (
                "data:text/html,<script>x</script>",
                Err(Refusal::Scheme("data".into())),
            ),
            ("ssh://host.example/", Err(Refusal::Scheme("ssh".into()))),
            (
                "vscode://extension/install",
                Err(Refusal::Scheme("vscode".into())),
            ),
            ("smb://share.example/x", Err(Refusal::Scheme("smb".into()))),
            ("http://intranet.example/reset", Err(Refusal::PlainHttp)),
            ("http://localhost.evil.example/", Err(Refusal::PlainHttp)),
            (
                "http://169.254.169.254/latest/meta-data/",
                Err(Refusal::PlainHttp),
            ),
            ("http://[::ffff:7f00:1]/", Err(Refusal::PlainHttp)),
            (
                "https://bank.example@evil.example/",
                Err(Refusal::Credentials),
            ),
            ("https://user:pass@site.example/", Err(Refusal::Credentials)),
            ("/relative/path", Err(Refusal::NotAUrl)),
            ("not a url", Err(Refusal::NotAUrl)),
        ];
        for (url, expected) in cases {
            assert_eq!(opened(url), expected.map(str::to_owned), "{url:?}");
        }
    }

    #[test]
    fn a_refusal_says_why() {
        assert_eq!(
            Refusal::Scheme("file".into()).to_string(),
            "it is a file: address, not a web page"
        );
        assert!(Refusal::PlainHttp.to_string().contains("plain http:"));
    }
}
