//! The REST verbs of one resource path: which (method, collection or object, subresource) goes
//! to which operation in `rest`, and how its result is written back.

use super::route::ResourcePath;
use super::{json_response, json_value, logs, streaming, App, Call};
use crate::negotiate::{self, Output};
use crate::openapi::{Directive, FieldCheck};
use crate::render;
use crate::rest::{self, DeleteOptions, ListParams, Sub, Target};
use crate::status::{ApiError, ApiResult};
use crate::store::Entry;
use axum::body::Body;
use axum::response::Response;
use http::{header, Method, StatusCode};
use serde_json::Value;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;

pub async fn handle(app: &App, rp: ResourcePath, call: &Call) -> ApiResult<Response> {
    let content_type = call.header(header::CONTENT_TYPE).unwrap_or_default();
    if call.method() == Method::PATCH
        && content_type.contains("strategic-merge-patch")
        && keelson_apiserver_registry::custom::definition(rp.res).is_some()
    {
        // Custom objects have no Go struct tags to merge by, so upstream refuses the format.
        return Err(ApiError::unsupported_media(content_type));
    }
    if rp.res.kind != "CustomResourceDefinition" || call.method() == Method::GET {
        return serve(app, rp, call).await;
    }
    let before = rest::custom::definitions(&app.api.store);
    let answer = serve(app, rp, call).await;
    rest::custom::after_write(&app.api, &before).await;
    answer
}

async fn serve(app: &App, rp: ResourcePath, call: &Call) -> ApiResult<Response> {
    let r = Request::new(app, &rp, call)?;
    let watch = rp.legacy_watch || rest::read_is_watch(&r.params);
    if call.method() == Method::GET
        && matches!(
            rp.sub.as_str(),
            "" | "status" | "approval" | "scale" | "ephemeralcontainers"
        )
    {
        r.fresh().await?;
    }
    match (call.method().clone(), rp.name.is_empty(), rp.sub.as_str()) {
        (Method::GET, true, "") if watch => r.watch(),
        (Method::GET, true, "") => r.list(),
        // pods/ephemeralcontainers reads as the whole Pod, as upstream since 1.22.
        (Method::GET, false, "" | "status" | "approval" | "ephemeralcontainers") => {
            r.object(rest::get(r.api(), &r.target)?, StatusCode::OK)
        }
        (Method::GET, false, "scale") => ok(&rest::get_scale(r.api(), &r.target)?),
        (Method::GET, false, "log") => {
            logs::pod_logs(r.api(), &app.kubelet, &r.target, call.query()).await
        }
        // Connect subresources: GET for WebSocket clients, POST for SPDY ones.
        (Method::GET | Method::POST, false, sub @ ("exec" | "attach" | "portforward")) => {
            streaming::connect(r.api(), &app.kubelet, &r.target, sub, call).await
        }
        (Method::POST, true, "") => r.create().await,
        (Method::POST, false, "binding") => r.bind().await,
        (Method::POST, false, "eviction") => r.evict().await,
        (Method::POST, false, "token") => r.token_request(),
        (Method::PUT, false, "scale") => r.update_scale(None).await,
        (
            Method::PUT,
            false,
            sub @ ("" | "status" | "finalize" | "approval" | "ephemeralcontainers"),
        ) => r.update(sub).await,
        (Method::PATCH, false, "scale") => r.update_scale(Some(r.patch_type()?)).await,
        (Method::PATCH, false, sub @ ("" | "status" | "approval" | "ephemeralcontainers")) => {
            r.patch(sub).await
        }
        (Method::DELETE, true, "") => r.delete_collection().await,
        (Method::DELETE, false, "") => r.delete().await,
        (m, _, sub) => Err(not_allowed(&m, rp.res.plural, sub)),
    }
}

/// What every verb reads from a resource request.
struct Request<'a> {
    app: &'a App,
    call: &'a Call,
    target: Target,
    params: ListParams,
    out: Output,
    /// `includeObject=None` (Tables without the objects).
    include: bool,
    dry_run: bool,
}

impl<'a> Request<'a> {
    fn new(app: &'a App, rp: &ResourcePath, call: &'a Call) -> ApiResult<Self> {
        let params: ListParams = serde_urlencoded::from_str(call.query())
            .map_err(|e| ApiError::bad_request(format!("invalid query parameters: {e}")))?;
        Ok(Request {
            app,
            call,
            target: Target {
                res: rp.res,
                namespace: rp.namespace.clone(),
                name: rp.name.clone(),
            },
            out: negotiate::output(call.header(header::ACCEPT)),
            include: params.include_object.as_deref() != Some("None"),
            dry_run: params.dry_run.as_deref().is_some_and(|d| !d.is_empty()),
            params,
        })
    }

