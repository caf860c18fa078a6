//! The booking core's contract in three places cannot drift apart: the routes the router serves,
//! the OpenAPI description at `GET /openapi.json` (`src/http/openapi.rs` and the handlers'
//! `#[utoipa::path]`), and API.md's "Booking core" table name the same (method, path) pairs.
//!
//! Axum cannot list its routes, so the router's are found in two steps: the path of every
//! `.route("…", …)` call in `src/` (read from the source; `.nest` is refused, as its prefix
//! would hide paths), then each of those paths is asked with every method. A method is routed
//! unless the answer is the router's own fallback: `405 method-not-allowed`, or `404` whose
//! detail is `no route …` (`crate::error::not_found`). Nothing is authorised, so no probe
//! changes anything.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;
use support::Harness;

type Routes = BTreeSet<(String, String)>;

const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE"];

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

async fn description(h: &Harness) -> Value {
    let r = h
        .http
        .get(format!("{}/openapi.json", h.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let doc: Value = r.json().await.unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    doc
}

/// (METHOD, path) of every operation in the description.
fn described(doc: &Value) -> Routes {
    let mut out = Routes::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("path item").keys() {
            if METHODS.contains(&method.to_uppercase().as_str()) {
                out.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The first argument of every `.route(` in `text` (a string literal, possibly on the next
/// line as rustfmt writes it).
fn route_literals(text: &str) -> Vec<String> {
    text.match_indices(".route(")
        .map(|(i, m)| {
            let rest = text[i + m.len()..].trim_start();
            let lit = rest
                .strip_prefix('"')
                .unwrap_or_else(|| panic!("`.route(` without a literal path: {rest:.60}"));
            lit[..lit.find('"').unwrap()].to_owned()
        })
        .collect()
}

/// Every path given to `.route(` anywhere in `src/`.
fn router_paths() -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_files(&crate_dir().join("src"), &mut files);
    let mut out = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(
            !text.contains(".nest(") && !text.contains(".nest_service("),
            "{}: a nested router's paths cannot be read here",
            f.display()
        );
        out.extend(route_literals(&text));
    }
    assert!(out.len() >= 20, "found only {out:?}");
    out
}

fn sample(path: &str) -> String {
    path.replace("{show}", support::SHOW)
        .replace("{hold}", "h-probe")
        .replace("{seat}", "A-1-1")
        .replace("{pool}", "FLOOR")
}

/// Whether the router has a handler for `method path` (see the module docs).
async fn routed(h: &Harness, method: &str, path: &str) -> bool {
    let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let r = h
        .http
        .request(m, format!("{}{}", h.base, sample(path)))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let body: Value = r.json().await.unwrap_or(Value::Null);
    let detail = body["detail"].as_str().unwrap_or("");
    let fallback = status == 405 || (status == 404 && detail.starts_with("no route "));
    !fallback
}

/// (METHOD, path) of every route the router serves.
async fn served(h: &Harness) -> Routes {
    let mut out = Routes::new();
    for path in router_paths() {
        for method in METHODS {
            if routed(h, method, &path).await {
                out.insert((method.to_string(), path.clone()));
            }
        }
    }
    out
}

/// (METHOD, path) of every row of API.md's "Booking core" table: the first cell is
/// `` `GET /path?query` `` or `` `GET`/`POST /path` ``.
fn api_md() -> Routes {
    let text = std::fs::read_to_string(crate_dir().join("../API.md")).unwrap();
    let start = text
        .find("\n## Booking core")
        .expect("API.md: Booking core section");
    let section = &text[start + 1..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut out = Routes::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cell = line.split(" | ").next().unwrap();
        let cell = cell.trim_start_matches("| ").replace('`', "");
        let (methods, target) = cell.split_once(' ').expect("method and path");
        let path = target.split(['?', '[']).next().unwrap();
        for m in methods.split('/') {
            out.insert((m.to_owned(), path.to_owned()));
        }
    }
    assert!(out.len() >= 20, "API.md table: only {out:?}");
    out
}

fn diff(a: &Routes, b: &Routes) -> Vec<String> {
    a.difference(b).map(|(m, p)| format!("{m} {p}")).collect()
}

#[tokio::test]
async fn description_names_exactly_the_routes_the_router_serves() {
    let h = Harness::start().await;
    let doc = description(&h).await;
    let described = described(&doc);
    let served = served(&h).await;
    assert!(
        described == served,
        "served but not described: {:?}; described but not served: {:?}",
        diff(&served, &described),
        diff(&described, &served)
    );
}

#[tokio::test]
async fn api_md_names_exactly_the_described_routes() {
    let h = Harness::start().await;
    let described = described(&description(&h).await);
    let md = api_md();
    assert!(
        md == described,
        "in API.md but not described: {:?}; described but not in API.md: {:?}",
        diff(&md, &described),
        diff(&described, &md)
    );
}

/// Each operation's responses, with its method and path for messages.
fn operations(doc: &Value) -> Vec<(String, &Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            out.push((format!("{method} {path}"), op));
        }
    }
    out
}

#[tokio::test]
async fn errors_are_problems_and_busy_answers_say_when_to_retry() {
    let h = Harness::start().await;
    let doc = description(&h).await;
    for (op, o) in operations(&doc) {
        let responses = o["responses"].as_object().unwrap();
        assert!(responses.contains_key("500"), "{op}: no 500");
        if o.get("requestBody").is_some() {
            assert!(responses.contains_key("413"), "{op}: a body but no 413");
        }
        if o.get("security").is_some() {
            assert!(
                responses.contains_key("401"),
                "{op}: a credential but no 401"
            );
        }
        for (status, r) in responses {
            if status.starts_with(['4', '5']) {
                let schema = &r["content"]["application/problem+json"]["schema"]["$ref"];
                assert_eq!(schema, "#/components/schemas/ProblemDoc", "{op} {status}");
            }
            if ["429", "502", "503"].contains(&status.as_str()) {
                assert!(r["headers"]["Retry-After"].is_object(), "{op} {status}");
            }
        }
    }
}

#[tokio::test]
async fn path_parameters_and_security_are_declared() {
    let h = Harness::start().await;
    let doc = description(&h).await;
    for name in [
        "admission_token",
        "admission_cookie",
        "admin_token",
        "webhook_signature",
    ] {
        assert!(
            doc["components"]["securitySchemes"][name].is_object(),
            "{name}"
        );
    }
    let cookie = &doc["components"]["securitySchemes"]["admission_cookie"];
    assert_eq!(
        (&cookie["in"], &cookie["name"]),
        (&"cookie".into(), &"admission".into())
    );
    let sig = &doc["components"]["securitySchemes"]["webhook_signature"];
    assert_eq!(sig["name"], "Gateway-Signature");
    for (op, o) in operations(&doc) {
        let path = op.split(' ').nth(1).unwrap();
        let declared: BTreeSet<&str> = o["parameters"]
            .as_array()
            .map(|ps| {
                ps.iter()
                    .filter(|p| p["in"] == "path")
                    .map(|p| p["name"].as_str().unwrap())
                    .collect()
            })
            .unwrap_or_default();
        let in_path: BTreeSet<&str> = path
            .split('/')
            .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
            .collect();
        assert_eq!(declared, in_path, "{op}: path parameters");
        let schemes: BTreeSet<&str> = o["security"]
            .as_array()
            .map(|alts| {
                alts.iter()
                    .flat_map(|a| a.as_object().unwrap().keys())
                    .map(String::as_str)
                    .collect()
            })
            .unwrap_or_default();
        // `/internal/…`: the service token or the admin token, both bearers (`admin_token`).
        let want: &[&str] = if path.starts_with("/admin/") || path.starts_with("/internal/") {
            &["admin_token"]
        } else if path.starts_with("/api/")
            && !path.ends_with("/seats")
            && !path.ends_with("/sections")
            && !path.contains("/resources/")
            && !path.ends_with("/venue")
        {
            &["admission_token", "admission_cookie"]
        } else if path == "/payment/webhook" {
            &["webhook_signature"]
        } else {
            &[]
        };
        assert_eq!(schemes, want.iter().copied().collect(), "{op}: security");
    }
}
