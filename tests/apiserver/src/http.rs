//! HTTP routing: request paths to discovery documents and resource verbs.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use crate::apply::apply;
use crate::discovery;
use crate::errors::{ApiError, ApiResult};
use crate::kinds::Kind;
use crate::patch::{PatchType, patched};
use crate::selectors::Selector;
use crate::store::{Page, Part, Store};
use crate::watch::{WatchRequest, error_body, stream_body};
use crate::{Access, Shared};

/// Response bodies: whole JSON documents or watch streams.
pub(crate) type Body = UnsyncBoxBody<Bytes, Infallible>;

/// How long a watch lasts when the client sends no `timeoutSeconds`.
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

/// A request for objects of one resource.
struct ResourcePath<'a> {
    group: &'a str,
    version: &'a str,
    plural: &'a str,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
    status: bool,
}

impl<'a> ResourcePath<'a> {
    fn parse(group: &'a str, version: &'a str, rest: &[&'a str]) -> Option<Self> {
        let (namespace, rest) = match rest {
            ["namespaces", ns, tail @ ..] if tail.first().is_some_and(|p| !matches!(*p, "status" | "finalize")) => {
                (Some(*ns), tail)
            }
            _ => (None, rest),
        };
        let (plural, name, status) = match rest {
            [plural] => (*plural, None, false),
            [plural, name] => (*plural, Some(*name), false),
            [plural, name, "status"] => (*plural, Some(*name), true),
            _ => return None,
        };
        Some(Self { group, version, plural, namespace, name, status })
    }

    fn resource(&self) -> String {
        if self.status { format!("{}/status", self.plural) } else { self.plural.to_string() }
    }
}

fn json_response(code: u16, body: &Value) -> Response<Body> {
    let bytes = serde_json::to_vec(body).expect("JSON values serialize");
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(bytes)).boxed_unsync())
        .expect("valid response")
}

fn error_response(error: &ApiError) -> Response<Body> {
    let mut response = json_response(error.code, &error.status());
    if error.code == 429 {
        response.headers_mut().insert("retry-after", "1".parse().expect("valid header"));
    }
    response
}

/// Serves one request.
pub(crate) async fn handle(shared: Arc<Shared>, request: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let query: HashMap<String, String> =
        form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes()).into_owned().collect();
    let content_type = parts.headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let user = parts.headers.get("impersonate-user").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let path = parts.uri.path().trim_matches('/').to_string();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let resource = match segments.as_slice() {
        ["api", "v1", rest @ ..] if !rest.is_empty() => ResourcePath::parse("", "v1", rest),
        ["apis", group, version, rest @ ..] if !rest.is_empty() => ResourcePath::parse(group, version, rest),
        _ => return Ok(discover(&shared, &user, &parts.method, &segments)),
    };
    let Some(resource) = resource else {
        count_path(&shared, &user, &format!("/{path}"));
        return Ok(error_response(&ApiError::not_found("path", &format!("/{path}"))));
    };
    let request = ResourceRequest { shared: &shared, path: resource, query, content_type, body, user };
    Ok(request.serve(&parts.method))
}

/// Records a non-resource request (counted as `get`, whatever its method).
fn count_path(shared: &Shared, user: &str, path: &str) {
    shared.count("get", path);
    shared.record(Access {
        user: user.to_string(),
        verb: "get".into(),
        group: String::new(),
        resource: String::new(),
        subresource: None,
        namespace: None,
        non_resource_path: Some(path.to_string()),
    });
}

/// Non-resource paths: discovery, read-only.
fn discover(shared: &Shared, user: &str, method: &Method, segments: &[&str]) -> Response<Body> {
    let path = format!("/{}", segments.join("/"));
    count_path(shared, user, &path);
    if method != Method::GET {
        return error_response(&ApiError::method_not_allowed(format!("{method} is not allowed on {path}")));
    }
    let store = shared.store.lock().expect("store lock");
    let document = match segments {
        ["version"] => Some(discovery::version()),
        ["api"] => Some(discovery::core_versions(&shared.address)),
        ["api", "v1"] => discovery::resources(&store.kinds, "", "v1"),
        ["apis"] => Some(discovery::api_groups(&store.kinds)),
        ["apis", group] => discovery::api_group(&store.kinds, group),
        ["apis", group, version] => discovery::resources(&store.kinds, group, version),
        _ => None,
    };
    match document {
        Some(document) => json_response(200, &document),
        None => error_response(&ApiError::not_found("path", &path)),
    }
}

