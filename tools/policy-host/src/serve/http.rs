//! policy-server's HTTP API (`api/handlers.rs`, `api/service.rs`, `api/api_error.rs`) on
//! axum, as policy-server builds it: `POST /validate/{policy_id}` (AdmissionReview in and out,
//! JSON errors `{"message", "status"}`), `POST /audit/{policy_id}` (the audit scanner's: no
//! mode, no custom message), `POST /validate_raw/{policy_id}` (`{"request": ...}` in,
//! `{"response": ...}` out), and `GET /readiness` on the readiness port, plain HTTP.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result};
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{now, LogLevel, PolicyMode, ServedPolicy, ServerState};
use crate::admission::{
    AdmissionRequest, AdmissionResponse, AdmissionResponseStatus, ValidateRequest, TIMEOUT_MESSAGE,
};
use crate::engine::{self, INIT_INTERRUPTED};
use crate::run::validate_on;

/// policy-server's `AdmissionReviewRequest`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReviewRequest {
    #[allow(dead_code)]
    pub kind: Option<String>,
    #[allow(dead_code)]
    pub api_version: Option<String>,
    pub request: AdmissionRequest,
}

/// policy-server's `AdmissionReviewResponse`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReviewResponse {
    pub kind: Option<String>,
    pub api_version: Option<String>,
    pub response: AdmissionResponse,
}

impl AdmissionReviewResponse {
    fn new(response: AdmissionResponse) -> AdmissionReviewResponse {
        AdmissionReviewResponse {
            api_version: Some("admission.k8s.io/v1".to_string()),
            kind: Some("AdmissionReview".to_string()),
            response,
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct RawReviewRequest {
    pub request: Value,
}

#[derive(Debug, Serialize)]
pub struct RawReviewResponse {
    pub response: AdmissionResponse,
}

/// policy-server's `ApiError`: `{"message": ..., "status": ...}` with that status.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let payload = json!({ "message": self.message, "status": self.status.as_u16() });
        (self.status, Json(payload)).into_response()
    }
}

/// policy-server's `JsonExtractor`: axum's `Json`, its rejections (400 bad JSON, 415 no
/// `Content-Type: application/json`, 422 not an AdmissionReview, 413 over 2 MB) as ApiError.
pub struct ApiJson<T>(T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let path = request.uri().path().to_string();
        match Json::<T>::from_request(request, state).await {
            Ok(Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => {
                let error = ApiError {
                    status: rejection.status(),
                    message: rejection.body_text(),
                };
                log!(
                    "WARN",
                    "{path}: request refused: {} {}",
                    error.status.as_u16(),
                    error.message
                );
                Err(error)
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    Validate,
    ValidateRaw,
    Audit,
}

impl Origin {
    fn name(self) -> &'static str {
        match self {
            Origin::Validate => "validation",
            Origin::ValidateRaw => "validation_raw",
            Origin::Audit => "audit",
        }
    }
}

/// policy-evaluator's `EvaluationError`, the cases policy-host can meet.
#[derive(Debug)]
enum EvaluationError {
    InvalidPolicyId(String),
    PolicyNotFound(String),
    WebAssembly(String),
}

impl std::fmt::Display for EvaluationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EvaluationError::InvalidPolicyId(id) => write!(f, "Not a valid Policy ID: {id}"),
            EvaluationError::PolicyNotFound(id) => write!(f, "unknown policy: {id}"),
            EvaluationError::WebAssembly(e) => write!(f, "WebAssembly failure: {e}"),
        }
    }
}

