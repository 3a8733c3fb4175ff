//! A real OAuth authorization server for tests, and a browser to go through it: the npm
//! package `oidc-provider` (installed by `scripts/oidc`) on 127.0.0.1, and a cookie jar that
//! follows its redirects and fills in its login and consent pages. Shared by the client's and
//! the CLI's tests.

#![allow(dead_code)]

#[path = "../../../../interop/oidc/launch.rs"]
mod launch;

/// A running oidc-provider (see `interop/oidc/provider.mjs`).
pub(crate) struct Provider {
    _launched: launch::Launched,
    pub(crate) issuer: String,
}

impl Provider {
    pub(crate) fn start(env: &[(&str, &str)]) -> Provider {
        let launched = launch::launch(env);
        Provider {
            issuer: launched.issuer(),
            _launched: launched,
        }
    }
}

/// A browser without JavaScript: a cookie jar, redirects followed by hand, and HTML forms
/// filled in and posted. It signs in at the provider's real login page (any name and password
/// are accepted there) and confirms its consent page.
#[derive(Default)]
pub(crate) struct Browser {
    pub(crate) cookies: std::collections::BTreeMap<String, String>,
    pub(crate) pages: Vec<String>,
}

impl Browser {
    /// Goes from `start` until a redirect points under `stop`; returns that URL.
    pub(crate) async fn sign_in(&mut self, start: &str, issuer: &str, stop: &str) -> String {
        let http = no_redirects();
        let mut next = (start.to_owned(), None::<String>);
        for _ in 0..20 {
            let (url, form) = next;
            if url.starts_with(stop) {
                return url;
            }
            let jar: Vec<String> = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let request = match form {
                Some(body) => http
                    .post(&url)
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(body),
                None => http.get(&url),
            };
            let reply = request
                .header("cookie", jar.join("; "))
                .send()
                .await
                .unwrap();
            for set in reply.headers().get_all("set-cookie") {
                let pair = set.to_str().unwrap().split(';').next().unwrap();
                if let Some((k, v)) = pair.split_once('=') {
                    self.cookies
                        .insert(k.trim().to_owned(), v.trim().to_owned());
                }
            }
            let absolute = |location: &str| {
                if location.starts_with('/') {
                    format!("{issuer}{location}")
                } else {
                    location.to_owned()
                }
            };
            if let Some(location) = reply.headers().get("location") {
                next = (absolute(location.to_str().unwrap()), None);
                continue;
            }
            assert_eq!(reply.status(), 200, "{url}");
            let page = reply.text().await.unwrap();
            let (action, body) = fill_form(&page);
            self.pages.push(page);
            next = (absolute(&action), Some(body));
        }
        panic!("no redirect to {stop} within 20 steps");
    }
}

/// The page's form: its action, and its inputs as a form body (hidden ones as they are, the
/// login and password filled in).
fn fill_form(page: &str) -> (String, String) {
    let attribute = |tag: &str, name: &str| {
        let key = format!("{name}=\"");
        tag.find(&key).map(|i| {
            let rest = &tag[i + key.len()..];
            rest[..rest.find('"').unwrap()].to_owned()
        })
    };
    let form = &page[page
        .find("<form")
        .unwrap_or_else(|| panic!("no form in {page}"))..];
    let action = attribute(&form[..form.find('>').unwrap()], "action").expect("an action");
    let mut body = url::form_urlencoded::Serializer::new(String::new());
    for input in form.split("<input").skip(1) {
        let tag = &input[..input.find('>').unwrap()];
        let Some(name) = attribute(tag, "name") else {
            continue;
        };
        let value = match name.as_str() {
            "login" => "alice".to_owned(),
            "password" => "wonderland".to_owned(),
            _ => attribute(tag, "value").unwrap_or_default(),
        };
        body.append_pair(&name, &value);
    }
    (action, body.finish())
}

/// A client that follows no redirect: the browser follows them by hand.
fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// The browser's last hop: the redirect delivered to the client's loopback listener; its
/// status.
pub(crate) async fn deliver(url: &str) -> u16 {
    no_redirects()
        .get(url)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// The `redirect_uri` an authorization URL names.
pub(crate) fn redirect_uri(start: &str) -> String {
    url::Url::parse(start)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "redirect_uri")
        .map(|(_, v)| v.into_owned())
        .expect("a redirect_uri")
}

impl Browser {
    /// Goes through the authorization at `start` as a person does, then follows its last hop
    /// to the redirect URI (the client's loopback listener); that listener's status.
    pub(crate) async fn authorize(&mut self, start: &str, issuer: &str) -> u16 {
        let last = self.sign_in(start, issuer, &redirect_uri(start)).await;
        deliver(&last).await
    }
}