struct ResourceRequest<'a> {
    shared: &'a Arc<Shared>,
    path: ResourcePath<'a>,
    query: HashMap<String, String>,
    content_type: String,
    body: Bytes,
    /// The `Impersonate-User` header, for [`Shared::record`].
    user: String,
}

impl ResourceRequest<'_> {
    fn param(&self, name: &str) -> Option<&str> {
        self.query.get(name).map(String::as_str).filter(|v| !v.is_empty())
    }

    fn verb(&self, method: &Method) -> &'static str {
        let watch = matches!(self.param("watch"), Some("true" | "1"));
        match (method, self.path.name.is_some()) {
            (&Method::GET, true) => "get",
            (&Method::GET, false) if watch => "watch",
            (&Method::GET, false) => "list",
            (&Method::POST, _) => "create",
            (&Method::PUT, _) => "update",
            (&Method::PATCH, _) => "patch",
            (&Method::DELETE, true) => "delete",
            (&Method::DELETE, false) => "deletecollection",
            _ => "unknown",
        }
    }

    fn serve(self, method: &Method) -> Response<Body> {
        let verb = self.verb(method);
        self.shared.count(verb, &self.path.resource());
        self.shared.record(Access {
            user: self.user.clone(),
            verb: verb.to_string(),
            group: self.path.group.to_string(),
            resource: self.path.plural.to_string(),
            subresource: self.path.status.then(|| "status".to_string()),
            namespace: self.path.namespace.map(str::to_string),
            non_resource_path: None,
        });
        if let Some(code) = self.shared.take_fault(verb) {
            return error_response(&ApiError::injected(code));
        }
        let kind = match self.resolve(verb) {
            Ok(kind) => kind,
            Err(e) => return error_response(&e),
        };
        if verb == "watch" {
            return self.watch(kind);
        }
        // Create, update and apply bodies are parsed before the store is locked, and every
        // answer is encoded after: the one lock serializes every request, so it covers less.
        let body = match verb {
            "create" | "update" => Some(self.json()),
            "patch" if matches!(PatchType::from_content_type(&self.content_type), Ok(PatchType::Apply)) => {
                Some(self.apply_body())
            }
            _ => None,
        };
        let result = {
            let mut store = self.shared.store.lock().expect("store lock");
            match (verb, body) {
                ("create", Some(body)) if kind.create_only => body.and_then(|b| self.access_review(&store, b)),
                ("get", _) => store.get(&kind, self.path.namespace, self.name()).map(|o| (200, o)),
                ("list", _) => self.list(&store, &kind),
                ("create", Some(body)) => {
                    body.and_then(|b| store.create(&kind, self.path.namespace, b, Part::Main)).map(|o| (201, o))
                }
                ("update", Some(body)) => body
                    .and_then(|b| store.replace(&kind, self.path.namespace, self.name(), b, self.part()))
                    .map(|o| (200, o)),
                ("patch", Some(applied)) => applied.and_then(|a| self.apply(&mut store, &kind, a)),
                ("patch", None) => self.patch(&mut store, &kind),
                ("delete", _) => self.delete(&mut store, &kind),
                _ => Err(ApiError::method_not_allowed(format!("{verb} is not supported"))),
            }
        };
        match result {
            Ok((code, object)) => json_response(code, &object),
            Err(e) => error_response(&e),
        }
    }

    /// The served kind, checked against the path's scope, name and subresource.
    fn resolve(&self, verb: &str) -> ApiResult<Kind> {
        let p = &self.path;
        let store = self.shared.store.lock().expect("store lock");
        let not_found = || ApiError::not_found("resource", &format!("{}/{}/{}", p.group, p.version, p.plural));
        let kind = store.kinds.by_resource(p.group, p.version, p.plural).cloned().ok_or_else(not_found)?;
        let collection = matches!(verb, "list" | "watch" | "create" | "deletecollection");
        if (!kind.namespaced && p.namespace.is_some())
            || (kind.namespaced && p.namespace.is_none() && !matches!(verb, "list" | "watch"))
            || (p.status && !kind.status_subresource)
            || collection == p.name.is_some()
        {
            return Err(not_found());
        }
        if kind.create_only && verb != "create" {
            return Err(ApiError::method_not_allowed(format!("{verb} is not supported on {}", kind.plural)));
        }
        Ok(kind)
    }

    fn name(&self) -> &str {
        self.path.name.unwrap_or_default()
    }

    fn part(&self) -> Part {
        if self.path.status { Part::Status } else { Part::Main }
    }

    fn json(&self) -> ApiResult<Value> {
        serde_json::from_slice(&self.body).map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
    }

    fn selector(&self) -> ApiResult<Selector> {
        Selector::parse(self.param("labelSelector"), self.param("fieldSelector"))
    }

    fn list(&self, store: &Store, kind: &Kind) -> ApiResult<(u16, Value)> {
        let page = self.page()?;
        let listed = store.list(kind, self.path.namespace, &self.selector()?, &page);
        let mut metadata = json!({"resourceVersion": listed.rv.to_string()});
        if let Some((namespace, name)) = listed.next {
            metadata["continue"] = json!(format!("{}/{namespace}/{name}", listed.rv));
        }
        let list = json!({
            "kind": format!("{}List", kind.kind),
            "apiVersion": kind.api_version(),
            "metadata": metadata,
            "items": listed.items,
        });
        Ok((200, list))
    }

    /// The page a list asks for: `limit` (0 or absent: all) and `continue` (the token a
    /// previous page returned: `rv/namespace/name`, the list's resourceVersion and its last
    /// object).
    fn page(&self) -> ApiResult<Page> {
        let limit = match self.param("limit").map(str::parse::<usize>) {
            None | Some(Ok(0)) => None,
            Some(Ok(limit)) => Some(limit),
            Some(Err(_)) => return Err(ApiError::bad_request("invalid limit")),
        };
        let Some(token) = self.param("continue") else { return Ok(Page { limit, after: None, rv: None }) };
        let mut parts = token.splitn(3, '/');
        match (parts.next().map(str::parse::<u64>), parts.next(), parts.next()) {
            (Some(Ok(rv)), Some(namespace), Some(name)) => {
                Ok(Page { limit, after: Some((namespace.to_string(), name.to_string())), rv: Some(rv) })
            }
            _ => Err(ApiError::bad_request("invalid continue token")),
        }
    }

    fn watch(&self, kind: Kind) -> Response<Body> {
        let selector = match self.selector() {
            Ok(s) => s,
            Err(e) => return error_response(&e),
        };
        let initial_events_end = self.param("sendInitialEvents") == Some("true");
        let rv = self.param("resourceVersion").filter(|rv| *rv != "0" && !initial_events_end);
        let rv = match rv.map(str::parse::<u64>).transpose() {
            Ok(rv) => rv,
            Err(_) => return error_response(&ApiError::bad_request("invalid resourceVersion")),
        };
        let timeout = self
            .param("timeoutSeconds")
            .and_then(|t| t.parse().ok())
            .map_or(DEFAULT_WATCH_TIMEOUT, Duration::from_secs);
        let namespace = self.path.namespace.map(String::from);
        let subscribed = self.shared.store.lock().expect("store lock").watch(&kind, namespace.as_deref(), rv);
        let body = match subscribed {
            Ok(subscription) => {
                let bookmarks = self.param("allowWatchBookmarks") == Some("true");
                let request = WatchRequest { kind, namespace, selector, bookmarks, initial_events_end, timeout };
                stream_body(self.shared.clone(), request, subscription)
            }
            Err(gone) => error_body(&gone),
        };
        Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "application/json")
            .body(body.boxed_unsync())
            .expect("valid response")
    }

    /// A JSON, merge or strategic-merge patch.
    fn patch(&self, store: &mut Store, kind: &Kind) -> ApiResult<(u16, Value)> {
        let patch_type = PatchType::from_content_type(&self.content_type)?;
        let current = store.get(kind, self.path.namespace, self.name())?;
        let new = patched(&current, patch_type, &self.body)?;
        store.replace(kind, self.path.namespace, self.name(), new, self.part()).map(|o| (200, o))
    }

    /// An apply body: YAML, of which JSON (what clients send) is read by the faster JSON parser.
    fn apply_body(&self) -> ApiResult<Value> {
        serde_json::from_slice(&self.body).or_else(|_| {
            serde_norway::from_slice(&self.body).map_err(|e| ApiError::bad_request(format!("invalid apply body: {e}")))
        })
    }

    /// Server-side apply (see [`crate::apply`]) of the parsed body `applied`.
    fn apply(&self, store: &mut Store, kind: &Kind, mut applied: Value) -> ApiResult<(u16, Value)> {
        let manager =
            self.param("fieldManager").ok_or_else(|| ApiError::bad_request("fieldManager is required for apply"))?;
        let force = self.param("force") == Some("true");
        let (namespace, name) = (self.path.namespace, self.name());
        let current = store.get(kind, namespace, name).ok();
        let applied_rv = applied["metadata"]["resourceVersion"].as_str().unwrap_or("");
        match &current {
            None if self.path.status => return Err(ApiError::not_found(&kind.plural, name)),
            Some(c) if !applied_rv.is_empty() && c["metadata"]["resourceVersion"].as_str() != Some(applied_rv) => {
                return Err(ApiError::conflict(format!("the object {name:?} has been modified")));
            }
            _ => {}
        }
        if let Some(object) = applied.as_object_mut() {
            if self.path.status {
                object.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"));
            } else if kind.status_subresource {
                object.remove("status");
            }
        }
        let subresource = if self.path.status { "status" } else { "" };
        let mut result = apply(current.as_ref(), &applied, manager, subresource, force)?;
        result["metadata"]["name"] = json!(name);
        result["metadata"].as_object_mut().map(|m| m.remove("resourceVersion"));
        match current {
            None => store.create(kind, namespace, result, Part::Whole).map(|o| (201, o)),
            Some(_) => store.replace(kind, namespace, name, result, Part::Whole).map(|o| (200, o)),
        }
    }

    fn delete(&self, store: &mut Store, kind: &Kind) -> ApiResult<(u16, Value)> {
        let options: Value = serde_json::from_slice(&self.body).unwrap_or(Value::Null);
        let policy = self.param("propagationPolicy").or(options["propagationPolicy"].as_str());
        store.delete(kind, self.path.namespace, self.name(), policy != Some("Orphan")).map(|o| (200, o))
    }

    /// SelfSubjectAccessReview: allowed unless denied with `TestApiServer::deny`.
    fn access_review(&self, store: &Store, mut review: Value) -> ApiResult<(u16, Value)> {
        let attrs = &review["spec"]["resourceAttributes"];
        let field = |f: &str| attrs[f].as_str().unwrap_or("").to_string();
        let optional = |f: &str| attrs[f].as_str().filter(|v| !v.is_empty()).map(str::to_string);
        let non_resource = &review["spec"]["nonResourceAttributes"];
        self.shared.record_review(match non_resource["path"].as_str() {
            Some(path) => Access {
                user: self.user.clone(),
                verb: non_resource["verb"].as_str().unwrap_or("").to_string(),
                group: String::new(),
                resource: String::new(),
                subresource: None,
                namespace: None,
                non_resource_path: Some(path.to_string()),
            },
            None => Access {
                user: self.user.clone(),
                verb: field("verb"),
                group: field("group"),
                resource: field("resource"),
                subresource: optional("subresource"),
                namespace: optional("namespace"),
                non_resource_path: None,
            },
        });
        let allowed = !store.denied.contains(&(field("verb"), field("group"), field("resource")));
        review["status"] = if allowed {
            json!({"allowed": true})
        } else {
            json!({"allowed": false, "reason": "denied by TestApiServer::deny"})
        };
        review["apiVersion"] = json!("authorization.k8s.io/v1");
        review["kind"] = json!("SelfSubjectAccessReview");
        Ok((201, review))
    }
}