    /// Before a read from memory: without resourceVersion, wait until memory has every write
    /// committed before the request (a consistent read, as upstream); with resourceVersion N,
    /// give memory a moment to reach N (written through another API server); "0" is any.
    async fn fresh(&self) -> ApiResult<()> {
        let store = &self.api().store;
        let waited = match self.params.resource_version.as_deref() {
            None | Some("") => store.sync().await,
            Some("0") => Ok(()),
            Some(rv) => match rv.parse() {
                Ok(rv) => store.wait_for(rv).await,
                Err(_) => Ok(()),
            },
        };
        waited.map_err(|e| match e {
            crate::store::StoreError::Unavailable(why) => ApiError::unavailable(why),
            other => ApiError::internal(other.to_string()),
        })
    }

    fn api(&self) -> &'a rest::Api {
        &self.app.api
    }

    fn patch_type(&self) -> ApiResult<negotiate::PatchType> {
        negotiate::patch_type(self.call.header(header::CONTENT_TYPE))
    }

    fn object(&self, e: Entry, code: StatusCode) -> ApiResult<Response> {
        let body = render::object(self.target.res, &e, self.out, self.include);
        Ok(json_response(code, body))
    }

    fn watch(&self) -> ApiResult<Response> {
        let rx = rest::watch(self.api(), &self.target, &self.params, self.out)?;
        let gauge = WatchGauge::new(self.app);
        let stream = ReceiverStream::new(rx).map(move |b| {
            let _ = &gauge;
            Ok::<_, std::convert::Infallible>(b)
        });
        Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::CACHE_CONTROL, "no-cache, private")
            .body(Body::from_stream(stream))
            .map_err(|e| ApiError::internal(e.to_string()))
    }

    fn list(&self) -> ApiResult<Response> {
        let page = rest::list(self.api(), &self.target, &self.params)?;
        let body = render::list(
            self.target.res,
            &page.items,
            page.rev,
            page.continue_.as_deref(),
            page.remaining,
            self.out,
            self.include,
        );
        Ok(json_response(StatusCode::OK, body))
    }

    async fn create(&self) -> ApiResult<Response> {
        let t = &self.target;
        let mut obj = self.call.object()?;
        let fields = self.checked_body(&mut obj)?;
        rest::certificates::set_requester(t.res.kind, &mut obj, &self.call.user);
        let e = rest::create(self.api(), t.res, &t.namespace, obj, self.dry_run).await?;
        let review = rest::podsecurity::review(self.api(), t.res, None, &e.obj);
        let resp = with_review(self.object(e, StatusCode::CREATED)?, review);
        Ok(with_warnings(resp, &fields.warnings()))
    }

    /// The stored object before a write of a Pod or workload, for PodSecurity's warnings
    /// about what the write changed; None for other kinds and for subresources other than
    /// pods/ephemeralcontainers (which upstream's PodSecurity also checks).
    fn before(&self, sub: &str) -> Option<Entry> {
        let t = &self.target;
        let pod_part = matches!(sub, "" | "ephemeralcontainers");
        let checked = pod_part && rest::podsecurity::has_pod_template(t.res.kind);
        checked.then(|| self.api().store.get(&t.key())).flatten()
    }

    /// The response for a written object, with PodSecurity's warnings about it.
    fn written(&self, e: Entry, old: Option<Entry>) -> ApiResult<Response> {
        let (api, res) = (self.api(), self.target.res);
        let review = match old {
            Some(old) => rest::podsecurity::review(api, res, Some(&old.obj), &e.obj),
            None => Default::default(),
        };
        Ok(with_review(self.object(e, StatusCode::OK)?, review))
    }

    async fn bind(&self) -> ApiResult<Response> {
        rest::bind(self.api(), &self.target, &self.call.object()?, self.dry_run).await?;
        let success = serde_json::json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201 });
        Ok(json_value(StatusCode::CREATED, &success))
    }

    async fn evict(&self) -> ApiResult<Response> {
        rest::evict(self.api(), &self.target, &self.call.object()?, self.dry_run).await?;
        let success = serde_json::json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201 });
        Ok(json_value(StatusCode::CREATED, &success))
    }

    fn token_request(&self) -> ApiResult<Response> {
        let (app, call) = (self.app, self.call);
        let body = call.object()?;
        let keys = &app.service_accounts;
        let tr =
            rest::token_request::request_token(self.api(), keys, &self.target, &body, &call.user)?;
        Ok(json_value(StatusCode::CREATED, &tr))
    }

    /// `fieldValidation` for the body of a POST or PUT: unknown fields removed (or refused).
    fn checked_body(&self, obj: &mut Value) -> ApiResult<FieldCheck> {
        let directive = Directive::from_query(self.call.query())?;
        let fields = FieldCheck::new(self.target.res, directive);
        let content_type = self.call.header(header::CONTENT_TYPE);
        fields.body(&self.call.body, content_type, obj)?;
        Ok(fields)
    }

    async fn update(&self, sub: &str) -> ApiResult<Response> {
        let mut body = self.call.object()?;
        let fields = self.checked_body(&mut body)?;
        let old = self.before(sub);
        let e = rest::update(
            self.api(),
            &self.target,
            body,
            subresource(sub),
            self.dry_run,
        );
        Ok(with_warnings(
            self.written(e.await?, old)?,
            &fields.warnings(),
        ))
    }

    /// PUT (`kind` None) or PATCH of a Scale.
    async fn update_scale(&self, kind: Option<negotiate::PatchType>) -> ApiResult<Response> {
        let body = self.call.object()?;
        ok(&rest::update_scale(self.api(), &self.target, &body, kind, self.dry_run).await?)
    }

    async fn patch(&self, sub: &str) -> ApiResult<Response> {
        let kind = self.patch_type()?;
        let body = self.call.object()?;
        let old = self.before(sub);
        let (t, sub) = (&self.target, subresource(sub));
        let fields = FieldCheck::new(t.res, Directive::from_query(self.call.query())?);
        let e = rest::patch(self.api(), t, kind, body, sub, self.dry_run, &fields).await?;
        Ok(with_warnings(self.written(e, old)?, &fields.warnings()))
    }

    async fn delete(&self) -> ApiResult<Response> {
        let e = rest::delete(self.api(), &self.target, &self.delete_options()?).await?;
        self.object(e, StatusCode::OK)
    }

    async fn delete_collection(&self) -> ApiResult<Response> {
        let (api, t, p) = (self.api(), &self.target, &self.params);
        let items = rest::delete_collection(api, t, p, &self.delete_options()?).await?;
        let rev = api.store.current_rev();
        let list = render::list(t.res, &items, rev, None, None, Output::Json, true);
        Ok(json_response(StatusCode::OK, list))
    }

    /// DeleteOptions from the body, with the query's grace period and propagation policy
    /// filling what the body leaves out.
    fn delete_options(&self) -> ApiResult<DeleteOptions> {
        let body = &self.call.body;
        let mut opts: DeleteOptions = if body.iter().all(u8::is_ascii_whitespace) {
            DeleteOptions::default()
        } else {
            serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
        };
        opts.fill_from_query(&self.params);
        Ok(opts)
    }
}