/// policy-server's `handle_evaluation_error`: 404 for an unknown policy, 500 "Something went
/// wrong" for the rest (logged).
fn evaluation_error(error: EvaluationError) -> (StatusCode, ApiError) {
    let status = match error {
        EvaluationError::PolicyNotFound(_) => StatusCode::NOT_FOUND,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let message = if status == StatusCode::NOT_FOUND {
        error.to_string()
    } else {
        log!("ERROR", "Evaluation error: {error}");
        "Something went wrong".to_string()
    };
    (status, ApiError { status, message })
}

/// Serves the API and the readiness probe until the process ends.
pub async fn run(
    state: Arc<ServerState>,
    addr: SocketAddr,
    readiness_addr: SocketAddr,
    tls: Option<super::tls::TlsFiles>,
) -> Result<()> {
    let router = Router::new()
        .route("/audit/{policy_id}", post(audit_handler))
        .route("/validate/{policy_id}", post(validate_handler))
        .route("/validate_raw/{policy_id}", post(validate_raw_handler))
        .with_state(state.clone());
    let readiness = Router::new().route("/readiness", get(|| async { StatusCode::OK }));

    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let api = async {
        match tls {
            Some(files) => {
                let config = super::tls::server_config(&files)?;
                let listener = super::tls::TlsListener::new(listener, config)?;
                axum::serve(listener, router).await?;
            }
            None => axum::serve(listener, router).await?,
        }
        anyhow::Ok(())
    };
    let readiness_listener = tokio::net::TcpListener::bind(readiness_addr)
        .await
        .with_context(|| format!("cannot listen on {readiness_addr}"))?;
    if state.log_level <= LogLevel::Info {
        log!(
            "INFO",
            "{} policies loaded ({}); API on {scheme}://{addr}, readiness on http://{readiness_addr}/readiness",
            state.policies.len(),
            state.policies.keys().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    let readiness = async {
        axum::serve(readiness_listener, readiness).await?;
        anyhow::Ok(())
    };
    tokio::try_join!(api, readiness)?;
    Ok(())
}

async fn validate_handler(
    State(state): State<Arc<ServerState>>,
    Path(policy_id): Path<String>,
    ApiJson(review): ApiJson<AdmissionReviewRequest>,
) -> Result<Json<AdmissionReviewResponse>, (StatusCode, ApiError)> {
    let request = ValidateRequest::AdmissionRequest(Box::new(review.request));
    let response = evaluate_logged(state, policy_id, request, Origin::Validate).await?;
    Ok(Json(AdmissionReviewResponse::new(response)))
}

async fn audit_handler(
    State(state): State<Arc<ServerState>>,
    Path(policy_id): Path<String>,
    Json(review): Json<AdmissionReviewRequest>,
) -> Result<Json<AdmissionReviewResponse>, (StatusCode, ApiError)> {
    let request = ValidateRequest::AdmissionRequest(Box::new(review.request));
    let response = evaluate_logged(state, policy_id, request, Origin::Audit).await?;
    Ok(Json(AdmissionReviewResponse::new(response)))
}

async fn validate_raw_handler(
    State(state): State<Arc<ServerState>>,
    Path(policy_id): Path<String>,
    Json(review): Json<RawReviewRequest>,
) -> Result<Json<RawReviewResponse>, (StatusCode, ApiError)> {
    let request = ValidateRequest::Raw(review.request);
    let response = evaluate_logged(state, policy_id, request, Origin::ValidateRaw).await?;
    Ok(Json(RawReviewResponse { response }))
}

/// One evaluation on a blocking thread (at most `--workers` at once), and its log line.
async fn evaluate_logged(
    state: Arc<ServerState>,
    policy_id: String,
    request: ValidateRequest,
    origin: Origin,
) -> Result<AdmissionResponse, (StatusCode, ApiError)> {
    let _permit = state.semaphore.acquire().await.map_err(|_| {
        evaluation_error(EvaluationError::WebAssembly(
            "the server is shutting down".to_string(),
        ))
    })?;
    let blocking_state = state.clone();
    let blocking_id = policy_id.clone();
    let (request, result) = tokio::task::spawn_blocking(move || {
        let result = evaluate(&blocking_state, &blocking_id, &request, origin);
        for message in engine::take_guest_logs() {
            eprintln!(
                "{}  INFO policy console_log: policy_id={blocking_id} {message}",
                now()
            );
        }
        (request, result)
    })
    .await
    .map_err(|e| {
        evaluation_error(EvaluationError::WebAssembly(format!(
            "the evaluation panicked: {e}"
        )))
    })?;
    if state.log_level <= LogLevel::Info {
        eprintln!("{}", log_line(&policy_id, origin, &request, &result));
    }
    result.map_err(evaluation_error)
}

/// `<time>  INFO policy-host serve: validation policy_id=.. request_uid=.. kind=.. ...`.
fn log_line(
    policy_id: &str,
    origin: Origin,
    request: &ValidateRequest,
    result: &Result<AdmissionResponse, EvaluationError>,
) -> String {
    let mut line = format!(
        "{}  INFO policy-host serve: {} policy_id={policy_id} request_uid={}",
        now(),
        origin.name(),
        request.uid()
    );
    if let ValidateRequest::AdmissionRequest(request) = request {
        line.push_str(&format!(
            " kind={} namespace={} name={} operation={} user={}",
            request.kind.kind,
            request.namespace.as_deref().unwrap_or_default(),
            request.name.as_deref().unwrap_or_default(),
            request.operation,
            request.user_info.username.as_deref().unwrap_or_default()
        ));
    }
    match result {
        Ok(response) => {
            let code = response
                .code()
                .map_or_else(|| "-".to_string(), |c| c.to_string());
            line.push_str(&format!(
                " allowed={} code={code} mutated={} warnings={}",
                response.allowed,
                response.patch.is_some(),
                response.warnings.as_ref().map_or(0, Vec::len)
            ));
            if let Some(message) = response.message() {
                line.push_str(&format!(" message={message:?}"));
            }
        }
        Err(error) => line.push_str(&format!(" error={:?}", error.to_string())),
    }
    line
}

/// policy-server's `evaluate` (`api/service.rs`) over policy-evaluator's waPC validation.
fn evaluate(
    state: &ServerState,
    policy_id: &str,
    request: &ValidateRequest,
    origin: Origin,
) -> Result<AdmissionResponse, EvaluationError> {
    // PolicyID::from_str: "name" or "group/name".
    if policy_id.is_empty() || policy_id.split('/').count() > 2 {
        return Err(EvaluationError::InvalidPolicyId(policy_id.to_string()));
    }
    let uid = request.uid();
    if let (ValidateRequest::AdmissionRequest(admission), Some(always)) =
        (request, &state.always_accept_namespace)
    {
        if admission.namespace.as_deref() == Some(always.as_str()) {
            if !state.policies.contains_key(policy_id) {
                return Err(EvaluationError::PolicyNotFound(policy_id.to_string()));
            }
            return Ok(AdmissionResponse {
                uid: uid.to_string(),
                allowed: true,
                ..Default::default()
            });
        }
    }
    let served = match state.policies.get(policy_id) {
        None => return Err(EvaluationError::PolicyNotFound(policy_id.to_string())),
        Some(Err(initialization_error)) => {
            return Ok(AdmissionResponse::reject(
                uid,
                initialization_error.clone(),
                500,
            ))
        }
        Some(Ok(served)) => served,
    };
    let instance = match served.policy.instantiate() {
        Ok(instance) => instance,
        Err(e) => {
            let error = e.to_string();
            if error.contains(INIT_INTERRUPTED) {
                return Ok(AdmissionResponse::reject(
                    uid,
                    TIMEOUT_MESSAGE.to_string(),
                    500,
                ));
            }
            return Err(EvaluationError::WebAssembly(format!(
                "cannot rehydrate PolicyEvaluatorPre: {error}"
            )));
        }
    };
    let response = validate_on(&instance, request, &served.settings);
    Ok(match origin {
        Origin::Validate | Origin::ValidateRaw => process_response(policy_id, served, response),
        Origin::Audit => response,
    })
}

/// policy-evaluator's `AdmissionResponseHandler::process_response`: monitor mode, then the
/// mutation constraint, then the custom rejection message.
fn process_response(
    policy_id: &str,
    served: &ServedPolicy,
    response: AdmissionResponse,
) -> AdmissionResponse {
    let mut response = response;
    if served.mode == PolicyMode::Monitor {
        // What the policy answered is logged; the request is allowed, unpatched, with no
        // status. Warnings and audit annotations stay.
        log!(
            "INFO",
            "policy evaluation (monitor mode) policy_id={policy_id} allowed_to_mutate={} response={}",
            served.allowed_to_mutate,
            response.to_line()
        );
        response.allowed = true;
        response.patch_type = None;
        response.patch = None;
        response.status = None;
    }
    if served.mode == PolicyMode::Protect && !served.allowed_to_mutate && response.patch.is_some() {
        response.allowed = false;
        response.status = Some(AdmissionResponseStatus {
            message: Some(format!(
                "Request rejected by policy {policy_id}. The policy attempted to mutate the request, but it is currently configured to not allow mutations."
            )),
            ..Default::default()
        });
        response.patch = None;
        response.patch_type = None;
    }
    if !response.allowed {
        if let Some(custom) = &served.message {
            let status = response.status.take().unwrap_or_default();
            let original = status.message.clone().unwrap_or_default();
            let mut details = match status.details.clone() {
                Some(Value::Object(details)) => details,
                _ => serde_json::Map::new(),
            };
            let mut causes = match details.remove("causes") {
                Some(Value::Array(causes)) => causes,
                _ => Vec::new(),
            };
            causes.push(json!({ "reason": null, "message": original, "field": null }));
            details.insert("causes".to_string(), Value::Array(causes));
            response.status = Some(AdmissionResponseStatus {
                message: Some(custom.clone()),
                details: Some(Value::Object(details)),
                ..status
            });
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(mode: PolicyMode, message: Option<&str>) -> ServedPolicy {
        ServedPolicy {
            policy: crate::engine::Policy::from_bytes(
                &wat::parse_str("(module)").unwrap(),
                &crate::engine::EngineOptions::default(),
                crate::callbacks::HostContext::offline().into_callback(),
            )
            .unwrap(),
            settings: Default::default(),
            mode,
            allowed_to_mutate: false,
            message: message.map(str::to_string),
        }
    }

    fn rejection() -> AdmissionResponse {
        AdmissionResponse {
            uid: "u".into(),
            allowed: false,
            status: Some(AdmissionResponseStatus {
                message: Some("no".into()),
                code: Some(403),
                ..Default::default()
            }),
            warnings: Some(vec!["w".into()]),
            audit_annotations: Some([("k".to_string(), "v".to_string())].into()),
            ..Default::default()
        }
    }

    #[test]
    fn monitor_mode_allows_and_keeps_warnings_and_annotations() {
        let response = process_response("p", &served(PolicyMode::Monitor, Some("x")), rejection());
        assert_eq!(
            response.to_line(),
            r#"{"uid":"u","allowed":true,"auditAnnotations":{"k":"v"},"warnings":["w"]}"#
        );
    }

    #[test]
    fn protect_mode_keeps_the_answer_and_applies_the_custom_message() {
        let plain = process_response("p", &served(PolicyMode::Protect, None), rejection());
        assert_eq!(plain, rejection());
        let custom = process_response(
            "p",
            &served(PolicyMode::Protect, Some("custom")),
            rejection(),
        );
        assert_eq!(
            custom.to_line(),
            r#"{"uid":"u","allowed":false,"status":{"message":"custom","details":{"causes":[{"field":null,"message":"no","reason":null}]},"code":403},"auditAnnotations":{"k":"v"},"warnings":["w"]}"#
        );
    }

    #[test]
    fn mutations_are_refused_unless_allowed() {
        let patched = AdmissionResponse {
            uid: "u".into(),
            allowed: true,
            patch_type: Some("JSONPatch".into()),
            patch: Some("W10=".into()),
            ..Default::default()
        };
        let refused = process_response("p", &served(PolicyMode::Protect, None), patched.clone());
        assert_eq!(
            refused.to_line(),
            r#"{"uid":"u","allowed":false,"status":{"message":"Request rejected by policy p. The policy attempted to mutate the request, but it is currently configured to not allow mutations."},"auditAnnotations":null,"warnings":null}"#
        );
        let mut allowed = served(PolicyMode::Protect, None);
        allowed.allowed_to_mutate = true;
        assert_eq!(process_response("p", &allowed, patched.clone()), patched);
        let monitored = process_response("p", &served(PolicyMode::Monitor, None), patched);
        assert!(monitored.allowed && monitored.patch.is_none() && monitored.patch_type.is_none());
    }
}