/// Adds PodSecurity's review to a response: each warning as an HTTP `Warning: 299 - "text"`
/// header (kubectl prints `Warning: text`), its audit annotations for the audit log.
fn with_review(mut resp: Response, review: rest::podsecurity::Review) -> Response {
    for w in &review.warnings {
        let text = w.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(v) = header::HeaderValue::from_str(&format!("299 - \"{text}\"")) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    if !review.annotations.is_empty() {
        let annotations = crate::audit::Annotations(review.annotations);
        resp.extensions_mut().insert(annotations);
    }
    resp
}

/// Adds `fieldValidation=Warn`'s warnings as `Warning: 299 - "text"` headers.
fn with_warnings(resp: Response, warnings: &[String]) -> Response {
    let review = rest::podsecurity::Review {
        warnings: warnings.to_vec(),
        ..Default::default()
    };
    with_review(resp, review)
}

fn ok(v: &Value) -> ApiResult<Response> {
    Ok(json_value(StatusCode::OK, v))
}

/// Writes to `status` leave the spec alone, `approval` writes a CSR's approval conditions,
/// `ephemeralcontainers` a Pod's ephemeral containers; every other path writes the main
/// resource.
fn subresource(sub: &str) -> Sub {
    match sub {
        "status" => Sub::Status,
        "approval" => Sub::Approval,
        "ephemeralcontainers" => Sub::EphemeralContainers,
        _ => Sub::Main,
    }
}

fn not_allowed(method: &Method, plural: &str, sub: &str) -> ApiError {
    let sub = if sub.is_empty() {
        String::new()
    } else {
        format!("/{sub}")
    };
    ApiError::method_not_allowed(format!(
        "the server does not allow this method on the requested resource ({method} {plural}{sub})"
    ))
}

/// Counts open watches for /metrics while a watch stream lives.
struct WatchGauge(prometheus_client::metrics::gauge::Gauge<i64, std::sync::atomic::AtomicI64>);

impl WatchGauge {
    fn new(app: &App) -> WatchGauge {
        app.metrics.watchers.inc();
        WatchGauge(app.metrics.watchers.clone())
    }
}

impl Drop for WatchGauge {
    fn drop(&mut self) {
        self.0.dec();
    }
}
